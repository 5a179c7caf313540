// TestMatrices.h - random test matrices with controlled singular values, and the LAPACK-style accuracy ratios the
// tests compare against fixed bounds. Non-template parts are compiled once, in TestMatrices.cpp.
//
// Randomness: every test case calls TCQR_RANDOM_SEED() first. It draws a fresh seed from std::random_device (or
// takes TCQR_TEST_SEED from the environment) and attaches it to every failure report through doctest's INFO, so a
// failure is reproduced with `TCQR_TEST_SEED=<seed> ./test_x -tc="<test case>"`.
//
// Ratios: "eps" is the machine epsilon std::numeric_limits<Scalar>::epsilon() (2^-23 for float, 2^-52 for double),
// i.e. twice the unit roundoff, of the scalar type the factorization ran in. Norms are Frobenius norms; ratios are
// computed in double. Every ratio is compared with kRatioBound = 30.
#ifndef TCQR_TESTS_TESTMATRICES_H
#define TCQR_TESTS_TESTMATRICES_H

#include <Eigen/Core>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace tcqr_test {

using Eigen::Index;
template <typename Scalar>
using Mat = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
template <typename Scalar>
using Vec = Eigen::Matrix<Scalar, Eigen::Dynamic, 1>;

/// The bound every ratio below is checked against (LAPACK's test suite uses 30 as well).
constexpr double kRatioBound = 30.0;

// ---- random numbers ----------------------------------------------------------------------------------------------

/// The engine every generator below draws from.
std::mt19937_64& engine();
/// A fresh seed: TCQR_TEST_SEED from the environment when set (to reproduce a failure), else std::random_device.
std::uint64_t freshSeed();
/// Reseeds the engine with a fresh seed and returns that seed.
std::uint64_t reseed();

/// Start of every test case that uses random data: reseeds and reports the seed with any failure of the test case.
#define TCQR_RANDOM_SEED()                                     \
  const std::uint64_t tcqr_test_seed_ = ::tcqr_test::reseed(); \
  INFO("reproduce with TCQR_TEST_SEED=" << tcqr_test_seed_)

double gaussian();
/// Uniform in [lo, hi).
double uniformScalar(double lo = -1.0, double hi = 1.0);
/// Uniform in [lo, hi].
Index uniformIndex(Index lo, Index hi);
Eigen::MatrixXd gaussianMatrix(Index m, Index n);
/// Entries uniform in [-1, 1), in double.
Eigen::MatrixXd uniformMatrixD(Index m, Index n);

/// Entries uniform in [-1, 1).
template <typename Scalar>
Mat<Scalar> uniformMatrix(Index m, Index n) {
  return uniformMatrixD(m, n).cast<Scalar>();
}

// ---- matrices with controlled singular values --------------------------------------------------------------------

/// m x k matrix with orthonormal columns (k <= m): the Q factor, in double, of a Gaussian matrix.
Eigen::MatrixXd randomOrthonormalColumns(Index m, Index k);

enum class Spectrum {
  Arithmetic,  ///< s_i = 1 - (i / (k-1)) (1 - 1/kappa): evenly spaced from 1 down to 1/kappa
  Geometric,   ///< s_i = kappa^(-i / (k-1)): evenly spaced on a log scale
  Clustered    ///< ones, and a small cluster of max(1, k/8) values at 1/kappa
};
const char* spectrumName(Spectrum s);

/// k singular values, largest 1, smallest 1/kappa (for k >= 2), sorted decreasingly.
Eigen::VectorXd singularValues(Spectrum kind, Index k, double kappa);

/// U diag(s) V^T in double (U: m x k, V: n x k random orthonormal, k = s.size() <= min(m, n)).
Eigen::MatrixXd withSingularValuesD(Index m, Index n, const Eigen::VectorXd& s);

/// A = U diag(s) V^T, formed in double and rounded once to Scalar.
template <typename Scalar>
Mat<Scalar> withSingularValues(Index m, Index n, const Eigen::VectorXd& s) {
  return withSingularValuesD(m, n, s).cast<Scalar>();
}

/// An m x n matrix with condition number kappa and the given distribution of its min(m, n) singular values.
template <typename Scalar>
Mat<Scalar> conditionedMatrix(Index m, Index n, Spectrum kind, double kappa) {
  return withSingularValues<Scalar>(m, n, singularValues(kind, m < n ? m : n, kappa));
}

/// Uniform random matrix whose listed columns are exactly zero.
template <typename Scalar>
Mat<Scalar> withZeroColumns(Index m, Index n, const std::vector<Index>& zeroCols) {
  Mat<Scalar> a = uniformMatrix<Scalar>(m, n);
  for (Index j : zeroCols) a.col(j).setZero();
  return a;
}

