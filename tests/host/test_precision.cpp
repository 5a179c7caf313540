// test_precision.cpp - the precision modes (tcqr::Precision) on the Host backend, which emulates each mode's rounding
// (operands rounded to TF32 / FP16 / BF16 before each product of the recursion; TF32x3 as three products): every
// mode against the error bounds, proof that the reduced modes really change the arithmetic, FP16 on columns
// whose norms span 1e-6 .. 1e6 (power-of-two column scaling), solve() in every mode, and the setPrecision() contract.
// The checks are shared with tests/gpu/test_precision_gpu.cpp (common/PrecisionChecks.h).
// clang-format off
#include "common/TestConfig.h"  // first: redefines eigen_assert to throw EigenAssertionFailed
// clang-format on

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#include "../../src/HostOps.hpp"
#include "common/PrecisionChecks.h"
#include "common/ScopedEnv.h"

using tcqr::Backend;
using tcqr::Precision;
using tcqr_test::Index;

namespace {
// Moderate sizes keep the test fast on a CPU-only CI machine: tall, odd (n not a multiple of the block size, m odd)
// and wide; all deep enough (n > 32, the host block size) for the recursion's products to run in the mode.
const std::vector<std::pair<Index, Index>> kShapes = {{300, 200}, {257, 129}, {120, 250}};
}  // namespace

TEST_CASE_TEMPLATE("[Host] every precision mode within its error bounds", T, float, double) {
  TCQR_RANDOM_SEED();
  tcqr_test::modeBoundsSuite<T>(Backend::Host, kShapes);
}

// The default merge caps (Tunables.hpp maxMergedCols: 256-2048 columns) leave these shapes uncapped; 64 makes every
// left child above 64 columns stay WY blocks (Algorithms.hpp factorRecursive), in every mode.
TEST_CASE_TEMPLATE("[Host] every precision mode within its error bounds with a merge cap of 64 columns", T, float,
                   double) {
  TCQR_RANDOM_SEED();
  const tcqr_test::ScopedEnv cap("TCQR_MAX_MERGED_COLS", "64");
  tcqr_test::modeBoundsSuite<T>(Backend::Host, {{300, 200}, {400, 390}});
}

TEST_CASE("[Host] the reduced-precision modes change the arithmetic, TF32x3 does not lose accuracy") {
  TCQR_RANDOM_SEED();
  tcqr_test::modesDifferSuite(Backend::Host, 300, 200);
  // (257 x 193: odd sizes whose top update is wider than 64 columns. Up to about 1100 columns FP16 and BF16 run every
  // product as TF32 (halfNarrowInTf32), so the BF16 checks need the 1100 x 1100 call.)
  tcqr_test::modesDifferSuite(Backend::Host, 257, 193);
  // (TF32x3 and FP16x3 leave FP32 only for products whose sides and inner dimension all exceed 512 and 256: at
  // 1100 x 1100 the top split is 544 / 556)
  tcqr_test::modesDifferSuite(Backend::Host, 1100, 1100);
}

TEST_CASE_TEMPLATE("[Host] column norms spread over 1e-6 .. 1e6", T, float, double) {
  TCQR_RANDOM_SEED();
  tcqr_test::spreadColumnsSuite<T>(Backend::Host, 300, 120);
  tcqr_test::spreadColumnsSuite<T>(Backend::Host, 257, 193);
  // (Up to about 1100 columns FP16 and BF16 run every GEMM as TF32, which has FP32's range (halfNarrowInTf32), so
  // FP16's overflow protection needs a wider matrix: at 1100 x 1100 the top split is 544 / 556. Float only: the double
  // modes have no such rule.)
  if (std::is_same<T, float>::value) tcqr_test::spreadColumnsSuite<T>(Backend::Host, 1100, 1100);
}

TEST_CASE("[Host] FP16 and FP16x3, column norms spread over 1e-37 .. 1e37") {
  TCQR_RANDOM_SEED();
  tcqr_test::fp16RangeEndsCheck(Backend::Host);
  tcqr_test::fp16RangeEndsCheck(Backend::Host, Precision::FP16x3);
}

TEST_CASE_TEMPLATE("[Host] solve() in every precision mode", T, float, double) {
  TCQR_RANDOM_SEED();
  tcqr_test::modeSolveSuite<T>(Backend::Host, 300, 120);
}

TEST_CASE_TEMPLATE("[Host] setPrecision() and precision()", T, float, double) {
  TCQR_RANDOM_SEED();
  tcqr_test::precisionApiSuite<T>(Backend::Host);
}

