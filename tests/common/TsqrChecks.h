// TsqrChecks.h - checks of the TSQR panel (tcqr::Panel::Tsqr), shared by the host and GPU test files: accuracy
// ratios, agreement with Eigen's HouseholderQR (the reconstruction must give Eigen's signs and tau), edge cases.
#ifndef TCQR_TESTS_TSQRCHECKS_H
#define TCQR_TESTS_TSQRCHECKS_H

#include <cmath>
#include <vector>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>
#include <doctest/doctest.h>

#include "QRSuites.h"
#include "TestMatrices.h"

namespace tcqr_test {

template <typename Scalar>
Eigen::TensorCoreHouseholderQR<Mat<Scalar>> tsqrFactor(const Mat<Scalar>& A, tcqr::Backend backend,
                                                       tcqr::Panel panel = tcqr::Panel::Tsqr, Index nb = 0) {
  Eigen::TensorCoreHouseholderQR<Mat<Scalar>> qr;
  qr.setBackend(backend).setPanel(panel).setBlockSize(nb);
  qr.compute(A);
  return qr;
}

/// Ratios <= kRatioBound, and matrixQR/hCoeffs/Q equal to Eigen's up to rounding (checkAgainstEigen).
template <typename Scalar>
void checkTsqr(const Mat<Scalar>& A, tcqr::Backend backend, double kappa, Index nb = 0) {
  const Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  INFO("m=" << m << " n=" << n << " kappa=" << kappa << " nb=" << nb << " backend=" << tcqr::backendName(backend));
  auto qr = tsqrFactor<Scalar>(A, backend, tcqr::Panel::Tsqr, nb);
  REQUIRE(qr.info() == Eigen::Success);
  const Mat<Scalar> Q = qr.householderQ() * Mat<Scalar>::Identity(m, k);
  const Mat<Scalar> R = qr.matrixQR().topRows(k).template triangularView<Eigen::Upper>();
  CHECK(backwardRatio<Scalar>(A, Q, R) <= kRatioBound);
  CHECK(orthogonalityRatio<Scalar>(Q) <= kRatioBound);
  CHECK(qr.matrixQR().allFinite());
  CHECK(qr.hCoeffs().allFinite());

  checkAgainstEigen<Mat<Scalar>>(A, qr, kappa);  // entry by entry, up to any sign-ambiguous column
}

/// Tall-skinny panels: m not a multiple of the 256-row tile, n < 32, n not a multiple of 32, one and several levels.
template <typename Scalar>
void tsqrShapeSuite(tcqr::Backend backend) {
  const Index shapes[][2] = {{1000, 32}, {5000, 20}, {257, 32}, {300, 17}, {33, 32}, {256, 1}, {70000, 32},
                             {20000, 5}, {513, 31}};
  for (const auto& s : shapes) checkTsqr<Scalar>(uniformMatrix<Scalar>(s[0], s[1]), backend, 1.0);
}

/// The TSQR panel at the leaves of the recursion, square and wide matrices included.
template <typename Scalar>
void tsqrRecursionSuite(tcqr::Backend backend) {
  const Index shapes[][2] = {{3000, 100}, {600, 600}, {257, 129}, {100, 200}, {2000, 33}};
  for (const auto& s : shapes) checkTsqr<Scalar>(uniformMatrix<Scalar>(s[0], s[1]), backend, 1.0);
  checkTsqr<Scalar>(uniformMatrix<Scalar>(1500, 96), backend, 1.0, 8);  // narrow panels, deep recursion
}

}  // namespace tcqr_test

#endif  // TCQR_TESTS_TSQRCHECKS_H
