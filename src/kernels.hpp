// kernels.hpp - launchers of the CUDA kernels in kernels/*.cu (internal). Each launcher validates its arguments,
// returns early on empty input, launches on the given stream, checks the launch, and never synchronises.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tcqr {
namespace kernels {

using Index = std::int64_t;

/// dst (m x n) = unit lower trapezoid of src: src below the diagonal, 1 on it, 0 above.
template <typename S>
void launchCopyUnitLower(const S* src, Index lds, S* dst, Index ldd, Index m, Index n, cudaStream_t stream);

/// A (m x n) = identity (ones on the main diagonal, zeros elsewhere).
template <typename S>
void launchSetIdentity(S* A, Index lda, Index m, Index n, cudaStream_t stream);

/// *flag = 1 if any entry of A (m x n) is NaN or infinite; *flag is left untouched otherwise.
template <typename S>
void launchFlagNonFinite(const S* A, Index lda, Index m, Index n, int* flag, cudaStream_t stream);

/// For each column j of A (m x n): lastRow[j] = min(1 + the index of its last nonzero row, cap), 0 for a zero column
/// (what detail::identityReflectorColumns reads), and *notFinite = 1 if any entry is NaN or infinite (left unchanged
/// otherwise; may be null). Clears lastRow (n entries) itself. With `dst` non-null A is also copied to dst (ldd) in
/// the same pass, column j multiplied by scale[j] when `scale` is non-null (then dst may be A itself, ldd = lda).
/// The record and the flag are of A as read, before any scaling.
template <typename S>
void launchScanColumns(const S* A, Index lda, Index m, Index n, std::uint32_t cap, std::uint32_t* lastRow,
                       int* notFinite, cudaStream_t stream, S* dst = nullptr, Index ldd = 0,
                       const S* scale = nullptr);

/// The Householder reflector of the column x (m entries) in place, as Eigen's makeHouseholderInPlace and LAPACK's
/// larfg: x(0) <- beta, x(1 : m) <- the essential part, *tau <- tau; tau = 0 (and a zero essential part) when the
/// tail's squared norm is at most the smallest normal number. `scratch`: detail::kColumnReflectorScratch scalars.
template <typename S>
void launchColumnReflector(S* x, Index m, S* tau, S* scratch, cudaStream_t stream);

/// C (p x c, ldc) = alpha sum_{b < batch} P_b + beta C, where P_b (p x c, contiguous) starts at P + b p c: the
/// reduction of a split-K GEMM. With beta = 0, C is not read.
template <typename S>
void launchAddBatches(const S* P, Index batch, Index p, Index c, S alpha, S beta, S* C, Index ldc,
                      cudaStream_t stream);

/// C (p x c, ldc; p, c <= 64) = alpha A^T B + beta C for A (k x p) and B (k x c) with a long inner dimension k: one
/// kernel writes the partial products of smallTnBlocks(k, p, c, sizeof(S), maxBlocks) blocks to `partials` (p c
/// elements each; float: rows summed in float in row blocks of 64-128, those sums added in double; double: a block's
/// rows in one double chain) and launchAddBatches sums them in double, in block order. With beta = 0, C is not read.
template <typename S>
void launchSmallTN(const S* A, Index lda, const S* B, Index ldb, Index k, Index p, Index c, S alpha, S beta, S* C,
                   Index ldc, S* partials, int maxBlocks, cudaStream_t stream);
/// Rows one block of launchSmallTN sums at a time for a p x c result of `scalarBytes`-byte scalars (its 32 x 32 or
/// 64 x 64 tile and about 33 KB of shared memory).
constexpr Index smallTnRowBlock(Index p, Index c, Index scalarBytes) {
  return (scalarBytes == 4 ? 4096 : 2048) / ((p <= 32 && c <= 32) ? 32 : 64);
}
/// launchSmallTN's blocks, one partial each (p c elements): a row block each, at most maxBlocks. The summation order
/// follows from k and maxBlocks alone, so a caller that fixes maxBlocks gets the same bits for the same operands.
constexpr Index smallTnBlocks(Index k, Index p, Index c, Index scalarBytes, Index maxBlocks) {
  const Index rb = smallTnRowBlock(p, c, scalarBytes);
  const Index blocks = (k + rb - 1) / rb;
  return blocks < 1 ? 1 : (blocks < maxBlocks ? blocks : (maxBlocks < 1 ? 1 : maxBlocks));
}

/// Upper triangular T (k x k) of the compact WY form from S = Y^T Y and tau (LAPACK larft, forward, columnwise):
/// T(i,i) = tau_i, T(0:i,i) = -tau_i T(0:i,0:i) S(0:i,i). Zeroes T below its diagonal.
template <typename S>
void launchFormT(const S* Sm, Index lds, const S* tau, S* T, Index ldt, Index k, cudaStream_t stream);

/// The top of a compact-WY update with k <= 32 reflectors, per column j of Btop (rows x c) and Z (k x c):
/// w = Z(:, j) + Yt^T Btop(:, j), Z(:, j) = op(T) w, Btop(:, j) -= Yt Z(:, j), with Yt the unit lower rows x k top of
/// Y (k <= rows <= 32; entries below the diagonal read from Y) and T (k x k) upper triangular (applyYT,
/// Algorithms.hpp). `zIn` false: Z is not read (w starts at zero), only written.
template <typename S>
void launchSmallUpdateTop(const S* Y, Index ldy, const S* T, Index ldt, Index k, Index rows, S* Btop, Index ldb, S* Z,
                          Index ldz, Index c, bool transpose, bool zIn, cudaStream_t stream);

/// The merge of two compact WY forms, n1, n2 <= 32 (factorRecursive): T12 = T1 (P - Y1mid^T Y2t) T2 and T21 = 0, T
/// holding T1 at (0, 0), T2 at (n1, n1), T12 at (0, n1) (on entry P there when hasBottom, else P = 0); Y1mid (n2 x n1)
/// dense, Y2t the unit lower n2 x n2 top of Y2 (read below its diagonal).
template <typename S>
void launchMergeSmallT(const S* Y1mid, Index ld1, const S* Y2, Index ld2, S* T, Index ldt, Index n1, Index n2,
                       bool hasBottom, cudaStream_t stream);

/// Most rows launchHouseholderPanel takes on the current device (0: none, before sm_90 or when no cluster of the
/// kernel's blocks fits): the largest cluster (asked once per device) x 256 threads x the most rows per thread (8 in
/// float, 4 in double, of which 2 in shared memory; or TCQR_PANEL_MAX_ROWS_PER_THREAD's cap, or 6 / 3 with
/// TCQR_PANEL_MAX_SMEM_ROWS=0, both read once per process).
template <typename S>
Index householderPanelMaxRows();

/// Householder QR of the panel A (m x n, n <= 32, n <= m <= householderPanelMaxRows) in place, Eigen's convention (as
/// launchColumnReflector per column: R on and above the diagonal, essential parts below, tau = 0 for a tail of
/// squared norm at most the smallest normal number), its n coefficients to tau, and T (n x n, upper triangular, zeros
/// below the diagonal) with H_0 ... H_{n-1} = I - Y T Y^T. One launch of one thread-block cluster
/// (kernels/panel_kernels.cu). rowsPerThread (1-6 in float, 1-3 in double; 0: the fewest that fit) is the least
/// rows per thread in registers, which picks the block count, for measurements (a panel taller than the largest
/// cluster's registers hold takes rows in shared memory whatever it asks). priority != 0: the launch's stream priority (cudaLaunchAttributePriority),
/// for panels that run beside other streams' GEMMs; kept in a captured graph's kernel node.
template <typename S>
void launchHouseholderPanel(S* A, Index lda, Index m, Index n, S* tau, S* T, Index ldt, cudaStream_t stream,
                            int rowsPerThread = 0, int priority = 0);

}  // namespace kernels
}  // namespace tcqr

