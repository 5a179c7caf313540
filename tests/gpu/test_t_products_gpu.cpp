// test_t_products_gpu.cpp - the products with a compact WY form's T on the device (CudaOps::gemmT, reached through
// Algorithms.hpp trmmUpperGemm / trmmUpperGemmRight as in a factorization), in every mode that multiplies T on tensor
// cores (tProductMode: FP16x3 for FP16 and FP16x3, TF32x3 for BF16, TF32 and TF32x3), against double references.
//
// Why at this level: a factorization in FP16, BF16 or TF32 cannot tell whether its T products are accurate. Two
// factorizations of one matrix whose T products differ by 1e-7 already differ by about the mode's own error (each
// changed operand can flip a rounding to the mode, and the flips cascade): R moved by 3-4e-4 in FP16 and 1e-3 in BF16
// (2300 x 2200 and 2600 x 2400, singular values in [1/2, 1]; H200, 6eda8f2), and a build whose paired T products
// dropped one correction term moved it only 1.5-2.5x more. A T product alone is off by 1e-4 or more when it loses a
// correction term, and by a few 1e-7 when it does not.
//
// Every layout of the products is checked: the default (both correction terms in one product, and in NN products hi*hi
// fused into it: CudaOps convertOperands), TCQR_X3_FUSED=0 and TCQR_X3_PAIRED=0 (both read on every product).
//
// Exits with 77 (CTest: SKIP_RETURN_CODE, reported as skipped) when no CUDA device is usable.
// clang-format off
#include "common/TestConfig.h"  // first: eigen_assert throws, as in every test TU and in tcqr_test_common
// clang-format on

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <Eigen/Dense>

#include "../../src/Algorithms.hpp"
#include "../../src/CudaContext.hpp"
#include "common/QRSuites.h"
#include "common/ScopedEnv.h"
#include "common/TestMatrices.h"

using tcqr::Precision;
using tcqr::detail::CudaContext;
using tcqr::detail::CudaOps;
using tcqr::detail::Index;
using tcqr::detail::Op;
using tcqr::detail::View;
using tcqr_test::Mat;
using tcqr_test::ScopedEnv;

TCQR_GPU_TEST_MAIN()

