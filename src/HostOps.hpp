// HostOps.hpp - the host side of the backend-generic algorithms (internal): HostOps, the "Ops" of Algorithms.hpp and
// Tsqr.hpp over Eigen. Shared by the host state classes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>
#include <Eigen/Householder>

#include "Algorithms.hpp"
#include "tcqr/Backend.h"

namespace tcqr {
namespace detail {

template <typename S>
using MapM = Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>, 0, Eigen::OuterStride<>>;

template <typename S>
MapM<S> map(View<S> v) {
  return MapM<S>(v.p, v.rows, v.cols, Eigen::OuterStride<>(v.ld));
}

/// Whether the `count` scalars at p are all finite. x - x is 0 for a finite x and NaN for NaN or +-Inf, so one
/// vectorized sum answers it; Eigen's allFinite() tests element by element with an early exit, a scalar loop that
/// took about 4 us of the 17 us of a 1000 x 10 float compute() (build machine, perf, 2026-11-27).
template <typename S>
bool allFiniteContiguous(const S* p, Index count) {
  if (count <= 0) return true;
  const Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>> a(p, count);
  return std::isfinite((a - a).sum());
}

/// Rounding of one operand entry in each mode, as the tensor cores see it (the Host backend's emulation).
inline float roundTf32(float x) {
  if (!std::isfinite(x)) return x;
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x1000u) & 0xFFFFE000u;  // to nearest, ties away from zero, as cvt.rna.tf32.f32
  std::memcpy(&x, &u, sizeof u);
  return x;
}
inline float roundFp16(float x) { return static_cast<float>(Eigen::half(x)); }
inline float roundBf16(float x) { return static_cast<float>(Eigen::bfloat16(x)); }

/// 1 + the index of the last nonzero row of column j of A (0 for a zero column), capped (launchScanColumns' record).
template <typename S>
std::uint32_t hostLastRow(View<S> A, Index j, std::uint32_t cap) {
  Index r = A.rows;
  while (r > 0 && A.p[(r - 1) + j * A.ld] == S(0)) --r;
  return static_cast<std::uint32_t>(std::min<Index>(r, cap));
}

/// identityReflectorColumns for the first min(m, n) columns of A (host memory).
template <typename S>
std::vector<char> hostIdentityReflectorColumns(View<S> A) {
  const Index k = std::min(A.rows, A.cols);
  std::vector<std::uint32_t> last(static_cast<size_t>(k), 0);
  for (Index j = 0; j < k; ++j) last[static_cast<size_t>(j)] = hostLastRow(A, j, exactIdentityCap(A.rows, A.cols));
  return identityReflectorColumns(last.data(), k);
}

template <typename S>
struct HostOps {
  Precision mode = Precision::Default;  ///< arithmetic of gemm() (emulated); gemmExact() always runs in S
  Index maxMergedCols = 0;  ///< factorRecursive's merge cap (0: none; backends set Tunables' maxMergedCols)
  bool eagerSpine = false;  ///< factorRecursive's eager lane (backends set Tunables' eagerSpineUpdates)
  Index panelKernelRows = 0;  ///< usePanelKernel's row limit: 0 in host factorizations, set by tests only
  /// gemm() applies halfNarrowInTf32 (false inside trmmLowerAcc: see there).
  bool narrowAsTf32 = true;

  void gemm(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    const Index inner = (ta == Op::N) ? A.cols : A.rows;
    const bool x3InFp32 = errorCorrected(mode) && x3ProductInFp32(mode, C.rows, C.cols, inner);  // as CudaOps
    if (std::is_same<S, float>::value && !x3InFp32 &&
        (mode == Precision::TF32 || errorCorrected(mode) || mode == Precision::FP16 || mode == Precision::BF16)) {
      const bool tf32 = narrowAsTf32 && halfNarrowInTf32(mode, C.rows, C.cols, inner);
      gemmRounded(tf32 ? Precision::TF32 : mode, ta, tb, alpha, A, B, beta, C);
      return;
    }
    gemmExact(ta, tb, alpha, A, B, beta, C);
  }

  /// S = beta S + Y^T Y on the upper triangle only (formT reads nothing else): a symmetric rank-k update, half the
  /// flops of the full product, which on a single-panel factorization (n <= the block size) cost as much as the
  /// factorization itself (1000 x 10 double: 1.9x Eigen::HouseholderQR's time with the full product).
  void gramUpper(View<S> Y, S beta, View<S> Sm) {
    auto s = map(Sm);
    if (beta == S(0))
      s.template triangularView<Eigen::Upper>().setZero();
    else if (beta != S(1))
      s.template triangularView<Eigen::Upper>() *= beta;
    if (Y.rows > 0) s.template selfadjointView<Eigen::Upper>().rankUpdate(map(Y).transpose());
  }

