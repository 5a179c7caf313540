// TestConfig.h - include FIRST in every test translation unit (before any Eigen header).
//
// Redefines eigen_assert to throw, as Eigen's own test suite does (test/main.h), so that the preconditions that
// Eigen::HouseholderQR asserts (e.g. matrixQR() before compute()) can be checked with CHECK_THROWS_AS, and so that
// any assertion inside Eigen or the tcqr front end fails the test instead of being compiled out by NDEBUG.
// Every test TU and the shared test library use the same definition, so that inline Eigen/tcqr functions are
// identical across them.
#ifndef TCQR_TESTS_TESTCONFIG_H
#define TCQR_TESTS_TESTCONFIG_H

#if defined(EIGEN_CORE_H) || defined(EIGEN_CORE_MODULE_H)
#error "TestConfig.h must be included before any Eigen header"
#endif

#include <stdexcept>

namespace tcqr_test {
/// What eigen_assert throws in the tests. A std::logic_error, so it cannot be confused with tcqr::Error.
struct EigenAssertionFailed : std::logic_error {
  using std::logic_error::logic_error;
};
}  // namespace tcqr_test

#define eigen_assert(x)                                                     \
  do {                                                                      \
    if (!(x)) throw ::tcqr_test::EigenAssertionFailed("eigen_assert: " #x); \
  } while (0)

#endif  // TCQR_TESTS_TESTCONFIG_H
