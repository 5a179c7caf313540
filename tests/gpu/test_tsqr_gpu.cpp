// test_tsqr_gpu.cpp - the TSQR tile kernels and ReconstructWY on the GPU: accuracy, agreement with Eigen, with the
// Host backend's tiles (same tiling), and with the cuSOLVER-panel path on large panels. Exits 77 (CTest: skipped)
// without a CUDA device.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cstdio>

#include "common/TsqrChecks.h"

using namespace tcqr_test;
using tcqr::Backend;

TCQR_GPU_TEST_MAIN()

TEST_SUITE("gpu") {
  TEST_CASE_TEMPLATE("GPU TSQR panel: tall-skinny shapes match Eigen", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    tsqrShapeSuite<Scalar>(Backend::Cuda);
  }

  TEST_CASE_TEMPLATE("GPU TSQR panel inside the recursion", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    tsqrRecursionSuite<Scalar>(Backend::Cuda);
  }

  TEST_CASE_TEMPLATE("GPU TSQR tiles agree with the Host backend's tiles", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    // Same tiling on both backends, so the packed factors agree to rounding, not just up to conditioning.
    const Mat<Scalar> A = uniformMatrix<Scalar>(100000, 32);
    auto g = tsqrFactor<Scalar>(A, Backend::Cuda);
    auto h = tsqrFactor<Scalar>(A, Backend::Host);
    const double tol = 100.0 * epsOf<Scalar>() * std::sqrt(double(A.rows()));
    CHECK(relativeDifference(g.matrixQR(), h.matrixQR()) <= tol);
    CHECK(relativeDifference(g.hCoeffs(), h.hCoeffs()) <= tol);
  }

  TEST_CASE_TEMPLATE("GPU TSQR panel: ill-conditioned, zero columns", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
    const Mat<Scalar> A = conditionedMatrix<Scalar>(20000, 32, Spectrum::Geometric, kappa);
    auto qr = tsqrFactor<Scalar>(A, Backend::Cuda);
    Mat<Scalar> Q = qr.householderQ() * Mat<Scalar>::Identity(A.rows(), A.cols());
    Mat<Scalar> R = qr.matrixQR().topRows(A.cols()).template triangularView<Eigen::Upper>();
    CHECK(backwardRatio<Scalar>(A, Q, R) <= kRatioBound);
    CHECK(orthogonalityRatio<Scalar>(Q) <= kRatioBound);

    const Mat<Scalar> Z = withZeroColumns<Scalar>(5000, 24, {0, 7, 23});
    auto qz = tsqrFactor<Scalar>(Z, Backend::Cuda);
    CHECK(qz.matrixQR().allFinite());
    CHECK(qz.hCoeffs().allFinite());
    Q = qz.householderQ() * Mat<Scalar>::Identity(Z.rows(), Z.cols());
    R = qz.matrixQR().topRows(Z.cols()).template triangularView<Eigen::Upper>();
    CHECK(backwardRatio<Scalar>(Z, Q, R) <= kRatioBound);
    CHECK(orthogonalityRatio<Scalar>(Q) <= kRatioBound);
  }

  TEST_CASE("GPU TSQR panel: large panel agrees with the cuSOLVER panel; NaN flagged") {
    TCQR_RANDOM_SEED();
    const Index m = Index(1) << 22, n = 32;
    const Mat<float> A = uniformMatrix<float>(m, n);
    auto t = tsqrFactor<float>(A, Backend::Cuda, tcqr::Panel::Tsqr);
    auto g = tsqrFactor<float>(A, Backend::Cuda, tcqr::Panel::Geqrf);
    // R (top n rows) and tau agree up to rounding of two different reduction orders over 4M rows.
    const double tol = 30.0 * epsOf<float>() * std::sqrt(double(m));
    CHECK(relativeDifference(t.matrixQR().topRows(n), g.matrixQR().topRows(n)) <= tol);
    CHECK(relativeDifference(t.hCoeffs(), g.hCoeffs()) <= tol);
    const Mat<float> x0 = uniformMatrix<float>(n, 1);
    const Mat<float> b = A * x0;
    const Mat<float> x = t.solve(b);
    CHECK(relativeDifference(x, x0) <= 1e-3);

    Mat<float> B = uniformMatrix<float>(300000, 16);
    B(299999, 15) = std::numeric_limits<float>::infinity();
    CHECK(tsqrFactor<float>(B, Backend::Cuda).info() == Eigen::NumericalIssue);
    // A NaN in the tail that the scan's 16-byte loads do not cover (rows * cols not a multiple of 4), and in the
    // first entry.
    Mat<float> T = uniformMatrix<float>(100003, 3);
    T(100002, 2) = std::numeric_limits<float>::quiet_NaN();
    CHECK(tsqrFactor<float>(T, Backend::Cuda).info() == Eigen::NumericalIssue);
    T(100002, 2) = 1.0f;
    CHECK(tsqrFactor<float>(T, Backend::Cuda).info() == Eigen::Success);
    T(0, 0) = -std::numeric_limits<float>::infinity();
    CHECK(tsqrFactor<float>(T, Backend::Cuda).info() == Eigen::NumericalIssue);
  }
}
