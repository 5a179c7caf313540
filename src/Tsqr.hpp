// Tsqr.hpp - the TSQR panel, generic over a backend (TPDS'25 §III.C and §V.A, PPoPP'23 §5.1-5.2):
//   1. tree: factor the row tiles of A independently, stack their R's, repeat until one tile remains;
//   2. explicit thin Q, top-down: each level's tiles apply their reflectors to their block of the level above;
//   3. ReconstructWY (Ballard et al.): signed LU of the top n x n block of Q (giving T as well), then one pass over
//      the rows giving the Householder vectors Y and tau, and R with LAPACK's signs - what the recursion consumes.
// The stages are separate functions so that the standalone tall-skinny QR (TallSkinny.hpp) can stop after the tree
// (R only) or after the explicit Q (thin Q); tsqrPanel chains all three for the recursion.
// Ops must additionally provide:
//   tsqrTileQR(X, tiles, tau, Rstack), tsqrTileQRFrom(src, X, tiles, tau, Rstack, notFinite, storeAll),
//   tsqrTileQRFormQ(X, tau, R) (one tile: tsqrTileQR, then X <- its explicit Q), tsqrTileApplyQ(X, tiles, tau, C),
//   tsqrTopRowsLU(X, tiles, tau, C, LU, s, T, Uinv) (the top n x n block of tile 0's Q, then signedLU on it, and
//   U^{-1}), signedLU(LU, s, T), tsqrApplyQReconstructWY(X, tiles, tau, C, LU, Uinv, s, R, A, tauOut),
//   setIdentity(A)
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "Tunables.hpp"
#include "View.hpp"