  /// A product with T (Algorithms.hpp trmmUpperGemm): as CudaOps, in tProductMode's error-corrected arithmetic
  /// (emulated) where tProductOnTensorCores, else in S.
  void gemmT(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    const Index inner = (ta == Op::N) ? A.cols : A.rows;
    if (std::is_same<S, float>::value && tProductOnTensorCores(mode, C.rows, C.cols, inner)) {
      gemmRounded(tProductMode(mode), ta, tb, alpha, A, B, beta, C);
      return;
    }
    gemmExact(ta, tb, alpha, A, B, beta, C);
  }

  void gemmExact(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    if (C.empty()) return;
    auto c = map(C);
    if (beta == S(0))
      c.setZero();
    else if (beta != S(1))
      c *= beta;
    const Index inner = (ta == Op::N) ? A.cols : A.rows;
    if (inner == 0) return;
    auto a = map(A);
    auto b = map(B);
    if (ta == Op::N && tb == Op::N) c.noalias() += alpha * a * b;
    else if (ta == Op::T && tb == Op::N) c.noalias() += alpha * a.transpose() * b;
    else if (ta == Op::N && tb == Op::T) c.noalias() += alpha * a * b.transpose();
    else c.noalias() += alpha * a.transpose() * b.transpose();
  }

  // No look-ahead lanes (factorRecursive): the Host backend runs one operation at a time.
  int lanes() const { return 0; }
  template <class F>
  void runOnLane(int, F&& f) {
    f(*this);
  }
  void joinLane(int) {}
  void joinAllLanes() noexcept {}

  /// As CudaOps: in FP16 and BF16 every block product of the triangle runs in the mode (CudaOps::trmmConverted converts
  /// L and Z once), narrow or not; halfNarrowInTf32 covers the GEMMs only. One difference remains in TF32x3 and FP16x3:
  /// CudaOps decides FP32 or x3 once for the whole triangle, this emulation per block product, so a short last block
  /// row of a triangle wider than the block rows (1024) runs x3 on the GPU and FP32 here; the default merge caps keep
  /// such triangles out of the factorization.
  void trmmLowerAcc(Op opL, S alpha, View<S> L, View<S> Z, View<S> C, Index cutoff, TrmmScheme scheme) {
    HostOps o = *this;
    o.narrowAsTf32 = false;
    trmmLowerAccGeneric(o, opL, alpha, L, Z, C, cutoff, scheme);
  }

  void columnScales(View<S> A, S* d) {
    auto a = map(A);
    for (Index j = 0; j < A.cols; ++j) {
      const S norm = a.col(j).stableNorm();
      int e = 0;
      std::frexp(norm, &e);
      // (A column of norm below 2^(1 - max_exponent), e.g. of subnormals only, gets the largest finite power of two:
      // 2^-e would overflow to infinity. Its scaled norm is then below 1/2, which is harmless.)
      e = std::max(e, 1 - std::numeric_limits<S>::max_exponent);
      d[j] = (norm > S(0) && std::isfinite(norm)) ? std::ldexp(S(1), -e) : S(1);
    }
  }
  void scaleColumns(View<S> A, const S* d, bool inverse, bool upperOnly) {
    auto a = map(A);
    for (Index j = 0; j < A.cols; ++j) {
      const Index rows = upperOnly ? std::min(A.rows, j + 1) : A.rows;
      if (inverse)
        a.col(j).head(rows) /= d[j];
      else
        a.col(j).head(rows) *= d[j];
    }
  }

 private:
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

  /// The unit lower trapezoid of Y (what copyUnitLower writes), as a new matrix.
  static Mat unitLower(View<S> Y) {
    Mat y = map(Y).template triangularView<Eigen::StrictlyLower>();
    y.diagonal().setOnes();
    return y;
  }

