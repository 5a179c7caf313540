// TallSkinny.hpp - the standalone tall-skinny QR (Eigen::TensorCoreTallSkinnyQR), generic over a backend like
// Algorithms.hpp. Besides the Ops of Algorithms.hpp and Tsqr.hpp, Ops must provide
//   scaleRows(src, d, dst)      dst = diag(d) src (out of place)
// Three paths, by shape and requested outputs (tallSkinnyPath):
//   Tree:      n <= kTsqrMaxCols, m > n, no WY form: the TSQR tree; the signs that turn the tree's R into
//              Householder's (Eigen's) R come from ReconstructWY's signed LU of Q1, the top n x n block of the tree's
//              Q, which only needs tile 0 of each level (tsqrTopBlockQ). The thin Q, if requested, is the explicit Q
//              of the tree with the signs folded into the top level's input (Q_tree S), so no extra pass over Q.
//   Panel:     n <= kTsqrMaxCols, m > n, WY form requested: the full tsqrPanel (tree + explicit Q + ReconstructWY).
//   Recursive: everything else (n > kTsqrMaxCols or m == n): the recursive QR with TSQR panels where they apply.
// Panel and Recursive give the packed factor, tau and W = Y T (Recursive without the thin Q: W as WY blocks, unused);
// then R = triu(A(0:n, :)), T from S = Y^T Y (LAPACK larft) and the thin Q = (I - W Y^T) [I; 0] = [I; 0] - W Y1^T
// with Y1 the unit lower top n x n block of Y.
#pragma once

#include <algorithm>
#include <vector>

#include "tcqr/Error.h"

#include "Algorithms.hpp"
#include "Tsqr.hpp"
#include "View.hpp"

