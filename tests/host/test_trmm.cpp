// test_trmm.cpp - the two block structures of the triangular product C += alpha op(L) Z (src/Algorithms.hpp:
// TPDS'25 Algorithm 3's recursion and the block-row form) against Eigen, on the Host backend's operations. Internal
// header on purpose: the TRMM is not a public entry point, and whichever scheme the library defaults to, both must
// stay correct (trmm_bench measures both).
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <limits>
#include <string>

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

// In TF32, FP16 and BF16 the factorization's T products run in TF32x3 (tProductPrecision), emulated here as on the GPU:
// they must stay close to FP32, where a product in the mode itself is off by its unit roundoff (2^-11 for TF32 and
// FP16). Z has more than kX3Fp32MaxDim columns, so the TF32x3 path is the one taken.
TEST_CASE("T's products in the tensor-core modes: TF32x3, not the mode") {
  TCQR_RANDOM_SEED();
  if (tcqr::detail::tProductPrecision(tcqr::Precision::FP16) != tcqr::Precision::TF32x3) {
    MESSAGE("TCQR_T_PRODUCTS=storage: T's products run in FP32, nothing of TF32x3 to check");
    return;
  }
  const Eigen::Index k = 700, c = 150;
  for (tcqr::Precision mode : {tcqr::Precision::TF32, tcqr::Precision::FP16, tcqr::Precision::BF16})
    for (Op op : {Op::N, Op::T}) {
      Mat<float> U = tcqr_test::uniformMatrix<float>(k, k);
      U.triangularView<Eigen::StrictlyLower>().setZero();
      const Mat<float> Z = tcqr_test::uniformMatrix<float>(k, c), C0 = tcqr_test::uniformMatrix<float>(k, c);
      const Mat<double> ref = (op == Op::N ? Mat<double>(U.cast<double>() * Z.cast<double>())
                                           : Mat<double>(U.cast<double>().transpose() * Z.cast<double>())) +
                              0.5 * C0.cast<double>();
      HostOps<float> ops;
      ops.mode = mode;
      Mat<float> Zc = Z, C = C0;
      tcqr::detail::trmmUpperGemm(ops, op, view(U), view(Zc), 0.5f, view(C));
      const double diff = (C.cast<double>() - ref).norm() / ref.norm();
      // The same product with the mode's own GEMM, to show that the bound tells the two apart.
      Mat<float> Cm = C0, Um = op == Op::N ? U : Mat<float>(U.transpose());
      ops.gemm(Op::N, Op::N, 1.0f, view(Um), view(Zc), 0.5f, view(Cm));
      const double diffMode = (Cm.cast<double>() - ref).norm() / ref.norm();
      INFO("mode " << std::string(tcqr::precisionName(mode)) << ", op " << (op == Op::N ? "N" : "T") << ": TF32x3 " << diff
                   << ", in the mode " << diffMode);
      CHECK(diff < 20 * std::sqrt(double(k)) * double(Eigen::NumTraits<float>::epsilon()));
      CHECK(diffMode > 100 * diff);
    }
}