TEST_CASE("precision names and applicability") {
  using tcqr::precisionSupported;
  using tcqr::resolvePrecision;
  CHECK(std::string(tcqr::precisionName(Precision::TF32x3)) == "TF32x3");
  CHECK(std::string(tcqr::precisionName(Precision::FP16x3)) == "FP16x3");
  CHECK(std::string(tcqr::precisionName(Precision::FP64Emulated)) == "FP64Emulated");
  CHECK(resolvePrecision(Precision::FP16, false, Backend::Cuda, 100, 100) == Precision::FP16);
  CHECK(resolvePrecision(Precision::FP32, false, Backend::Cuda, 16384, 16384) == Precision::FP32);
  CHECK(resolvePrecision(Precision::FP64Emulated, true, Backend::Host, 100, 100) == Precision::FP64Emulated);
  // Default: FP64 for double anywhere; float FP32 on the host at any size, FP16x3 on the GPU from 1024 rows and
  // columns and 2^24 entries (Tunables.hpp, kDefaultFp16x3MinDim / kDefaultFp16x3MinElements).
  for (Backend b : {Backend::Host, Backend::Cuda}) {
    CHECK(resolvePrecision(Precision::Default, true, b, 16384, 16384) == Precision::FP64);
    CHECK(resolvePrecision(Precision::Default, true, b, 10, 10) == Precision::FP64);
  }
  CHECK(resolvePrecision(Precision::Default, false, Backend::Host, 16384, 16384) == Precision::FP32);
  CHECK(resolvePrecision(Precision::Default, false, Backend::Host, 10, 10) == Precision::FP32);
  const std::vector<std::pair<Index, Index>> fp16x3 = {{8192, 8192}, {4096, 4096}, {16384, 1024}, {1024, 16384},
                                                       {8192, 2048}, {65536, 1024}, {20000, 5000}};
  const std::vector<std::pair<Index, Index>> fp32 = {{4095, 4096}, {16383, 1024}, {3000, 3000}, {1048576, 1023},
                                                     {1023, 1048576}, {1000, 1000}, {0, 0}};
  for (const auto& s : fp16x3) {
    INFO(s.first << " x " << s.second);
    CHECK(resolvePrecision(Precision::Default, false, Backend::Cuda, s.first, s.second) == Precision::FP16x3);
  }
  for (const auto& s : fp32) {
    INFO(s.first << " x " << s.second);
    CHECK(resolvePrecision(Precision::Default, false, Backend::Cuda, s.first, s.second) == Precision::FP32);
  }
  // Auto: the backend resolveBackend picks (the host without a device).
  const Backend big = tcqr::resolveBackend(Backend::Auto, 8192, 8192);
  CHECK(resolvePrecision(Precision::Default, false, Backend::Auto, 8192, 8192) ==
        (big == Backend::Cuda ? Precision::FP16x3 : Precision::FP32));
  for (Precision p : tcqr_test::modesOf<float>()) {
    CHECK(precisionSupported(p, false));
    CHECK_FALSE(precisionSupported(p, true));
  }
  for (Precision p : tcqr_test::modesOf<double>()) {
    CHECK(precisionSupported(p, true));
    CHECK_FALSE(precisionSupported(p, false));
  }
  CHECK(precisionSupported(Precision::Default, false));
  CHECK(precisionSupported(Precision::Default, true));
}

// 2200 x 2100: the top split (1056 columns) exceeds the tensor-core modes' block-row height (1024, trmmPlan), so the
// block-row TRMM runs in the mode, with operands rounded as the tensor cores would round them. One matrix per mode
// keeps CI short. (FP32's recursive TRMM: test_householder_qr.cpp.)
TEST_CASE("[Host] the TRMM path in the reduced modes") {
  TCQR_RANDOM_SEED();
  for (Precision p : {Precision::TF32x3, Precision::FP16, Precision::FP16x3}) {
    INFO("mode " << tcqr_test::modeString(p));
    tcqr_test::checkModeBounds<float>(tcqr_test::uniformMatrix<float>(2200, 2100), Backend::Host, p);
  }
}

