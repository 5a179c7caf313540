// QRSuites.h - the accuracy and API checks of TensorCoreHouseholderQR, written once and parameterised by backend:
// the host test runs them on Backend::Host and Backend::Auto, the GPU test on Backend::Cuda.
//
// The checks are defined in QRChecks.h and compiled once for float and double (QRSuites_*.cpp, the library
// tcqr_test_common); this header declares them. TCQR_DEFINE_ACCURACY_SUITE(prefix, backend) turns the suites into
// doctest test cases. Include common/TestConfig.h first and <doctest/doctest.h> (with DOCTEST_CONFIG_IMPLEMENT* in
// the TU that implements doctest) before this header.
#ifndef TCQR_TESTS_QRSUITES_H
#define TCQR_TESTS_QRSUITES_H

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <Eigen/TensorCoreQR>
#include <cstdlib>

#include "TestMatrices.h"

namespace tcqr_test {

using tcqr::Backend;
template <typename MatrixType>
using TCQR = Eigen::TensorCoreHouseholderQR<MatrixType>;

/// Comparisons with a second, independent factorization (Eigen's HouseholderQR, or the other backend) allow for the
/// conditioning of the problem: relative differences must stay below kAgreementFactor * kappa * max(m, n) * eps
/// (kappa^2 for least-squares solutions), where kappa bounds the condition number of the test matrix.
constexpr double kAgreementFactor = 1.0;

/// TCQR_TEST_VERBOSE=1 prints every measured ratio (to calibrate bounds).
inline bool verbose() {
  static const bool v = [] {
    const char* s = std::getenv("TCQR_TEST_VERBOSE");
    return s && *s && *s != '0';
  }();
  return v;
}

/// Prints a measured quantity when TCQR_TEST_VERBOSE is set, and returns it.
inline double report(const char* what, double value) {
  if (verbose()) MESSAGE(doctest::String(what) << " = " << value);
  return value;
}

/// How a decomposition is made and checked.
struct Options {
  Backend backend = Backend::Host;
  Index blockSize = 0;                    ///< setBlockSize(); 0 keeps the backend default
  bool fullQ = true;                      ///< also form the full m x m Q (off for very tall matrices)
  tcqr::Panel panel = tcqr::Panel::Auto;  ///< setPanel()
};

/// Factors A (any Eigen expression) into a new decomposition object with the given options.
template <typename MatrixType, typename Input>
TCQR<MatrixType> factor(const Input& A, const Options& o) {
  TCQR<MatrixType> qr;
  qr.setBackend(o.backend).setBlockSize(o.blockSize).setPanel(o.panel);
  qr.compute(A);
  return qr;
}

// ---- checks on one decomposition (QRChecks.h has the details) ----------------------------------------------------

/// Sizes, info(), the backend used, tau, and the LAPACK ratios of the full Q (o.fullQ) and of the thin Q, and that
/// HouseholderSequence<MatrixType, HCoeffsType>(matrixQR(), hCoeffs()) is the same Q.
template <typename MatrixType>
void checkDecomposition(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, const Options& o);
/// factor() + checkDecomposition(); returns the decomposition.
template <typename MatrixType>
TCQR<MatrixType> factorAndCheck(const Mat<typename MatrixType::Scalar>& A, const Options& o);
/// matrixQR(), hCoeffs(), sign convention and Q products against Eigen::HouseholderQR of the same A.
template <typename MatrixType>
void checkAgainstEigen(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, double kappa);
/// Q, Q^T, Q^* from both sides, setLength(), applyOnTheLeft/Right against Eigen's HouseholderSequence.
template <typename MatrixType>
void checkQOperator(const TCQR<MatrixType>& qr, bool fullQ);
/// solve(), transpose().solve(), adjoint().solve() for 1 and 3 right-hand sides, against residual bounds and Eigen.
template <typename MatrixType>
void checkSolve(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, double kappa);
/// absDeterminant() and logAbsDeterminant() against Eigen's.
template <typename MatrixType>
void checkDeterminant(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, double kappa);

// ---- suites ------------------------------------------------------------------------------------------------------

/// Shapes from 0 x 0 to 1000 x 400 (vectors, tall, square, wide, odd sizes, forced deep recursion), kappa 10:
/// all checks, including Eigen agreement and the Q operator.
template <typename Scalar>
void shapeSuite(Backend backend);
/// Geometric, arithmetic and clustered spectra with kappa 1e6 (float) / 1e12 (double): the LAPACK ratios.
template <typename Scalar>
void conditionedSuite(Backend backend, Index m, Index n);
/// Zero columns (tau = 0, no NaN), an all-zero matrix, duplicated columns, low rank.
template <typename Scalar>
void rankDeficientSuite(Backend backend);
/// The panel factorizations (Panel::Geqrf, Panel::Tsqr, and on the GPU Auto's one-kernel panel): the same factorization as Eigen's up to rounding, and
/// the LAPACK ratios on ill-conditioned and rank-deficient panels.
template <typename Scalar>
void panelSuite(Backend backend);
/// solve() on square, tall and wide matrices, empty right-hand sides, determinants.
template <typename Scalar>
void solveSuite(Backend backend);
/// Fixed-size (4 x 4, 6 x 3) and row-major matrix types, Map, strided Map and expression inputs.
template <typename Scalar>
void matrixTypeSuite(Backend backend);
/// compute() with changing shapes on one object, copies, assignment, moves.
template <typename Scalar>
void lifetimeSuite(Backend backend);
/// NaN / +-Inf input: info() == NumericalIssue without crash; recovery on the same object.
template <typename Scalar>
void nonFiniteSuite(Backend backend);

// Explicit instantiations live in the QRSuites_*.cpp files; PREFIX is `extern` here and empty there.
#define TCQR_INSTANTIATE_CHECKS(PREFIX, S)                                                             \
  PREFIX template void checkDecomposition<Mat<S>>(const Mat<S>&, const TCQR<Mat<S>>&, const Options&); \
  PREFIX template TCQR<Mat<S>> factorAndCheck<Mat<S>>(const Mat<S>&, const Options&);                  \
  PREFIX template void checkAgainstEigen<Mat<S>>(const Mat<S>&, const TCQR<Mat<S>>&, double);          \
  PREFIX template void checkQOperator<Mat<S>>(const TCQR<Mat<S>>&, bool);                              \
  PREFIX template void checkSolve<Mat<S>>(const Mat<S>&, const TCQR<Mat<S>>&, double);                 \
  PREFIX template void checkDeterminant<Mat<S>>(const Mat<S>&, const TCQR<Mat<S>>&, double);
#define TCQR_INSTANTIATE_FACTOR_SUITES(PREFIX, S)                  \
  PREFIX template void shapeSuite<S>(Backend);                     \
  PREFIX template void conditionedSuite<S>(Backend, Index, Index); \
  PREFIX template void rankDeficientSuite<S>(Backend);             \
  PREFIX template void panelSuite<S>(Backend);
#define TCQR_INSTANTIATE_SOLVE_SUITES(PREFIX, S)  \
  PREFIX template void solveSuite<S>(Backend);    \
  PREFIX template void lifetimeSuite<S>(Backend); \
  PREFIX template void nonFiniteSuite<S>(Backend);
#define TCQR_INSTANTIATE_TYPE_SUITES(PREFIX, S) PREFIX template void matrixTypeSuite<S>(Backend);

TCQR_INSTANTIATE_CHECKS(extern, float)
TCQR_INSTANTIATE_CHECKS(extern, double)
TCQR_INSTANTIATE_FACTOR_SUITES(extern, float)
TCQR_INSTANTIATE_FACTOR_SUITES(extern, double)
TCQR_INSTANTIATE_SOLVE_SUITES(extern, float)
TCQR_INSTANTIATE_SOLVE_SUITES(extern, double)
TCQR_INSTANTIATE_TYPE_SUITES(extern, float)
TCQR_INSTANTIATE_TYPE_SUITES(extern, double)

}  // namespace tcqr_test

