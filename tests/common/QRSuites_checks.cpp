// QRSuites_checks.cpp - explicit instantiation of part of QRChecks.h for float and double (split over several files
// so that the tests build in parallel).
// clang-format off
#include "common/TestConfig.h"  // first: before any Eigen header
// clang-format on

#include "common/QRChecks.h"

namespace tcqr_test {
TCQR_INSTANTIATE_CHECKS(, float)
TCQR_INSTANTIATE_CHECKS(, double)
}  // namespace tcqr_test
