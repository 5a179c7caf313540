// TallSkinny.hpp - the standalone tall-skinny QR (Eigen::TensorCoreTallSkinnyQR), generic over a backend like
// Algorithms.hpp. Besides the Ops of Algorithms.hpp and Tsqr.hpp, Ops must provide
//   scaleRows(src, d, dst)      dst = diag(d) src (out of place)
// Three paths, by shape and requested outputs (tallSkinnyPath):
//   Tree:      n <= kTsqrMaxCols, m > n, no WY form: the TSQR tree; the signs that turn the tree's R into
//              Householder's (Eigen's) R come from ReconstructWY's signed LU of Q1, the top n x n block of the tree's
//              Q, which only needs tile 0 of each level (tsqrTopBlockQ). The thin Q, if requested, is the explicit Q
//              of the tree with the signs folded into the top level's input (Q_tree S), so no extra pass over Q.
//   Panel:     n <= kTsqrMaxCols, m > n, WY form requested: the full tsqrPanel (tree + explicit Q + ReconstructWY),
//              or the one-kernel panel (ops.householderPanel) where it holds the panel (usePanelKernel).
//   Recursive: everything else (n > kTsqrMaxCols or m == n): the recursive QR with the backend's panels (Hybrid on CUDA:
//              the one-kernel panel where it applies, TSQR panels where they apply).
// Panel and Recursive give the packed factor, tau and T (I - Y T Y^T; Recursive for R alone: T as WY blocks,
// unused); then R = triu(A(0:n, :)) and the thin Q = (I - Y T Y^T) [I; 0] = [I; 0] - Y (T Y1^T) with Y1 the unit
// lower top n x n block of Y.
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

/// Whether the path computes the n coefficients tau and T (n x n), which then need storage whatever was requested.
inline bool tallSkinnyNeedsT(Index m, Index n, unsigned what) {
  return n > 0 && tallSkinnyPath(m, n, what) != TallSkinnyPath::Tree;
}

/// Whether the thin Q needs its own m x n buffer: only when the packed factor (WY) must be kept as well; otherwise
/// the thin Q overwrites the working copy of A.
inline bool tallSkinnySeparateQ(unsigned what) { return (what & kTallSkinnyThinQ) && (what & kTallSkinnyWY); }

/// Rows of the chunks in which tallSkinnyQR forms the thin Q's bottom block Y2 M: Q may be A itself, which holds Y2,
/// so each chunk of Y2 is copied to scratch and multiplied from there (cuBLAS's in-place TRMM ran at 3-4 TFLOP/s on
/// the H100 for 2097152 x 128 in double). About 2^24 scalars per chunk.
inline Index thinQChunkRows(Index m, Index n) {
  return std::max<Index>(1, std::min<Index>(m - n, std::max<Index>(n, (Index(1) << 24) / std::max<Index>(n, 1))));
}

/// Scratch (in scalars) of tallSkinnyQR.
inline Index tallSkinnyScratchSize(Index m, Index n, unsigned what, Index nb, PanelKind panel) {
  if (n == 0) return 0;
  // The thin Q after a WY form: Y1, M and a chunk of Y2.
  const Index thinQ = (what & kTallSkinnyThinQ) ? 2 * n * n + (m > n ? thinQChunkRows(m, n) * n : 0) : 0;
  switch (tallSkinnyPath(m, n, what)) {
    case TallSkinnyPath::Tree:
      return tsqrTreeScratchSize(m, n) + 2 * n * n + n + tsqrTopBlockScratchSize(n);
    case TallSkinnyPath::Panel: return std::max(tsqrScratchSize(m, n), thinQ);
    default: return std::max(factorTotalScratch(m, n, nb, panel), thinQ);
  }
}

/// Storage of one tall-skinny QR. A (m x n) holds the input on entry. On exit R (n x n) holds R with Householder's
/// signs; with kTallSkinnyWY, A holds the packed factor, tau the coefficients and T (n x n) the triangular factor;
/// with kTallSkinnyThinQ, Q holds the thin Q: Q must be A itself unless kTallSkinnyWY is set too. T and tau are
/// needed unless the path is Tree (tallSkinnyNeedsT).
template <typename S>
struct TallSkinnyViews {
  View<S> A, Q, R, T;
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
    if (usePanelKernel(ops, panel, m, n)) {
      if (src.p != nullptr) ops.copy(src, v.A);  // (the caller's scan flagged NaN/Inf)
      ops.householderPanel(v.A, v.tau, v.T);
    } else {
      tsqrPanel(ops, v.A, v.tau, v.scratch, src, notFinite, v.T);
    }
  } else {
    if (src.p != nullptr) ops.copy(src, v.A);  // (the Panel path: src was scanned with the identity columns)
    // The thin Q and the WY form need T merged over all n columns (one block). For R alone T can stay a product of
    // blocks (factorRecursive's `blocks`), which skips the merges down the recursion's right-hand spine.
    std::vector<Index> blocks;
    factor(ops, v.A, v.tau, v.T, nb, panel, v.scratch, static_cast<S*>(nullptr), identity,
           (wantQ || wantWY) ? nullptr : &blocks);
  }

  View<S> A1 = v.A.topRows(n);
  ops.setIdentity(v.R);
  ops.trmmRightUpper(v.R, A1);  // R = I triu(A1): the upper triangle with zeros below, exactly
  if (wantQ) {
    // Q = [I; 0] - Y (T Y1^T) = [I + Y1 M; Y2 M] with M = -T Y1^T. Where Q is A itself, which holds Y2, the bottom
    // is formed chunk by chunk from copies (thinQChunkRows). Y1 is copied out of A before Q's top is written.
    View<S> Y1(v.scratch, n, n, n), M(v.scratch + n * n, n, n, n);
    ops.copyUnitLower(A1, Y1);
    ops.gemm(Op::N, Op::T, S(-1), v.T, Y1, S(0), M);
    if (m > n) {
      const Index rows = thinQChunkRows(m, n);
      View<S> chunk(v.scratch + 2 * n * n, rows, n, rows);
      for (Index r0 = n; r0 < m; r0 += rows) {
        const Index r = std::min(rows, m - r0);
        View<S> Yc = v.A.block(r0, 0, r, n);
        if (v.Q.p == v.A.p) {
          ops.copy(Yc, chunk.topRows(r));
          Yc = chunk.topRows(r);
        }
        ops.gemm(Op::N, Op::N, S(1), Yc, M, S(0), v.Q.block(r0, 0, r, n));
      }
    }
    ops.setIdentity(v.Q.topRows(n));
    ops.gemm(Op::N, Op::N, S(1), Y1, M, S(1), v.Q.topRows(n));
  }
}

}  // namespace detail
}  // namespace tcqr