namespace tcqr {
namespace detail {

/// Columns whose Householder reflector may be the identity, found from the input alone. Householder QR (LAPACK,
/// Eigen) stores tau = 0 for column j when the tail below the diagonal of the updated column is exactly zero.
/// Applying a reflector to a column changes only rows where the reflector's vector is nonzero, and where the column
/// was nonzero there the result stays nonzero unless values cancel exactly; so the nonzero rows of the updated column
/// include those of the input column, and without exact cancellation the tail can only be zero if the input
/// column's own tail A(j+1 : m, j) is zero. Those columns are flagged: zero columns, upper triangular and identity
/// blocks, permutation-like and other sparse columns. It is a superset (in [B C; 0 D] the last column of B gets
/// tau = 0 but a column of C with a zero tail may be filled in by the earlier reflectors), which only costs speed.
/// ReconstructWY cannot give tau = 0 (it always yields a reflection), so a leaf panel holding a flagged column is
/// factored by geqrfPanel instead (factorRecursive), which reproduces LAPACK's and Eigen's choice on its own.
/// `lastRow[j]` is 1 + the index of the last nonzero row of column j, 0 for a zero column; values may be capped at
/// any c > n (see exactIdentityCap): only whether they exceed j + 1 matters. Exact zeros that arise from
/// cancellation (data whose arithmetic happens to be exact) are not predictable from the input and are not detected.
/// Flag values: kMaybeIdentity, or kSureIdentity where A(j+1 : m, 0 : j) = 0 as well: the earlier reflectors then
/// only touch rows up to j, so the tail stays exactly zero and the reflector is the identity for certain (upper
/// triangular and identity blocks, [B C; 0 0]); factorRecursive needs no computation for those.
constexpr char kMaybeIdentity = 1, kSureIdentity = 2;
inline std::vector<char> identityReflectorColumns(const std::uint32_t* lastRow, Index n) {
  std::vector<char> mask(static_cast<size_t>(n), 0);
  std::uint32_t reach = 0;  // max over i <= j of lastRow[i]: rows from `reach` on are zero in columns 0..j
  for (Index j = 0; j < n; ++j) {
    const std::uint32_t limit = static_cast<std::uint32_t>(j + 1);
    reach = std::max(reach, lastRow[j]);
    mask[static_cast<size_t>(j)] = reach <= limit ? kSureIdentity : (lastRow[j] <= limit ? kMaybeIdentity : 0);
  }
  return mask;
}
/// The cap of the lastRow values identityReflectorColumns needs for an m x n matrix: min(m, n) + 1.
inline std::uint32_t exactIdentityCap(Index m, Index n) { return static_cast<std::uint32_t>(std::min(m, n) + 1); }

inline Index tsqrTileCount(Index m) { return (m + kTsqrTileRows - 1) / kTsqrTileRows; }

/// Scratch (in scalars) of tsqrTree for an m x n panel: per level the stacked R's and tau, then the final R.
inline Index tsqrTreeScratchSize(Index m, Index n) {
  Index total = 0, rows = m;
  for (;;) {
    const Index tiles = tsqrTileCount(rows);
    total += tiles * n;  // tau
    if (tiles == 1) break;
    total += tiles * n * n;  // stacked R
    rows = tiles * n;
  }
  return total + n * n;
}

/// Scratch (in scalars) used by tsqrPanel for an m x n panel: the tree, then an identity, the LU block, T, U^{-1} and
/// the signs.
inline Index tsqrScratchSize(Index m, Index n) { return tsqrTreeScratchSize(m, n) + 4 * n * n + n; }

/// True when the TSQR panel factors an m x n panel: at most kTsqrMaxCols columns (the tile kernel's width) and
/// strictly tall. For m == n Householder QR's last step has an empty tail and is the identity (tau = 0, as in
/// LAPACK and Eigen), while ReconstructWY always yields a reflection (|tau| >= 1); such panels (the last one of a
/// square matrix) go to geqrfPanel so that matrixQR()/hCoeffs() keep Eigen's values.
inline bool tsqrApplicable(Index m, Index n) { return n >= 1 && n <= kTsqrMaxCols && m > n; }

/// The levels of a factored TSQR tree. Level l's tiles hold their reflectors in X[l] (level 0 is the panel itself,
/// level l > 0 the stacked R's of level l - 1) with coefficients tau[l]; R is the top tile's R (the tiles' signs,
/// zeros below the diagonal). With topQ the top level (then not level 0) holds its explicit Q instead of its
/// reflectors (tsqrTree's formTopQ). `end` is the first scratch scalar the tree does not use.
template <typename S>
struct TsqrTree {
  static constexpr int kMaxLevels = 64;
  View<S> X[kMaxLevels];
  Index tiles[kMaxLevels] = {};
  S* tau[kMaxLevels] = {};
  int levels = 0;
  bool topQ = false;
  View<S> R;
  S* end = nullptr;
};

/// Stage 1: the tree. A (m x n, tsqrApplicable) is overwritten by the level-0 reflectors; uses
/// tsqrTreeScratchSize(m, n) scalars at scratch. With `src` (same shape as A, any leading dimension) level 0 reads the
/// matrix from src instead of A, so a caller need not copy it into A first, and `*notFinite` is set to 1 when src
/// holds a NaN or an infinity (it is left unchanged otherwise). With `src` and keepLevel0 = false only tile 0 of level
/// 0 is stored into A (all tsqrTopBlockQ needs): for R alone the matrix is then read once and nothing is written.
/// With `src` and `lastRow` (n entries, zero on entry), level 0 also records the last nonzero row of every column of
/// src, capped at exactIdentityCap (what identityReflectorColumns reads), at no extra pass over the matrix.
/// With formTopQ, a top level above level 0 is factored and turned into its explicit Q in one step (t.topQ; what
/// tsqrPanelFromTree starts from): only for callers that form the whole Q top-down from the identity.
template <class Ops, typename S>
TsqrTree<S> tsqrTree(Ops& ops, View<S> A, S* scratch, View<S> src = View<S>(), int* notFinite = nullptr,
                     bool keepLevel0 = true, std::uint32_t* lastRow = nullptr, bool formTopQ = false) {
  const Index n = A.cols;
  TsqrTree<S> t;
  S* p = scratch;
  View<S> X = A;
  for (;;) {
    const Index tiles = tsqrTileCount(X.rows);
    S* tauL = p;
    p += tiles * n;
    t.X[t.levels] = X;
    t.tiles[t.levels] = tiles;
    t.tau[t.levels] = tauL;
    ++t.levels;
    const bool fromSrc = t.levels == 1 && src.p != nullptr;
    View<S> Rout;
    if (tiles == 1) {
      Rout = t.R = View<S>(p, n, n, n);
      p += n * n;
    } else {
      Rout = View<S>(p, tiles * n, n, tiles * n);
      p += tiles * n * n;
    }
    if (fromSrc) {
      ops.tsqrTileQRFrom(src, X, tiles, tauL, Rout, notFinite, keepLevel0, lastRow);
    } else if (tiles == 1 && formTopQ && t.levels > 1) {
      ops.tsqrTileQRFormQ(X, tauL, Rout);
      t.topQ = true;
    } else {
      ops.tsqrTileQR(X, tiles, tauL, Rout);
    }
    if (tiles == 1) break;
    X = Rout;
  }
  t.end = p;
  return t;
}

/// Stage 2: the explicit thin Q, top-down. Level 0 (the panel A) ends up holding Q_tree C, where C (n x n) is the
/// input of the top level (the identity for Q itself). Overwrites every level's reflectors; C may be overwritten.
/// Needs a tree without topQ.
template <class Ops, typename S>
void tsqrExplicitQ(Ops& ops, const TsqrTree<S>& t, View<S> C) {
  for (int l = t.levels - 1; l >= 0; --l) {
    ops.tsqrTileApplyQ(t.X[l], t.tiles[l], t.tau[l], C);
    C = t.X[l];
  }
}

/// Scratch (in scalars) of tsqrTopBlockQ: two copies of a tile.
inline Index tsqrTopBlockScratchSize(Index n) { return 2 * kTsqrTileRows * n; }

/// Q1, the top n x n block of the tree's explicit Q, written to Q1 (n x n), without forming the rest: only tile 0 of
/// each level contributes to the top rows, so each level applies its tile 0 to a copy of that tile (the tree is left
/// intact for tsqrExplicitQ). C (n x n) is scratch; `tiles` holds tsqrTopBlockScratchSize(n) scalars. Needs a tree
/// without topQ.
template <class Ops, typename S>
void tsqrTopBlockQ(Ops& ops, const TsqrTree<S>& t, View<S> C, S* tiles, View<S> Q1) {
  const Index n = t.R.cols;
  ops.setIdentity(C);
  View<S> above = C;
  for (int l = t.levels - 1; l >= 0; --l) {
    const Index rows0 = t.X[l].rows / t.tiles[l];  // tile 0: rows [0, rows / tiles), at least n of them
    View<S> tile(tiles + (l % 2) * kTsqrTileRows * n, rows0, n, rows0);
    ops.copy(t.X[l].topRows(rows0), tile);
    ops.tsqrTileApplyQ(tile, 1, t.tau[l], above);
    above = tile.topRows(n);
  }
  ops.copy(above, Q1);
}

/// QR of the panel A (m x n, m >= n, n <= kTsqrMaxCols) by TSQR + ReconstructWY. On exit A and tau are what
/// geqrfPanel produces: the packed factor in Eigen/LAPACK layout and the coefficients. With Tout (n x n, non-null) T is
/// written there (H_0 ... H_{n-1} = I - Y T Y^T, T upper triangular with zeros below the diagonal: what the recursion
/// keeps). With `src`, A's contents on entry are ignored: the matrix is read from src (see tsqrTree).
template <class Ops, typename S>
void tsqrPanelFromTree(Ops& ops, const TsqrTree<S>& t, View<S> A, S* tau, View<S> Tout = View<S>());

template <class Ops, typename S>
void tsqrPanel(Ops& ops, View<S> A, S* tau, S* scratch, View<S> src = View<S>(), int* notFinite = nullptr,
               View<S> Tout = View<S>()) {
  const TsqrTree<S> t = tsqrTree(ops, A, scratch, src, notFinite, true, nullptr, /*formTopQ=*/true);  // 1. the tree
  tsqrPanelFromTree(ops, t, A, tau, Tout);
}

/// Stages 2 and 3 of tsqrPanel, after its tree `t` of the panel A (a caller may inspect the tree's level-0 scan before
/// deciding to go on; the scratch after t.end is used).
template <class Ops, typename S>
void tsqrPanelFromTree(Ops& ops, const TsqrTree<S>& t, View<S> A, S* tau, View<S> Tout) {
  const Index n = A.cols;
  S* p = t.end;

  View<S> C(p, n, n, n);  // 2. explicit Q, from the top level down to level 1
  p += n * n;
  int l = t.levels - 1;
  if (t.topQ) {  // the top level's Q is formed already
    C = t.X[l];
    --l;
  } else {
    ops.setIdentity(C);
  }
  for (; l >= 1; --l) {
    ops.tsqrTileApplyQ(t.X[l], t.tiles[l], t.tau[l], C);
    C = t.X[l];
  }

  // 3. ReconstructWY. The signed LU (and U^{-1}) needs the top n x n block of Q first; then each level-0 tile forms its
  // rows of Y = -Q2 U^{-1} as -H_t [C_t U^{-1}; 0], so Q is never stored (A, which holds level 0's reflectors,
  // receives Y), and tau.
  // T goes straight to Tout where there is one (the signed LU writes all of it, zeros below the diagonal included).
  View<S> LU(p, n, n, n), T = Tout.p ? Tout : View<S>(p + n * n, n, n, n), Uinv(p + 2 * n * n, n, n, n);
  p += 3 * n * n;
  S* s = p;
  ops.tsqrTopRowsLU(t.X[0], t.tiles[0], t.tau[0], C, LU, s, T, Uinv);
  ops.tsqrApplyQReconstructWY(t.X[0], t.tiles[0], t.tau[0], C, LU, Uinv, s, t.R, A, tau);
}

}  // namespace detail
}  // namespace tcqr