namespace tcqr {
namespace detail {

/// The tcqr::TallSkinnyOutputs bits, repeated here so that src/ needs no public front-end header.
constexpr unsigned kTallSkinnyThinQ = 0x2;
constexpr unsigned kTallSkinnyWY = 0x4;

enum class TallSkinnyPath { Tree, Panel, Recursive };

inline TallSkinnyPath tallSkinnyPath(Index m, Index n, unsigned what) {
  if (!tsqrApplicable(m, n)) return TallSkinnyPath::Recursive;
  return (what & kTallSkinnyWY) ? TallSkinnyPath::Panel : TallSkinnyPath::Tree;
}

/// Whether the path needs the m x n W buffer and the n coefficients tau.
inline bool tallSkinnyNeedsW(Index m, Index n, unsigned what) {
  return n > 0 && tallSkinnyPath(m, n, what) != TallSkinnyPath::Tree;
}

/// Whether the thin Q needs its own m x n buffer: only when the packed factor (WY) must be kept as well; otherwise
/// the thin Q overwrites the working copy of A.
inline bool tallSkinnySeparateQ(unsigned what) { return (what & kTallSkinnyThinQ) && (what & kTallSkinnyWY); }

/// Scratch (in scalars) of tallSkinnyQR.
inline Index tallSkinnyScratchSize(Index m, Index n, unsigned what, Index nb, PanelKind panel) {
  if (n == 0) return 0;
  switch (tallSkinnyPath(m, n, what)) {
    case TallSkinnyPath::Tree:
      return tsqrTreeScratchSize(m, n) + 2 * n * n + n + tsqrTopBlockScratchSize(n);
    case TallSkinnyPath::Panel: return std::max(tsqrScratchSize(m, n), 2 * n * n);
    default: return std::max(factorTotalScratch(m, n, nb, panel), 2 * n * n);
  }
}

/// Storage of one tall-skinny QR. A (m x n) holds the input on entry. On exit R (n x n) holds R with Householder's
/// signs; with kTallSkinnyWY, A holds the packed factor, tau the coefficients and T (n x n) the triangular factor;
/// with kTallSkinnyThinQ, Q holds the thin Q: Q must be A itself unless kTallSkinnyWY is set too. W (m x n) and tau
/// are needed unless the path is Tree (tallSkinnyNeedsW).
template <typename S>
struct TallSkinnyViews {
  View<S> A, W, Q, R, T;
  S* tau = nullptr;
  S* scratch = nullptr;
};

/// With `src` (m x n, Tree and Panel paths only) the input is read from src rather than from A, whose contents on
/// entry are then ignored, and *notFinite is set to 1 if src holds a NaN or an infinity (see tsqrTree); for R alone
/// the matrix is read once and A receives only its first tile.
/// `identity` (identityReflectorColumns of the input, or null) matters wherever tau is computed (Panel, Recursive):
/// a panel holding such a column is factored by geqrfPanel so that its tau is 0 as in Eigen. The Tree path ignores
/// it: R and the thin Q are then a valid QR, but the sign of R(j, j) and the thin Q's column j may differ from
/// Eigen's on those columns (for a zero column any unit vector orthogonal to the others is a valid Q(:, j)).
template <class Ops, typename S>
void tallSkinnyQR(Ops& ops, const TallSkinnyViews<S>& v, unsigned what, Index nb, PanelKind panel,
                  View<S> src = View<S>(), int* notFinite = nullptr, const char* identity = nullptr) {
  const Index m = v.A.rows, n = v.A.cols;
  if (n == 0) return;
  const bool wantQ = (what & kTallSkinnyThinQ) != 0, wantWY = (what & kTallSkinnyWY) != 0;
  const TallSkinnyPath path = tallSkinnyPath(m, n, what);
  if (src.p != nullptr && path == TallSkinnyPath::Recursive)
    throw Error(ErrorSource::Usage, 0, "tallSkinnyQR", "tallSkinnyQR: the recursive path reads its input from A");

  if (path == TallSkinnyPath::Tree) {
    const TsqrTree<S> t = tsqrTree(ops, v.A, v.scratch, src, notFinite, /*keepLevel0=*/wantQ);
    S* p = t.end;
    View<S> C(p, n, n, n), LU(p + n * n, n, n, n);
    S* s = p + 2 * n * n;
    S* tiles = s + n;
    tsqrTopBlockQ(ops, t, C, tiles, LU);
    ops.signedLU(LU, s);  // s: the signs with S R_tree = Householder's R (ReconstructWY's choice)
    ops.scaleRows(t.R, s, v.R);
    if (wantQ) {  // A <- Q_tree S: S as the top level's input instead of the identity
      ops.setIdentity(LU);
      ops.scaleRows(LU, s, C);
      tsqrExplicitQ(ops, t, C);
    }
    return;
  }

  if (path == TallSkinnyPath::Panel && !anySet(identity, n)) {
    tsqrPanel(ops, v.A, v.tau, v.W, v.scratch, src, notFinite);
  } else {
    if (src.p != nullptr) ops.copy(src, v.A);  // (the Panel path: src was scanned with the identity columns)
    // Only the thin Q reads W (merged: one m x n x n product below). For R and the WY form W can stay a product of
    // blocks (factorRecursive's `blocks`), which skips the merges down the recursion's right-hand spine.
    std::vector<Index> blocks;
    factor(ops, v.A, v.tau, v.W, nb, panel, v.scratch, static_cast<S*>(nullptr), identity, wantQ ? nullptr : &blocks);
  }

  View<S> A1 = v.A.topRows(n);
  ops.setIdentity(v.R);
  ops.trmmRightUpper(v.R, A1);  // R = I triu(A1): the upper triangle with zeros below, exactly
  View<S> Y1(v.scratch, n, n, n), Sm(v.scratch + n * n, n, n, n);
  ops.copyUnitLower(A1, Y1);
  if (wantWY) {  // S = Y^T Y = Y1^T Y1 + Y2^T Y2, then LAPACK's larft recurrence
    ops.gemm(Op::T, Op::N, S(1), Y1, Y1, S(0), Sm);
    if (m > n) ops.gemm(Op::T, Op::N, S(1), v.A.bottomRows(m - n), v.A.bottomRows(m - n), S(1), Sm);
    ops.formT(Sm, v.tau, v.T);
  }
  if (wantQ) {  // Q = [I; 0] - W Y1^T (Y1 was copied out of A, which Q may overwrite)
    ops.setIdentity(v.Q);
    ops.gemm(Op::N, Op::T, S(-1), v.W, Y1, S(1), v.Q);
  }
}

}  // namespace detail
}  // namespace tcqr
