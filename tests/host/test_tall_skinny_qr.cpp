// test_tall_skinny_qr.cpp - Eigen::TensorCoreTallSkinnyQR on the Host backend (the same tree, tiling, sign fix and
// reconstruction as the CUDA backend, so CI tests the logic of every output mode).
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "common/TallSkinnyChecks.h"

using namespace tcqr_test;
using tcqr::Backend;

TEST_CASE_TEMPLATE("TallSkinnyQR: every mode matches Eigen on tall-skinny, wide-panel and square shapes", Scalar,
                   float, double) {
  TCQR_RANDOM_SEED();
  tallSkinnyShapeSuite<Scalar>(Backend::Host);
}

TEST_CASE_TEMPLATE("TallSkinnyQR: controlled singular values", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  tallSkinnyConditionedSuite<Scalar>(Backend::Host, 4000);
}

TEST_CASE_TEMPLATE("TallSkinnyQR: zero and duplicated columns give no NaN", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  tallSkinnyZeroColumnSuite<Scalar>(Backend::Host);
}

TEST_CASE_TEMPLATE("TallSkinnyQR: NaN and Inf input are flagged", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  tallSkinnyNonFiniteSuite<Scalar>(Backend::Host);
}

TEST_CASE_TEMPLATE("TallSkinnyQR: argument checks and input types", Scalar, float, double) {
  TCQR_RANDOM_SEED();
  tallSkinnyArgumentSuite<Scalar>(Backend::Host);
}

TEST_CASE("TallSkinnyQR: Backend::Auto runs small problems on the host; Cuda throws without a device") {
  TCQR_RANDOM_SEED();
  const Mat<double> A = uniformMatrix<double>(300, 10);
  Eigen::TensorCoreTallSkinnyQR<Mat<double>> ts(A);
  CHECK(ts.activeBackend() == Backend::Host);
  const Eigen::HouseholderQR<Mat<double>> ref(A);
  const Mat<double> refR = ref.matrixQR().topRows(10).triangularView<Eigen::Upper>();
  CHECK(relativeDifference(ts.matrixR(), refR) <= 300 * epsOf<double>());
  if (!tcqr::cudaDeviceAvailable()) {
    Eigen::TensorCoreTallSkinnyQR<Mat<double>> gpu;
    gpu.setBackend(Backend::Cuda);
    CHECK_THROWS_AS(gpu.compute(A), tcqr::Error);
  }
}

TEST_CASE("TallSkinnyQR: the R-only and thin-Q tree paths agree with the full TSQR panel") {
  TCQR_RANDOM_SEED();
  // Same tree for all three modes; only the sign fix differs in how it is obtained (signed LU of the top block of Q
  // for R only / thin Q, ReconstructWY for the WY form), so R agrees to rounding, not just up to conditioning.
  const Mat<double> A = uniformMatrix<double>(70000, 32);
  Eigen::TensorCoreTallSkinnyQR<Mat<double>> r(A), q(A, tcqr::ComputeThinQ), wy(A, tcqr::ComputeWY);
  CHECK(relativeDifference(r.matrixR(), wy.matrixR()) <= 100 * epsOf<double>());
  CHECK(relativeDifference(q.matrixR(), wy.matrixR()) <= 100 * epsOf<double>());
  CHECK(r.matrixR() == q.matrixR());
}

// The thin Q of the recursive path (n > 32) is formed in chunks of rows where it overwrites the packed factor
// (src/TallSkinny.hpp, thinQChunkRows: about 2^24 scalars each); 262149 x 65 takes two chunks, the last one partial.
TEST_CASE("TallSkinnyQR: thin Q of the recursive path formed in several chunks") {
  TCQR_RANDOM_SEED();
  const Index m = (Index(1) << 18) + 5, n = 65;
  const Mat<float> A = uniformMatrix<float>(m, n);
  Eigen::TensorCoreTallSkinnyQR<Mat<float>> ts;
  ts.setBackend(Backend::Host).compute(A, tcqr::ComputeThinQ);
  REQUIRE(ts.info() == Eigen::Success);
  CHECK(orthogonalityRatio<float>(ts.thinQ()) <= kRatioBound);
  CHECK(backwardRatio<float>(A, ts.thinQ(), ts.matrixR()) <= kRatioBound);
  // The same Q when it does not overwrite the packed factor (kept for the WY form): no copies, one product per chunk.
  Eigen::TensorCoreTallSkinnyQR<Mat<float>> both;
  both.setBackend(Backend::Host).compute(A, tcqr::ComputeThinQ | tcqr::ComputeWY);
  CHECK(both.thinQ() == ts.thinQ());
}
