// test_tsqr.cpp - the TSQR panel + ReconstructWY on the Host backend (the same tree, tiling and reconstruction as
// the CUDA kernels, so CI tests the logic).
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "common/TsqrChecks.h"

using namespace tcqr_test;
using tcqr::Backend;

TEST_CASE_TEMPLATE("TSQR panel: tall-skinny shapes match Eigen", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  tsqrShapeSuite<Scalar>(Backend::Host);
}

TEST_CASE_TEMPLATE("TSQR panel inside the recursion", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  tsqrRecursionSuite<Scalar>(Backend::Host);
}

TEST_CASE_TEMPLATE("TSQR panel: ill-conditioned (geometric spectrum)", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
  for (Spectrum sp : {Spectrum::Geometric, Spectrum::Arithmetic, Spectrum::Clustered}) {
    INFO("spectrum " << spectrumName(sp));
    const Mat<Scalar> A = conditionedMatrix<Scalar>(4000, 32, sp, kappa);
    auto qr = tsqrFactor<Scalar>(A, Backend::Host);
    const Mat<Scalar> Q = qr.householderQ() * Mat<Scalar>::Identity(A.rows(), A.cols());
    const Mat<Scalar> R = qr.matrixQR().topRows(A.cols()).template triangularView<Eigen::Upper>();
    CHECK(backwardRatio<Scalar>(A, Q, R) <= kRatioBound);
    CHECK(orthogonalityRatio<Scalar>(Q) <= kRatioBound);
  }
}

TEST_CASE_TEMPLATE("TSQR panel: zero and rank-deficient columns give no NaN", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  Mat<Scalar> A = withZeroColumns<Scalar>(3000, 24, {0, 7, 23});
  auto qr = tsqrFactor<Scalar>(A, Backend::Host);
  CHECK(qr.info() == Eigen::Success);
  CHECK(qr.matrixQR().allFinite());
  CHECK(qr.hCoeffs().allFinite());
  const Mat<Scalar> Q = qr.householderQ() * Mat<Scalar>::Identity(A.rows(), A.cols());
  const Mat<Scalar> R = qr.matrixQR().topRows(A.cols()).template triangularView<Eigen::Upper>();
  CHECK(backwardRatio<Scalar>(A, Q, R) <= kRatioBound);
  CHECK(orthogonalityRatio<Scalar>(Q) <= kRatioBound);
  // A zero column's reflector is the identity, as in LAPACK and Eigen (its panel goes to geqrf: a reconstructed
  // reflector cannot be the identity), and R's column is exactly zero.
  for (Index j : {Index(0), Index(7), Index(23)}) {
    CHECK(qr.hCoeffs()(j) == Scalar(0));
    CHECK(qr.matrixQR().col(j).isZero(0));
  }

  const Mat<Scalar> D = withDuplicatedColumns<Scalar>(2000, 30);
  auto qd = tsqrFactor<Scalar>(D, Backend::Host);
  CHECK(qd.matrixQR().allFinite());
  const Mat<Scalar> Qd = qd.householderQ() * Mat<Scalar>::Identity(D.rows(), D.cols());
  CHECK(orthogonalityRatio<Scalar>(Qd) <= kRatioBound);
}

TEST_CASE("TSQR panel: NaN input is flagged") {
  Eigen::MatrixXf A = Eigen::MatrixXf::Random(1000, 16);
  A(999, 3) = std::numeric_limits<float>::quiet_NaN();
  auto qr = tsqrFactor<float>(A, Backend::Host);
  CHECK(qr.info() == Eigen::NumericalIssue);
}

TEST_CASE("TSQR panel and geqrf panel agree; solve works through the TSQR factorization") {
  TCQR_RANDOM_SEED();
  const Mat<double> A = uniformMatrix<double>(5000, 32);
  const Mat<double> b = uniformMatrix<double>(5000, 3);
  auto t = tsqrFactor<double>(A, Backend::Host, tcqr::Panel::Tsqr);
  auto g = tsqrFactor<double>(A, Backend::Host, tcqr::Panel::Geqrf);
  CHECK(relativeDifference(t.matrixQR(), g.matrixQR()) <= 1e-12);
  const Mat<double> x = t.solve(b);
  CHECK(normalEquationsRatio<double>(A, x, b) <= kRatioBound);
}
