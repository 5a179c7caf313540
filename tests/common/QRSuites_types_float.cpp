// QRSuites_types_float.cpp - explicit instantiation of matrixTypeSuite<float> (QRChecks.h). Each matrix type it covers
// instantiates the front end and the checks anew, so it gets a file of its own to build in parallel.
// clang-format off
#include "common/TestConfig.h"  // first: before any Eigen header
// clang-format on

#include "common/QRChecks.h"

namespace tcqr_test {
TCQR_INSTANTIATE_TYPE_SUITES(, float)
}  // namespace tcqr_test
