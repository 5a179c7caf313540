// test_tall_skinny_qr_gpu.cpp - Eigen::TensorCoreTallSkinnyQR on Backend::Cuda: every output mode against Eigen,
// agreement with the Host backend (same tiling), computeOnDevice (padded input, user stream, device pointers), large
// tree shapes, a new object taking over a destroyed one's state. Exits 77 (CTest: skipped) without a CUDA device.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cstdio>
#include <type_traits>

#include <cuda_runtime.h>

#include "common/TallSkinnyChecks.h"

using namespace tcqr_test;
using tcqr::Backend;

TCQR_GPU_TEST_MAIN()

namespace {

#define REQUIRE_CUDA(expr) REQUIRE((expr) == cudaSuccess)

/// Device copy of a host matrix with leading dimension ld >= rows (padding filled with NaN, which must not be read).
template <typename Scalar>
struct DeviceMatrix {
  Scalar* p = nullptr;
  Index ld = 0;
  DeviceMatrix(const Mat<Scalar>& A, Index ld_) : ld(ld_) {
    const Index count = std::max<Index>(ld * A.cols(), 1);
    REQUIRE_CUDA(cudaMalloc(&p, sizeof(Scalar) * count));
    Mat<Scalar> padded = Mat<Scalar>::Constant(ld, A.cols(), std::numeric_limits<Scalar>::quiet_NaN());
    padded.topRows(A.rows()) = A;
    REQUIRE_CUDA(cudaMemcpy(p, padded.data(), sizeof(Scalar) * ld * A.cols(), cudaMemcpyHostToDevice));
  }
  ~DeviceMatrix() { cudaFree(p); }
  DeviceMatrix(const DeviceMatrix&) = delete;
  DeviceMatrix& operator=(const DeviceMatrix&) = delete;
};

template <typename Scalar>
Mat<Scalar> download(const Scalar* d, Index rows, Index cols, Index ld) {
  Mat<Scalar> h(ld, cols);
  if (rows * cols > 0) REQUIRE(cudaMemcpy(h.data(), d, sizeof(Scalar) * ld * cols, cudaMemcpyDeviceToHost) == cudaSuccess);
  return h.topRows(rows);
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE_TEMPLATE("GPU TallSkinnyQR: every mode matches Eigen", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    tallSkinnyShapeSuite<Scalar>(Backend::Cuda);
  }

  TEST_CASE_TEMPLATE("GPU TallSkinnyQR: controlled singular values", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    tallSkinnyConditionedSuite<Scalar>(Backend::Cuda, 20000);
  }

  TEST_CASE_TEMPLATE("GPU TallSkinnyQR: zero columns, NaN/Inf, arguments", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    tallSkinnyZeroColumnSuite<Scalar>(Backend::Cuda);
    tallSkinnyNonFiniteSuite<Scalar>(Backend::Cuda);
    tallSkinnyArgumentSuite<Scalar>(Backend::Cuda);
  }

  TEST_CASE_TEMPLATE("GPU TallSkinnyQR agrees with the Host backend", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    // Same tiling on both backends, so R and Q agree to rounding, not just up to conditioning.
    const double tol = 100.0 * epsOf<Scalar>() * std::sqrt(100000.0);
    for (Index n : {Index(32), Index(13)}) {
      const Mat<Scalar> A = uniformMatrix<Scalar>(100000, n);
      Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> g, h;
      g.setBackend(Backend::Cuda).compute(A, tcqr::ComputeThinQ);
      h.setBackend(Backend::Host).compute(A, tcqr::ComputeThinQ);
      CHECK(g.activeBackend() == Backend::Cuda);
      CHECK(relativeDifference(g.matrixR(), h.matrixR()) <= tol);
      CHECK(relativeDifference(g.thinQ(), h.thinQ()) <= tol);
    }
  }

  TEST_CASE_TEMPLATE("GPU TallSkinnyQR::computeOnDevice", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    const Index m = 50000, ld = m + 7;
    for (Index n : {Index(32), Index(20), Index(64)}) {
      INFO("n = " << n);
      const Mat<Scalar> A = uniformMatrix<Scalar>(m, n);
      DeviceMatrix<Scalar> dA(A, ld);
      cudaStream_t s = nullptr;
      REQUIRE_CUDA(cudaStreamCreate(&s));
      for (unsigned what : {unsigned(tcqr::ComputeR), unsigned(tcqr::ComputeThinQ),
                            unsigned(tcqr::ComputeWY | tcqr::ComputeThinQ)}) {
        INFO("what = " << what);
        Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> dev, host;
        dev.computeOnDevice(dA.p, m, n, ld, s, what);
        host.setBackend(Backend::Cuda).compute(A, what);
        CHECK(dev.activeBackend() == Backend::Cuda);
        CHECK(dev.info() == Eigen::Success);
        // Same data, same kernels: the device-input and host-input paths agree to rounding (cuBLAS may pick a
        // different GEMM algorithm per handle/stream, so not necessarily bit for bit).
        const double tol = 100 * epsOf<Scalar>();
        CHECK(relativeDifference(dev.matrixR(), host.matrixR()) <= tol);
        // Device pointers hold what the accessors return.
        dev.synchronize();
        CHECK(download(dev.deviceR(), n, n, n) == dev.matrixR());
        if (what & tcqr::ComputeThinQ) {
          CHECK(download(dev.deviceThinQ(), m, n, m) == dev.thinQ());
          CHECK(orthogonalityRatio<Scalar>(dev.thinQ()) <= kRatioBound);
          CHECK(backwardRatio<Scalar>(A, dev.thinQ(), dev.matrixR()) <= kRatioBound);
        } else {
          CHECK(dev.deviceThinQ() == nullptr);
        }
        if (what & tcqr::ComputeWY) {
          CHECK(download(dev.deviceMatrixQR(), m, n, m) == dev.matrixQR());
          CHECK(download(dev.deviceHCoeffs(), n, 1, n) == Mat<Scalar>(dev.hCoeffs()));
          CHECK(download(dev.deviceT(), n, n, n) == dev.matrixT());
          CHECK(relativeDifference(dev.matrixQR(), host.matrixQR()) <= tol);
        } else {
          CHECK(dev.deviceMatrixQR() == nullptr);
        }
      }
      // The input is left unmodified (padding included: still NaN).
      const Mat<Scalar> back = download(dA.p, ld, n, ld);
      CHECK(back.topRows(m) == A);
      CHECK(back.bottomRows(ld - m).array().isNaN().all());
      REQUIRE_CUDA(cudaStreamDestroy(s));
    }
    // Zero columns in device input, WY requested: the input scan sends the panel (n <= 32: the single panel read
    // from dA, copied first) or the leaf (n > 32) to geqrf, so tau = 0 there as in Eigen, and the rest agrees with the
    // host-input path. 1048624 x 48: S = Y^T Y's bottom part has exactly 2^20 rows, a split-K GEMM with no remainder
    // chunk into beta = 1.
    for (auto mn : {std::pair<Index, Index>{5000, 24}, std::pair<Index, Index>{5000, 40},
                    std::pair<Index, Index>{(Index(1) << 20) + 48, 48}}) {
      const Index mz = mn.first, nz = mn.second;
      INFO("zero columns, " << mz << " x " << nz);
      const Mat<Scalar> Z = withZeroColumns<Scalar>(mz, nz, {7, nz - 1});
      DeviceMatrix<Scalar> dZ(Z, mz);
      Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> dev, host;
      dev.computeOnDevice(dZ.p, mz, nz, mz, nullptr, tcqr::ComputeWY | tcqr::ComputeThinQ);
      host.setBackend(Backend::Cuda).compute(Z, tcqr::ComputeWY | tcqr::ComputeThinQ);
      REQUIRE(dev.info() == Eigen::Success);
      CHECK(dev.hCoeffs()(7) == Scalar(0));
      CHECK(dev.hCoeffs()(nz - 1) == Scalar(0));
      CHECK(relativeDifference(dev.matrixQR(), host.matrixQR()) <= 100 * epsOf<Scalar>());
      CHECK(orthogonalityRatio<Scalar>(dev.thinQ()) <= kRatioBound);
      CHECK(backwardRatio<Scalar>(Z, dev.thinQ(), dev.matrixR()) <= kRatioBound);
      // T is the triangular factor of the reflectors: its diagonal is tau.
      CHECK(relativeDifference(Mat<Scalar>(dev.matrixT().diagonal()), Mat<Scalar>(dev.hCoeffs())) <=
            10 * epsOf<Scalar>());
    }

    // Device input on the one-kernel panel (WY requested, n <= 32, m within a cluster's rows): the input scan copies
    // dA, which stays unmodified, and the factors agree with the host-input path and Eigen's conventions. 12288 rows
    // fit the registers in both precisions (double's limit there), the taller case takes rows in shared memory (the
    // kernel's limits since 2026-11-29).
    for (const Index mk : {Index(12288), Index(std::is_same<Scalar, float>::value ? 32768 : 16384)}) {
      INFO(mk << " x 32 on the one-kernel panel");
      const Index ldk = mk + 3, nk = 32;
      const Mat<Scalar> K = uniformMatrix<Scalar>(mk, nk);
      DeviceMatrix<Scalar> dK(K, ldk);
      Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> dev, host;
      dev.computeOnDevice(dK.p, mk, nk, ldk, nullptr, tcqr::ComputeWY | tcqr::ComputeThinQ);
      host.setBackend(Backend::Cuda).compute(K, tcqr::ComputeWY | tcqr::ComputeThinQ);
      REQUIRE(dev.info() == Eigen::Success);
      CHECK(relativeDifference(dev.matrixQR(), host.matrixQR()) <= 100 * epsOf<Scalar>());
      CHECK(relativeDifference(Mat<Scalar>(dev.hCoeffs()), Mat<Scalar>(host.hCoeffs())) <= 100 * epsOf<Scalar>());
      CHECK(orthogonalityRatio<Scalar>(dev.thinQ()) <= kRatioBound);
      CHECK(backwardRatio<Scalar>(K, dev.thinQ(), dev.matrixR()) <= kRatioBound);
      const Mat<Scalar> back = download(dK.p, ldk, nk, ldk);
      CHECK(back.topRows(mk) == K);
    }

    // A NaN inside the matrix (not the padding) is flagged, on the tree (R only) and on the one-kernel panel (WY).
    Mat<Scalar> B = uniformMatrix<Scalar>(3000, 8);
    B(2999, 7) = std::numeric_limits<Scalar>::quiet_NaN();
    DeviceMatrix<Scalar> dB(B, 3001);
    Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> ts;
    CHECK(ts.computeOnDevice(dB.p, 3000, 8, 3001).info() == Eigen::NumericalIssue);
    CHECK(ts.computeOnDevice(dB.p, 3000, 8, 3001, nullptr, tcqr::ComputeWY).info() == Eigen::NumericalIssue);
  }

  TEST_CASE("GPU TallSkinnyQR: large tree (R only and thin Q) matches Eigen") {
    TCQR_RANDOM_SEED();
    const Index m = Index(1) << 21, n = 32;
    const Mat<float> A = uniformMatrix<float>(m, n);
    const EigenReference<float> ref(A);
    const double tol = kAgreementFactor * double(m) * epsOf<float>();
    Eigen::TensorCoreTallSkinnyQR<Mat<float>> ts;
    ts.setBackend(Backend::Cuda).compute(A);
    checkAgrees<float>("large: R vs Eigen / tol", ts.matrixR(), ref.R(), ref.kc, toDouble(A).norm(), tol);
    const Mat<float> R = ts.matrixR();
    ts.compute(A, tcqr::ComputeThinQ);
    CHECK(ts.matrixR() == R);
    CHECK(orthogonalityRatio<float>(ts.thinQ()) <= kRatioBound);
    CHECK(backwardRatio<float>(A, ts.thinQ(), ts.matrixR()) <= kRatioBound);
  }

  // The recursive path's thin Q (n > 32) in chunks of rows (src/TallSkinny.hpp, thinQChunkRows: about 2^24 scalars
  // each); (2^19 + 77) x 48 takes two, the last one partial.
  TEST_CASE_TEMPLATE("GPU TallSkinnyQR: thin Q of the recursive path formed in several chunks", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    const Index m = (Index(1) << 19) + 77, n = 48;
    const Mat<Scalar> A = uniformMatrix<Scalar>(m, n);
    Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> ts, both;
    ts.setBackend(Backend::Cuda).compute(A, tcqr::ComputeThinQ);
    REQUIRE(ts.info() == Eigen::Success);
    CHECK(orthogonalityRatio<Scalar>(ts.thinQ()) <= kRatioBound);
    CHECK(backwardRatio<Scalar>(A, ts.thinQ(), ts.matrixR()) <= kRatioBound);
    both.setBackend(Backend::Cuda).compute(A, tcqr::ComputeThinQ | tcqr::ComputeWY);
    CHECK(relativeDifference(both.thinQ(), ts.thinQ()) <= 30 * epsOf<Scalar>());
  }

  // A destroyed object's CUDA state (handles, stream, buffers) is kept for the next object (src/StatePool.hpp).
  TEST_CASE_TEMPLATE("GPU TallSkinnyQR: a new object per call takes over its predecessor's state", Scalar, float,
                     double) {
    TCQR_RANDOM_SEED();
    const Index m = 40000, n = 64;
    tcqr::releaseCachedDeviceMemory();
    const Mat<Scalar> A = uniformMatrix<Scalar>(m, n);
    DeviceMatrix<Scalar> dA(A, m);
    cudaStream_t s = nullptr;
    REQUIRE_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const Scalar* storage = nullptr;
    Mat<Scalar> R0;
    {
      Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> ts;
      ts.computeOnDevice(dA.p, m, n, m, s, tcqr::ComputeThinQ);
      ts.synchronize();
      REQUIRE(ts.info() == Eigen::Success);
      storage = ts.deviceR();
      R0 = ts.matrixR();
    }
    REQUIRE_CUDA(cudaStreamDestroy(s));  // the kept state must not use it again
    Mat<Scalar> R1;
    for (int call = 0; call < 3; ++call) {
      INFO("call " << call);
      const Eigen::TensorCoreTallSkinnyQR<Mat<Scalar>> ts(A, tcqr::ComputeThinQ);  // the object's own stream
      REQUIRE(ts.info() == Eigen::Success);
      CHECK(ts.activeBackend() == Backend::Cuda);
      CHECK(ts.deviceR() == storage);  // the same device buffers: taken over
      CHECK(relativeDifference(ts.matrixR(), R0) <= 100 * epsOf<Scalar>());
      CHECK(orthogonalityRatio<Scalar>(ts.thinQ()) <= kRatioBound);
      CHECK(backwardRatio<Scalar>(A, ts.thinQ(), ts.matrixR()) <= kRatioBound);
      if (call == 0) R1 = ts.matrixR();
      CHECK(ts.matrixR() == R1);  // run to run on the taken-over state
    }
    CHECK(tcqr::releaseCachedDeviceMemory() > 0);
    CHECK(tcqr::releaseCachedDeviceMemory() == 0);
  }
}
