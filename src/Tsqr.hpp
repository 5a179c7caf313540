// Tsqr.hpp - the TSQR panel, generic over a backend (TPDS'25 §III.C and §V.A, PPoPP'23 §5.1-5.2):
//   1. tree: factor the row tiles of A independently, stack their R's, repeat until one tile remains;
//   2. explicit thin Q, top-down: each level's tiles apply their reflectors to their block of the level above;
//   3. ReconstructWY (Ballard et al.): signed LU of the top n x n block of Q, then one pass over the rows giving the
//      Householder vectors Y, W = Y T and tau, and R with LAPACK's signs - exactly what the recursion consumes.
// Ops must additionally provide:
//   tsqrTileQR(X, tiles, tau, Rstack), tsqrTileApplyQ(X, tiles, tau, C), tsqrTopRowsQ(X, tiles, tau, C, out),
//   signedLU(LU, s, T), tsqrApplyQReconstructWY(X, tiles, tau, C, LU, s, T, R, A, W, tauOut), setIdentity(A)
#pragma once

#include <algorithm>

#include "Tunables.hpp"
#include "View.hpp"

namespace tcqr {
namespace detail {

inline Index tsqrTileCount(Index m) { return (m + kTsqrTileRows - 1) / kTsqrTileRows; }

/// Scratch (in scalars) used by tsqrPanel for an m x n panel: per level the stacked R's and tau, then the final R,
/// an identity, the LU block, T and the signs.
inline Index tsqrScratchSize(Index m, Index n) {
  Index total = 0, rows = m;
  for (;;) {
    const Index tiles = tsqrTileCount(rows);
    total += tiles * n;  // tau
    if (tiles == 1) break;
    total += tiles * n * n;  // stacked R
    rows = tiles * n;
  }
  return total + 4 * n * n + n;
}

/// True when the TSQR panel factors an m x n panel: at most kTsqrMaxCols columns (the tile kernel's width) and
/// strictly tall. For m == n Householder QR's last step has an empty tail and is the identity (tau = 0, as in
/// LAPACK and Eigen), while ReconstructWY always yields a reflection (|tau| >= 1); such panels (the last one of a
/// square matrix) go to geqrfPanel so that matrixQR()/hCoeffs() keep Eigen's values.
inline bool tsqrApplicable(Index m, Index n) { return n >= 1 && n <= kTsqrMaxCols && m > n; }

/// QR of the panel A (m x n, m >= n, n <= kTsqrMaxCols) by TSQR + ReconstructWY. On exit A, tau and W are what
/// geqrfPanel + formPanelW produce: the packed factor in Eigen/LAPACK layout, the coefficients, and W = Y T.
template <class Ops, typename S>
void tsqrPanel(Ops& ops, View<S> A, S* tau, View<S> W, S* scratch) {
  const Index n = A.cols;
  constexpr int kMaxLevels = 64;
  View<S> levelX[kMaxLevels];
  Index levelTiles[kMaxLevels];
  S* levelTau[kMaxLevels];
  int levels = 0;

  S* p = scratch;
  View<S> X = A, R;
  for (;;) {  // 1. the tree
    const Index tiles = tsqrTileCount(X.rows);
    S* tauL = p;
    p += tiles * n;
    levelX[levels] = X;
    levelTiles[levels] = tiles;
    levelTau[levels] = tauL;
    ++levels;
    if (tiles == 1) {
      R = View<S>(p, n, n, n);
      p += n * n;
      ops.tsqrTileQR(X, tiles, tauL, R);
      break;
    }
    View<S> next(p, tiles * n, n, tiles * n);
    p += tiles * n * n;
    ops.tsqrTileQR(X, tiles, tauL, next);
    X = next;
  }

  View<S> C(p, n, n, n);  // 2. explicit Q, from the top level down to level 1
  p += n * n;
  ops.setIdentity(C);
  for (int l = levels - 1; l >= 1; --l) {
    ops.tsqrTileApplyQ(levelX[l], levelTiles[l], levelTau[l], C);
    C = levelX[l];
  }

  // 3. ReconstructWY. The signed LU needs the top n x n block of Q first; then level 0's Q is formed tile by tile and
  // turned into Y, W and tau in the same pass, never stored (A, which holds level 0's reflectors, receives Y).
  View<S> LU(p, n, n, n), T(p + n * n, n, n, n);
  p += 2 * n * n;
  S* s = p;
  ops.tsqrTopRowsQ(levelX[0], levelTiles[0], levelTau[0], C, LU);
  ops.signedLU(LU, s, T);
  ops.tsqrApplyQReconstructWY(levelX[0], levelTiles[0], levelTau[0], C, LU, s, T, R, A, W, tau);
}

}  // namespace detail
}  // namespace tcqr