// TF32x3 and FP16x3 run memory-bound products (a side of the result or the inner dimension at most x3Fp32MaxDim: 512
// and 256) in plain FP32 and the others as three tensor-core products (src/Tunables.hpp, x3ProductInFp32); the CUDA
// backend makes the same choice.
// FP16 and BF16 run the same narrow products as TF32 products (src/Tunables.hpp, halfNarrowInTf32; the CUDA backend
// makes the same choice), the others in their own format.
TEST_CASE("[Host] FP16 and BF16 run narrow products as TF32, the others in their own format") {
  TCQR_RANDOM_SEED();
  using tcqr::detail::Op;
  using tcqr::detail::View;
  using M = Eigen::MatrixXf;
  if (!tcqr::detail::halfNarrowInTf32(Precision::FP16, 1, 1, 1)) {
    MESSAGE("TCQR_HALF_NARROW=mode: narrow products stay in the mode, nothing to check");
    return;
  }
  const Index big = tcqr::detail::halfAsTf32MaxDim() + 36;
  tcqr::detail::HostOps<float> tf32;
  tf32.mode = Precision::TF32;
  for (Precision p : {Precision::FP16, Precision::BF16}) {
    tcqr::detail::HostOps<float> half;
    half.mode = p;
    for (const Index k : {big, tcqr::detail::halfAsTf32MaxDim()}) {
      INFO(tcqr_test::modeString(p) << ", " << big << " x " << big << ", inner " << k);
      // Entries with more significant bits than FP16, BF16 or TF32 hold, and a column below FP16's normal range (FP16
      // subnormals keep a few bits where TF32 keeps 11), so each format's rounding shows, whatever the draw.
      M A = tcqr_test::uniformMatrix<float>(k, big), B = tcqr_test::uniformMatrix<float>(k, big);
      A.array() += 1.0f / 3.0f;
      A.col(0) *= 3.1e-7f;
      M Ch = M::Zero(big, big), Ct = M::Zero(big, big);
      half.gemm(Op::T, Op::N, 1.0f, View<float>(A.data(), k, big, k), View<float>(B.data(), k, big, k), 0.0f,
                View<float>(Ch.data(), big, big, big));
      tf32.gemm(Op::T, Op::N, 1.0f, View<float>(A.data(), k, big, k), View<float>(B.data(), k, big, k), 0.0f,
                View<float>(Ct.data(), big, big, big));
      const bool narrow = k <= tcqr::detail::halfAsTf32MaxDim();
      CHECK(tcqr::detail::halfNarrowInTf32(p, big, big, k) == narrow);
      CHECK((Ch.array() == Ct.array()).all() == narrow);
    }
  }
}

TEST_CASE_TEMPLATE("[Host] TF32x3 and FP16x3 run memory-bound products in FP32, the others on the emulated tensor cores",
                   Mode, std::integral_constant<Precision, Precision::TF32x3>,
                   std::integral_constant<Precision, Precision::FP16x3>) {
  TCQR_RANDOM_SEED();
  using tcqr::detail::Op;
  using tcqr::detail::View;
  using M = Eigen::MatrixXf;
  tcqr::detail::HostOps<float> x3, fp32;
  x3.mode = Mode::value;
  fp32.mode = Precision::FP32;
  INFO("mode " << tcqr_test::modeString(Mode::value));
  const Index d = tcqr::detail::x3Fp32MaxDim(Mode::value), big = d + 36;
  struct Shape {
    Index m, n, k;
    bool inFp32;
  };
  for (const Shape s : {Shape{big, big, big, false}, Shape{big, big, d, true}, Shape{d, big, big, true},
                        Shape{big, 16, big, true}}) {
    INFO(s.m << " x " << s.n << ", inner " << s.k);
    // Entries with more significant bits than TF32's hi and lo parts hold, so the split's rounding shows.
    M A = M::Random(s.k, s.m), B = M::Random(s.k, s.n);
    A.array() += 1.0f / 3.0f;
    M C3 = M::Zero(s.m, s.n), C32 = M::Zero(s.m, s.n);
    x3.gemm(Op::T, Op::N, 1.0f, View<float>(A.data(), s.k, s.m, s.k), View<float>(B.data(), s.k, s.n, s.k), 0.0f,
            View<float>(C3.data(), s.m, s.n, s.m));
    fp32.gemm(Op::T, Op::N, 1.0f, View<float>(A.data(), s.k, s.m, s.k), View<float>(B.data(), s.k, s.n, s.k), 0.0f,
              View<float>(C32.data(), s.m, s.n, s.m));
    CHECK(tcqr::detail::x3ProductInFp32(Mode::value, s.m, s.n, s.k) == s.inFp32);
    CHECK((C3.array() == C32.array()).all() == s.inFp32);
  }
}