namespace tcqr {
namespace kernels {

/// Tiles of a TSQR level: the m rows are split into `tiles` balanced row blocks, tile t being rows
/// [m t / tiles, m (t+1) / tiles), with tiles = ceil(m / kTsqrTileRows). Every tile then has at least
/// min(m, kTsqrTileRows / 2) rows, so at least n when m >= n. (Tsqr.hpp and the Host backend use the same rule.)

/// One TSQR level: each tile of X (m x n, n <= 32) is factored in place by Householder QR (Eigen/LAPACK conventions;
/// R on and above the diagonal, essential reflector parts below), its n coefficients go to tau[t*n ...], and its
/// n x n R (zeros below the diagonal) to rows [t*n, t*n + n) of Rout.
/// With `src` non-null the tiles are read from src (leading dimension lds) instead of X, X only receives the result,
/// and *notFinite is set to 1 if any entry read is NaN or infinite (left unchanged otherwise; may be null).
/// With storeAll = false only tile 0's reflectors are written to X (R and tau of every tile still are).
/// With `lastRow` non-null (n entries) lastRow[j] is raised to min(1 + the last nonzero row of column j, cap), as
/// launchScanColumns records it.
/// With formQ (and storeAll) X receives each tile's explicit Q, H_0 ... H_{n-1} [I; 0] (tile rows x n), instead of
/// its reflectors: the top level of a TSQR tree, saving the separate launchTsqrTileApplyQ with C = I.
template <typename S>
void launchTsqrTileQR(S* X, Index ldx, Index m, Index n, Index tiles, S* tau, S* Rout, Index ldr, cudaStream_t stream,
                      const S* src = nullptr, Index lds = 0, int* notFinite = nullptr, bool storeAll = true,
                      std::uint32_t* lastRow = nullptr, std::uint32_t cap = 0, bool formQ = false);

/// The transpose step of a level: each tile of X (holding reflectors from launchTsqrTileQR) is overwritten with
/// H_0 ... H_{n-1} [C_t; 0], where C_t are rows [t*n, t*n + n) of C (ldc). The result is this level's explicit Q.
template <typename S>
void launchTsqrTileApplyQ(S* X, Index ldx, Index m, Index n, Index tiles, const S* tau, const S* C, Index ldc,
                          cudaStream_t stream);

/// ReconstructWY's first step (Ballard et al.) for the level-0 tiles X of a TSQR tree: Q1, the top n x n block of
/// tile 0's H_0 ... H_{n-1} [C_0; 0] (the top rows of the tree's explicit Q, C as for launchTsqrTileApplyQ), then its
/// signed LU as launchSignedLU computes it: LU (n x n, ldlu) receives L and U, s the signs, T = U S L^{-T}, and
/// Uinv (n x n, ldui) U^{-1} (upper triangular, zeros below the diagonal). One launch; X is not modified.
template <typename S>
void launchTsqrTopRowsLU(const S* X, Index ldx, Index m, Index n, Index tiles, const S* tau, const S* C, Index ldc,
                         S* LU, Index ldlu, S* s, S* T, Index ldt, S* Uinv, Index ldui, cudaStream_t stream);

/// launchTsqrTileApplyQ for the last level (level 0) fused with ReconstructWY's pass over the rows (Ballard et al.):
/// the explicit Q is never stored. With Q S_n = I - Y T Y1^T: rows i >= n get Y(i,:) = -Q(i,:) U^{-1}, computed per
/// tile as -H_0 ... H_{n-1} [C_t U^{-1}; 0]; rows i < n the packed factor (L below the diagonal, s_i R(i,:) on and
/// above it), and tau_i = U_ii s_i. A may alias X (each block reads its tile before writing the same rows). LU, Uinv
/// and s come from launchTsqrTopRowsLU.
template <typename S>
void launchTsqrApplyQReconstructWY(const S* X, Index ldx, Index m, Index n, Index tiles, const S* tauTiles, const S* C,
                                   Index ldc, const S* LU, Index ldlu, const S* Uinv, Index ldui, const S* s,
                                   const S* R, Index ldr, S* A, Index lda, S* tau, cudaStream_t stream);

/// ReconstructWY, step 1 (Ballard et al.): LU without pivoting of S - Q1 for the n x n top block Q1 of an explicit
/// Q, choosing s_i = -sign(pivot) on the fly so that every pivot has magnitude >= 1. In place: LU holds Q1 on entry,
/// L (unit, strictly lower) and U on exit; s receives the signs.
/// With T non-null, also T (n x n, ldt) = U S L^{-T}, the upper triangular T of the compact WY form (zero below).
template <typename S>
void launchSignedLU(S* LU, Index ld, Index n, S* s, cudaStream_t stream, S* T = nullptr, Index ldt = 0);



}  // namespace kernels
}  // namespace tcqr