/// Uniform random m x n matrix of rank c = ceil(n/2) (when m >= c): every column j >= c repeats column j - c, except
/// the last one, which is -2 times column 0 (an exact scaled copy).
template <typename Scalar>
Mat<Scalar> withDuplicatedColumns(Index m, Index n) {
  Mat<Scalar> a = uniformMatrix<Scalar>(m, n);
  const Index c = (n + 1) / 2;
  for (Index j = c; j < n; ++j) a.col(j) = a.col(j - c);
  if (n >= 3) a.col(n - 1) = Scalar(-2) * a.col(0);
  return a;
}

/// Uniform random entries, then column j scaled to 2-norm 10^e_j, with the exponents e_j evenly spaced over
/// [log10(lo), log10(hi)] and assigned to the columns in a random order (large and small columns interleave, so
/// every level of the recursion mixes them). Built in double and rounded once to Scalar.
template <typename Scalar>
Mat<Scalar> spreadColumnsMatrix(Index m, Index n, double lo = 1e-6, double hi = 1e6) {
  Eigen::MatrixXd A = uniformMatrixD(m, n);
  std::vector<Index> order(static_cast<size_t>(n));
  for (Index j = 0; j < n; ++j) order[size_t(j)] = j;
  for (Index j = n - 1; j > 0; --j) std::swap(order[size_t(j)], order[size_t(uniformIndex(0, j))]);
  const double l0 = std::log10(lo), l1 = std::log10(hi);
  for (Index j = 0; j < n; ++j) {
    const double t = n > 1 ? double(order[size_t(j)]) / double(n - 1) : 0.0;
    A.col(j) *= std::pow(10.0, l0 + t * (l1 - l0)) / A.col(j).norm();
  }
  return A.cast<Scalar>();
}

// ---- accuracy ratios ---------------------------------------------------------------------------------------------

/// Machine epsilon of the scalar type (2 x unit roundoff): the "eps" of every ratio below.
template <typename Scalar>
constexpr double epsOf() {
  return double(std::numeric_limits<Scalar>::epsilon());
}

template <typename Derived>
Eigen::MatrixXd toDouble(const Eigen::MatrixBase<Derived>& x) {
  return x.template cast<double>();
}

// The ratios on double data; eps is the epsilon of the precision the factorization ran in.
double backwardRatioD(const Eigen::MatrixXd& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& R, double eps);
double orthogonalityRatioD(const Eigen::MatrixXd& Q, double eps);
double normalEquationsRatioD(const Eigen::MatrixXd& A, const Eigen::MatrixXd& x, const Eigen::MatrixXd& b, double eps);
double residualRatioD(const Eigen::MatrixXd& A, const Eigen::MatrixXd& x, const Eigen::MatrixXd& b, double eps);
double relativeDifferenceD(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y);

/// ||A - Q R||_F / (||A||_F max(m, n) eps). Q is m x p, R is p x n (full or thin factors).
template <typename Scalar, typename DA, typename DQ, typename DR>
double backwardRatio(const Eigen::MatrixBase<DA>& A, const Eigen::MatrixBase<DQ>& Q, const Eigen::MatrixBase<DR>& R) {
  return backwardRatioD(toDouble(A), toDouble(Q), toDouble(R), epsOf<Scalar>());
}

/// ||I - Q^T Q||_F / (m eps) for an m x p matrix Q with (supposedly) orthonormal columns.
template <typename Scalar, typename DQ>
double orthogonalityRatio(const Eigen::MatrixBase<DQ>& Q) {
  return orthogonalityRatioD(toDouble(Q), epsOf<Scalar>());
}

/// Normal-equations residual of a least-squares solution,
///   ||A^T (A x - b)||_F / (||A||_F^2 ||x||_F + ||A||_F ||b||_F),
/// returned divided by max(m, n) eps so that it is compared with kRatioBound like the other ratios.
template <typename Scalar, typename DA, typename DX, typename DB>
double normalEquationsRatio(const Eigen::MatrixBase<DA>& A, const Eigen::MatrixBase<DX>& x,
                            const Eigen::MatrixBase<DB>& b) {
  return normalEquationsRatioD(toDouble(A), toDouble(x), toDouble(b), epsOf<Scalar>());
}

/// ||A x - b||_F / ((||A||_F ||x||_F + ||b||_F) max(m, n) eps): the backward error of a consistent linear system.
template <typename Scalar, typename DA, typename DX, typename DB>
double residualRatio(const Eigen::MatrixBase<DA>& A, const Eigen::MatrixBase<DX>& x, const Eigen::MatrixBase<DB>& b) {
  return residualRatioD(toDouble(A), toDouble(x), toDouble(b), epsOf<Scalar>());
}

/// ||X - Y||_F / ||Y||_F (||X - Y||_F when Y is zero), in double.
template <typename DX, typename DY>
double relativeDifference(const Eigen::MatrixBase<DX>& X, const Eigen::MatrixBase<DY>& Y) {
  return relativeDifferenceD(toDouble(X), toDouble(Y));
}

}  // namespace tcqr_test

#endif  // TCQR_TESTS_TESTMATRICES_H