  // The GPU modes on the host: operands rounded entrywise as the tensor cores consume them, products accumulated in
  // S. TF32x3 sums lo*hi + hi*lo + hi*hi with hi = tf32(x) and lo = tf32(x - hi), FP16x3 the same with hi = fp16(x)
  // and lo = fp16((x - hi) 2^11), its lo products scaled by 2^-11, as kernels/precision_kernels.cu.
  void gemmRounded(Precision rounding, Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    if (C.empty()) return;
    const Index inner = (ta == Op::N) ? A.cols : A.rows;
    if (inner == 0) {
      if (beta == S(0)) map(C).setZero();
      return;
    }
    auto rounded = [&](View<S> X, int part) {
      Mat r = map(X);
      for (Index j = 0; j < r.cols(); ++j)
        for (Index i = 0; i < r.rows(); ++i) {
          const float x = static_cast<float>(r(i, j));
          float v;
          switch (rounding) {
            case Precision::FP16: v = roundFp16(x); break;
            case Precision::BF16: v = roundBf16(x); break;
            case Precision::FP16x3: {  // (as kernels::launchSplitHalf with kFp16x3LoScale)
              const float hi = roundFp16(x);
              v = part == 0 ? hi : roundFp16((x - hi) * kFp16x3LoScale);
              break;
            }
            default: {
              const float hi = roundTf32(x);
              v = part == 0 ? hi : roundTf32(x - hi);
            }
          }
          r(i, j) = static_cast<S>(v);
        }
      return r;
    };
    auto product = [&](const Mat& a, const Mat& b, S bet, S al) {
      View<S> av(const_cast<S*>(a.data()), a.rows(), a.cols(), a.rows());
      View<S> bv(const_cast<S*>(b.data()), b.rows(), b.cols(), b.rows());
      gemmExact(ta, tb, al, av, bv, bet, C);
    };
    const Mat aHi = rounded(A, 0), bHi = rounded(B, 0);
    if (errorCorrected(rounding)) {
      const Mat aLo = rounded(A, 1), bLo = rounded(B, 1);
      const S alphaLo = alpha * S(loProductScale(rounding));  // (exact: a power of two)
      product(aLo, bHi, beta, alphaLo);
      product(aHi, bLo, S(1), alphaLo);
      product(aHi, bHi, S(1), alpha);
    } else {
      product(aHi, bHi, beta, alpha);
    }
  }

 public:
  // Column-by-column Householder QR with Eigen's own reflector (makeHouseholderInPlace), hence Eigen's conventions.
  void geqrfPanel(View<S> A, S* tau) {
    auto a = map(A);
    const Index m = A.rows, n = A.cols;
    std::vector<S> work(static_cast<size_t>(std::max<Index>(n, 1)));
    for (Index j = 0; j < n; ++j) {
      S beta;
      a.col(j).tail(m - j).makeHouseholderInPlace(tau[j], beta);
      a(j, j) = beta;
      a.bottomRightCorner(m - j, n - j - 1).applyHouseholderOnTheLeft(a.col(j).tail(m - j - 1), tau[j], work.data());
    }
  }

  void columnReflector(View<S> A, S* tau, S* /*scratch*/) { geqrfPanel(A.leftCols(1), tau); }

  /// What the CUDA backend's one-kernel panel (kernels::launchHouseholderPanel) computes: Eigen's reflectors, and T
  /// of H_0 ... H_{k-1} = I - Y T Y^T (zeros below the diagonal).
  /// The same operations as geqrfPanel + formPanelT (Algorithms.hpp), so the same bits.
  void householderPanel(View<S> A, S* tau, View<S> T) {
    geqrfPanel(A, tau);
    const Index m = A.rows, k = A.cols;
    std::vector<S> buf(static_cast<size_t>(2 * k * k));
    View<S> Yt(buf.data(), k, k, k), Sm(buf.data() + k * k, k, k, k);
    copyUnitLower(A.topRows(k), Yt);
    gramUpper(Yt, S(0), Sm);
    if (m > k) gramUpper(A.bottomRows(m - k), S(1), Sm);
    formT(Sm, tau, T);
  }

  void copyUnitLower(View<S> src, View<S> dst) {
    auto s = map(src);
    auto d = map(dst);
    for (Index j = 0; j < dst.cols; ++j) {
      const Index top = std::min(j, dst.rows);
      d.col(j).head(top).setZero();
      if (j < dst.rows) {
        d(j, j) = S(1);
        d.col(j).tail(dst.rows - j - 1) = s.col(j).tail(dst.rows - j - 1);
      }
    }
  }