// ---- precision modes (kernels/precision_kernels.cu) ------------------------------------------------------------
struct __half;
struct __nv_bfloat16;

namespace tcqr {
namespace kernels {

/// Leading dimension of a converted copy of a block with `rows` rows: rows rounded up to a multiple of 8.
Index paddedRows(Index rows);

/// out (paddedRows(rows) x cols, ld = paddedRows(rows)) = A (rows x cols, lda) rounded to T (__half or
/// __nv_bfloat16), padding rows zeroed. `out` must be 16-byte aligned. With `overflow`, *overflow = 1 where a finite
/// entry rounds to infinity (left alone otherwise).
template <typename T>
void launchConvertFromFloat(const float* A, Index lda, Index rows, Index cols, T* out, cudaStream_t stream,
                            int* overflow = nullptr);

/// A second copy of hi (times `scale`, a power of two) for the leading `count` columns (`cols`) or rows (a multiple
/// of 8) of a split, at `p` plus the same offset as hi's (same leading dimension): the extra inner block that lets one
/// product hold both correction terms and the first chunk of hi*hi (CudaOps convertOperand). Null p: none.
struct SplitDup {
  void* p = nullptr;
  Index count = 0;
  bool cols = false;
  float scale = 1.0f;
};

/// hi + lo = A to within 2^-22 relative: hi = A rounded to TF32, lo = (A - hi) rounded to TF32; both padded like
/// launchConvertFromFloat (paddedRows(rows) rows per column, zeros below `rows`), with leading dimension ldOut
/// (0: paddedRows(rows); else a multiple of 8 at least that, so that hi and lo can share columns: hi = lo +
/// paddedRows(rows) stacks them). `hi` and `lo` must be 16-byte aligned.
void launchSplitTf32(const float* A, Index lda, Index rows, Index cols, float* hi, float* lo, cudaStream_t stream,
                     Index ldOut = 0, SplitDup dup = SplitDup());
/// FP16x3's split of A into hi = fp16(x) and lo = fp16((x - hi) loScale), packed as launchSplitTf32 (ldOut alike).
/// `hi` and `lo` must be 16-byte aligned. With `overflow`, *overflow = 1 where a finite entry's hi, or its scaled copy
/// in `dup`, rounds to infinity (left alone otherwise).
void launchSplitHalf(const float* A, Index lda, Index rows, Index cols, __half* hi, __half* lo, float loScale,
                     cudaStream_t stream, Index ldOut = 0, SplitDup dup = SplitDup(), int* overflow = nullptr);

/// d_j = 2^-e_j with 2^(e_j - 1) <= ||A(:, j)||_2 < 2^e_j (1 for a zero or non-finite column). `work`: 16 * cols
/// bytes of device memory, 8-byte aligned.
template <typename S>
void launchColumnScales(const S* A, Index lda, Index rows, Index cols, S* d, void* work, cudaStream_t stream);

/// A(:, j) *= d_j, or /= d_j when `inverse`; with `upperOnly` only rows i <= j are touched (the R part of a packed QR).
template <typename S>
void launchScaleColumns(S* A, Index lda, Index rows, Index cols, const S* d, bool inverse, bool upperOnly,
                        cudaStream_t stream);

}  // namespace kernels
}  // namespace tcqr