/// Defines the shared accuracy suite for one backend as doctest test cases named "<prefix> ..." (prefix: a string
/// literal), each for float and double.
#define TCQR_DEFINE_ACCURACY_SUITE(prefix, backend)                                                  \
  TEST_CASE_TEMPLATE(prefix " shapes: factors, Q, agreement with Eigen", T, float, double) {         \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::shapeSuite<T>(backend);                                                             \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " ill-conditioned inputs", T, float, double) {                           \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::conditionedSuite<T>(backend, 300, 200);                                             \
    ::tcqr_test::conditionedSuite<T>(backend, 200, 200);                                             \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " rank-deficient inputs", T, float, double) {                            \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::rankDeficientSuite<T>(backend);                                                     \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " panel factorizations: Geqrf and Tsqr", T, float, double) {             \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::panelSuite<T>(backend);                                                             \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " solve and determinants", T, float, double) {                           \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::solveSuite<T>(backend);                                                             \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " fixed-size, row-major, Map and expression inputs", T, float, double) { \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::matrixTypeSuite<T>(backend);                                                        \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " recompute, copy, assign, move", T, float, double) {                    \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::lifetimeSuite<T>(backend);                                                          \
  }                                                                                                  \
  TEST_CASE_TEMPLATE(prefix " NaN and infinity", T, float, double) {                                 \
    TCQR_RANDOM_SEED();                                                                              \
    ::tcqr_test::nonFiniteSuite<T>(backend);                                                         \
  }

#endif  // TCQR_TESTS_QRSUITES_H
