// test_small_products_gpu.cpp - kernels::launchSmallTN, the recursion's products with a result of at most 64 x 64
// and a long inner dimension (CudaOps::smallTN: a leaf's Z = Y^T B, a small merge's Y1^T Y2), called directly against
// a double reference on the host: every result width the kernel's two tile shapes meet (1 to 64, p != c), inner
// dimensions from 1 to beyond the factorization's upper bound, one row block up to more than the blocks hold (each
// block then sums several, its next one's loads in flight), leading dimensions larger than k, beta = 0 (C not read:
// NaN there must not come through) and beta != 0, and the same bits on a second call.
// Why at this level: inside a factorization an error of this product shows only as a slightly larger backward
// error, and a row block left out or summed twice on one shape would not fail the factorization's thresholds.
// The bound per entry follows the kernel's summation (see checkSmallTN); a row block left out or summed twice misses
// it by orders of magnitude. Exits 77 (CTest: skipped) without a CUDA device.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/TestMatrices.h"
#include "../../src/kernels.hpp"

using namespace tcqr_test;

TCQR_GPU_TEST_MAIN()

namespace {

/// The row block of the kernel for a p x c result (kernels.hpp smallTnRowBlock).
Index rowBlockOf(Index p, Index c, Index bytes) { return tcqr::kernels::smallTnRowBlock(p, c, bytes); }

template <typename S>
void checkSmallTN(Index k, Index p, Index c, Index maxBlocks, double alpha, double beta) {
  const Index lda = k + 3, ldb = k + 5, ldc = p + 2;
  const Mat<S> A = uniformMatrixD(lda, p).cast<S>(), B = uniformMatrixD(ldb, c).cast<S>();
  Mat<S> C0 = uniformMatrixD(ldc, c).cast<S>();
  if (beta == 0.0) C0.setConstant(std::numeric_limits<S>::quiet_NaN());  // not read
  const Index blocks = tcqr::kernels::smallTnBlocks(k, p, c, Index(sizeof(S)), maxBlocks);
  CHECK(blocks >= 1);
  CHECK(blocks <= maxBlocks);
  DeviceArray<S> dA(size_t(lda * p)), dB(size_t(ldb * c)), dC(size_t(ldc * c)), dP(size_t(blocks * p * c));
  REQUIRE((dA.p && dB.p && dC.p && dP.p));
  REQUIRE(cudaMemcpy(dA.p, A.data(), sizeof(S) * size_t(lda * p), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(dB.p, B.data(), sizeof(S) * size_t(ldb * c), cudaMemcpyHostToDevice) == cudaSuccess);
  Mat<S> first(ldc, c), second(ldc, c);
  for (Mat<S>* out : {&first, &second}) {
    REQUIRE(cudaMemcpy(dC.p, C0.data(), sizeof(S) * size_t(ldc * c), cudaMemcpyHostToDevice) == cudaSuccess);
    tcqr::kernels::launchSmallTN<S>(dA.p, lda, dB.p, ldb, k, p, c, S(alpha), S(beta), dC.p, ldc, dP.p,
                                    static_cast<int>(maxBlocks), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(out->data(), dC.p, sizeof(S) * size_t(ldc * c), cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  // Rows of C beyond p (ldc > p) are not written.
  CHECK(std::memcmp(first.data(), second.data(), sizeof(S) * size_t(ldc * c)) == 0);
  for (Index j = 0; j < c; ++j)
    for (Index i = p; i < ldc; ++i) {
      const S was = C0(i, j), now = first(i, j);
      CHECK(std::memcmp(&was, &now, sizeof(S)) == 0);
    }
  // The longest chain of roundings in S: float sums a row block (at most RB rows) in float and the rest in double;
  // double sums all of a block's row blocks in one chain. So |error| <= (chain + 2) u (|alpha| |A|^T |B|) + 2 u |beta
  // C0| entry by entry (chain + 8 below, for the final roundings), plus the double reference's own error, at most
  // k u_double (|alpha| |A|^T |B|).
  const Mat<double> Ad = A.topRows(k).template cast<double>(), Bd = B.topRows(k).template cast<double>();
  const Mat<double> ref = alpha * Ad.transpose() * Bd;
  const Mat<double> mag = std::abs(alpha) * Ad.cwiseAbs().transpose() * Bd.cwiseAbs();
  const double u = std::numeric_limits<S>::epsilon() / 2, uRef = std::numeric_limits<double>::epsilon() / 2;
  const Index rb = rowBlockOf(p, c, Index(sizeof(S))), rowBlocks = (k + rb - 1) / rb;
  const Index chain = sizeof(S) == 8 ? (rowBlocks + blocks - 1) / blocks * rb : rb;
  double worst = 0.0;
  for (Index j = 0; j < c; ++j)
    for (Index i = 0; i < p; ++i) {
      const double r = ref(i, j) + (beta == 0.0 ? 0.0 : beta * double(C0(i, j)));
      const double bound = (double(chain + 8) * u + double(k) * uRef) * mag(i, j) +
                           2 * u * (beta == 0.0 ? 0.0 : std::abs(beta * double(C0(i, j)))) + 1e-300;
      const double got = double(first(i, j));
      REQUIRE(std::isfinite(got));
      worst = std::max(worst, std::abs(got - r) / bound);
    }
  INFO("k " << k << ", " << p << " x " << c << ", blocks " << blocks << " (at most " << maxBlocks << "), alpha "
            << alpha << ", beta " << beta << ": worst error / bound " << worst);
  CHECK(worst <= 1.0);
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE_TEMPLATE("launchSmallTN matches a double reference, the same bits on every call", S, float, double) {
    TCQR_RANDOM_SEED();
    int sms = 0;
    REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
    struct Size {
      Index p, c;
    };
    for (Size s : {Size{1, 1}, Size{7, 33}, Size{32, 32}, Size{33, 64}, Size{64, 64}, Size{64, 17}, Size{20, 5}}) {
      for (Index k : {1, 31, 129, 513, 4097, 16384, 20001, 70000}) {
        for (Index maxBlocks : {Index(1), Index(3), Index(sms), Index(4 * sms)}) {
          checkSmallTN<S>(k, s.p, s.c, maxBlocks, 1.0, 0.0);
          if (k == 4097 || k == 70000) checkSmallTN<S>(k, s.p, s.c, maxBlocks, -0.75, 1.5);
        }
      }
    }
  }
}
