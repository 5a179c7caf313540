// Algorithms.hpp - the recursive Householder QR (TPDS'25 Algorithm 1) and the WY applications, written once and
// run on any backend. A backend ("Ops") provides, on its own memory space:
//   gemm(opA, opB, alpha, A, B, beta, C)        C = alpha op(A) op(B) + beta C, in the object's precision mode
//   gemmExact(opA, opB, alpha, A, B, beta, C)   the same in the storage precision (small products inside a panel)
//   columnScales(A, d), scaleColumns(A, d, inverse, upperOnly)   power-of-two column scaling (FP16 mode)
//   trmmLowerAcc(opL, alpha, L, Z, C, cutoff, scheme)
//   mode                                        the Precision of gemm() (selects the TRMM plan)
//                                               C += alpha op(L) Z, L lower triangular (trmmLowerAccGeneric or better)
//   geqrfPanel(A, tau)                           unblocked-quality Householder QR of a panel, LAPACK/Eigen convention
//   copyUnitLower(src, dst)                      dst = unit lower trapezoid of src (zeros above, ones on diagonal)
//   formT(S, tau, T)                             T of the compact WY form from S = Y^T Y (LAPACK larft recurrence)
//   trmmRightUpper(B, T)                         B = B T, T upper triangular
//   trmmUpper(left, op, T, B)                    B = op(T) B (left) or B op(T), T upper triangular (applyYT)
//   trsmLeftUpper(op, R, B)                      B = op(R)^{-1} B, R upper triangular
//   setZero(A)
//   maxMergedCols                                 widest node whose W factorRecursive merges when blocks are taken
// Every temporary comes from one scratch region sized up front by the callers (see *ScratchSize), so nothing is
// allocated inside the recursion.
#pragma once

#include <algorithm>
#include <vector>

#include "Tsqr.hpp"
#include "View.hpp"

