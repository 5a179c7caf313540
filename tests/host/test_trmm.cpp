// test_trmm.cpp - the two block structures of the triangular product C += alpha op(L) Z (src/Algorithms.hpp:
// TPDS'25 Algorithm 3's recursion and the block-row form) against Eigen, on the Host backend's operations. Internal
// header on purpose: the TRMM is not a public entry point, and whichever scheme the library defaults to, both must
// stay correct (trmm_bench measures both).
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <limits>

#include <Eigen/Dense>

#include "../../src/HostOps.hpp"
#include "common/TestMatrices.h"

namespace {

using tcqr::detail::HostOps;
using tcqr::detail::Op;
using tcqr::detail::TrmmScheme;
using tcqr::detail::View;

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

template <typename T>
View<T> view(Mat<T>& M) {
  return View<T>(M.data(), M.rows(), M.cols(), M.rows());
}

template <typename T>
void checkScheme(TrmmScheme scheme, Op op, Eigen::Index k, Eigen::Index c, Eigen::Index cutoff) {
  Mat<T> L = tcqr_test::uniformMatrix<T>(k, k);
  L.template triangularView<Eigen::StrictlyUpper>().setZero();  // explicit zeros above the diagonal, as the callers
  Mat<T> Z = tcqr_test::uniformMatrix<T>(k, c), C = tcqr_test::uniformMatrix<T>(k, c);
  const T alpha = T(-0.75);
  const Mat<T> ref = C + alpha * (op == Op::N ? Mat<T>(L * Z) : Mat<T>(L.transpose() * Z));
  HostOps<T> ops;
  tcqr::detail::trmmLowerAccGeneric(ops, op, alpha, view(L), view(Z), view(C), cutoff, scheme);
  const double diff = double((C - ref).norm() / ref.norm());
  INFO("k = " << k << ", c = " << c << ", cutoff = " << cutoff << ", op " << (op == Op::N ? "N" : "T")
              << ", scheme " << (scheme == TrmmScheme::BlockRows ? "rows" : "recursive"));
  CHECK(diff < 20 * std::sqrt(double(k)) * double(Eigen::NumTraits<T>::epsilon()));
}

}  // namespace

TEST_CASE_TEMPLATE("TRMM: recursive and block-row schemes match Eigen", T, float, double) {
  TCQR_RANDOM_SEED();
  for (TrmmScheme scheme : {TrmmScheme::Recursive, TrmmScheme::BlockRows})
    for (Op op : {Op::N, Op::T}) {
      checkScheme<T>(scheme, op, 1100, 37, 512);  // several levels / block rows, k not a multiple of 16
      checkScheme<T>(scheme, op, 300, 5, 64);
      checkScheme<T>(scheme, op, 40, 3, 512);  // one block: a single full product
    }
}

namespace {

/// trmmUpperGemm (C = op(U) Z + beta C) and trmmUpperGemmRight (C = Z op(U) + beta C), U upper triangular with explicit
/// zeros below the diagonal (T of the compact WY form), against Eigen.
template <typename T>
void checkUpper(bool right, Op op, Eigen::Index k, Eigen::Index c, T beta) {
  Mat<T> U = tcqr_test::uniformMatrix<T>(k, k);
  U.template triangularView<Eigen::StrictlyLower>().setZero();
  const Mat<T> opU = op == Op::N ? U : Mat<T>(U.transpose());
  Mat<T> Z = right ? tcqr_test::uniformMatrix<T>(c, k) : tcqr_test::uniformMatrix<T>(k, c);
  Mat<T> C = right ? tcqr_test::uniformMatrix<T>(c, k) : tcqr_test::uniformMatrix<T>(k, c);
  const Mat<T> product = right ? Mat<T>(Z * opU) : Mat<T>(opU * Z);
  const Mat<T> ref = beta == T(0) ? product : Mat<T>(beta * C + product);
  if (beta == T(0)) C.setConstant(std::numeric_limits<T>::quiet_NaN());  // beta = 0: C is output only (scratch)
  HostOps<T> ops;
  if (right) tcqr::detail::trmmUpperGemmRight(ops, op, view(Z), view(U), beta, view(C));
  else tcqr::detail::trmmUpperGemm(ops, op, view(U), view(Z), beta, view(C));
  const double diff = double((C - ref).norm() / ref.norm());
  INFO("k = " << k << ", c = " << c << ", " << (right ? "Z op(U)" : "op(U) Z") << ", op " << (op == Op::N ? "N" : "T")
              << ", beta " << beta);
  CHECK(diff < 20 * std::sqrt(double(k)) * double(Eigen::NumTraits<T>::epsilon()));
}

}  // namespace