  void formT(View<S> Sm, const S* tau, View<S> T) {
    auto s = map(Sm);
    auto t = map(T);
    const Index k = T.rows;
    t.setZero();
    for (Index i = 0; i < k; ++i) {
      t(i, i) = tau[i];
      if (i > 0) {
        Eigen::Matrix<S, Eigen::Dynamic, 1> v = -tau[i] * s.col(i).head(i);
        t.col(i).head(i) = t.topLeftCorner(i, i).template triangularView<Eigen::Upper>() * v;
      }
    }
  }

  /// w = Z + Yt^T Btop, Z = op(T) w, Btop -= Yt Z, Yt the unit lower trapezoid of Ytop (rows >= k; CudaOps: one
  /// kernel, k and rows <= 32). zIn false: w = Yt^T Btop (Z is output only).
  void smallUpdateTop(View<S> Ytop, View<S> T, View<S> Btop, View<S> Z, bool transpose, bool zIn = true) {
    const Mat yt = unitLower(Ytop);
    auto z = map(Z);
    auto b = map(Btop);
    const Mat t = map(T).template triangularView<Eigen::Upper>();
    Mat w = yt.transpose() * b;
    if (zIn) w += z;
    if (transpose) z = t.transpose() * w;
    else z = t * w;
    b -= yt * z;
  }
  /// T12 = T1 (P - Y1mid^T Y2t) T2, T21 = 0 (CudaOps: one kernel, n1, n2 <= 32); P is in T12 when hasBottom.
  void mergeSmallT(View<S> Y1mid, View<S> Y2top, View<S> T, Index n1, Index n2, bool hasBottom) {
    auto t = map(T);
    const Mat y2 = unitLower(Y2top);
    Mat p = hasBottom ? Mat(t.block(0, n1, n1, n2)) : Mat::Zero(n1, n2);
    p -= map(Y1mid).transpose() * y2;
    const Mat t1 = t.topLeftCorner(n1, n1).template triangularView<Eigen::Upper>();
    const Mat t2 = t.block(n1, n1, n2, n2).template triangularView<Eigen::Upper>();
    t.block(0, n1, n1, n2) = t1 * p * t2;
    t.block(n1, 0, n2, n1).setZero();
  }
  /// B <- B T, T upper triangular.
  void trmmRightUpper(View<S> B, View<S> T) {
    if (B.empty()) return;
    auto b = map(B);
    const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic> tmp = b * map(T).template triangularView<Eigen::Upper>();
    b = tmp;
  }

  void trsmLeftUpper(Op op, View<S> R, View<S> B) {
    if (B.empty()) return;
    auto r = map(R);
    auto b = map(B);
    if (op == Op::N)
      r.template triangularView<Eigen::Upper>().solveInPlace(b);
    else
      r.template triangularView<Eigen::Upper>().transpose().solveInPlace(b);
  }

  void setZero(View<S> A) {
    if (!A.empty()) map(A).setZero();
  }
  void setIdentity(View<S> A) {
    if (!A.empty()) map(A).setIdentity();
  }
  void copy(View<S> src, View<S> dst) {
    if (!dst.empty()) map(dst) = map(src);
  }

