// Algorithms.hpp - the recursive Householder QR (TPDS'25 Algorithm 1) and the WY applications, written once and
// run on any backend. A backend ("Ops") provides, on its own memory space:
//   gemm(opA, opB, alpha, A, B, beta, C)        C = alpha op(A) op(B) + beta C, in the object's precision mode
//   gemmExact(opA, opB, alpha, A, B, beta, C)   the same in the storage precision (small products inside a panel)
//   gemmT(opA, opB, alpha, A, B, beta, C)       the same for the products with T, in tProductMode(mode)
//   columnScales(A, d), scaleColumns(A, d, inverse, upperOnly)   power-of-two column scaling (FP16 mode)
//   trmmLowerAcc(opL, alpha, L, Z, C, cutoff, scheme)
//   mode                                        the Precision of gemm() (selects the TRMM plan)
//                                               C += alpha op(L) Z, L lower triangular (trmmLowerAccGeneric or better)
//   geqrfPanel(A, tau)                           unblocked-quality Householder QR of a panel, LAPACK/Eigen convention
//   householderPanel(A, tau, T), panelKernelRows geqrfPanel and T in one operation, for panels of at most
//                                                panelKernelRows rows (0: none; see usePanelKernel)
//   copyUnitLower(src, dst)                      dst = unit lower trapezoid of src (zeros above, ones on diagonal)
//   gramUpper(Y, beta, S)                        S = beta S + Y^T Y, of which only the upper triangle is needed
//   formT(S, tau, T)                             T of the compact WY form from S = Y^T Y (LAPACK larft recurrence)
//   trmmRightUpper(B, T)                         B = B T, T upper triangular (TallSkinny: R = triu(A1))
//   smallUpdateTop(Ytop, T, Btop, Z, transpose, zIn)  applyYT's top for k <= kSmallWY reflectors (one kernel on
//                                                CUDA; Ytop of at most kSmallWY rows, zIn false: Z output only)
//   mergeSmallT(Y1mid, Y2top, T, n1, n2, bottom) factorRecursive's merge for n1, n2 <= kSmallWY (one kernel on CUDA)
//   trsmLeftUpper(op, R, B)                      B = op(R)^{-1} B, R upper triangular
//   setZero(A)
//   maxMergedCols                                 widest node whose T factorRecursive merges when blocks are taken
//   eagerSpine                                    whether the last lane is the eager lane (eagerLaneFor)
//   lanes(), runOnLane(q, f), joinLane(q), joinAllLanes()   factorRecursive's look-ahead lanes (0 lanes: none)
// Every temporary comes from one scratch region sized up front by the callers (see *ScratchSize), so nothing is
// allocated inside the recursion.
#pragma once

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <vector>

#include "Tsqr.hpp"
#include "View.hpp"