TEST_CASE_TEMPLATE("T's products: trmmUpperGemm and trmmUpperGemmRight match Eigen", T, float, double) {
  TCQR_RANDOM_SEED();
  for (bool right : {false, true})
    for (Op op : {Op::N, Op::T})
      for (T beta : {T(0), T(1), T(-0.5)}) {
        checkUpper<T>(right, op, 1100, 37, beta);  // several levels of the recursion (cutoff 256), k not a multiple of 16
        checkUpper<T>(right, op, 200, 5, beta);    // one block: a single full product
      }
}

TEST_CASE("T's products in the tensor-core modes run error-corrected: FP16, BF16, TF32 not in the mode (tProductMode)") {
  TCQR_RANDOM_SEED();
  using tcqr::Precision;
  if (std::getenv("TCQR_T_PRODUCTS") != nullptr) {  // (a measurement switch changes what is checked here)
    MESSAGE("TCQR_T_PRODUCTS is set: skipped");
    return;
  }
  const Eigen::Index k = 601, c = 563;  // every side above x3Fp32MaxDim (one product of the whole triangle); k odd
  Mat<float> U = tcqr_test::uniformMatrix<float>(k, k);
  U.triangularView<Eigen::StrictlyLower>().setZero();
  for (Precision mode : {Precision::FP16, Precision::BF16, Precision::TF32, Precision::FP16x3, Precision::TF32x3})
    for (bool right : {false, true})
      for (Op op : {Op::N, Op::T}) {
        INFO("mode " << doctest::String(tcqr::precisionName(mode)) << ", " << (right ? "Z op(U)" : "op(U) Z")
                     << ", op " << (op == Op::N ? "N" : "T"));
        REQUIRE(tcqr::detail::tProductOnTensorCores(mode, k, c, k));
        Mat<float> Z = right ? tcqr_test::uniformMatrix<float>(c, k) : tcqr_test::uniformMatrix<float>(k, c);
        const Mat<double> Ud = U.cast<double>();
        const Mat<double> opU = op == Op::N ? Ud : Mat<double>(Ud.transpose());
        const Mat<double> ref = right ? Mat<double>(Z.cast<double>() * opU) : Mat<double>(opU * Z.cast<double>());
        Mat<float> C(Z.rows(), Z.cols());
        HostOps<float> ops;
        ops.mode = mode;
        if (right) tcqr::detail::trmmUpperGemmRight(ops, op, view(Z), view(U), 0.0f, view(C));
        else tcqr::detail::trmmUpperGemm(ops, op, view(U), view(Z), 0.0f, view(C));
        // Bit for bit the error-corrected mode's own product of the whole triangle (HostOps::gemm in that mode)...
        HostOps<float> x3;
        x3.mode = tcqr::detail::tProductMode(mode);
        CHECK((x3.mode == Precision::FP16x3) == (mode == Precision::FP16 || mode == Precision::FP16x3));
        CHECK((x3.mode == Precision::TF32x3) == (mode != Precision::FP16 && mode != Precision::FP16x3));
        Mat<float> E(Z.rows(), Z.cols());
        if (right) x3.gemm(Op::N, op, 1.0f, view(Z), view(U), 0.0f, view(E));
        else x3.gemm(op, Op::N, 1.0f, view(U), view(Z), 0.0f, view(E));
        CHECK(C == E);
        // ... which is FP32-class, where a product in the mode itself would be off by 1e-4 (TF32, FP16) to 1e-3 (BF16).
        const double err = (C.cast<double>() - ref).norm() / ref.norm();
        CHECK(err < 2e-6);
      }
}
