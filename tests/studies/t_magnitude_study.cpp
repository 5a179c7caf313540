// t_magnitude_study.cpp - a measurement, not a test: how large do the entries of the compact WY form's T get?
// FP16 mode runs its products with T on FP16 tensor cores (src/Tunables.hpp tProductMode: FP16x3 products, whose
// operands are converted to FP16), so T's entries must stay below FP16's largest finite value, 65504. Nothing bounds
// them in general: T = (triu(Y^T Y) with 1/tau on the diagonal)^{-1} can be large where the unit lower trapezoidal Y
// is ill-conditioned. This program factors matrices of several kinds with the recursion (Algorithms.hpp factor(),
// Host backend, float, whole T merged: every block of T the GPU keeps is a diagonal block of this T, the T of a run of
// consecutive reflectors, so its entries are among these) and prints max |T_ij|, the largest |Y_ij| below the
// diagonal, and how far below 65504 the largest T entry stays. It also prints max |X_ij| over the recursion's merges,
// X = T1 P with P = -(Y1^T Y2) (Algorithms.hpp factorRecursive: T12 = X T2), the left operand of the merge's second T
// product: a fused x3 product holds a copy of each operand scaled by a power of two in FP16 (CudaOps DupScales: 2^6
// on T or X, which stays finite for entries below 1024).
//
// Usage: t_magnitude_study [--n N] [--trials K] [--seed S]  (N: the listed matrices' order; K: random small matrices)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "../../src/HostOps.hpp"
#include "common/TestMatrices.h"

namespace {

using tcqr::detail::HostOps;
using tcqr::detail::Index;
using tcqr::detail::PanelKind;
using tcqr::detail::View;
using tcqr_test::Mat;

struct Result {
  double maxT = 0.0, maxY = 0.0, maxTau = 0.0, maxX = 0.0;
};

/// max |X_ij| over the merges of columns [c0, c0 + w) as factorRecursive splits them (32-column leaves), X = -T1 Y1^T Y2
/// with Y the unit lower trapezoid (in double).
double maxMergeX(const Eigen::MatrixXd& Y, const Eigen::MatrixXd& T, Index c0, Index w) {
  if (w <= 32) return 0.0;
  const Index n1 = tcqr::detail::splitColumns(w, 32), n2 = w - n1;
  const Eigen::MatrixXd X =
      -T.block(c0, c0, n1, n1) * (Y.middleCols(c0, n1).transpose() * Y.middleCols(c0 + n1, n2));
  return std::max({X.cwiseAbs().maxCoeff(), maxMergeX(Y, T, c0, n1), maxMergeX(Y, T, c0 + n1, n2)});
}

Result study(const Mat<float>& A0) {
  const Index m = A0.rows(), n = A0.cols(), k = std::min(m, n);
  Mat<float> A = A0;
  Mat<float> T = Mat<float>::Zero(k, k);
  std::vector<float> tau(static_cast<size_t>(k), 0.0f);
  std::vector<float> scratch(static_cast<size_t>(tcqr::detail::factorTotalScratch(m, n, 32, PanelKind::Geqrf)));
  HostOps<float> ops;
  tcqr::detail::factor(ops, View<float>(A.data(), m, n, m), tau.data(), View<float>(T.data(), k, k, k), 32,
                       PanelKind::Geqrf, scratch.data());
  Result r;
  r.maxT = double(T.cwiseAbs().maxCoeff());
  r.maxY = double(Mat<float>(A.leftCols(k).triangularView<Eigen::StrictlyLower>()).cwiseAbs().maxCoeff());
  for (float t : tau) r.maxTau = std::max(r.maxTau, double(std::fabs(t)));
  Eigen::MatrixXd Y = A.leftCols(k).cast<double>().triangularView<Eigen::UnitLower>();
  r.maxX = maxMergeX(Y, T.cast<double>(), 0, k);
  return r;
}

/// The cyclic down-shift (column j has its 1 in row j + 1): every column's weight sits in one row below the diagonal,
/// the case that gives reflectors with an entry of magnitude 1 below the diagonal.
Mat<float> shiftPlusNoise(Index n, double noise) {
  Eigen::MatrixXd a = noise * tcqr_test::uniformMatrixD(n, n);
  for (Index j = 0; j < n; ++j) a((j + 1) % n, j) += 1.0;
  return a.cast<float>();
}

/// Unit lower triangular with every entry below the diagonal -1 (Wilkinson's growth matrix without its last column),
/// plus noise: its inverse has entries up to 2^(n-2), the pattern of an ill-conditioned unit lower L.
Mat<float> minusOnesLower(Index n, double noise) {
  Eigen::MatrixXd a = noise * tcqr_test::uniformMatrixD(n, n);
  for (Index j = 0; j < n; ++j) {
    a(j, j) += 1.0;
    for (Index i = j + 1; i < n; ++i) a(i, j) -= 1.0;
  }
  return a.cast<float>();
}

/// Kahan's matrix (upper triangular, rows scaled by s^i, c above the diagonal times -1): QR of a triangular matrix
/// whose columns are nearly dependent.
Mat<float> kahan(Index n, double theta) {
  const double s = std::sin(theta), c = std::cos(theta);
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
  for (Index i = 0; i < n; ++i) {
    const double si = std::pow(s, double(i));
    a(i, i) = si;
    for (Index j = i + 1; j < n; ++j) a(i, j) = -c * si;
  }
  return a.cast<float>();
}

}  // namespace