namespace tcqr {
namespace detail {

/// Column split of Algorithm 1: half the columns, rounded down to a multiple of the panel width.
inline Index splitColumns(Index n, Index nb) { return std::max(nb, (n / 2) / nb * nb); }

/// Which panel factorization the recursion uses at its leaves.
enum class PanelKind {
  Geqrf,  ///< geqrfPanel (cuSOLVER / Eigen reflectors) + T from Y^T Y
  Tsqr,   ///< TSQR tree + ReconstructWY (Tsqr.hpp) where it applies, Geqrf otherwise
  Hybrid  ///< Tsqr for panels with at least kTsqrAutoMinRows rows, Geqrf for shorter ones
};

inline bool useTsqr(PanelKind panel, Index m, Index n) {
  if (!tsqrApplicable(m, n)) return false;
  return panel == PanelKind::Tsqr || (panel == PanelKind::Hybrid && m >= kTsqrAutoMinRows);
}

/// Whether a leaf panel (m x n, m >= n) goes to ops.householderPanel: Householder QR and T in one operation, which
/// the CUDA backend runs as one kernel on a thread-block cluster (kernels/panel_kernels.cu) for panels of up to
/// ops.panelKernelRows rows. Panel::Auto only; Panel::Tsqr and Panel::Geqrf keep their panels.
template <class Ops>
bool usePanelKernel(const Ops& ops, PanelKind panel, Index m, Index n) {
  return panel == PanelKind::Hybrid && n <= kTsqrMaxCols && m >= n && m <= ops.panelKernelRows;
}

/// Index of the first set flag among mask[0 : n) (mask may be null), or -1.
inline Index firstSet(const char* mask, Index n) {
  if (mask == nullptr) return -1;
  const char* p = std::find_if(mask, mask + n, [](char c) { return c != 0; });
  return p == mask + n ? -1 : static_cast<Index>(p - mask);
}
inline bool anySet(const char* mask, Index n) { return firstSet(mask, n) >= 0; }

/// Scratch (in scalars) of one leaf panel of at most nb columns and m rows (geqrfPanel + formPanelW, or tsqrPanel).
/// An upper bound over every leaf of the recursion on at most m rows: any leaf of at most kTsqrMaxCols columns may be
/// a TSQR panel (tsqrScratchSize grows with both dimensions).
inline Index leafScratchSize(Index m, Index nb, PanelKind panel) {
  Index s = 2 * nb * nb;
  const Index w = std::min<Index>(nb, kTsqrMaxCols);
  if (panel != PanelKind::Geqrf && m > 1 && w >= 1) s = std::max(s, tsqrScratchSize(m, w));
  if (panel != PanelKind::Geqrf) s = std::max<Index>(s, kColumnReflectorScratch);  // identity columns' leaves
  return s;
}

/// Whether factorRecursive gives any leaf of an m x n factorization (m >= n) to the TSQR panel, which is when the
/// input scan of identityReflectorColumns is needed. Walks the recursion's leaves: with nb > kTsqrMaxCols only a
/// narrow last leaf may qualify.
inline bool anyTsqrLeaf(PanelKind panel, Index m, Index n, Index nb) {
  if (panel == PanelKind::Geqrf || n <= 0) return false;
  if (n <= nb) return useTsqr(panel, m, n);
  const Index n1 = splitColumns(n, nb);
  return anyTsqrLeaf(panel, m, n1, nb) || anyTsqrLeaf(panel, m - n1, n - n1, nb);
}

/// Scratch needed to apply a k-reflector compact WY form to `c` vectors (applyYT): the unit lower top block of Y, the
/// product Y^T B and T's product with it (out of place).
inline Index applyScratchSize(Index k, Index c) { return k * k + 2 * k * c; }

/// Scratch (in scalars) needed by factorRecursive on its main lane for an m x n (m >= n) problem: a leaf, and at an
/// inner node the update of the right half or the merge of the two T's (the look-ahead lanes have their own, below).
inline Index factorScratchSize(Index m, Index n, Index nb, PanelKind panel) {
  const Index leaf = leafScratchSize(m, std::min(n, nb), panel);
  if (n <= nb) return leaf;
  const Index n1 = splitColumns(n, nb), n2 = n - n1;
  return std::max(leaf, std::max(applyScratchSize(n1, n2), n2 * n2 + 2 * n1 * n2));
}

/// Look-ahead lanes of factorRecursive (at most this many; see there).
constexpr int kMaxLanes = 4;

/// Columns of a node's right half (n2 columns) that the look-ahead updates on the main lane: those of the right
/// child's left child, which the main lane factors next; 0 where the right child is a leaf (no look-ahead there).
inline Index lookaheadWindow(Index n2, Index nb) { return n2 > nb ? splitColumns(n2, nb) : 0; }

/// need[q] (q < lanes) = the scratch lane q's updates take: the recursion's column tree walked as factorRecursive
/// assigns lanes (freeLane, pendingLane as there).
inline void laneScratchWalk(Index n, Index nb, int lanes, int freeLane, int pendingLane, Index* need) {
  if (n <= nb) return;
  const Index n1 = splitColumns(n, nb), n2 = n - n1;
  laneScratchWalk(n1, nb, lanes, freeLane, -1, need);
  const int q = pendingLane >= 0 ? pendingLane : freeLane;
  const Index w = lookaheadWindow(n2, nb);
  if (w > 0 && q < lanes) {
    need[q] = std::max(need[q], applyScratchSize(n1, n2 - w));
    laneScratchWalk(n2, nb, lanes, q + 1, q, need);
  } else {
    laneScratchWalk(n2, nb, lanes, q, -1, need);
  }
}

/// Where each look-ahead lane's scratch lies in factor()'s scratch (after the main lane's) and how large it is.
template <typename S>
struct LaneScratch {
  int count = 0;
  S* p[kMaxLanes] = {};
  Index size[kMaxLanes] = {};
  int eager = -1;  ///< the eager lane (Ops::eagerSpine; eagerLaneFor), -1: none
};

/// T (k x k, upper triangular, zeros below the diagonal) of a freshly factored panel, from S = Y^T Y and tau
/// (LAPACK larft): H_0 ... H_{k-1} = I - Y T Y^T. A (m x k, m >= k) holds Y below its diagonal. Scratch: 2 k^2.
template <class Ops, typename S>
void formPanelT(Ops& ops, View<S> A, const S* tau, View<S> T, S* scratch) {
  const Index m = A.rows, k = A.cols;
  View<S> Yt(scratch, k, k, k), Sm(scratch + k * k, k, k, k);
  ops.copyUnitLower(A.topRows(k), Yt);
  ops.gramUpper(Yt, S(0), Sm);
  if (m > k) ops.gramUpper(A.bottomRows(m - k), S(1), Sm);
  ops.formT(Sm, tau, T);
}

/// The block structure of the recursive TRMM of TPDS'25 Algorithm 3, for C += alpha op(L) Z with L (k x k) lower
/// triangular: the diagonal blocks recurse, the off-diagonal block is one GEMM, so the GEMMs stay large (tensor-core
/// friendly) while the flops approach half of a full GEMM's. Below `cutoff` rows a diagonal block is multiplied as a
/// full block (zeros above its diagonal included). `gemm(op, lr, lc, lnr, lnc, zr, cr)` must perform
///   C(cr : cr + rows(op(Lb)), :) += alpha op(Lb) Z(zr : zr + cols(op(Lb)), :),  Lb = L(lr : lr + lnr, lc : lc + lnc).
/// Splits are rounded to multiples of 16 so that every block starts 16-byte aligned in converted copies.
template <class BlockGemm>
void trmmLowerBlocks(BlockGemm& gemm, Op opL, Index r0, Index k, Index cutoff) {
  if (k <= cutoff) {
    gemm(opL, r0, r0, k, k, r0, r0);
    return;
  }
  const Index k1 = (k / 2 + 15) / 16 * 16, k2 = k - k1;
  trmmLowerBlocks(gemm, opL, r0, k1, cutoff);
  if (opL == Op::N)  // [C1; C2] += [L11 0; L21 L22] [Z1; Z2]: C2 += L21 Z1
    gemm(Op::N, r0 + k1, r0, k2, k1, r0, r0 + k1);
  else  // [C1; C2] += [L11^T L21^T; 0 L22^T] [Z1; Z2]: C1 += L21^T Z2
    gemm(Op::T, r0 + k1, r0, k2, k1, r0 + k1, r0);
  trmmLowerBlocks(gemm, opL, r0 + k1, k2, cutoff);
}

/// The block-row alternative to trmmLowerBlocks: one GEMM per block row of C (block rows of `block` rows, a multiple
/// of 16), each taking the whole nonzero part of L's block row, L(r0 : r0 + b, 0 : r0 + b) for op(L) = L. Same flops
/// (half a GEMM plus the full diagonal blocks), but every entry of C is read and written once, where the recursion
/// accumulates into C once per level; the GEMMs are b x c with inner dimensions b, 2b, ..., k.
template <class BlockGemm>
void trmmLowerBlockRows(BlockGemm& gemm, Op opL, Index k, Index block) {
  for (Index r0 = 0; r0 < k; r0 += block) {
    const Index rb = std::min(block, k - r0);
    if (opL == Op::N)  // C(r0 : r0 + rb, :) += L(r0 : r0 + rb, 0 : r0 + rb) Z(0 : r0 + rb, :)
      gemm(Op::N, r0, 0, rb, r0 + rb, 0, r0);
    else  // C(r0 : r0 + rb, :) += L(r0 : k, r0 : r0 + rb)^T Z(r0 : k, :)
      gemm(Op::T, r0, r0, k - r0, rb, r0, r0);
  }
}

/// The block structure of a k x k lower triangular product: TPDS'25 Algorithm 3 (Recursive, cutoff = the largest
/// diagonal block multiplied in full) or one GEMM per block row (BlockRows, cutoff = the block-row height).
template <class BlockGemm>
void trmmBlocks(BlockGemm& gemm, Op opL, Index k, Index cutoff, TrmmScheme scheme) {
  if (scheme == TrmmScheme::BlockRows)
    trmmLowerBlockRows(gemm, opL, k, std::max<Index>(16, (cutoff + 15) / 16 * 16));
  else
    trmmLowerBlocks(gemm, opL, 0, k, cutoff);
}

/// trmmBlocks with ops.gemm on views of L, Z and C (operands converted per product in the tensor-core modes).
template <class Ops, typename S>
void trmmLowerAccGeneric(Ops& ops, Op opL, S alpha, View<S> L, View<S> Z, View<S> C, Index cutoff,
                         TrmmScheme scheme) {
  auto gemm = [&](Op op, Index lr, Index lc, Index lnr, Index lnc, Index zr, Index cr) {
    const Index zRows = op == Op::N ? lnc : lnr, cRows = op == Op::N ? lnr : lnc;
    ops.gemm(op, Op::N, alpha, L.block(lr, lc, lnr, lnc), Z.block(zr, 0, zRows, Z.cols), S(1),
             C.block(cr, 0, cRows, C.cols));
  };
  trmmBlocks(gemm, opL, L.rows, cutoff, scheme);
}

/// C += alpha op(L) Z for a k x k lower triangular L stored with explicit zeros above its diagonal, with the block
/// structure of `plan` (trmmBlocks). The backend chooses how to run the products: ops.trmmLowerAcc (CudaOps converts
/// L and Z once in the tensor-core modes).
template <class Ops, typename S>
void trmmLowerAcc(Ops& ops, Op opL, S alpha, View<S> L, View<S> Z, View<S> C, TrmmPlan plan) {
  if (L.rows == 0 || Z.cols == 0) return;
  ops.trmmLowerAcc(opL, alpha, L, Z, C, plan.cutoff, plan.scheme);
}
/// trmmLowerAcc with the plan of the backend's precision mode (trmmPlan).
template <class Ops, typename S>
void trmmLowerAcc(Ops& ops, Op opL, S alpha, View<S> L, View<S> Z, View<S> C) {
  trmmLowerAcc(ops, opL, alpha, L, Z, C, trmmPlan(ops.mode));
}

/// Widest compact WY form whose update top and merge run as one fused operation each (smallUpdateTop, mergeSmallT):
/// at the recursion's leaves the update and the merge are otherwise 4-6 small launches each, which cost 16384^2
/// FP32 about 20 ms against the W form (first A/B of the compact WY form, H100).
constexpr Index kSmallWY = 32;

/// Diagonal blocks of at most this many rows are multiplied in full by trmmUpperGemm (75% of a full product's flops at
/// 512 rows, the FP32/FP64 merge cap). 512 and 1024 (fewer, larger products, partly on zeros) were within noise of
/// 256: FP16 32768^2 312.5-316.0 ms, FP16x3 16384^2 168.0-170.5 (H100, same binary, alternating;
/// bench/results/logs/2026-11-28-h100-small-tn-ab.log).
constexpr Index kTrmmUpperCutoff = 256;

/// C = op(U) Z + beta C for U (k x k) upper triangular with zeros below its diagonal, by GEMMs in T's arithmetic
/// (ops.gemmT, tProductMode): in the storage precision the diagonal blocks recurse and the off-diagonal block is one
/// product (TPDS'25 Algorithm 3's structure); on tensor cores (tProductOnTensorCores) the whole triangle is one
/// product. cuBLAS's in-place TRMM, which this replaces, ran at 3-4 TFLOP/s on the H100 (double, 2097152 x 128 by
/// 128 x 128). Not in FP16, BF16 or TF32 themselves: T's products are an extra rounding stage the W form does not
/// have, and in those modes they made the 4096^2 factorization 1.3-1.4x less accurate (TF32/FP16 backward error
/// 1.03e-3 against 7.7e-4; H100, 32e3e91); they run error-corrected there, as in FP16x3 and TF32x3 (tProductMode).
template <class Ops, typename S>
void trmmUpperGemm(Ops& ops, Op op, View<S> U, View<S> Z, S beta, View<S> C) {
  const Index k = U.rows;
  if (k <= kTrmmUpperCutoff || tProductOnTensorCores(ops.mode, k, Z.cols, k)) {
    ops.gemmT(op, Op::N, S(1), U, Z, beta, C);
    return;
  }
  const Index k1 = (k / 2 + 15) / 16 * 16, k2 = k - k1;
  View<S> U11 = U.block(0, 0, k1, k1), U12 = U.block(0, k1, k1, k2), U22 = U.block(k1, k1, k2, k2);
  View<S> Z1 = Z.topRows(k1), Z2 = Z.bottomRows(k2), C1 = C.topRows(k1), C2 = C.bottomRows(k2);
  if (op == Op::N) {  // [C1; C2] = [U11 Z1 + U12 Z2; U22 Z2]
    trmmUpperGemm(ops, op, U11, Z1, beta, C1);
    ops.gemmT(Op::N, Op::N, S(1), U12, Z2, S(1), C1);
    trmmUpperGemm(ops, op, U22, Z2, beta, C2);
  } else {  // [C1; C2] = [U11^T Z1; U12^T Z1 + U22^T Z2]
    trmmUpperGemm(ops, op, U11, Z1, beta, C1);
    ops.gemmT(Op::T, Op::N, S(1), U12, Z1, beta, C2);
    trmmUpperGemm(ops, op, U22, Z2, S(1), C2);
  }
}

/// C = Z op(U) + beta C, the right-hand counterpart of trmmUpperGemm (same blocks, same GEMMs): for B Q, whose T
/// product cuBLAS's in-place TRMM ran at its 3-4 TFLOP/s.
template <class Ops, typename S>
void trmmUpperGemmRight(Ops& ops, Op op, View<S> Z, View<S> U, S beta, View<S> C) {
  const Index k = U.rows;
  if (k <= kTrmmUpperCutoff || tProductOnTensorCores(ops.mode, Z.rows, k, k)) {
    ops.gemmT(Op::N, op, S(1), Z, U, beta, C);
    return;
  }
  const Index k1 = (k / 2 + 15) / 16 * 16, k2 = k - k1;
  View<S> U11 = U.block(0, 0, k1, k1), U12 = U.block(0, k1, k1, k2), U22 = U.block(k1, k1, k2, k2);
  View<S> Z1 = Z.leftCols(k1), Z2 = Z.rightCols(k2), C1 = C.leftCols(k1), C2 = C.rightCols(k2);
  if (op == Op::N) {  // [C1 C2] = [Z1 U11, Z1 U12 + Z2 U22]
    trmmUpperGemmRight(ops, op, Z1, U11, beta, C1);
    ops.gemmT(Op::N, Op::N, S(1), Z1, U12, beta, C2);
    trmmUpperGemmRight(ops, op, Z2, U22, S(1), C2);
  } else {  // [C1 C2] = [Z1 U11^T + Z2 U12^T, Z2 U22^T]
    trmmUpperGemmRight(ops, op, Z1, U11, beta, C1);
    ops.gemmT(Op::N, Op::T, S(1), Z2, U12, S(1), C1);
    trmmUpperGemmRight(ops, op, Z2, U22, beta, C2);
  }
}

/// B <- op(Q) B (onLeft) or B op(Q) for Q = I - Y T Y^T: Y the m x k unit lower trapezoid stored in `Yp` (Householder
/// vectors below the diagonal; the diagonal and above are ignored), T (k x k) upper triangular with zeros below its
/// diagonal (the compact WY form, LAPACK larfb). Scratch: applyScratchSize(k, c), c = B's other dimension.
/// On the left, Y's triangular top block is multiplied by trmmLowerAcc where it is wider than the mode's TRMM cutoff
/// (half the flops of a full product), and T's product with Z = Y^T B by trmmUpperGemm (GEMMs in the mode). The
/// right-hand side (B Q, B Q^T) is only used for Q products in the storage precision (trmmUpperGemmRight for T).
template <class Ops, typename S>
void applyYT(Ops& ops, View<S> Yp, View<S> T, View<S> B, bool onLeft, bool transpose, S* scratch) {
  const Index m = Yp.rows, k = Yp.cols;
  if (k == 0 || B.empty()) return;
  if (onLeft && k <= kSmallWY) {  // Z = Ybot^T Bbot, then the top in one operation, then Bbot -= Ybot Z
    View<S> Z(scratch, k, B.cols, k);
    if (m <= kSmallWY) {
      // All of Y in the one operation: no products with the few rows below the top (the last panels of a square
      // matrix; with one row below, a product of inner dimension 1 and one of a 1 x 1 result, whose first use in a
      // process loaded a cuBLAS kernel each: 13-18 ms of a first FP64 4096^2 factorization on the H200).
      ops.smallUpdateTop(Yp, T, B, Z, transpose, false);
      return;
    }
    if (m > k)
      ops.gemm(Op::T, Op::N, S(1), Yp.bottomRows(m - k), B.bottomRows(m - k), S(0), Z);
    else
      ops.setZero(Z);
    ops.smallUpdateTop(Yp.topRows(k), T, B.topRows(k), Z, transpose);
    if (m > k) ops.gemm(Op::N, Op::N, S(-1), Yp.bottomRows(m - k), Z, S(1), B.bottomRows(m - k));
    return;
  }
  View<S> Yt(scratch, k, k, k);
  ops.copyUnitLower(Yp.topRows(k), Yt);
  const Op opT = transpose ? Op::T : Op::N;
  if (onLeft) {  // Q B = B - Y (T (Y^T B)), Q^T B = B - Y (T^T (Y^T B))
    View<S> Z(scratch + k * k, k, B.cols, k);
    const TrmmPlan plan = trmmPlan(ops.mode);
    if (k > plan.cutoff) {
      ops.setZero(Z);
      trmmLowerAcc(ops, Op::T, S(1), Yt, B.topRows(k), Z, plan);
    } else {
      ops.gemm(Op::T, Op::N, S(1), Yt, B.topRows(k), S(0), Z);
    }
    if (m > k) ops.gemm(Op::T, Op::N, S(1), Yp.bottomRows(m - k), B.bottomRows(m - k), S(1), Z);
    View<S> TZ(scratch + k * k + k * B.cols, k, B.cols, k);
    trmmUpperGemm(ops, opT, T, Z, S(0), TZ);
    Z = TZ;
    trmmLowerAcc(ops, Op::N, S(-1), Yt, Z, B.topRows(k), plan);
    if (m > k) ops.gemm(Op::N, Op::N, S(-1), Yp.bottomRows(m - k), Z, S(1), B.bottomRows(m - k));
  } else {  // B Q = B - ((B Y) T) Y^T, B Q^T = B - ((B Y) T^T) Y^T
    View<S> Z(scratch + k * k, B.rows, k, B.rows);
    ops.gemm(Op::N, Op::N, S(1), B.leftCols(k), Yt, S(0), Z);
    if (m > k) ops.gemm(Op::N, Op::N, S(1), B.rightCols(m - k), Yp.bottomRows(m - k), S(1), Z);
    View<S> ZT(scratch + k * k + B.rows * k, B.rows, k, B.rows);
    trmmUpperGemmRight(ops, opT, Z, T, S(0), ZT);
    Z = ZT;
    ops.gemm(Op::N, Op::T, S(-1), Z, Yt, S(1), B.leftCols(k));
    if (m > k) ops.gemm(Op::N, Op::T, S(-1), Z, Yp.bottomRows(m - k), S(1), B.rightCols(m - k));
  }
}

/// applyYT for Q given as WY blocks (factor() with `blocks`; null or empty: one block), Q = Q_0 ... Q_{p-1} with
/// Q_i = I - Y_i T_i Y_i^T acting on rows b_i .. m, T_i = T(b_i : b_{i+1}, b_i : b_{i+1}) (the diagonal blocks of the
/// k x k T; the rest of T is not read). Yp may be the first `length` columns only (Q_L): the blocks are clipped to
/// Yp.cols (the leading block of a block's T is the T of its first reflectors). Scratch: that of applyYT for all
/// Yp.cols columns.
template <class Ops, typename S>
void applyWYBlocks(Ops& ops, View<S> Yp, View<S> T, View<S> B, bool onLeft, bool transpose, S* scratch,
                   const std::vector<Index>* blocks) {
  const Index m = Yp.rows, k = Yp.cols;
  if (blocks == nullptr || blocks->size() <= 1) {
    applyYT(ops, Yp, T.block(0, 0, k, k), B, onLeft, transpose, scratch);
    return;
  }
  Index count = 0;  // blocks that start before k
  while (count < Index(blocks->size()) && (*blocks)[static_cast<size_t>(count)] < k) ++count;
  // Q^T B and B Q take the blocks first to last, Q B and B Q^T last to first.
  const bool forward = onLeft == transpose;
  for (Index t = 0; t < count; ++t) {
    const Index i = forward ? t : count - 1 - t;
    const Index b0 = (*blocks)[static_cast<size_t>(i)];
    const Index b1 = i + 1 < count ? (*blocks)[static_cast<size_t>(i + 1)] : k;
    const View<S> Yi = Yp.block(b0, b0, m - b0, b1 - b0), Ti = T.block(b0, b0, b1 - b0, b1 - b0);
    applyYT(ops, Yi, Ti, onLeft ? B.bottomRows(m - b0) : B.rightCols(m - b0), onLeft, transpose, scratch);
  }
}

/// Recursive Householder QR of A (m x n, m >= n), TPDS'25 Algorithm 1, in compact WY form. On exit A holds R and the
/// Householder vectors (Eigen/LAPACK layout), tau the coefficients, and T (n x n, upper triangular, zeros below the
/// diagonal; ld of the caller's choice) satisfies H_0 ... H_{n-1} = I - Y T Y^T.
///
/// Compact WY (LAPACK's larft/larfb, Schreiber and Van Loan) rather than the papers' W = Y T: a node merges its
/// children's forms as T12 = -T1 (Y1^T Y2) T2, one n1 x n2 product over the rows plus two small triangular
/// products, where merging W (W2 <- W2 - W1 (Y1^T W2)) takes two m x n1 x n2 products and writes W2; and no m x n W
/// is ever stored, so the factorization keeps n x n scalars beside A instead of m x n. The update of the right half
/// costs the same either way (Y^T A2, then T^T times that, then A2 - Y Z).
///
/// Look-ahead (TPDS'25 §V.C.2, kernel scheduling), where the backend has lanes (Ops::lanes() > 0: further streams).
/// A leaf panel is a latency-bound chain of small kernels that leaves most of the GPU idle; it can only run beside
/// the trailing update's GEMMs if that update is not finished yet. So at a node whose right child R is not a leaf,
/// the update Q1^T A2 is split: the columns of R's left child (lookaheadWindow) are updated on the main lane, the
/// rest of A2 on a lane of its own, and the main lane goes on to factor R's left child (its whole subtree, panels
/// and all) while that lane works; R joins the lane just before its own update, the first operation that touches
/// those columns. Lanes are numbered by nesting: a node that forks while its parent's lane is still busy (inside R's
/// left child) takes the next lane (`freeLane`), and R, having joined its parent's lane (`pendingLane`), forks on
/// that same lane again. Nodes that would need more lanes than the Ops have update on the main lane. Every fork is
/// joined before the forking node returns. Each lane has its own scratch (`lanes`, from factor()). Ops provides
///   lanes() (0: no look-ahead), runOnLane(q, f) (lane q first waits for the work queued on the main lane, then
///   f(laneOps) queues work on it), joinLane(q) (the main lane waits for lane q's queued work; no-op when none),
///   joinAllLanes() (noexcept: joins every lane with queued work; factor() calls it on the way out, even when an
///   operation threw).
/// With Ops::eagerSpine the last lane is the eager lane instead (eagerLaneFor; "eager" in the code below).
///
/// `identity` (null, or a flag per column: identityReflectorColumns) marks the columns whose reflector may have to
/// be the identity (tau = 0), which neither a TSQR panel (ReconstructWY always reflects) nor cuSOLVER's geqrf (it
/// stored a reflection for an exact zero column of a 1048624-row panel, H100, cuSOLVER 12004) is relied on for: a
/// leaf holding one is split around it, and the column alone gets ops.columnReflector (Eigen's makeHouseholder); a
/// run of kSureIdentity columns is a leaf of its own with tau = 0 and T = 0 and nothing computed.
///
/// `blocks` (null: T is merged over all n columns, as above): the caller does not need this node's merged T, only
/// Q = H_0 ... H_{n-1} in some WY form. The merge of T12 is then skipped, here and down the right-hand spine of the
/// recursion (the left children still merge: their T updates their right siblings), and the node appends the first
/// column (col0 + its own offset) of each block whose T it leaves merged: T then holds a product of block
/// reflectors on its diagonal, Q = prod_i (I - Y_i T_i Y_i^T), block i covering columns [b_i, b_{i+1}) (the last up
/// to n), T_i = T(b_i : b_{i+1}, b_i : b_{i+1}) (applyWYBlocks); T's entries outside those blocks are not written.
/// `ops.maxMergedCols` (0: no cap) extends this to left children: with blocks, a left child wider than the cap is
/// factored into blocks too (`spine` false: its nodes of at most the cap merge and are one block each, wider ones
/// split again) and updates its right sibling block by block. The update's flops are the same either way (each
/// block's product is as long as the merged one's, just narrower), while each merge costs one more m x n1 x n2
/// product; a cap trades the narrower, less efficient GEMMs of the block-by-block update against those merges
/// (Tunables.hpp: maxMergedCols). Nodes of the top spine (`spine` true) never merge, capped or not.
/// A WY block's completion (TCQR_EAGER, Tunables.hpp eagerSpineUpdates): (global first column, Y from the block's
/// diagonal down, its T).
template <typename S>
using BlockDone = std::function<void(Index, View<S>, View<S>)>;

template <class Ops, typename S>
void factorRecursiveNode(Ops& ops, View<S> A, S* tau, View<S> T, Index nb, PanelKind panel, S* scratch,
                         const char* identity, std::vector<Index>* blocks, Index col0, bool spine,
                         const LaneScratch<S>* lanes, int freeLane, int pendingLane, const BlockDone<S>* onBlock);

template <class Ops, typename S>
void factorRecursive(Ops& ops, View<S> A, S* tau, View<S> T, Index nb, PanelKind panel, S* scratch,
                     const char* identity = nullptr, std::vector<Index>* blocks = nullptr, Index col0 = 0,
                     bool spine = true, const LaneScratch<S>* lanes = nullptr, int freeLane = 0, int pendingLane = -1,
                     const BlockDone<S>* onBlock = nullptr) {
  // A node that is one WY block of an eager owner's left child reports itself once it is factored (T merged).
  const bool isBlock = onBlock != nullptr && blocks != nullptr && !spine && A.cols > 0 && A.cols <= ops.maxMergedCols;
  factorRecursiveNode(ops, A, tau, T, nb, panel, scratch, identity, blocks, col0, spine, lanes, freeLane, pendingLane,
                      isBlock ? nullptr : onBlock);
  if (isBlock) (*onBlock)(col0, A, T);
}

template <class Ops, typename S>
void factorRecursiveNode(Ops& ops, View<S> A, S* tau, View<S> T, Index nb, PanelKind panel, S* scratch,
                         const char* identity, std::vector<Index>* blocks, Index col0, bool spine,
                         const LaneScratch<S>* lanes, int freeLane, int pendingLane, const BlockDone<S>* onBlock) {
  const Index m = A.rows, n = A.cols;
  if (n == 0) return;
  const Index cap = ops.maxMergedCols;
  if (blocks && !spine && n <= cap) {  // inside a left child that stays blocks: narrow enough to merge, one block
    blocks->push_back(col0);
    blocks = nullptr;
  }
  Index n1 = 0;
  if (n <= nb) {
    const Index f = firstSet(identity, n);
    if (f == 0 && identity[0] == kSureIdentity) {  // a run of certain identities: tau = 0, T = 0, A stays as it is
      Index r = 1;
      while (r < n && identity[r] == kSureIdentity) ++r;
      if (r == n) {
        ops.setZero(View<S>(tau, n, 1, n));
        ops.setZero(T);
        if (blocks) blocks->push_back(col0);
        return;
      }
      n1 = r;  // (the inner node's update with T1 = 0 leaves A2 as it is, and its merge gives T12 = 0)
    }
    if (n1 == 0 && (f < 0 || (f == 0 && n == 1))) {
      if (f == 0) {
        ops.columnReflector(A, tau, scratch);
        formPanelT(ops, A, tau, T, scratch);
      } else if (usePanelKernel(ops, panel, m, n)) {
        ops.householderPanel(A, tau, T);
      } else if (useTsqr(panel, m, n)) {
        tsqrPanel(ops, A, tau, scratch, View<S>(), nullptr, T);  // ReconstructWY gives T
      } else {
        ops.geqrfPanel(A, tau);
        formPanelT(ops, A, tau, T, scratch);
      }
      if (blocks) blocks->push_back(col0);
      return;
    }
    if (n1 == 0) n1 = f == 0 ? 1 : f;  // the flagged column alone, or the columns before it: an inner node
  } else {
    n1 = splitColumns(n, nb);
  }
  const Index n2 = n - n1;
  View<S> A1 = A.leftCols(n1), A2 = A.rightCols(n2), T1 = T.block(0, 0, n1, n1), T2 = T.block(n1, n1, n2, n2);

  // The left child merges its T unless the caller takes blocks and it is wider than the cap: then its own blocks
  // (appended by it) update A2 one after another.
  const bool leftBlocks = blocks && cap > 0 && n1 > cap;
  if (blocks && !leftBlocks) blocks->push_back(col0);
  const size_t leftFirst = blocks ? blocks->size() : 0;
  // The eager lane (Ops::eagerSpine; Tunables.hpp eagerSpineUpdates): the last lane; a spine node whose left child
  // stays WY blocks queues each block's update of A2 on it as soon as the block is factored (the blocks complete in
  // column order, and the lane's stream keeps that order), so that when the left child is done A2 needs only the
  // lane's last block. Such a node forks no regular lane itself; the regular forks inside its left child use the
  // other lanes.
  const int eagerLane = lanes != nullptr && lanes->eager < std::min(lanes->count, ops.lanes()) ? lanes->eager : -1;
  const bool eagerOn = eagerLane >= 0;
  // (pendingLane == eagerLane: this node is an eager node's right child, whose left child's columns its parent
  // updated on the main lane and the rest on the eager lane, where this node's blocks queue after that.)
  const bool eager = eagerOn && spine && leftBlocks && (pendingLane < 0 || pendingLane == eagerLane) &&
                     lanes->size[eagerLane] >= applyScratchSize(cap, n2);
  // The left child's last block: the main lane waits for the lane's earlier blocks and updates the right child's
  // left child (lookaheadWindow) itself, the lane the rest, which the right child joins before its own update, as
  // a regular fork's; otherwise the main lane would wait for the last block's whole update before the next panel.
  const Index eagerWindow = eager ? lookaheadWindow(n2, nb) : 0;
  BlockDone<S> sink;
  if (eager) {
    S* const es = lanes->p[eagerLane];
    sink = [&ops, A, n1, n2, col0, eagerLane, es, eagerWindow, scratch](Index c, View<S> Yb, View<S> Tb) {
      const Index r = c - col0;  // the block's first column, and its diagonal's row, in this node's A
      const View<S> B = A.block(r, n1, A.rows - r, n2);
      if (eagerWindow > 0 && r + Yb.cols == n1) {
        ops.joinLane(eagerLane);
        const View<S> rest = B.rightCols(n2 - eagerWindow);
        ops.runOnLane(eagerLane, [=](auto& o) { applyYT(o, Yb, Tb, rest, true, true, es); });
        applyYT(ops, Yb, Tb, B.leftCols(eagerWindow), true, true, scratch);  // (the left child is done with scratch)
        return;
      }
      ops.runOnLane(eagerLane, [=](auto& o) { applyYT(o, Yb, Tb, B, true, true, es); });
    };
  }
  factorRecursive(ops, A1, tau, T1, nb, panel, scratch, identity, leftBlocks ? blocks : nullptr, col0, false, lanes,
                  freeLane, -1, eager ? &sink : (leftBlocks ? onBlock : nullptr));
  // A left child this node pushed as one block (merged, so it was given no blocks) reports here.
  if (onBlock && blocks && !leftBlocks) (*onBlock)(col0, A1, T1);
  std::vector<Index> left;  // the left child's blocks, relative to its first column
  if (leftBlocks)
    for (size_t i = leftFirst; i < blocks->size(); ++i) left.push_back((*blocks)[i] - col0);
  // A2 may still be in the parent's look-ahead update (this node is its right child): wait for it. (An eager node
  // need not: its blocks' updates of A2 queued on the eager lane after the parent's, and its last block's sink joined
  // the lane before the main lane's window update; a join here would wait for that last block's rest.)
  if (pendingLane >= 0 && !eager) ops.joinLane(pendingLane);
  if (eager) {  // every block of the left child has been queued (A2 is Q1^T A2 once the eager lane is done with it)
    if (eagerWindow == 0) ops.joinLane(eagerLane);
    factorRecursive(ops, A2.bottomRows(m - n1), tau + n1, T2, nb, panel, scratch, identity ? identity + n1 : nullptr,
                    blocks, col0 + n1, spine, lanes, freeLane, eagerWindow > 0 ? eagerLane : -1, onBlock);
    return;  // (a spine node: blocks is set, T1 and T2 stay separate blocks)
  }
  // [R12; A22] = Q1^T A2, with the columns beyond the right child's left child on lane q (look-ahead, see above).
  // (The eager lane, joined above, takes no regular forks.)
  const int q = pendingLane >= 0 && pendingLane != eagerLane ? pendingLane : freeLane;
  const Index w = lookaheadWindow(n2, nb);
  bool fork = lanes != nullptr && w > 0 && q >= 0 && q < lanes->count && q < ops.lanes() && q != eagerLane;
  if (fork && eagerOn && applyScratchSize(n1, n2 - w) > lanes->size[q])
    fork = false;  // (with the eager lane the lanes may nest differently from laneScratchWalk's walk)
  if (fork) {
    if (applyScratchSize(n1, n2 - w) > lanes->size[q])  // laneScratchWalk and this recursion must agree
      throw std::logic_error("tcqr: look-ahead lane scratch too small (internal error)");
    applyWYBlocks(ops, A1, T1, A2.leftCols(w), true, true, scratch, leftBlocks ? &left : nullptr);
    const View<S> rest = A2.rightCols(n2 - w);
    S* laneScratch = lanes->p[q];
    ops.runOnLane(q, [=](auto& o) {
      applyWYBlocks(o, A1, T1, rest, true, true, laneScratch, leftBlocks ? &left : nullptr);
    });
  } else {
    applyWYBlocks(ops, A1, T1, A2, true, true, scratch, leftBlocks ? &left : nullptr);
  }
  factorRecursive(ops, A2.bottomRows(m - n1), tau + n1, T2, nb, panel, scratch, identity ? identity + n1 : nullptr,
                  blocks, col0 + n1, spine, lanes, fork ? q + 1 : q, fork ? q : -1, blocks ? onBlock : nullptr);
  if (blocks) return;  // T1 and T2 stay separate blocks

  // T12 = -T1 (Y1^T Y2) T2, T21 = 0. Y2 starts at row n1: its top n2 x n2 block is unit lower triangular (copied out,
  // A2 holds R22 above it), and Y1 is dense from row n1 on. The triangles' products are small full GEMMs in T's
  // arithmetic (T1 and T2 hold zeros below their diagonals; trmmUpperGemm and tProductMode say which).
  View<S> T12 = T.block(0, n1, n1, n2);
  const Index below = m - n1 - n2;
  if (n1 <= kSmallWY && n2 <= kSmallWY) {
    if (below > 0) ops.gemm(Op::T, Op::N, S(-1), A1.bottomRows(below), A2.bottomRows(below), S(0), T12);
    ops.mergeSmallT(A1.block(n1, 0, n2, n1), A2.block(n1, 0, n2, n2), T, n1, n2, below > 0);
    return;
  }
  View<S> Y2t(scratch, n2, n2, n2), P(scratch + n2 * n2, n1, n2, n1), X(scratch + n2 * n2 + n1 * n2, n1, n2, n1);
  ops.setZero(T.block(n1, 0, n2, n1));
  ops.copyUnitLower(A2.block(n1, 0, n2, n2), Y2t);
  ops.gemm(Op::T, Op::N, S(-1), A1.block(n1, 0, n2, n1), Y2t, S(0), P);
  if (below > 0) ops.gemm(Op::T, Op::N, S(-1), A1.bottomRows(below), A2.bottomRows(below), S(1), P);
  trmmUpperGemm(ops, Op::N, T1, P, S(0), X);
  ops.gemmT(Op::N, Op::N, S(1), X, T2, S(0), T12);
}

/// Scratch of factor()'s main lane for an m x n matrix.
inline Index factorMainScratch(Index m, Index n, Index nb, PanelKind panel) {
  const Index k = std::min(m, n);
  Index s = factorScratchSize(m, k, nb, panel);
  if (n > k) s = std::max(s, applyScratchSize(k, n - k));
  return s;
}

/// The eager lane of a factorization of k = min(m, n) columns (TCQR_EAGER, Tunables.hpp eagerSpineUpdates): the last
/// of `lanes` (>= 2) lanes where the top node's left child stays WY blocks of at most `cap` columns (cap >= nb, so that
/// every block is a node of its own: a leaf wider than the cap would be pushed as a block without being reported),
/// else -1. factor() and laneScratchSizes decide with it, so the lane is kept from the regular forks only where used.
inline int eagerLaneFor(Index k, Index nb, int lanes, Index cap, bool eagerSpine) {
  if (!eagerSpine || lanes < 2 || cap <= 0 || cap < nb || k <= nb) return -1;
  return splitColumns(k, nb) > cap ? std::min(lanes, kMaxLanes) - 1 : -1;
}

/// The scratch of each of `lanes` look-ahead lanes (0 beyond what the recursion uses), into need[0 : kMaxLanes).
/// `cap`: the merge cap (Ops::maxMergedCols), for the eager lane's blocks (TCQR_EAGER, eagerSpineUpdates).
inline void laneScratchSizes(Index m, Index n, Index nb, int lanes, Index* need, Index cap = 0,
                             bool eagerSpine = false) {
  std::fill(need, need + kMaxLanes, Index(0));
  lanes = std::min(lanes, kMaxLanes);
  laneScratchWalk(std::min(m, n), nb, lanes, 0, -1, need);
  const Index k = std::min(m, n);
  const int eager = eagerLaneFor(k, nb, lanes, cap, eagerSpine);
  if (eager >= 0)  // the top node's right half is the widest an eager block updates
    need[eager] = std::max(need[eager], applyScratchSize(cap, k - splitColumns(k, nb)));
}

/// Scratch needed by factor() for an m x n matrix with `lanes` look-ahead lanes (Ops::lanes()) and merge cap `cap`.
inline Index factorTotalScratch(Index m, Index n, Index nb, PanelKind panel, int lanes = 0, Index cap = 0,
                                bool eagerSpine = false) {
  Index need[kMaxLanes];
  laneScratchSizes(m, n, nb, lanes, need, cap, eagerSpine);
  Index s = factorMainScratch(m, n, nb, panel);
  for (Index x : need) s += x;
  return s;
}

/// Whether factor() scales the columns of an m x n matrix when given a colScale: not for one panel without a trailing
/// update (no product runs in the mode).
inline bool columnScalingApplies(Index m, Index n, Index nb) {
  const Index k = std::min(m, n);
  return k > 0 && !(k <= nb && n == k);
}

/// QR of any m x n matrix: the recursion on the first k = min(m, n) columns, then R12 = Q^T A(:, k:n) for wide A.
/// T must be k x k. With `colScale` (n scalars of storage) the columns are first scaled by powers of two to norms in
/// [1/2, 1) and R is scaled back at the end (HPDC'20 §3.5): A D = Q (R D), so Q, the reflectors and tau are those of A
/// and nothing in the recursion exceeds the column norms, which keeps FP16 operands in range.
/// `identity`: see factorRecursive (needed wherever a TSQR leaf may meet a structurally zero column).
/// `blocks` (null: T is merged, H_0 ... H_{k-1} = I - Y T Y^T): receives the WY blocks of T (factorRecursive), which
/// every later product with Q must then be given (applyWYBlocks, solve).
/// `colScaleApplied`: the caller already computed colScale and scaled A's columns by it (the CUDA backend does both
/// while copying its input, kernels::launchScanColumns); only valid where columnScalingApplies.
template <class Ops, typename S>
void factor(Ops& ops, View<S> A, S* tau, View<S> T, Index nb, PanelKind panel, S* scratch, S* colScale = nullptr,
            const char* identity = nullptr, std::vector<Index>* blocks = nullptr, bool colScaleApplied = false) {
  const Index m = A.rows, n = A.cols, k = std::min(m, n);
  if (blocks) blocks->clear();
  if (k == 0) return;
  if (!columnScalingApplies(m, n, nb)) {
    if (colScale && colScaleApplied)  // the caller scaled A, but R would never be scaled back
      throw std::logic_error("tcqr: column scales applied where factor() does not scale (internal error)");
    colScale = nullptr;
  }
  if (colScale && !colScaleApplied) {
    ops.columnScales(A, colScale);
    ops.scaleColumns(A, colScale, false, false);
  }
  LaneScratch<S> lanes;
  lanes.count = std::min(ops.lanes(), kMaxLanes);
  if (lanes.count > 0) {
    laneScratchSizes(m, n, nb, lanes.count, lanes.size, ops.maxMergedCols, ops.eagerSpine);
    lanes.eager = eagerLaneFor(k, nb, lanes.count, ops.maxMergedCols, ops.eagerSpine);
    S* p = scratch + factorMainScratch(m, n, nb, panel);
    for (int q = 0; q < lanes.count; ++q) {
      lanes.p[q] = p;
      p += lanes.size[q];
    }
  }
  {
    // Every fork is joined inside the recursion; this also joins them when an operation throws half-way, so that
    // nothing queued later on the main lane (or the caller's next use of A) runs beside a lane still writing A.
    struct JoinLanes {
      Ops& o;
      ~JoinLanes() { o.joinAllLanes(); }
    } join{ops};
    factorRecursive(ops, A.leftCols(k), tau, T, nb, panel, scratch, identity, blocks, 0, true,
                    lanes.count > 0 ? &lanes : nullptr);
  }
  if (n > k) applyWYBlocks(ops, A.leftCols(k), T, A.rightCols(n - k), true, true, scratch, blocks);
  if (colScale) ops.scaleColumns(A, colScale, true, true);
}

/// Scratch needed by solve() for nrhs right-hand sides.
inline Index solveScratchSize(Index m, Index n, Index nrhs) { return applyScratchSize(std::min(m, n), nrhs); }

/// Eigen's HouseholderQR::_solve_impl / _solve_impl_transposed on a backend. B has max(m, n) rows.
/// `blocks`: the WY blocks of T (factor()), or null for a merged T.
template <class Ops, typename S>
void solve(Ops& ops, View<S> A, View<S> T, View<S> B, bool transposed, S* scratch,
           const std::vector<Index>* blocks = nullptr) {
  const Index m = A.rows, n = A.cols, k = std::min(m, n), nrhs = B.cols;
  View<S> Yp = A.leftCols(k), R = A.block(0, 0, k, k);
  if (!transposed) {
    applyWYBlocks(ops, Yp, T, B.topRows(m), true, true, scratch, blocks);
    ops.trsmLeftUpper(Op::N, R, B.topRows(k));
    if (n > k) ops.setZero(B.block(k, 0, n - k, nrhs));
  } else {
    ops.trsmLeftUpper(Op::T, R, B.topRows(k));
    if (m > k) ops.setZero(B.block(k, 0, m - k, nrhs));
    applyWYBlocks(ops, Yp, T, B.topRows(m), true, false, scratch, blocks);
  }
}

}  // namespace detail
}  // namespace tcqr