  // TSQR primitives (Tsqr.hpp): the same tiling as the CUDA kernels, each tile factored with Eigen's reflectors.
  void tsqrTileQR(View<S> X, Index tiles, S* tau, View<S> Rout) {
    const Index n = X.cols;
    for (Index t = 0; t < tiles; ++t) {
      const Index r0 = tileBegin(X.rows, tiles, t), nr = tileBegin(X.rows, tiles, t + 1) - r0;
      View<S> tile = X.block(r0, 0, nr, n);
      geqrfPanel(tile, tau + t * n);
      map(Rout.block(t * n, 0, n, n)) = map(tile.topRows(n)).template triangularView<Eigen::Upper>();
    }
  }
  // Stores every tile even when storeAll is false (which only allows leaving tiles > 0 unwritten).
  void tsqrTileQRFrom(View<S> src, View<S> X, Index tiles, S* tau, View<S> Rout, int* notFinite,
                      bool /*storeAll*/ = true, std::uint32_t* lastRow = nullptr) {
    map(X) = map(src);
    if (notFinite && !map(X).allFinite()) *notFinite = 1;
    if (lastRow)
      for (Index j = 0; j < X.cols; ++j)
        lastRow[j] = std::max(lastRow[j], hostLastRow(X, j, exactIdentityCap(X.rows, X.cols)));
    tsqrTileQR(X, tiles, tau, Rout);
  }
  void tsqrTileQRFormQ(View<S> X, S* tau, View<S> R) {
    tsqrTileQR(X, 1, tau, R);
    const Index n = X.cols;
    std::vector<S> identity(static_cast<size_t>(n * n), S(0));
    for (Index j = 0; j < n; ++j) identity[static_cast<size_t>(j + j * n)] = S(1);
    tsqrTileApplyQ(X, 1, tau, View<S>(identity.data(), n, n, n));
  }
  void tsqrTileApplyQ(View<S> X, Index tiles, const S* tau, View<S> C) {
    const Index n = X.cols;
    Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic> B;
    std::vector<S> work(static_cast<size_t>(n));
    for (Index t = 0; t < tiles; ++t) {
      const Index r0 = tileBegin(X.rows, tiles, t), nr = tileBegin(X.rows, tiles, t + 1) - r0;
      auto V = map(X.block(r0, 0, nr, n));
      B.setZero(nr, n);
      B.topRows(n) = map(C.block(t * n, 0, n, n));
      for (Index j = n - 1; j >= 0; --j)
        B.bottomRows(nr - j).applyHouseholderOnTheLeft(V.col(j).tail(nr - j - 1), tau[t * n + j], work.data());
      V = B;
    }
  }
  void signedLU(View<S> LU, S* s, View<S> T = View<S>()) {
    auto a = map(LU);
    a = -a;
    const Index n = LU.rows;
    for (Index k = 0; k < n; ++k) {
      s[k] = a(k, k) >= S(0) ? S(1) : S(-1);
      a(k, k) += s[k];
      a.col(k).tail(n - k - 1) /= a(k, k);
      a.bottomRightCorner(n - k - 1, n - k - 1).noalias() -= a.col(k).tail(n - k - 1) * a.row(k).tail(n - k - 1);
    }
    if (T.empty()) return;
    // T = U S L^{-T}: the T of the compact WY form with Y1 = L (see kernels/tsqr_kernels.cu signedLUKernel).
    auto t = map(T);
    Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>> sv(s, n);
    t = a.template triangularView<Eigen::Upper>().toDenseMatrix() * sv.asDiagonal();
    a.template triangularView<Eigen::UnitLower>().transpose().template solveInPlace<Eigen::OnTheRight>(t);
    t.template triangularView<Eigen::StrictlyLower>().setZero();
  }
  void tsqrTopRowsLU(View<S> X, Index tiles, const S* tau, View<S> C, View<S> LU, S* s, View<S> T, View<S> Uinv) {
    const Index n = X.cols, nr = tileBegin(X.rows, tiles, 1);
    Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic> tile = map(X.topRows(nr));
    View<S> tv(tile.data(), nr, n, nr);
    tsqrTileApplyQ(tv, 1, tau, C);
    map(LU) = tile.topRows(n);
    signedLU(LU, s, T);
    auto ui = map(Uinv);
    ui.setIdentity();
    map(LU).template triangularView<Eigen::Upper>().solveInPlace(ui);
  }
  // Level 0's Y = -Q2 U^{-1} (rows >= n), L and S R (rows < n), and tau: what the fused CUDA kernel computes.
  void tsqrApplyQReconstructWY(View<S> X, Index tiles, const S* tauTiles, View<S> C, View<S> LU, View<S> Uinv,
                               const S* s, View<S> R, View<S> A, S* tau) {
    const Index m = X.rows, n = X.cols;
    auto lu = map(LU);
    // Y2 = -Q2 U^{-1}, with Q's tiles H_t [C_t; 0]: C (tiles n x n) is multiplied by U^{-1} before the reflectors, as
    // on the GPU, and X then holds Q U^{-1} (X and A are the same storage in the recursion).
    Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic> d =
        map(C) * map(Uinv).template triangularView<Eigen::Upper>();
    tsqrTileApplyQ(X, tiles, tauTiles, View<S>(d.data(), d.rows(), d.cols(), d.rows()));
    auto a = map(A);
    if (m > n) a.bottomRows(m - n) = -map(X).bottomRows(m - n);
    for (Index j = 0; j < n; ++j)
      for (Index i = 0; i < n; ++i) a(i, j) = (i > j) ? lu(i, j) : s[i] * map(R)(i, j);
    for (Index j = 0; j < n; ++j) tau[j] = lu(j, j) * s[j];
  }

 private:
  static Index tileBegin(Index m, Index tiles, Index t) { return (m * t) / tiles; }
};

}  // namespace detail
}  // namespace tcqr