namespace {

/// A column-major float matrix on the device, copied from and back to the host.
struct DeviceMatrix {
  tcqr::detail::DeviceBuffer<float> buffer;
  Index rows = 0, cols = 0;
  explicit DeviceMatrix(const Mat<float>& m) : rows(m.rows()), cols(m.cols()) {
    buffer.reserve(std::max<Index>(rows * cols, 1));
    TCQR_CHECK(cudaMemcpy(buffer.get(), m.data(), sizeof(float) * rows * cols, cudaMemcpyHostToDevice));
  }
  View<float> view() { return View<float>(buffer.get(), rows, cols, rows); }
  Mat<float> toHost() const {
    Mat<float> m(rows, cols);
    TCQR_CHECK(cudaMemcpy(m.data(), buffer.get(), sizeof(float) * rows * cols, cudaMemcpyDeviceToHost));
    return m;
  }
};

/// The operations of a factorization in `mode` (as CudaBackend's makeOps, without look-ahead lanes).
struct Ops {
  CudaContext ctx;
  tcqr::detail::DeviceBuffer<char> work;
  std::vector<char> hostWork;
  tcqr::detail::DeviceBuffer<int> info;
  tcqr::detail::ConversionWork conversion, partials;
  CudaOps<float> ops{};
  explicit Ops(Precision mode) {
    ctx.fillOps(ops, false);
    info.reserve(1);
    ops.work = &work;
    ops.hostWork = &hostWork;
    ops.dInfo = info.get();
    ops.mode = mode;
    ops.conversion = &conversion;
    ops.partials = &partials;
  }
};

/// ||C - ref||_F / ||ref||_F for C = op(U) Z (left) or Z op(U), U (k x k) upper triangular with entries up to 2 in
/// magnitude (T's measured bound, tests/studies/t_magnitude_study), Z's up to sqrt(2) (|Y^T B| under column scaling).
double tProductError(Precision mode, Index k, Index c, bool left, Op op) {
  Mat<float> U = (2.0 * tcqr_test::uniformMatrixD(k, k)).cast<float>();
  U.triangularView<Eigen::StrictlyLower>().setZero();
  const Mat<float> Z = (1.41 * (left ? tcqr_test::uniformMatrixD(k, c) : tcqr_test::uniformMatrixD(c, k))).cast<float>();
  const Eigen::MatrixXd Ud = U.cast<double>();
  const Eigen::MatrixXd opU = op == Op::N ? Ud : Eigen::MatrixXd(Ud.transpose());
  const Eigen::MatrixXd ref = left ? Eigen::MatrixXd(opU * Z.cast<double>()) : Eigen::MatrixXd(Z.cast<double>() * opU);
  Ops o(mode);
  DeviceMatrix dU(U), dZ(Z), dC(Mat<float>::Constant(Z.rows(), Z.cols(), 7.0f));  // (beta 0: the 7s must vanish)
  // cudaMemcpy from pageable memory may return before its DMA is done, and ops.stream does not wait for the legacy
  // stream: without this, one product in 240 read a partly copied operand (error 0.43; H200, ea7b403).
  TCQR_CHECK(cudaDeviceSynchronize());
  if (left)
    tcqr::detail::trmmUpperGemm(o.ops, op, dU.view(), dZ.view(), 0.0f, dC.view());
  else
    tcqr::detail::trmmUpperGemmRight(o.ops, op, dZ.view(), dU.view(), 0.0f, dC.view());
  TCQR_CHECK(cudaStreamSynchronize(o.ops.stream));
  return (dC.toHost().cast<double>() - ref).norm() / ref.norm();
}

/// The bound of tProductError: FP32-class. Measured 2.1e-7 to 1.05e-6 over the 120 products (H200, 6eda8f2 with this
/// test); a build whose pair of correction terms dropped the lo*hi term failed here in all 30 products that ran that
/// pair (the TN ones, and the NN ones of k = 608 with TCQR_X3_FUSED=0), each off by 1.8e-4 or more (bench/results/logs/2026-11-28-h200-fused-gemmT-x3-t-products.log).
constexpr double kTProductBound = 1e-5;

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("[Cuda] T's products on tensor cores are FP32-class in every mode and layout") {
    TCQR_RANDOM_SEED();
    if (std::getenv("TCQR_T_PRODUCTS") != nullptr) {  // (a measurement switch changes what is checked here)
      MESSAGE("TCQR_T_PRODUCTS is set: skipped");
      return;
    }
    const ScopedEnv paired("TCQR_X3_PAIRED"), fused("TCQR_X3_FUSED");
    struct Layout {
      const char *name, *paired, *fused;
    };
    for (const Layout& layout : {Layout{"paired and fused", "1", "1"}, Layout{"paired", "1", "0"},
                                 Layout{"apart", "0", "0"}}) {
      paired.set(layout.paired);
      fused.set(layout.fused);
      for (Precision mode :
           {Precision::FP16, Precision::BF16, Precision::TF32, Precision::FP16x3, Precision::TF32x3}) {
        // k = 608: NN products pair (k a multiple of 8); k = 601: they do not. Every side above 512, so that the
        // products reach the tensor cores in every mode (x3Fp32MaxDim) as one product of the whole triangle.
        for (Index k : {Index(608), Index(601)})
          for (bool left : {true, false})
            for (Op op : {Op::N, Op::T}) {
              REQUIRE(tcqr::detail::tProductOnTensorCores(mode, k, 563, k));
              INFO(std::string(layout.name) << ", " << std::string(tcqr::precisionName(mode)) << ", k " << k << ", "
                               << (left ? "op(U) Z" : "Z op(U)") << ", op " << (op == Op::N ? "N" : "T"));
              CHECK(tcqr_test::report("T product error", tProductError(mode, k, 563, left, op)) <= kTProductBound);
            }
      }
    }
  }
}
