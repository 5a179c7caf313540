// test_kernels_gpu.cpp - internal kernels tested directly against references computed on the host (src/kernels.hpp;
// the factorization tests cover them only through whatever shapes the recursion happens to produce). Exits 77
// (CTest: skipped) without a CUDA device.
//
// launchSkinnyTN (C = alpha A^T B + beta C, both sides of C at most kSkinnyMaxSide, long inner dimension): every
// tile shape (sides 1, 7, 32, 33, 64; the kernel's two micro-tile sizes and partial tiles), inner dimensions that
// are and are not multiples of its chunks (64 rows in float, 32 in double), fewer partials than chunks (blocks that take several chunks),
// leading dimensions larger than the rows, beta = 0 with a C full of NaN (C must not be read) and beta != 0.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>

#include "kernels.hpp"

TCQR_GPU_TEST_MAIN()

namespace {

using tcqr::kernels::Index;

#define CUDA_OK(expr) REQUIRE((expr) == cudaSuccess)

template <typename T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(Index n) { CUDA_OK(cudaMalloc(&p, sizeof(T) * static_cast<size_t>(std::max<Index>(n, 1)))); }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

template <typename S>
void checkSkinnyTN(Index k, Index p, Index q, Index partialCount, S alpha, S beta, std::mt19937_64& rng) {
  INFO("k=" << k << " p=" << p << " q=" << q << " partials=" << partialCount << " alpha=" << alpha
            << " beta=" << beta);
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const Index lda = k + 3, ldb = k + 5, ldc = p + 2;
  std::normal_distribution<double> nd;
  Mat A(lda, p), B(ldb, q), C(ldc, q);
  for (Index j = 0; j < p; ++j)
    for (Index i = 0; i < lda; ++i) A(i, j) = S(nd(rng));
  for (Index j = 0; j < q; ++j)
    for (Index i = 0; i < ldb; ++i) B(i, j) = S(nd(rng));
  for (Index j = 0; j < q; ++j)
    for (Index i = 0; i < ldc; ++i) C(i, j) = beta == S(0) ? std::numeric_limits<S>::quiet_NaN() : S(nd(rng));
  // Reference in double on the operands as stored (rows k .. ld - 1 must not be read).
  const Eigen::MatrixXd ref = double(alpha) * A.topRows(k).template cast<double>().transpose() *
                                  B.topRows(k).template cast<double>() +
                              (beta == S(0) ? Eigen::MatrixXd::Zero(p, q)
                                            : Eigen::MatrixXd(double(beta) * C.topRows(p).template cast<double>()));
  // Scale of the sums: |alpha| |A|^T |B| + |beta| |C| entrywise, the usual bound's numerator.
  const Eigen::MatrixXd scale = std::abs(double(alpha)) * A.topRows(k).template cast<double>().cwiseAbs().transpose() *
                                    B.topRows(k).template cast<double>().cwiseAbs() +
                                (beta == S(0) ? Eigen::MatrixXd::Zero(p, q)
                                              : Eigen::MatrixXd(std::abs(double(beta)) *
                                                                C.topRows(p).template cast<double>().cwiseAbs()));
  DeviceArray<S> dA(lda * p), dB(ldb * q), dC(ldc * q), dP(partialCount * p * q);
  CUDA_OK(cudaMemcpy(dA.p, A.data(), sizeof(S) * A.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dB.p, B.data(), sizeof(S) * B.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dC.p, C.data(), sizeof(S) * C.size(), cudaMemcpyHostToDevice));
  tcqr::kernels::launchSkinnyTN<S>(dA.p, lda, dB.p, ldb, k, p, q, alpha, beta, dC.p, ldc, dP.p, partialCount,
                                   nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  Mat out(ldc, q);
  CUDA_OK(cudaMemcpy(out.data(), dC.p, sizeof(S) * out.size(), cudaMemcpyDeviceToHost));
  // Rows p .. ldc - 1 of C are untouched.
  CHECK(((out.bottomRows(ldc - p).array() == C.bottomRows(ldc - p).array()) ||
         (out.bottomRows(ldc - p).array().isNaN() && C.bottomRows(ldc - p).array().isNaN()))
            .all());
  // Chunks of at most 64 rows summed in S, the chunk sums in double: the error relative to the scale is at most
  // about 64 units of S's roundoff (bound 2 * 64 u, with margin).
  const double u = std::numeric_limits<S>::epsilon() / 2;
  const Eigen::MatrixXd err = (out.topRows(p).template cast<double>() - ref).cwiseAbs();
  double worst = 0;
  for (Index j = 0; j < q; ++j)
    for (Index i = 0; i < p; ++i) worst = std::max(worst, err(i, j) / scale(i, j));
  CHECK(out.topRows(p).allFinite());
  CHECK(worst <= 2 * 64 * u);
  // Not vacuous: the result is not just beta C.
  CHECK((out.topRows(p).template cast<double>() -
         (beta == S(0) ? Eigen::MatrixXd::Zero(p, q) : Eigen::MatrixXd(double(beta) * C.topRows(p).template cast<double>())))
            .norm() > 0.1 * ref.norm());
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE_TEMPLATE("launchSkinnyTN matches a double reference", S, float, double) {
    std::mt19937_64 rng(20261127);
    for (Index side : {1, 7, 32, 33, 64})
      for (Index k : {2048, 2049, 5000, 100003}) {
        const Index chunks = (k + 63) / 64;
        checkSkinnyTN<S>(k, side, side, chunks, S(1), S(0), rng);  // one chunk per block
        checkSkinnyTN<S>(k, side, 64 - side + 1, 7, S(-1), S(1), rng);  // several chunks per block, p != q
      }
    checkSkinnyTN<S>(3000, 64, 17, 1, S(0.5), S(-2), rng);  // one block takes every chunk
  }

  TEST_CASE("launchSkinnyTN rejects sides above kSkinnyMaxSide and missing partials") {
    DeviceArray<float> d(65 * 4096);
    CHECK_THROWS(tcqr::kernels::launchSkinnyTN<float>(d.p, 4096, d.p, 4096, 4096, 65, 8, 1.0f, 0.0f, d.p, 65, d.p, 4,
                                                      nullptr));
    CHECK_THROWS(tcqr::kernels::launchSkinnyTN<float>(d.p, 4096, d.p, 4096, 4096, 8, 8, 1.0f, 0.0f, d.p, 8, d.p, 0,
                                                      nullptr));
  }
}