namespace tcqr {
namespace detail {

/// Column split of Algorithm 1: half the columns, rounded down to a multiple of the panel width.
inline Index splitColumns(Index n, Index nb) { return std::max(nb, (n / 2) / nb * nb); }

/// Which panel factorization the recursion uses at its leaves.
enum class PanelKind {
  Geqrf,  ///< geqrfPanel (cuSOLVER / Eigen reflectors) + W = Y T
  Tsqr,   ///< TSQR tree + ReconstructWY (Tsqr.hpp) where it applies, Geqrf otherwise
  Hybrid  ///< Tsqr for panels with at least kTsqrAutoMinRows rows, Geqrf for shorter ones
};

inline bool useTsqr(PanelKind panel, Index m, Index n) {
  if (!tsqrApplicable(m, n)) return false;
  return panel == PanelKind::Tsqr || (panel == PanelKind::Hybrid && m >= kTsqrAutoMinRows);
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

/// Width of the leftmost leaf panel of factorRecursive over n columns.
inline Index firstLeafCols(Index n, Index nb) {
  while (n > nb) n = splitColumns(n, nb);
  return n;
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

/// Scratch (in scalars) needed by factorRecursive for an m x n (m >= n) problem: a leaf, and at an inner node the
/// update of the right half (n1 x n, at most) next to a leaf (the look-ahead, see factorRecursive).
inline Index factorScratchSize(Index m, Index n, Index nb, PanelKind panel) {
  const Index leaf = leafScratchSize(m, std::min(n, nb), panel);
  return n > nb ? leaf + splitColumns(n, nb) * n : leaf;
}
/// Scratch needed to apply a k-reflector WY form to `c` vectors.
inline Index applyScratchSize(Index k, Index c) { return k * c + k * k; }

/// W = Y T for a freshly factored panel (A holds Y below its diagonal). W must have A's shape.
template <class Ops, typename S>
void formPanelW(Ops& ops, View<S> A, const S* tau, View<S> W, S* scratch) {
  const Index k = A.cols;
  View<S> Sm(scratch, k, k, k), T(scratch + k * k, k, k, k);
  ops.copyUnitLower(A, W);
  ops.gemmExact(Op::T, Op::N, S(1), W, W, S(0), Sm);
  ops.formT(Sm, tau, T);
  ops.trmmRightUpper(W, T);
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

/// B <- (I - W Y^T)^T B = B - Y (W^T B). Y is the m x k unit lower trapezoid stored in `Yp` (Householder vectors below
/// the diagonal; the diagonal and above are ignored), W is m x k, B is m x c.
template <class Ops, typename S>
void applyQtLeft(Ops& ops, View<S> Yp, View<S> W, View<S> B, S* scratch) {
  const Index m = Yp.rows, k = Yp.cols, c = B.cols;
  if (k == 0 || c == 0) return;
  View<S> Z(scratch, k, c, k), Yt(scratch + k * c, k, k, k);
  ops.gemm(Op::T, Op::N, S(1), W, B, S(0), Z);
  ops.copyUnitLower(Yp.topRows(k), Yt);
  trmmLowerAcc(ops, Op::N, S(-1), Yt, Z, B.topRows(k));
  if (m > k) ops.gemm(Op::N, Op::N, S(-1), Yp.bottomRows(m - k), Z, S(1), B.bottomRows(m - k));
}

/// B <- (I - W Y^T) B = B - W (Y^T B).
template <class Ops, typename S>
void applyQLeft(Ops& ops, View<S> Yp, View<S> W, View<S> B, S* scratch) {
  const Index m = Yp.rows, k = Yp.cols, c = B.cols;
  if (k == 0 || c == 0) return;
  View<S> Z(scratch, k, c, k), Yt(scratch + k * c, k, k, k);
  ops.copyUnitLower(Yp.topRows(k), Yt);
  if (k > trmmPlan(ops.mode).cutoff) {
    ops.setZero(Z);
    trmmLowerAcc(ops, Op::T, S(1), Yt, B.topRows(k), Z);
  } else {
    ops.gemm(Op::T, Op::N, S(1), Yt, B.topRows(k), S(0), Z);
  }
  if (m > k) ops.gemm(Op::T, Op::N, S(1), Yp.bottomRows(m - k), B.bottomRows(m - k), S(1), Z);
  ops.gemm(Op::N, Op::N, S(-1), W, Z, S(1), B);
}

/// B <- B (I - W Y^T) = B - (B W) Y^T, B is r x m.
template <class Ops, typename S>
void applyQRight(Ops& ops, View<S> Yp, View<S> W, View<S> B, S* scratch) {
  const Index m = Yp.rows, k = Yp.cols, r = B.rows;
  if (k == 0 || r == 0) return;
  View<S> Z(scratch, r, k, r), Yt(scratch + k * r, k, k, k);
  ops.gemm(Op::N, Op::N, S(1), B, W, S(0), Z);
  ops.copyUnitLower(Yp.topRows(k), Yt);
  ops.gemm(Op::N, Op::T, S(-1), Z, Yt, S(1), B.leftCols(k));
  if (m > k) ops.gemm(Op::N, Op::T, S(-1), Z, Yp.bottomRows(m - k), S(1), B.rightCols(m - k));
}

/// B <- B (I - W Y^T)^T = B - (B Y) W^T, B is r x m.
template <class Ops, typename S>
void applyQtRight(Ops& ops, View<S> Yp, View<S> W, View<S> B, S* scratch) {
  const Index m = Yp.rows, k = Yp.cols, r = B.rows;
  if (k == 0 || r == 0) return;
  View<S> Z(scratch, r, k, r), Yt(scratch + k * r, k, k, k);
  ops.copyUnitLower(Yp.topRows(k), Yt);
  ops.gemm(Op::N, Op::N, S(1), B.leftCols(k), Yt, S(0), Z);
  if (m > k) ops.gemm(Op::N, Op::N, S(1), B.rightCols(m - k), Yp.bottomRows(m - k), S(1), Z);
  ops.gemm(Op::N, Op::T, S(-1), Z, W, S(1), B);
}

/// Dispatch of the four applications above.
template <class Ops, typename S>
void applyWY(Ops& ops, View<S> Yp, View<S> W, View<S> B, bool onLeft, bool transpose, S* scratch) {
  if (onLeft)
    transpose ? applyQtLeft(ops, Yp, W, B, scratch) : applyQLeft(ops, Yp, W, B, scratch);
  else
    transpose ? applyQtRight(ops, Yp, W, B, scratch) : applyQRight(ops, Yp, W, B, scratch);
}

/// applyWY with Q = I - Y T Y^T given by T (k x k, upper triangular) instead of W = Y T: the W product becomes the
/// same product with Y plus a k x k triangular product, as much memory traffic as with W, without storing W.
/// A factorization that is one TSQR panel keeps T (CudaQRState and HostQRState; ReconstructWY gives it for free),
/// which saves writing W (m x k) in compute(). Scratch: applyScratchSize(k, c).
template <class Ops, typename S>
void applyYT(Ops& ops, View<S> Yp, View<S> T, View<S> B, bool onLeft, bool transpose, S* scratch) {
  const Index m = Yp.rows, k = Yp.cols;
  if (k == 0 || B.empty()) return;
  View<S> Yt(scratch, k, k, k);
  ops.copyUnitLower(Yp.topRows(k), Yt);
  const Op opT = transpose ? Op::T : Op::N;
  if (onLeft) {  // Q B = B - Y (T (Y^T B)), Q^T B = B - Y (T^T (Y^T B))
    View<S> Z(scratch + k * k, k, B.cols, k);
    ops.gemm(Op::T, Op::N, S(1), Yt, B.topRows(k), S(0), Z);
    if (m > k) ops.gemm(Op::T, Op::N, S(1), Yp.bottomRows(m - k), B.bottomRows(m - k), S(1), Z);
    ops.trmmUpper(true, opT, T, Z);
    ops.gemm(Op::N, Op::N, S(-1), Yt, Z, S(1), B.topRows(k));
    if (m > k) ops.gemm(Op::N, Op::N, S(-1), Yp.bottomRows(m - k), Z, S(1), B.bottomRows(m - k));
  } else {  // B Q = B - ((B Y) T) Y^T, B Q^T = B - ((B Y) T^T) Y^T
    View<S> Z(scratch + k * k, B.rows, k, B.rows);
    ops.gemm(Op::N, Op::N, S(1), B.leftCols(k), Yt, S(0), Z);
    if (m > k) ops.gemm(Op::N, Op::N, S(1), B.rightCols(m - k), Yp.bottomRows(m - k), S(1), Z);
    ops.trmmUpper(false, opT, T, Z);
    ops.gemm(Op::N, Op::T, S(-1), Z, Yt, S(1), B.leftCols(k));
    if (m > k) ops.gemm(Op::N, Op::T, S(-1), Z, Yp.bottomRows(m - k), S(1), B.rightCols(m - k));
  }
}

/// applyWY for a W of WY blocks (factor() with `blocks`; null or empty: one block), Q = Q_0 ... Q_{p-1} with
/// Q_i = I - W_i Y_i^T acting on rows b_i .. m. Yp and W may be the first `length` columns only (Q_L): the blocks
/// are clipped to Yp.cols (a block's first columns are the WY form of its first reflectors). Scratch: that of
/// applyWY for all Yp.cols columns.
/// With T (T.p non-null) the form is one block given by T instead of W (applyYT; W and blocks are ignored), T's
/// leading Yp.cols x Yp.cols block being used.
template <class Ops, typename S>
void applyWYBlocks(Ops& ops, View<S> Yp, View<S> W, View<S> B, bool onLeft, bool transpose, S* scratch,
                   const std::vector<Index>* blocks, View<S> T = View<S>()) {
  const Index m = Yp.rows, k = Yp.cols;
  if (T.p) {
    applyYT(ops, Yp, T.block(0, 0, k, k), B, onLeft, transpose, scratch);
    return;
  }
  if (blocks == nullptr || blocks->size() <= 1) {
    applyWY(ops, Yp, W, B, onLeft, transpose, scratch);
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
    const View<S> Yi = Yp.block(b0, b0, m - b0, b1 - b0), Wi = W.block(b0, b0, m - b0, b1 - b0);
    applyWY(ops, Yi, Wi, onLeft ? B.bottomRows(m - b0) : B.rightCols(m - b0), onLeft, transpose, scratch);
  }
}

/// Recursive Householder QR of A (m x n, m >= n), TPDS'25 Algorithm 1. On exit A holds R and the Householder
/// vectors (Eigen/LAPACK layout), tau the coefficients, and W (m x n) satisfies H_0 ... H_{n-1} = I - W Y^T.
///
/// Look-ahead (TPDS'25 §V.C.2, kernel scheduling): where the backend has a side lane (a second stream), the update
/// Q1^T A2 is split: the columns of A2's first leaf panel are updated on the main lane, the rest on the side lane,
/// which then runs concurrently with that panel's factorization (a latency-bound chain of small kernels that leaves
/// most of the GPU idle). Every leaf joins the lanes when it is done, so nothing else ever overlaps. Ops provides
///   sideLaneAvailable(), sideLane() (an Ops on the side lane), forkSide() (the side lane waits for the main lane),
///   sideDone() (marks the side lane's queued work as pending), joinSide() (the main lane waits for pending work).
///
/// `identity` (null, or a flag per column: identityReflectorColumns) marks the columns whose reflector may have to
/// be the identity (tau = 0), which neither a TSQR panel (ReconstructWY always reflects) nor cuSOLVER's geqrf (it
/// stored a reflection for an exact zero column of a 1048624-row panel, H100, cuSOLVER 12004) is relied on for: a
/// leaf holding one is split around it, and the column alone gets ops.columnReflector (Eigen's makeHouseholder); a
/// run of kSureIdentity columns is a leaf of its own with tau = 0 and W = 0 and nothing computed.
///
/// `blocks` (null: W is merged over all n columns, as above): the caller does not need this node's merged W, only
/// Q = H_0 ... H_{n-1} in some WY form. The merge W2 <- W2 - W1 (Y1^T W2) is then skipped, here and down the
/// right-hand spine of the recursion (the left children still merge: their W updates their right siblings), and the
/// node appends the first column (col0 + its own offset) of each block whose W it leaves merged: W then holds a
/// product of block reflectors, Q = prod_i (I - W_i Y_i^T), block i covering columns [b_i, b_{i+1}) (the last up
/// to n), W_i = W(b_i : m, b_i : b_{i+1}) (applyWYBlocks). That saves the merges' two m x n1 x n2 products at every
/// spine node: at the top of a square matrix a quarter of all GEMM flops.
/// `ops.maxMergedCols` (0: no cap) extends this to left children: with blocks, a left child wider than the cap is
/// factored into blocks too (`spine` false: its nodes of at most the cap merge and are one block each, wider ones
/// split again) and updates its right sibling block by block. The update's flops are the same either way (each
/// block's product is as long as the merged one's, just narrower), while each merge costs two more m x n1 x n2
/// products; a cap trades the narrower, less efficient GEMMs of the block-by-block update against those merges
/// (Tunables.hpp: maxMergedCols). Nodes of the top spine (`spine` true) never merge, capped or not.
template <class Ops, typename S>
void factorRecursive(Ops& ops, View<S> A, S* tau, View<S> W, Index nb, PanelKind panel, S* scratch,
                     const char* identity = nullptr, std::vector<Index>* blocks = nullptr, Index col0 = 0,
                     bool spine = true) {
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
    if (f == 0 && identity[0] == kSureIdentity) {  // a run of certain identities: tau = 0, W = 0, A stays as it is
      Index r = 1;
      while (r < n && identity[r] == kSureIdentity) ++r;
      if (r == n) {
        ops.setZero(View<S>(tau, n, 1, n));
        ops.setZero(W);
        ops.joinSide();
        if (blocks) blocks->push_back(col0);
        return;
      }
      n1 = r;  // (the inner node's updates with W1 = 0 and a zero Y1 below its top leave A2 and W2 as they are)
    }
    if (n1 == 0 && (f < 0 || (f == 0 && n == 1))) {
      if (f == 0)
        ops.columnReflector(A, tau, scratch);
      else if (useTsqr(panel, m, n))
        tsqrPanel(ops, A, tau, W, scratch);
      else
        ops.geqrfPanel(A, tau);
      if (f == 0 || !useTsqr(panel, m, n)) formPanelW(ops, A, tau, W, scratch);
      ops.joinSide();
      if (blocks) blocks->push_back(col0);
      return;
    }
    if (n1 == 0) n1 = f == 0 ? 1 : f;  // the flagged column alone, or the columns before it: an inner node
    // A leaf split this way runs GEMMs, which share the conversion and partials workspaces with a side lane that may
    // still be busy with the parent's update: wait for it first.
    ops.joinSide();
  } else {
    n1 = splitColumns(n, nb);
  }
  const Index n2 = n - n1;
  View<S> A1 = A.leftCols(n1), A2 = A.rightCols(n2), W1 = W.leftCols(n1), W2 = W.rightCols(n2);

  // The left child merges its W unless the caller takes blocks and it is wider than the cap: then its own blocks
  // (appended by it) update A2 one after another.
  const bool leftBlocks = blocks && cap > 0 && n1 > cap;
  if (blocks && !leftBlocks) blocks->push_back(col0);
  const size_t leftFirst = blocks ? blocks->size() : 0;
  factorRecursive(ops, A1, tau, W1, nb, panel, scratch, identity, leftBlocks ? blocks : nullptr, col0, false);
  std::vector<Index> left;  // the left child's blocks, relative to its first column
  if (leftBlocks)
    for (size_t i = leftFirst; i < blocks->size(); ++i) left.push_back((*blocks)[i] - col0);
  // [R12; A22] = Q1^T A2
  auto updateA2 = [&](auto& o, View<S> B, S* s) {
    if (leftBlocks)
      applyWYBlocks(o, A1, W1, B, true, true, s, &left);
    else
      applyQtLeft(o, A1, W1, B, s);
  };
  const Index first = firstLeafCols(n2, nb);
  if (first < n2 && ops.sideLaneAvailable()) {
    updateA2(ops, A2.leftCols(first), scratch);
    ops.forkSide();
    auto side = ops.sideLane();
    // Disjoint from the scratch of the leaf that runs meanwhile (factorScratchSize counts both).
    updateA2(side, A2.rightCols(n2 - first), scratch + leafScratchSize(m, nb, panel));
    ops.sideDone();
  } else {
    updateA2(ops, A2, scratch);
  }
  factorRecursive(ops, A2.bottomRows(m - n1), tau + n1, W2.bottomRows(m - n1), nb, panel, scratch,
                  identity ? identity + n1 : nullptr, blocks, col0 + n1, spine);
  if (blocks) return;  // W1 and W2 stay separate blocks

  // W2 <- W2 - W1 (Y1^T W2). The top n1 rows of W2 are zero, so Y1^T W2 only involves Y1's dense bottom part.
  View<S> P(scratch, n1, n2, n1);
  ops.gemm(Op::T, Op::N, S(1), A1.bottomRows(m - n1), W2.bottomRows(m - n1), S(0), P);
  ops.gemm(Op::N, Op::N, S(-1), W1.topRows(n1), P, S(0), W2.topRows(n1));
  ops.gemm(Op::N, Op::N, S(-1), W1.bottomRows(m - n1), P, S(1), W2.bottomRows(m - n1));
}

/// Scratch needed by factor() for an m x n matrix.
inline Index factorTotalScratch(Index m, Index n, Index nb, PanelKind panel) {
  const Index k = std::min(m, n);
  Index s = factorScratchSize(m, k, nb, panel);
  if (n > k) s = std::max(s, applyScratchSize(k, n - k));
  return s;
}

/// QR of any m x n matrix: the recursion on the first k = min(m, n) columns, then R12 = Q^T A(:, k:n) for wide A.
/// W must be m x k. With `colScale` (n scalars of storage) the columns are first scaled by powers of two to norms in
/// [1/2, 1) and R is scaled back at the end (HPDC'20 §3.5): A D = Q (R D), so Q, the reflectors and tau are those of A
/// and nothing in the recursion exceeds the column norms, which keeps FP16 operands in range.
/// `identity`: see factorRecursive (needed wherever a TSQR leaf may meet a structurally zero column).
/// `blocks` (null: W is merged, H_0 ... H_{k-1} = I - W Y^T): receives the WY blocks of W (factorRecursive), which
/// every later product with Q must then be given (applyWYBlocks, solve).
template <class Ops, typename S>
void factor(Ops& ops, View<S> A, S* tau, View<S> W, Index nb, PanelKind panel, S* scratch, S* colScale = nullptr,
            const char* identity = nullptr, std::vector<Index>* blocks = nullptr) {
  const Index m = A.rows, n = A.cols, k = std::min(m, n);
  if (blocks) blocks->clear();
  if (k == 0) return;
  if (k <= nb && n == k) colScale = nullptr;  // one panel and no trailing update: no product runs in the mode
  if (colScale) {
    ops.columnScales(A, colScale);
    ops.scaleColumns(A, colScale, false, false);
  }
  factorRecursive(ops, A.leftCols(k), tau, W, nb, panel, scratch, identity, blocks);
  if (n > k) applyWYBlocks(ops, A.leftCols(k), W, A.rightCols(n - k), true, true, scratch, blocks);
  if (colScale) ops.scaleColumns(A, colScale, true, true);
}

/// Scratch needed by solve() for nrhs right-hand sides.
inline Index solveScratchSize(Index m, Index n, Index nrhs) { return applyScratchSize(std::min(m, n), nrhs); }

/// Eigen's HouseholderQR::_solve_impl / _solve_impl_transposed on a backend. B has max(m, n) rows.
/// `blocks`: the WY blocks of W (factor()), or null for a merged W. With T (non-null) Q = I - Y T Y^T instead
/// (applyWYBlocks).
template <class Ops, typename S>
void solve(Ops& ops, View<S> A, View<S> W, View<S> B, bool transposed, S* scratch,
           const std::vector<Index>* blocks = nullptr, View<S> T = View<S>()) {
  const Index m = A.rows, n = A.cols, k = std::min(m, n), nrhs = B.cols;
  View<S> Yp = A.leftCols(k), R = A.block(0, 0, k, k);
  if (!transposed) {
    applyWYBlocks(ops, Yp, W, B.topRows(m), true, true, scratch, blocks, T);
    ops.trsmLeftUpper(Op::N, R, B.topRows(k));
    if (n > k) ops.setZero(B.block(k, 0, n - k, nrhs));
  } else {
    ops.trsmLeftUpper(Op::T, R, B.topRows(k));
    if (m > k) ops.setZero(B.block(k, 0, m - k, nrhs));
    applyWYBlocks(ops, Yp, W, B.topRows(m), true, false, scratch, blocks, T);
  }
}

}  // namespace detail
}  // namespace tcqr