int main(int argc, char** argv) {
  Index n = 2048;
  int trials = 20000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--trials") && i + 1 < argc) trials = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
      tcqr_test::engine().seed(std::strtoull(argv[++i], nullptr, 10));
    else {
      std::fprintf(stderr, "usage: %s [--n N] [--trials K] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  using tcqr_test::Spectrum;
  struct Case {
    std::string name;
    Mat<float> A;
  };
  std::vector<Case> cases;
  cases.push_back({"uniform", tcqr_test::uniformMatrix<float>(n, n)});
  cases.push_back({"normal", tcqr_test::gaussianMatrix(n, n).cast<float>()});
  cases.push_back({"geometric kappa 1e6", tcqr_test::conditionedMatrix<float>(n, n, Spectrum::Geometric, 1e6)});
  cases.push_back({"clustered kappa 1e6", tcqr_test::conditionedMatrix<float>(n, n, Spectrum::Clustered, 1e6)});
  cases.push_back({"duplicated columns", tcqr_test::withDuplicatedColumns<float>(n, n)});
  {
    Mat<float> a = tcqr_test::uniformMatrix<float>(n, n);
    for (Index j = 1; j < n; j += 2) a.col(j) = a.col(j - 1) + 1e-5f * tcqr_test::uniformMatrix<float>(n, 1);
    cases.push_back({"column pairs equal to 1e-5", a});
  }
  cases.push_back({"zero columns", tcqr_test::withZeroColumns<float>(n, n, {0, 1, 5, n / 2, n - 1})});
  cases.push_back({"column norms 1e-6 .. 1e6", tcqr_test::spreadColumnsMatrix<float>(n, n)});
  {
    const Eigen::MatrixXd lo = tcqr_test::gaussianMatrix(n, n / 2) * tcqr_test::gaussianMatrix(n / 2, n);
    cases.push_back({"rank n/2", lo.cast<float>()});
  }
  {
    Eigen::MatrixXd g = tcqr_test::uniformMatrixD(n, n);
    for (Index i = 0; i < n; ++i) g.row(i) *= std::pow(10.0, -6.0 + 12.0 * double(i) / double(n - 1));
    cases.push_back({"row norms 1e-6 .. 1e6", g.cast<float>()});
  }
  cases.push_back({"cyclic shift + 1e-3 noise", shiftPlusNoise(n, 1e-3)});
  cases.push_back({"cyclic shift + 1e-7 noise", shiftPlusNoise(n, 1e-7)});
  cases.push_back({"-1 lower triangle + 1e-3 noise", minusOnesLower(n, 1e-3)});
  cases.push_back({"-1 lower triangle, exact", minusOnesLower(n, 0.0)});
  cases.push_back({"Kahan theta 1.2", kahan(n, 1.2)});
  cases.push_back({"identity", Mat<float>::Identity(n, n)});
  {
    Mat<float> a = Mat<float>::Identity(n, n);
    a.row(0).setOnes();  // every column's weight in row 0 and its own row
    cases.push_back({"identity with a row of ones on top", a});
  }
  std::printf("t_magnitude_study: %ld x %ld float, recursion with 32-column leaves (Geqrf panels), whole T merged\n",
              long(n), long(n));
  std::printf("%-36s %12s %12s %10s %16s %14s\n", "matrix", "max |T_ij|", "max |Y_ij|", "max tau", "65504 / max|T|",
              "max |X_ij|");
  double worst = 0.0, worstX = 0.0;
  for (const Case& c : cases) {
    const Result r = study(c.A);
    worst = std::max(worst, r.maxT);
    worstX = std::max(worstX, r.maxX);
    std::printf("%-36s %12.4g %12.4g %10.4g %16.4g %14.4g\n", c.name.c_str(), r.maxT, r.maxY, r.maxTau,
                65504.0 / r.maxT, r.maxX);
    std::fflush(stdout);
  }
  std::printf("largest |T_ij| over all matrices: %.4g; largest |X_ij| of a merge: %.4g\n", worst, worstX);
  // A random search on small matrices for structures the list above misses: entries of random sign, magnitudes over
  // 2^-40 .. 2^40, random zeros, and columns copied from earlier ones with a small perturbation.
  double worstSmall = 0.0, worstExcess = 0.0, worstSmallX = 0.0;
  for (int trial = 0; trial < trials; ++trial) {
    const Index ms = 4 + tcqr_test::uniformIndex(0, 60);
    const Index ns = 2 + tcqr_test::uniformIndex(0, std::min<Index>(ms, 40) - 2);
    Eigen::MatrixXd a(ms, ns);
    const double zeroProb = tcqr_test::uniformScalar(0.0, 0.9), copyProb = tcqr_test::uniformScalar(0.0, 0.5);
    for (Index j = 0; j < ns; ++j) {
      if (j > 0 && tcqr_test::uniformScalar(0.0, 1.0) < copyProb) {
        const Index src = tcqr_test::uniformIndex(0, j - 1);
        const double eps = std::pow(10.0, tcqr_test::uniformScalar(-8.0, 0.0));
        for (Index i = 0; i < ms; ++i) a(i, j) = a(i, src) * (1.0 + eps * tcqr_test::gaussian());
        continue;
      }
      for (Index i = 0; i < ms; ++i)
        a(i, j) = tcqr_test::uniformScalar(0.0, 1.0) < zeroProb
                      ? 0.0
                      : tcqr_test::gaussian() * std::pow(2.0, tcqr_test::uniformScalar(-40.0, 40.0));
    }
    const Result r = study(a.cast<float>());
    worstSmall = std::max(worstSmall, r.maxT);
    worstExcess = std::max(worstExcess, r.maxT - r.maxTau);
    worstSmallX = std::max(worstSmallX, r.maxX);
  }
  std::printf("random search, %d matrices of 4-64 rows and 2-40 columns: largest |T_ij| %.4g, largest excess of "
              "max |T_ij| over max tau %.3g, largest |X_ij| of a merge %.4g\n", trials, worstSmall, worstExcess,
              worstSmallX);
  return 0;
}
