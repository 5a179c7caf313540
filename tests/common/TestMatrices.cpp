// TestMatrices.cpp - the non-template parts of TestMatrices.h, compiled once for all tests.
// clang-format off
#include "common/TestConfig.h"  // first: before any Eigen header
// clang-format on

#include "common/TestMatrices.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <Eigen/QR>

namespace tcqr_test {

std::mt19937_64& engine() {
  static std::mt19937_64 e;
  return e;
}

std::uint64_t freshSeed() {
  if (const char* s = std::getenv("TCQR_TEST_SEED"); s && *s) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (std::uint64_t(rd()) << 32) ^ rd();
}

std::uint64_t reseed() {
  const std::uint64_t s = freshSeed();
  engine().seed(s);
  return s;
}

double gaussian() {
  // A fresh distribution each time: std::normal_distribution caches a second value, which would survive reseed().
  std::normal_distribution<double> d(0.0, 1.0);
  return d(engine());
}

double uniformScalar(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine()); }

Index uniformIndex(Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(engine()); }

Eigen::MatrixXd gaussianMatrix(Index m, Index n) {
  Eigen::MatrixXd g(m, n);
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < m; ++i) g(i, j) = gaussian();
  return g;
}

Eigen::MatrixXd uniformMatrixD(Index m, Index n) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  Eigen::MatrixXd a(m, n);
  double* p = a.data();
  for (Index i = 0; i < m * n; ++i) p[i] = d(engine());
  return a;
}

Eigen::MatrixXd randomOrthonormalColumns(Index m, Index k) {
  if (m == 0 || k == 0) return Eigen::MatrixXd::Zero(m, k);
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(gaussianMatrix(m, k));
  return qr.householderQ() * Eigen::MatrixXd::Identity(m, k);
}

const char* spectrumName(Spectrum s) {
  switch (s) {
    case Spectrum::Arithmetic:
      return "arithmetic";
    case Spectrum::Geometric:
      return "geometric";
    case Spectrum::Clustered:
      return "clustered";
  }
  return "?";
}

Eigen::VectorXd singularValues(Spectrum kind, Index k, double kappa) {
  Eigen::VectorXd s(k);
  if (k == 0) return s;
  if (k == 1) return Eigen::VectorXd::Ones(1);
  for (Index i = 0; i < k; ++i) {
    const double t = double(i) / double(k - 1);
    switch (kind) {
      case Spectrum::Arithmetic:
        s(i) = 1.0 - t * (1.0 - 1.0 / kappa);
        break;
      case Spectrum::Geometric:
        s(i) = std::pow(kappa, -t);
        break;
      case Spectrum::Clustered:
        s(i) = (i >= k - std::max<Index>(1, k / 8)) ? 1.0 / kappa : 1.0;
        break;
    }
  }
  return s;
}

Eigen::MatrixXd withSingularValuesD(Index m, Index n, const Eigen::VectorXd& s) {
  const Index k = s.size();
  const Eigen::MatrixXd u = randomOrthonormalColumns(m, k), v = randomOrthonormalColumns(n, k);
  return u * s.asDiagonal() * v.transpose();
}

double backwardRatioD(const Eigen::MatrixXd& A, const Eigen::MatrixXd& Q, const Eigen::MatrixXd& R, double eps) {
  const Index m = A.rows(), n = A.cols();
  if (m == 0 || n == 0) return 0.0;
  Eigen::MatrixXd residual = A;
  residual.noalias() -= Q * R;
  const double r = residual.norm(), anorm = A.norm();
  if (anorm == 0.0) return r == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return r / (anorm * double(std::max(m, n)) * eps);
}

double orthogonalityRatioD(const Eigen::MatrixXd& Q, double eps) {
  const Index m = Q.rows(), p = Q.cols();
  if (m == 0 || p == 0) return 0.0;
  Eigen::MatrixXd g = Eigen::MatrixXd::Identity(p, p);
  if (Eigen::nbThreads() > 1) {
    g.noalias() -= Q.transpose() * Q;  // a general product: the one Eigen runs on several threads
  } else {
    g.selfadjointView<Eigen::Lower>().rankUpdate(Q.transpose(), -1.0);  // half the work: lower half of I - Q^T Q
    g.triangularView<Eigen::StrictlyUpper>() = g.transpose();
  }
  return g.norm() / (double(m) * eps);
}

double normalEquationsRatioD(const Eigen::MatrixXd& A, const Eigen::MatrixXd& x, const Eigen::MatrixXd& b, double eps) {
  const Index m = A.rows(), n = A.cols();
  if (m == 0 || n == 0) return 0.0;
  const double an = A.norm();
  const double denom = an * an * x.norm() + an * b.norm();
  Eigen::MatrixXd r = b;
  r.noalias() -= A * x;
  const double num = (A.transpose() * r).norm();
  if (denom == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return num / denom / (double(std::max(m, n)) * eps);
}

double residualRatioD(const Eigen::MatrixXd& A, const Eigen::MatrixXd& x, const Eigen::MatrixXd& b, double eps) {
  const Index m = A.rows(), n = A.cols();
  if (m == 0 || n == 0) return 0.0;
  const double denom = A.norm() * x.norm() + b.norm();
  Eigen::MatrixXd r = b;
  r.noalias() -= A * x;
  const double num = r.norm();
  if (denom == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return num / denom / (double(std::max(m, n)) * eps);
}

double relativeDifferenceD(const Eigen::MatrixXd& X, const Eigen::MatrixXd& Y) {
  if (X.size() == 0) return 0.0;
  const double yn = Y.norm(), d = (X - Y).norm();
  return yn > 0.0 ? d / yn : d;
}

}  // namespace tcqr_test
