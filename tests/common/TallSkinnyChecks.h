// TallSkinnyChecks.h - checks of Eigen::TensorCoreTallSkinnyQR, shared by the host and GPU test files: each output
// mode against Eigen::HouseholderQR of the same matrix (R, thin Q, packed factor, tau), the compact WY form's T, the
// accuracy ratios, and the argument checks.
#ifndef TCQR_TESTS_TALLSKINNYCHECKS_H
#define TCQR_TESTS_TALLSKINNYCHECKS_H

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>
#include <doctest/doctest.h>

#include "QRSuites.h"
#include "TestMatrices.h"

namespace tcqr_test {

template <typename Scalar>
using TSQR = Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>>;

/// Eigen's reference factorization and the number of leading columns whose Householder sign is well determined (see
/// checkAgainstEigen in QRChecks.h: past a column with Eigen tau within 1000 eps of 1, two correct implementations
/// may legitimately pick opposite signs).
template <typename Scalar>
struct EigenReference {
  Eigen::HouseholderQR<Mat<Scalar>> qr;
  Index kc = 0;
  explicit EigenReference(const Mat<Scalar>& A) : qr(A) {
    const Index m = A.rows(), n = A.cols();
    kc = n;
    for (Index i = 0; i < n; ++i)
      if (m > i + 1 && std::abs(double(qr.hCoeffs()(i)) - 1.0) <= 1000.0 * epsOf<Scalar>()) {
        kc = i;
        MESSAGE("Householder sign ill-determined at column " << i << ": comparing the first " << i << " columns");
        break;
      }
  }
  Mat<Scalar> R() const {
    const Index n = qr.matrixQR().cols();
    return qr.matrixQR().topRows(n).template triangularView<Eigen::Upper>();
  }
  Mat<Scalar> thinQ() const {
    return qr.householderQ() * Mat<Scalar>::Identity(qr.matrixQR().rows(), qr.matrixQR().cols());
  }
};

/// ||X(:, 0:kc) - Y(:, 0:kc)||_F / scale / tol <= 1.
template <typename Scalar>
void checkAgrees(const char* what, const Mat<Scalar>& X, const Mat<Scalar>& Y, Index kc, double scale, double tol) {
  if (kc == 0) return;
  const double d = (toDouble(X.leftCols(kc)) - toDouble(Y.leftCols(kc))).norm() / std::max(scale, 1e-300);
  INFO(what);
  CHECK(report(what, d / tol) <= 1.0);
}

/// The n x n results are upper triangular with exact zeros below the diagonal.
template <typename Scalar>
bool strictlyLowerIsZero(const Mat<Scalar>& X) {
  return Mat<Scalar>(X.template triangularView<Eigen::StrictlyLower>()).cwiseAbs().maxCoeff() == Scalar(0);
}

/// Runs all output modes on A and checks them against Eigen::HouseholderQR (condition number at most kappa).
template <typename Scalar>
void checkTallSkinny(const Mat<Scalar>& A, tcqr::Backend backend, double kappa) {
  const Index m = A.rows(), n = A.cols();
  INFO("A is " << m << " x " << n << ", kappa " << kappa << ", backend " << tcqr::backendName(backend));
  const EigenReference<Scalar> ref(A);
  // The agreement with Eigen scales with the condition number of A. The shape suite passes kappa = 1 for uniform
  // random matrices, which holds for tall ones but not for the square ones (a 20 x 20 uniform matrix has kappa of
  // order 10-1000): use the measured kappa_2(A) = kappa_2(R) where it is larger.
  if (n > 0) {
    const Eigen::VectorXd sv = Eigen::JacobiSVD<Eigen::MatrixXd>(toDouble(ref.R())).singularValues();
    const double measured = sv(0) / sv(sv.size() - 1);
    if (std::isfinite(measured)) kappa = std::max(kappa, measured);
  }
  const double tol = kAgreementFactor * kappa * double(m) * epsOf<Scalar>();
  const double normA = toDouble(A).norm();
  const Mat<Scalar> refR = ref.R();

  TSQR<Scalar> ts;
  ts.setBackend(backend);

  // R only.
  ts.compute(A);
  REQUIRE(ts.info() == Eigen::Success);
  CHECK(ts.computed() == unsigned(tcqr::ComputeR));
  CHECK(ts.rows() == m);
  CHECK(ts.cols() == n);
  Mat<Scalar> R = ts.matrixR();
  REQUIRE(R.rows() == n);
  REQUIRE(R.cols() == n);
  if (n > 0) CHECK(strictlyLowerIsZero(R));
  checkAgrees<Scalar>("R only: R vs Eigen / tol", R, refR, ref.kc, normA, tol);
  CHECK_THROWS_AS(ts.thinQ(), EigenAssertionFailed);
  CHECK_THROWS_AS(ts.matrixQR(), EigenAssertionFailed);
  CHECK(ts.deviceThinQ() == nullptr);

  // Thin Q.
  ts.compute(A, tcqr::ComputeThinQ);
  REQUIRE(ts.info() == Eigen::Success);
  const Mat<Scalar> Q = ts.thinQ();
  R = ts.matrixR();
  REQUIRE(Q.rows() == m);
  REQUIRE(Q.cols() == n);
  if (n > 0) {
    CHECK(report("thin Q: backward", backwardRatio<Scalar>(A, Q, R)) <= kRatioBound);
    CHECK(report("thin Q: orthogonality", orthogonalityRatio<Scalar>(Q)) <= kRatioBound);
    CHECK(strictlyLowerIsZero(R));
  }
  checkAgrees<Scalar>("thin Q: R vs Eigen / tol", R, refR, ref.kc, normA, tol);
  checkAgrees<Scalar>("thin Q: Q vs Eigen / tol", Q, ref.thinQ(), ref.kc, std::sqrt(double(std::max<Index>(n, 1))),
                      tol);
  CHECK_THROWS_AS(ts.hCoeffs(), EigenAssertionFailed);

  // Compact WY form, with the thin Q as well.
  ts.compute(A, tcqr::ComputeWY | tcqr::ComputeThinQ);
  REQUIRE(ts.info() == Eigen::Success);
  CHECK(ts.computed() == unsigned(tcqr::ComputeR | tcqr::ComputeWY | tcqr::ComputeThinQ));
  const Mat<Scalar> QR = ts.matrixQR(), T = ts.matrixT(), Q2 = ts.thinQ();
  const Vec<Scalar> tau = ts.hCoeffs();
  R = ts.matrixR();
  REQUIRE(QR.rows() == m);
  REQUIRE(QR.cols() == n);
  REQUIRE(tau.size() == n);
  REQUIRE(T.rows() == n);
  CHECK(QR.allFinite());
  CHECK(tau.allFinite());
  CHECK(T.allFinite());
  if (n == 0) return;
  // R is the upper triangle of the packed factor, exactly.
  CHECK(R == Mat<Scalar>(QR.topRows(n).template triangularView<Eigen::Upper>()));
  checkAgrees<Scalar>("WY: R vs Eigen / tol", R, refR, ref.kc, normA, tol);
  const Mat<Scalar> refY = ref.qr.matrixQR().template triangularView<Eigen::StrictlyLower>();
  const Mat<Scalar> Y0 = QR.template triangularView<Eigen::StrictlyLower>();
  checkAgrees<Scalar>("WY: Householder vectors vs Eigen / tol", Y0, refY, ref.kc,
                      std::max(1.0, toDouble(refY).norm()), tol);
  if (ref.kc > 0) {
    const double dTau = relativeDifference(tau.head(ref.kc), ref.qr.hCoeffs().head(ref.kc));
    CHECK(report("WY: hCoeffs vs Eigen / tol", dTau / tol) <= 1.0);
  }
  // T: upper triangular, tau on its diagonal, and I - Y T Y^T equal to the product of the reflectors.
  CHECK(strictlyLowerIsZero(T));
  CHECK(relativeDifference(T.diagonal(), tau) <= 10 * epsOf<Scalar>());
  Mat<Scalar> Y = QR.template triangularView<Eigen::UnitLower>();
  const Mat<Scalar> B = uniformMatrix<Scalar>(m, 3);
  const Eigen::MatrixXd QB_T = toDouble(B) - toDouble(Y) * (toDouble(T) * (toDouble(Y).transpose() * toDouble(B)));
  const Mat<Scalar> QB_H = Eigen::HouseholderSequence<Mat<Scalar>, Vec<Scalar>>(QR, tau) * B;
  CHECK(report("WY: (I - Y T Y^T) B vs H_0..H_{n-1} B / (m eps)",
               (QB_T - toDouble(QB_H)).norm() / toDouble(B).norm() / (double(m) * epsOf<Scalar>())) <= kRatioBound);
  // The thin Q of this mode.
  CHECK(report("WY + thin Q: backward", backwardRatio<Scalar>(A, Q2, R)) <= kRatioBound);
  CHECK(report("WY + thin Q: orthogonality", orthogonalityRatio<Scalar>(Q2)) <= kRatioBound);
  CHECK(report("WY + thin Q vs H_0..H_{n-1} [I; 0] / (m eps)",
               relativeDifference(Q2, Mat<Scalar>(Eigen::HouseholderSequence<Mat<Scalar>, Vec<Scalar>>(QR, tau) *
                                                  Mat<Scalar>::Identity(m, n))) /
                   (double(m) * epsOf<Scalar>())) <= kRatioBound);
}

/// Shapes: one tile and several levels, m not a multiple of the 256-row tile, n < 32, n not a multiple of 32,
/// n = 32, n > 32 (the recursion), m == n (n <= 32 and n > 32), one column, empty.
template <typename Scalar>
void tallSkinnyShapeSuite(tcqr::Backend backend) {
  const Index shapes[][2] = {{1000, 32}, {5000, 20}, {257, 32}, {300, 17}, {33, 32}, {256, 1},  {70000, 32},
                             {20000, 5}, {513, 31},  {3000, 100}, {2000, 33}, {20, 20}, {150, 150}, {7, 3}};
  for (const auto& s : shapes) checkTallSkinny<Scalar>(uniformMatrix<Scalar>(s[0], s[1]), backend, 1.0);
  checkTallSkinny<Scalar>(Mat<Scalar>(100, 0), backend, 1.0);
  checkTallSkinny<Scalar>(Mat<Scalar>(0, 0), backend, 1.0);
}

/// Controlled singular values: kappa up to 1e6 (float) / 1e12 (double); accuracy ratios and agreement with Eigen.
template <typename Scalar>
void tallSkinnyConditionedSuite(tcqr::Backend backend, Index m) {
  const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
  for (Spectrum sp : {Spectrum::Geometric, Spectrum::Arithmetic, Spectrum::Clustered}) {
    INFO("spectrum " << spectrumName(sp));
    for (Index n : {Index(24), Index(48)}) checkTallSkinny<Scalar>(conditionedMatrix<Scalar>(m, n, sp, kappa), backend, kappa);
  }
}

/// Exact zero columns and rank deficiency: no NaN, R_jj = 0, Q still orthonormal.
template <typename Scalar>
void tallSkinnyZeroColumnSuite(tcqr::Backend backend) {
  for (Index n : {Index(24), Index(40)}) {
    const Mat<Scalar> A = withZeroColumns<Scalar>(3000, n, {0, 7, n - 1});
    INFO("n = " << n);
    TSQR<Scalar> ts;
    ts.setBackend(backend).compute(A, tcqr::ComputeThinQ | tcqr::ComputeWY);
    CHECK(ts.info() == Eigen::Success);
    CHECK(ts.matrixR().allFinite());
    CHECK(ts.thinQ().allFinite());
    CHECK(ts.matrixQR().allFinite());
    CHECK(ts.hCoeffs().allFinite());
    CHECK(ts.matrixT().allFinite());
    for (Index j : {Index(0), Index(7), n - 1}) {
      CHECK(std::abs(double(ts.matrixR()(j, j))) <= 1e-30);
      CHECK(ts.hCoeffs()(j) == Scalar(0));  // the identity, as Eigen's (the panel goes to geqrf)
    }
    CHECK(orthogonalityRatio<Scalar>(ts.thinQ()) <= kRatioBound);
    CHECK(backwardRatio<Scalar>(A, ts.thinQ(), ts.matrixR()) <= kRatioBound);
    ts.compute(A);  // R only (the tree alone for n <= 32)
    CHECK(ts.matrixR().allFinite());
    ts.compute(A, tcqr::ComputeThinQ);
    CHECK(ts.thinQ().allFinite());
    CHECK(orthogonalityRatio<Scalar>(ts.thinQ()) <= kRatioBound);
  }
  const Mat<Scalar> D = withDuplicatedColumns<Scalar>(2000, 30);
  TSQR<Scalar> td;
  td.setBackend(backend).compute(D, tcqr::ComputeThinQ);
  CHECK(td.thinQ().allFinite());
  CHECK(orthogonalityRatio<Scalar>(td.thinQ()) <= kRatioBound);
  CHECK(backwardRatio<Scalar>(D, td.thinQ(), td.matrixR()) <= kRatioBound);
}

/// NaN / Inf in the input: info() == NumericalIssue, in every mode, for the tree and the recursion.
template <typename Scalar>
void tallSkinnyNonFiniteSuite(tcqr::Backend backend) {
  for (Index n : {Index(16), Index(3), Index(40)}) {
    for (unsigned what : {unsigned(tcqr::ComputeR), unsigned(tcqr::ComputeThinQ), unsigned(tcqr::ComputeWY)}) {
      INFO("n = " << n << ", what = " << what);
      Mat<Scalar> A = uniformMatrix<Scalar>(1001, n);
      TSQR<Scalar> ts;
      ts.setBackend(backend);
      CHECK(ts.compute(A, what).info() == Eigen::Success);
      A(1000, n - 1) = std::numeric_limits<Scalar>::quiet_NaN();
      CHECK(ts.compute(A, what).info() == Eigen::NumericalIssue);
      A(1000, n - 1) = 0;
      A(0, 0) = -std::numeric_limits<Scalar>::infinity();
      CHECK(ts.compute(A, what).info() == Eigen::NumericalIssue);
    }
  }
}

/// Misuse: rows < cols and unknown bits throw tcqr::Error (Usage); accessors before compute() assert.
template <typename Scalar>
void tallSkinnyArgumentSuite(tcqr::Backend backend) {
  TSQR<Scalar> ts;
  ts.setBackend(backend);
  CHECK_THROWS_AS(ts.matrixR(), EigenAssertionFailed);
  CHECK_THROWS_AS(ts.info(), EigenAssertionFailed);
  try {
    ts.compute(Mat<Scalar>::Ones(10, 11));
    FAIL("rows < cols did not throw");
  } catch (const tcqr::Error& e) {
    CHECK(e.source() == tcqr::ErrorSource::Usage);
  }
  try {
    ts.compute(Mat<Scalar>::Ones(10, 3), 0x8u);
    FAIL("unknown bits did not throw");
  } catch (const tcqr::Error& e) {
    CHECK(e.source() == tcqr::ErrorSource::Usage);
  }
  // computeOnDevice: argument checks come first (no device needed to see them), then the backend.
  const Scalar dummy[4] = {1, 2, 3, 4};
  const auto usage = [&](auto&& call) {
    try {
      call();
      FAIL("no exception");
    } catch (const tcqr::Error& e) {
      CHECK(e.source() == tcqr::ErrorSource::Usage);
    }
  };
  usage([&] { ts.computeOnDevice(nullptr, 4, 1, 4); });
  usage([&] { ts.computeOnDevice(dummy, 4, 1, 3); });
  usage([&] { ts.computeOnDevice(dummy, 1, 4, 4); });
  usage([&] { ts.computeOnDevice(dummy, -1, 0, 4); });
  TSQR<Scalar> host;
  host.setBackend(tcqr::Backend::Host);
  usage([&] { host.computeOnDevice(dummy, 4, 1, 4); });
  // A failed compute() leaves the object usable.
  const Mat<Scalar> A = uniformMatrix<Scalar>(500, 8);
  ts.compute(A);
  CHECK(ts.info() == Eigen::Success);
  CHECK(ts.matrixR().rows() == 8);
  // Any Eigen expression as input, and a row-major result type.
  Eigen::TensorCoreTallSkinnyQR<Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> rm;
  rm.setBackend(backend).compute(Scalar(2) * A, tcqr::ComputeThinQ);
  CHECK(relativeDifference(rm.matrixR(), Mat<Scalar>(Scalar(2) * ts.matrixR())) <= 100 * epsOf<Scalar>());
  CHECK(orthogonalityRatio<Scalar>(rm.thinQ()) <= kRatioBound);
  // A block of a larger matrix (outer stride > rows; handed to the backend as it is) surrounded by NaN, which must not
  // be read: the same R and thin Q as from a plain copy, on the tree path (8 columns) and the recursive one (40).
  // (The block is overwritten once compute() has returned, as the contract allows; that a missing synchronization
  // would show here is not guaranteed.)
  for (Index n : {Index(8), Index(40)}) {
    INFO("block input, 500 x " << n);
    Mat<Scalar> padded = Mat<Scalar>::Constant(507, n + 3, std::numeric_limits<Scalar>::quiet_NaN());
    const Mat<Scalar> B = uniformMatrix<Scalar>(500, n);
    padded.block(4, 1, 500, n) = B;
    TSQR<Scalar> viaBlock, plain;
    viaBlock.setBackend(backend).compute(padded.block(4, 1, 500, n), tcqr::ComputeR | tcqr::ComputeThinQ);
    padded.block(4, 1, 500, n).setConstant(Scalar(-1));
    plain.setBackend(backend).compute(B, tcqr::ComputeR | tcqr::ComputeThinQ);
    CHECK(viaBlock.info() == Eigen::Success);
    CHECK(relativeDifference(viaBlock.matrixR(), plain.matrixR()) <= 100 * epsOf<Scalar>());
    CHECK(relativeDifference(viaBlock.thinQ(), plain.thinQ()) <= 100 * epsOf<Scalar>());
  }
  {
    // An IndexedView (every other row) as input: flagged as direct access by Eigen, but it has no data().
    const Mat<Scalar> tall = uniformMatrix<Scalar>(1000, 8);
    TSQR<Scalar> viaIndexed, plain;
    viaIndexed.setBackend(backend).compute(tall(Eigen::seqN(0, 500, 2), Eigen::all));
    plain.setBackend(backend).compute(Mat<Scalar>(tall(Eigen::seqN(0, 500, 2), Eigen::all)));
    CHECK(relativeDifference(viaIndexed.matrixR(), plain.matrixR()) <= 100 * epsOf<Scalar>());
  }
}

}  // namespace tcqr_test

#endif  // TCQR_TESTS_TALLSKINNYCHECKS_H
