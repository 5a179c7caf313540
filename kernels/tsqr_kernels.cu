// tsqr_kernels.cu - the TSQR panel (TPDS'25 §V.A; PPoPP'23 §5.1-5.2): a Householder QR of one tile per thread block
// with the column distribution of Fig. 4 (right): warp w owns columns w, w+8, ..., so every reduction is one warp's
// shuffle, and ReconstructWY (Ballard et al.) as a signed LU plus one pass over the rows (level 0's Q is never
// stored: each tile forms its rows of Y directly).
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "../src/CudaCheck.hpp"
#include "../src/Tunables.hpp"
#include "../src/kernels.hpp"
#include "device_math.cuh"

namespace tcqr {
namespace kernels {

namespace {

constexpr int TR = static_cast<int>(detail::kTsqrTileRows);
constexpr int NC = static_cast<int>(detail::kTsqrMaxCols);
static_assert(TR % 32 == 0 && NC == 32, "tile shape: the kernels assume 32 columns at most, rows in whole warps");

__device__ __forceinline__ Index tsqrTileBegin(Index m, Index tiles, Index t) { return (m * t) / tiles; }

template <typename S>
__device__ __forceinline__ S warpSum(S v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Register-resident tile (TPDS'25 Fig. 4, right): column c belongs to warp c % kTileWarps, which keeps it in
// registers as slot c / kTileWarps; lane l holds rows l, l+32, ..., l+224 (kSlots values). Every reduction is a
// shuffle inside one warp; reflector j is published in its own column of shared memory, with a producer/consumer
// barrier per step (tsqrTileQRKernel). 8 warps x 4 columns (rather than 32 warps x 1) lets several tiles share an SM
// and gives each warp 4 independent columns to overlap.
//
// Two shapes of the same kernel, chosen per TSQR level (launchers below): 8 warps x 4 columns for levels with many
// tiles (several tiles share an SM, each warp overlaps 4 independent columns: level 0 of 8388608 x 32 float went from
// 4.5 to 2.8 ms), 32 warps x 1 column for levels with few tiles, where only a tile's latency counts (30 us against
// 39 us for 8 warps).
constexpr int kSlots = TR / 32;
// Column and reflector indices are below NC = 32, so every row of slots k >= 1 (rows >= 32) lies below them: tests
// such as "row > j" are written "k > 0 || lane > j", which the unrolled slot loops resolve at compile time for k >= 1
// (without it each slot paid a comparison and a predicated operation).
// Resident tiles per SM the register budget is capped for.
template <typename S, int W>
constexpr int kTileBlocksPerSM = W == 8 ? (sizeof(S) == 4 ? 4 : 2) : (sizeof(S) == 4 ? 2 : 1);
/// Levels with at least this many tiles per SM use the 8-warp shape.
constexpr int kManyTilesPerSM = 4;

/// Sums each of a warp's 4 values over its 32 lanes, the result in every lane: a reduce-scatter (the first two
/// butterfly stages exchange half of the values, so lane bits 4 and 3 select which sum a lane carries on) and one
/// broadcast per value: 10 shuffles and 6 additions against 20 and 20 for four warpSums.
template <typename S>
__device__ __forceinline__ void warpSum4(S (&a)[4], int lane) {
  const bool b4 = (lane & 16) != 0, b3 = (lane & 8) != 0;
  S k0 = b4 ? a[2] : a[0], k1 = b4 ? a[3] : a[1];
  const S s0 = b4 ? a[0] : a[2], s1 = b4 ? a[1] : a[3];
  k0 += __shfl_xor_sync(0xffffffffu, s0, 16);
  k1 += __shfl_xor_sync(0xffffffffu, s1, 16);
  S k = b3 ? k1 : k0;
  k += __shfl_xor_sync(0xffffffffu, b3 ? k0 : k1, 8);  // lane now carries value 2 b4 + b3, summed over 4 lanes
  k += __shfl_xor_sync(0xffffffffu, k, 4);
  k += __shfl_xor_sync(0xffffffffu, k, 2);
  k += __shfl_xor_sync(0xffffffffu, k, 1);
#pragma unroll
  for (int q = 0; q < 4; ++q) a[q] = __shfl_sync(0xffffffffu, k, (q >> 1) * 16 + (q & 1) * 8);
}

/// x_q <- (I - tau v v^T) x_q for a warp's register-resident columns q >= Q0 (v and x distributed over the warp like
/// the tile); columns q < Q0 are left alone. The columns are straight-line code, so their shuffle chains interleave
/// (guarding each column with a runtime branch made the compiler run them one after another), and a caller selects
/// Q0 with one warp-uniform switch (reflectFrom), so finished columns cost nothing.
template <typename S, int kCols, int Q0>
__device__ __forceinline__ void reflectColumns(const S (&v)[kSlots], S (&x)[kCols][kSlots], S tj, int lane) {
  S d[kCols];
#pragma unroll
  for (int q = 0; q < kCols; ++q) {
    d[q] = S(0);
    if (q < Q0) continue;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) d[q] += v[k] * x[q][k];
  }
  if constexpr (kCols == 4 && Q0 <= 1) {
    warpSum4(d, lane);
  } else {
#pragma unroll
    for (int q = Q0; q < kCols; ++q) d[q] = warpSum(d[q]);
  }
#pragma unroll
  for (int q = Q0; q < kCols; ++q) {
    const S dq = d[q] * tj;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) x[q][k] -= dq * v[k];
  }
}

/// reflectColumns for the columns q >= q0 (q0 warp-uniform; nothing for q0 >= kCols).
template <typename S, int kCols>
__device__ __forceinline__ void reflectFrom(int q0, const S (&v)[kSlots], S (&x)[kCols][kSlots], S tj, int lane) {
  if constexpr (kCols == 4) {
    switch (q0) {
      case 0: reflectColumns<S, 4, 0>(v, x, tj, lane); break;
      case 1: reflectColumns<S, 4, 1>(v, x, tj, lane); break;
      case 2: reflectColumns<S, 4, 2>(v, x, tj, lane); break;
      case 3: reflectColumns<S, 4, 3>(v, x, tj, lane); break;
      default: break;
    }
  } else if constexpr (kCols == 2) {
    if (q0 == 0) reflectColumns<S, 2, 0>(v, x, tj, lane);
    else if (q0 == 1) reflectColumns<S, 2, 1>(v, x, tj, lane);
  } else {
    static_assert(kCols == 1, "tile shapes: 4, 2 or 1 columns per warp");
    if (q0 == 0) reflectColumns<S, 1, 0>(v, x, tj, lane);
  }
}

/// Entry (r, c) of the explicit reflector matrix of a tile (unit lower trapezoid) from the packed factor's value.
template <typename S>
__device__ __forceinline__ S reflectorEntry(int r, int c, S packed) {
  return (r > c) ? packed : ((r == c) ? S(1) : S(0));
}

/// x <- H_0 ... H_{n-1} x for a warp's register-resident columns, the reflectors in shared memory (V, TR x NC, unit
/// diagonal explicit; sTau their coefficients), no barrier. kFromIdentity: column c of x is e_c, which the reflectors
/// j > c leave alone, so reflector j only runs on the columns c >= j.
template <typename S, int kTileWarps, bool kFromIdentity>
__device__ __forceinline__ void applySharedReflectors(const S* V, const S* sTau, int n, S (&x)[NC / kTileWarps][kSlots],
                                                      int warp, int lane) {
  constexpr int kColsPerWarp = NC / kTileWarps;
  for (int j = n - 1; j >= 0; --j) {
    const S tj = sTau[j];
    if (tj == S(0)) continue;
    S vr[kSlots];
#pragma unroll
    for (int k = 0; k < kSlots; ++k) vr[k] = V[j * TR + lane + 32 * k];
    if constexpr (kFromIdentity) {
      const int q0 = j <= warp ? 0 : (j - warp + kTileWarps - 1) / kTileWarps;  // the columns c >= j
      reflectFrom<S, kColsPerWarp>(q0, vr, x, tj, lane);
    } else {
      reflectColumns<S, kColsPerWarp, 0>(vr, x, tj, lane);  // columns >= n are zero and stay zero
    }
  }
}

/// Writes the first nr rows of a register-resident column to col (global memory).
template <typename S>
__device__ __forceinline__ void storeColumn(const S (&x)[kSlots], S* col, int nr, int lane) {
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const int r = lane + 32 * k;
    if (r < nr) col[r] = x[k];
  }
}

/// The Householder reflector of column jn from its register slot xq, given alpha = its entry in row jn and sq = the
/// squared norm of its tail below row jn (Eigen's makeHouseholder rule, outputs as makeReflector below).
template <typename S>
__device__ __forceinline__ void finishReflector(S (&xq)[kSlots], int jn, S alpha, S sq, S* v, S* sTau, int lane) {
  S tj, beta, scale;
  if (sq <= tinyNormSq<S>()) {
    tj = S(0);
    beta = alpha;
    scale = S(0);
  } else {
    beta = sqrt(alpha * alpha + sq);
    if (alpha >= S(0)) beta = -beta;
    tj = (beta - alpha) / beta;
    scale = S(1) / (alpha - beta);
  }
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    if (k > 0 || lane > jn) xq[k] *= scale;
    else if (lane == jn) xq[k] = beta;
    v[lane + 32 * k] = (k > 0 || lane > jn) ? xq[k] : ((lane == jn) ? S(1) : S(0));
  }
  if (lane == 0) sTau[jn] = tj;
}

/// The reflector of column j (Eigen's makeHouseholder: signs, zero-tail rule), built by the warp owning column j from
/// its registers: column j becomes (beta at row j, the essential part below), v (shared, TR entries) receives the
/// whole vector (zeros above row j, 1 at row j) and sTau[j] its coefficient.
template <typename S, int kTileWarps>
__device__ __forceinline__ void makeReflector(S (&x)[NC / kTileWarps][kSlots], int j, S* v, S* sTau, int lane) {
  constexpr int kColsPerWarp = NC / kTileWarps;
  const int qj = j / kTileWarps;
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    if (q != qj) continue;  // constant register indices: select the slot by comparison
    S sq = S(0);
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (k > 0 || lane > j) sq += x[q][k] * x[q][k];
    sq = warpSum(sq);
    const S alpha = __shfl_sync(0xffffffffu, x[q][0], j);  // row j < 32 lives in slot 0 of lane j
    finishReflector(x[q], j, alpha, sq, v, sTau, lane);
  }
}

/// Loads a tile into registers (the input: X itself, or src, level 0 read straight from the caller's matrix, checked
/// for NaN/Inf on the way), zero beyond its nr rows and n columns; with lastRow, records 1 + the last nonzero row of
/// each column, capped (launchScanColumns' record, for free here).
template <typename S, int kTileWarps>
__device__ __forceinline__ void loadTile(const S* X, Index ldx, const S* src, Index lds, Index r0, int nr, int n,
                                         int* notFinite, std::uint32_t* lastRow, std::uint32_t cap,
                                         S (&x)[NC / kTileWarps][kSlots], int warp, int lane) {
  constexpr int kColsPerWarp = NC / kTileWarps;
  const S* in = src ? src : X;
  const Index ldin = src ? lds : ldx;
  bool finite = true;
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int r = lane + 32 * k;
      x[q][k] = (c < n && r < nr) ? in[r0 + r + c * ldin] : S(0);
      finite = finite && isfinite(x[q][k]);
    }
  }
  if (notFinite && !__all_sync(0xffffffffu, finite) && lane == 0) *notFinite = 1;
  if (lastRow) {
#pragma unroll
    for (int q = 0; q < kColsPerWarp; ++q) {
      const int c = warp + kTileWarps * q;
      std::uint32_t last = 0;
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        const Index row = r0 + lane + 32 * k + 1;  // rows grow with k: the last hit is the lane's largest
        if (x[q][k] != S(0)) last = static_cast<std::uint32_t>(row < Index(cap) ? row : Index(cap));
      }
      for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
      // Read first: once a column's value reaches the cap (after the first tiles) no block issues the atomic.
      if (lane == 0 && c < n && last > *(volatile std::uint32_t*)(lastRow + c)) atomicMax(lastRow + c, last);
    }
  }
}

/// A factored tile's outputs from the owning warps' registers: the packed columns (unless kFormQ, or storeAll is
/// false and t > 0), its R into Rout and its coefficients into tau.
template <typename S, int kTileWarps, bool kFormQ>
__device__ __forceinline__ void storeTileResults(S* X, Index ldx, Index r0, int nr, int n, Index t, bool storeAll,
                                                 S* tau, S* Rout, Index ldr, const S* sTau,
                                                 const S (&x)[NC / kTileWarps][kSlots], int warp, int lane) {
  constexpr int kColsPerWarp = NC / kTileWarps;
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c >= n) continue;
    if (!kFormQ && (storeAll || t == 0)) storeColumn(x[q], X + r0 + c * ldx, nr, lane);
    if (lane < n) Rout[t * n + lane + c * ldr] = (lane <= c) ? x[q][0] : S(0);
    if (lane == 0) tau[t * n + c] = sTau[c];
  }
}

/// The tile's explicit Q into X, column c = H_0 ... H_{n-1} e_c = H_0 ... H_c e_c (the reflectors j > c are zero in
/// row c and leave e_c alone): what tsqrTileApplyQKernel computes from C = I (the same operations in the same order
/// for the 32-warp shape, which a single tile gets), without its launch, its identity C and its reading the
/// reflectors back. V holds the reflectors (TR x NC, unit diagonal explicit) and must be complete; x is overwritten.
template <typename S, int kTileWarps>
__device__ __forceinline__ void formTileQ(S* X, Index ldx, Index r0, int nr, int n, const S* V, const S* sTau,
                                          S (&x)[NC / kTileWarps][kSlots], int warp, int lane) {
  constexpr int kColsPerWarp = NC / kTileWarps;
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) x[q][k] = (c < n && k == 0 && lane == c) ? S(1) : S(0);
  }
  applySharedReflectors<S, kTileWarps, true>(V, sTau, n, x, warp, lane);
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c < n) storeColumn(x[q], X + r0 + c * ldx, nr, lane);
  }
}

// ---- The tile QR: producer/consumer barriers -----------------------------------------------------------------------
// Look-ahead by one column: in step j every warp applies reflector j to its columns, and the warp owning column j + 1
// builds reflector j + 1 from it at once. A __syncthreads per step (the kernel until 2026-11-26) made step j + 1 wait
// until every warp had applied reflector j to all of its columns, although only the owner of column j + 1 needs to
// have done so. Here each reflector has its own column of shared memory (no buffer is reused, so nobody waits for a
// slower reader) and its own hardware barrier instance: the warp that builds reflector j arrives (bar.arrive, no
// wait) and the warps that still own columns > j wait for it (bar.sync), so the critical path of a step is the
// owner's own work and the other warps catch up in its shadow. With kFusedNorm the owner of column j + 1 also gets
// the squared norm of that column's updated tail from the same warp reduction as the reflection (downdating, below),
// which removes a second reduction from the critical path.

__device__ __forceinline__ void barArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void barSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
/// Hardware barrier of step j (ids 1-4; 0 is __syncthreads'). A warp arrives at step j + 2 only after step j has
/// completed (it waited at step j + 1, or built reflector j + 1 after waiting at step j), so two ids would suffice.
__device__ __forceinline__ int stepBarrier(int j) { return 1 + (j & 3); }
/// Threads taking part in step j: the warps that own a column >= j (the builder of reflector j and its users).
template <int kTileWarps>
__device__ __forceinline__ int stepThreads(int j, int n) { return 32 * min(kTileWarps, n - j); }


/// Reflector j (v, tj) applied to column slot Q, which holds column jn = j + 1, fused with building reflector jn.
/// One warp reduction gives v^T x and, over the rows below jn, x^T x, v^T x and v^T v of the column before the
/// update; the tail's squared norm after x <- x - d v is then x^T x - 2 d v^T x + d^2 v^T v. That sum cancels when the
/// column is nearly in the span of the previous ones, so it is kept only when it is at least half of the sum of its
/// terms' magnitudes (relative error then within a few times a direct sum's); otherwise, and always for an exactly
/// zero tail (LAPACK's tau = 0 rule needs the exact zero), the tail is summed again directly.
template <typename S, int kCols, int Q>
__device__ __forceinline__ void reflectAndBuildNextAt(const S (&v)[kSlots], S (&x)[kCols][kSlots], S tj, int jn,
                                                      S* vOut, S* sTau, int lane) {
  S p[4] = {S(0), S(0), S(0), S(0)};
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const S xv = x[Q][k], vv = v[k];
    p[0] += vv * xv;
    if (k > 0 || lane > jn) {
      p[1] += xv * xv;
      p[2] += vv * xv;
      p[3] += vv * vv;
    }
  }
  const S xj = __shfl_sync(0xffffffffu, x[Q][0], jn), vj = __shfl_sync(0xffffffffu, v[0], jn);  // row jn < 32
  warpSum4(p, lane);
  const S d = p[0] * tj;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) x[Q][k] = fma(-d, v[k], x[Q][k]);
  const S alpha = fma(-d, vj, xj);  // = x[Q][0] of lane jn, the same operation
  const S cross = d * p[2];
  S sq = fma(d, fma(d, p[3], S(-2) * p[2]), p[1]);
  const S terms = p[1] + S(2) * fabs(cross) + d * d * p[3];
  if (!(sq >= S(0.5) * terms) || terms == S(0)) {
    sq = S(0);
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (k > 0 || lane > jn) sq += x[Q][k] * x[Q][k];
    sq = warpSum(sq);
  }
  finishReflector(x[Q], jn, alpha, sq, vOut, sTau, lane);
}

/// Whether a tile shape uses the fused norm. Measured on the H100 (2026-11-26, A/B in one process per variant, logs/
/// 2026-11-26-h100-tile-qr-flow-ab.log): producer/consumer barriers alone took 16384^2 TF32 from 120.1 to 115 ms and
/// FP64 from 296 to 290 ms; the fused norm on top, 112 ms for TF32 and 11.7 to 11.3 ms for 8388608 x 32 double, but
/// 301 ms for FP64 16384^2: the double 32-warp shape has 64 registers per thread and spills with it. Double hence
/// uses 16 warps where tiles are few (kFewTilesWarps), fused norm included: FP64 16384^2 293.6 to 287.4 ms.
template <typename S, int kTileWarps>
constexpr bool kFusedNorm = sizeof(S) == 4 || kTileWarps != 32;

/// The tile QR's shape for levels with few tiles (and the top of a tree): 32 warps x 1 column for float; 16 x 2 for
/// double, whose fused norm does not fit the 64 registers a 1024-thread block leaves.
template <typename S>
constexpr int kFewTilesWarps = sizeof(S) == 4 ? 32 : 16;

/// Step j of the tile QR for one warp that owns a column > j: wait for reflector j (the builder, warp j % kTileWarps,
/// only syncs its own lanes: `self`) and load it.
template <typename S, int kTileWarps>
__device__ __forceinline__ S waitForReflector(int j, bool self, int n, const S* V, const S* sTau, S (&vr)[kSlots],
                                              int lane) {
  if (self) __syncwarp();
  else barSync(stepBarrier(j), stepThreads<kTileWarps>(j, n));
#pragma unroll
  for (int k = 0; k < kSlots; ++k) vr[k] = V[j * TR + lane + 32 * k];
  return sTau[j];
}

/// Phase Q of a warp in tsqrTileQRKernel: the steps j in [c_{Q-1}, c_Q) (c_q = warp + kTileWarps q, the warp's
/// columns; c_{-1} = 0), in which the warp's first column after j is its slot Q, so the slots to update are known at
/// compile time; the last step also builds reflector c_Q, and the next phase follows. (One loop over all steps with
/// the first slot as a runtime value spent about a quarter of the kernel's instructions on finding it and on the
/// loop's own bookkeeping: ncu source counters, H100, 2026-11-26.) A warp without column Q is done.
template <typename S, int kTileWarps, int Q>
__device__ __forceinline__ void tileQRPhase(S (&x)[NC / kTileWarps][kSlots], S* V, S* sTau, int n, int warp,
                                            int lane) {
  constexpr int kCols = NC / kTileWarps;
  const int cq = warp + kTileWarps * Q;
  if (cq >= n) return;
  const int j0 = Q == 0 ? 0 : cq - kTileWarps;  // for Q > 0 the warp built reflector j0 itself
  S vr[kSlots];
  for (int j = j0; j + 1 < cq; ++j) {
    const S tj = waitForReflector<S, kTileWarps>(j, Q > 0 && j == j0, n, V, sTau, vr, lane);
    reflectColumns<S, kCols, Q>(vr, x, tj, lane);
  }
  if (cq > 0) {  // step cq - 1: column cq (slot Q) is updated first and gives reflector cq
    const int j = cq - 1;
    const S tj = waitForReflector<S, kTileWarps>(j, Q > 0 && j == j0, n, V, sTau, vr, lane);
    if constexpr (kFusedNorm<S, kTileWarps>) {
      reflectAndBuildNextAt<S, kCols, Q>(vr, x, tj, cq, V + cq * TR, sTau, lane);
    } else {
      reflectColumns<S, kCols, Q>(vr, x, tj, lane);
      makeReflector<S, kTileWarps>(x, cq, V + cq * TR, sTau, lane);
    }
    if (stepThreads<kTileWarps>(cq, n) > 32) barArrive(stepBarrier(cq), stepThreads<kTileWarps>(cq, n));
    if constexpr (kFusedNorm<S, kTileWarps> && Q + 1 < kCols) reflectColumns<S, kCols, Q + 1>(vr, x, tj, lane);
  }
  if constexpr (Q + 1 < kCols) tileQRPhase<S, kTileWarps, Q + 1>(x, V, sTau, n, warp, lane);
}

// One shape of the tile QR, launched by launchTsqrTileQR. Dynamic shared memory: TR x NC scalars, the reflectors.
// kFormQ (one tile, the top of a tree; launchTsqrTileQR's formQ) is a separate instantiation, so that the shapes of the
// wide levels compile exactly as without it. The shapes for few tiles (kFewTilesWarps) are budgeted for one block
// per SM (with two per SM, the float 32-warp shape spilled).
template <typename S, int kTileWarps, bool kFormQ>
__global__ void __launch_bounds__(32 * kTileWarps, (kFormQ || kTileWarps != 8 ? 1 : kTileBlocksPerSM<S, kTileWarps>))
    tsqrTileQRKernel(S* __restrict__ X, Index ldx, Index m, int n, Index tiles, S* __restrict__ tau,
                     S* __restrict__ Rout, Index ldr, const S* __restrict__ src, Index lds, int* notFinite,
                     bool storeAll, std::uint32_t* lastRow, std::uint32_t cap) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* V = reinterpret_cast<S*>(smem);  // column j: reflector j, unit diagonal explicit, zeros above
  __shared__ S sTau[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTileWarps;

  S x[kColsPerWarp][kSlots];
  loadTile<S, kTileWarps>(X, ldx, src, lds, r0, nr, n, notFinite, lastRow, cap, x, warp, lane);

  if (warp == 0 && n > 0) {
    makeReflector<S, kTileWarps>(x, 0, V, sTau, lane);
    if (stepThreads<kTileWarps>(0, n) > 32) barArrive(stepBarrier(0), stepThreads<kTileWarps>(0, n));
  }
  tileQRPhase<S, kTileWarps, 0>(x, V, sTau, n, warp, lane);
  storeTileResults<S, kTileWarps, kFormQ>(X, ldx, r0, nr, n, t, storeAll, tau, Rout, ldr, sTau, x, warp, lane);
  if constexpr (!kFormQ) return;
  __syncthreads();  // every reflector is in V
  formTileQ<S, kTileWarps>(X, ldx, r0, nr, n, V, sTau, x, warp, lane);
}

/// A tile's packed reflectors (X, rows r0 .. r0 + nr - 1, n columns) into a warp's registers (the tile layout, zero
/// beyond nr and n), then into V explicitly (TR x NC: unit diagonal, zeros above it; columns >= n not written). All
/// loads come first: X may alias memory a caller writes later (the fused level-0 kernel writes A, which may be X), so
/// the compiler keeps each load before the shared stores that follow it in program order; loaded and stored in one
/// loop, the loads went out one at a time (ncu: most stall samples of the fused kernel sat on those stores).
template <typename S, int kTileWarps>
__device__ __forceinline__ void loadTileReflectors(const S* X, Index ldx, Index r0, int nr, int n, S* V,
                                                   S (&x)[NC / kTileWarps][kSlots], int warp, int lane) {
  constexpr int kColsPerWarp = NC / kTileWarps;
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int r = lane + 32 * k;
      x[q][k] = (c < n && r < nr) ? X[r0 + r + c * ldx] : S(0);
    }
  }
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c < n) {
#pragma unroll
      for (int k = 0; k < kSlots; ++k) V[c * TR + lane + 32 * k] = k > 0 ? x[q][k] : reflectorEntry(lane, c, x[q][k]);
    }
  }
}

// X_tile <- H_0 ... H_{n-1} [C_t; 0]. The columns of the result are independent: each warp keeps its 4 columns in
// registers and runs all n reflectors on them; the reflectors sit in shared memory (V, TR x NC, dynamic), with no
// barrier inside the loop. On return x holds the tile's rows of Q for the warp's columns; V is still intact.
template <typename S, int kTileWarps>
__device__ __forceinline__ void applyTileReflectors(const S* X, Index ldx, Index r0, int nr, int n,
                                                    Index t, const S* __restrict__ tau, const S* __restrict__ C,
                                                    Index ldc, S* V, S* sTau,
                                                    S (&x)[NC / kTileWarps][kSlots]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTileWarps;
  loadTileReflectors<S, kTileWarps>(X, ldx, r0, nr, n, V, x, warp, lane);
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) x[q][k] = (c < n && k == 0 && lane < n) ? C[t * n + lane + c * ldc] : S(0);
    if (c < n && lane == 0) sTau[c] = tau[t * n + c];
  }
  __syncthreads();
  applySharedReflectors<S, kTileWarps, false>(V, sTau, n, x, warp, lane);
}

// The apply step of a level: the result overwrites the tile in X.
template <typename S, int kTileWarps>
__global__ void __launch_bounds__(32 * kTileWarps, (kTileBlocksPerSM<S, kTileWarps>))
    tsqrTileApplyQKernel(S* __restrict__ X, Index ldx, Index m, int n, Index tiles, const S* __restrict__ tau,
                         const S* __restrict__ C, Index ldc) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* V = reinterpret_cast<S*>(smem);  // TR x n, unit lower trapezoid made explicit
  __shared__ S sTau[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32;
  constexpr int kColsPerWarp = NC / kTileWarps;

  S x[kColsPerWarp][kSlots];
  applyTileReflectors<S, kTileWarps>(X, ldx, r0, nr, n, t, tau, C, ldc, V, sTau, x);
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c < n) storeColumn(x[q], X + r0 + c * ldx, nr, threadIdx.x % 32);
  }
}

// Level 0 of the explicit Q fused with ReconstructWY's row pass. With Q S = I - Y T Y1^T, the rows below n are
// Y2 = -Q2 U^{-1}, and a tile's rows of Q are H_0 ... H_{n-1} [C_t; 0], so its rows of Y are -H_0 ... H_{n-1}
// [C_t U^{-1}; 0]: the n x n block C_t is multiplied by U^{-1} (from tsqrTopRowsLUKernel) before the reflectors are
// applied, instead of a triangular solve on each of the tile's rows of Q after them (until 2026-11-27: one thread
// per row, after a transpose of Q through shared memory, about a third of the kernel's multiply-adds; a solve on C_t
// by one warp, tried first, left the other warps waiting on its chain of divisions). Then the tile's reflectors run
// on [D_t; 0] in registers as in tsqrTileApplyQKernel, and the rows go out negated as columns; tile 0's rows i < n
// receive the packed factor instead (L below the diagonal, s_i R(i,:) on and above it), and tile 0 writes
// tau_i = U_ii s_i. Q itself is never stored (a write and a read of m n values saved). LU and s hold the signed LU of
// Q's top n x n block. X and A may alias (no __restrict__): a block reads its own tile before the barrier and writes
// only its own rows after it.
template <typename S, int kTileWarps>
__global__ void __launch_bounds__(32 * kTileWarps, (kTileBlocksPerSM<S, kTileWarps>))
    tsqrTileApplyQReconstructKernel(const S* X, Index ldx, Index m, int n, Index tiles,
                                    const S* __restrict__ tauTiles, const S* __restrict__ C, Index ldc,
                                    const S* __restrict__ LU, Index ldlu, const S* __restrict__ Uinv, Index ldui,
                                    const S* __restrict__ s, const S* __restrict__ R, Index ldr, S* A, Index lda,
                                    S* __restrict__ tau) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* V = reinterpret_cast<S*>(smem);  // the tile's reflectors, unit diagonal explicit
  __shared__ S sTau[NC];
  __shared__ S sUi[NC][NC + 1];  // sUi[k][j] = U^{-1}(k, j), zero beyond n
  __shared__ S sC[NC][NC + 1];   // C_t (row, column), zero beyond n
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTileWarps;

  for (int idx = threadIdx.x; idx < NC * NC; idx += blockDim.x) {
    const int r = idx % NC, c = idx / NC;  // consecutive threads read consecutive rows of the column-major U^{-1}
    sUi[r][c] = (r < n && c < n && r <= c) ? Uinv[r + c * ldui] : S(0);
  }
  S x[kColsPerWarp][kSlots];
  loadTileReflectors<S, kTileWarps>(X, ldx, r0, nr, n, V, x, warp, lane);  // (A may alias X: loads first)
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c < n && lane == 0) sTau[c] = tauTiles[t * n + c];
    sC[lane][c] = (c < n && lane < n) ? C[t * n + lane + c * ldc] : S(0);
  }
  __syncthreads();
  // Row `lane` of D_t = C_t U^{-1} for the warp's columns (sUi is zero below the diagonal; the unrolled sums over all
  // of k run the warp's columns side by side).
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) x[q][k] = S(0);
  }
#pragma unroll
  for (int k = 0; k < NC; ++k) {
    const S ck = sC[lane][k];
#pragma unroll
    for (int q = 0; q < kColsPerWarp; ++q) x[q][0] += ck * sUi[k][warp + kTileWarps * q];
  }
  applySharedReflectors<S, kTileWarps, false>(V, sTau, n, x, warp, lane);

#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c >= n) continue;
    S* col = A + r0 + c * lda;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int r = lane + 32 * k;
      if (r >= nr) continue;
      const Index i = r0 + r;  // i < n only in tile 0, slot 0
      if (k > 0 || i >= Index(n)) col[r] = -x[q][k];
      else col[r] = (c < r) ? LU[r + c * ldlu] : s[r] * R[r + c * ldr];
    }
  }
  if (t == 0)
    for (int j = threadIdx.x; j < n; j += blockDim.x) tau[j] = LU[j + j * ldlu] * s[j];
}

// One block. M = -Q1, then at step k the sign s_k = sign(M_kk) (1 for zero) makes the pivot s_k + M_kk >= 1 in
// magnitude: the LU of S - Q1 needs no pivoting. With T non-null, also T = U S L^{-T}, the upper triangular factor of
// the compact WY form (Q1 S = I - Y1 T Y1^T with Y1 = L, and (S - Q1) S = L U S), one thread per row of T.
template <typename S>
__global__ void signedLUKernel(S* LU, Index ld, int n, S* s, S* T, Index ldt) {
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int c = idx / n, i = idx - c * n;
    LU[i + c * ld] = -LU[i + c * ld];
  }
  __syncthreads();
  for (int k = 0; k < n; ++k) {
    if (threadIdx.x == 0) {
      const S mkk = LU[k + k * ld];
      const S sk = (mkk >= S(0)) ? S(1) : S(-1);
      s[k] = sk;
      LU[k + k * ld] = mkk + sk;
    }
    __syncthreads();
    const S piv = LU[k + k * ld];
    for (int i = k + 1 + threadIdx.x; i < n; i += blockDim.x) LU[i + k * ld] /= piv;
    __syncthreads();
    const int rest = n - k - 1;
    for (int idx = threadIdx.x; idx < rest * rest; idx += blockDim.x) {
      const int c = k + 1 + idx / rest, i = k + 1 + idx % rest;
      LU[i + c * ld] -= LU[i + k * ld] * LU[k + c * ld];
    }
    __syncthreads();
  }
  if (!T) return;
  // Row r of T L^T = row r of U S: (T L^T)(r, j) = T(r, j) + sum_{k < j} T(r, k) L(j, k), so the row is solved
  // left to right; T(r, k) = 0 for k < r.
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    for (int j = 0; j < r; ++j) T[r + j * ldt] = S(0);
    for (int j = r; j < n; ++j) {
      S acc = LU[r + j * ld] * s[j];
      for (int k = r; k < j; ++k) acc -= T[r + k * ldt] * LU[j + k * ld];
      T[r + j * ldt] = acc;
    }
  }
}

/// The signed LU of launchSignedLU for n <= 32 by one warp, without a block barrier: lane i keeps row i of M in
/// registers (constant indices, the loops are unrolled), the pivot row is broadcast by shuffles, and T's rows are
/// solved independently from L in shared memory (every lane reads the same entry at a time: broadcasts). Q1(i, c) =
/// Q1[i + c * ldq] on entry (global or shared memory); writes L and U to LU (ld), the signs to s and, with T non-null,
/// T = U S L^{-T}. The 256-thread signedLUKernel pays a block barrier per step and re-reads global memory: 38 us per
/// call on the H100 (TCQR_TRACE, 2026-11-26), on every TSQR panel. (Keeping M in shared memory instead, one row per
/// lane, took 28 us more per call inside tsqrTopRowsLUKernel: its dynamic loops serialise on load latency.)
/// With uOut (shared, 32 x 33), U is published there for upperInverseWarp, and the warp then arrives at hardware
/// barrier 1 with a count of 64: the caller must run exactly one other warp that waits on barrier 1 with 64
/// (tsqrTopRowsLUKernel's warp 1), and barrier 1 must have no other use in that kernel.
template <typename S>
__device__ __forceinline__ void signedLUWarp(const S* Q1, Index ldq, int n, S* LU, Index ld, S* s, S* T, Index ldt,
                                             int lane, S (*uOut)[NC + 1] = nullptr) {
  __shared__ S sL[NC][NC + 1];  // sL[j][k] = L(j, k), k < j
  __shared__ S sS[NC];
  S row[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) row[c] = (lane < n && c < n) ? -Q1[lane + c * ldq] : S(0);
  S sign = S(1), pivot = S(1);
#pragma unroll
  for (int k = 0; k < NC; ++k) {
    if (k >= n) break;
    const S mkk = __shfl_sync(0xffffffffu, row[k], k);
    const S sk = (mkk >= S(0)) ? S(1) : S(-1);
    const S piv = mkk + sk;
    const S l = row[k] / piv;
#pragma unroll
    for (int c = k + 1; c < NC; ++c) {
      const S ukc = __shfl_sync(0xffffffffu, row[c], k);
      if (lane > k) row[c] -= l * ukc;
    }
    if (lane > k) row[k] = l;
    if (lane == k) {
      row[k] = piv;
      sign = sk;
      pivot = piv;
    }
  }
  if (lane < n) {
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < n) LU[lane + c * ld] = row[c];
    s[lane] = sign;
  }
  if (uOut) {  // U (identity beyond n) with 1 / U_ii on the diagonal, for upperInverseWarp, which waits on barrier 1
    const S rdiag = S(1) / pivot;  // (one division per lane, outside the unrolled loop)
#pragma unroll
    for (int k = 0; k < NC; ++k)
      uOut[lane][k] = (lane < n && k < n) ? ((k > lane) ? row[k] : ((k == lane) ? rdiag : S(0))) : S(lane == k);
    __syncwarp();
    barArrive(1, 64);
  }
  if (T) {
#pragma unroll
    for (int k = 0; k < NC; ++k) sL[lane][k] = (k < lane) ? row[k] : S(0);
    sS[lane] = sign;
    __syncwarp();
    // Row r = lane of T: T(r, j) = U(r, j) s_j - sum_{k < j} T(r, k) L(j, k), T(r, k) = 0 for k < r.
    S t[NC];
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      S acc = (j >= lane) ? row[j] * sS[j] : S(0);
#pragma unroll
      for (int k = 0; k < j; ++k) acc -= t[k] * sL[j][k];
      t[j] = (j >= lane) ? acc : S(0);
    }
    if (lane < n) {
#pragma unroll
      for (int j = 0; j < NC; ++j)
        if (j < n) T[lane + j * ldt] = t[j];
    }
  }
}

/// U^{-1} (n x n, ldui; upper triangular, zeros written below the diagonal) by one warp from sU (32 x 32, U
/// with 1 / U_ii on its diagonal, identity beyond n): lane j solves U x = e_j by back substitution (x_i = 0 for
/// i > j, so the sums may run to NC). Each sum adds the newest x last and the reciprocals are formed up front, so the
/// dependent chain is one multiply-add and one multiplication per row. It runs beside warp 0's T and is on every
/// TSQR panel's critical path (docs/DESIGN.md, ReconstructWY).
template <typename S>
__device__ __forceinline__ void upperInverseWarp(const S (*sU)[NC + 1], int n, S* Uinv, Index ldui, int lane) {
  S xi[NC];
#pragma unroll
  for (int i = NC - 1; i >= 0; --i) {
    S acc = (i == lane) ? S(1) : S(0);
#pragma unroll
    for (int k = NC - 1; k > i; --k) acc -= sU[i][k] * xi[k];
    xi[i] = (i <= lane) ? acc * sU[i][i] : S(0);
  }
  if (lane < n) {
#pragma unroll
    for (int i = 0; i < NC; ++i)
      if (i < n) Uinv[i + lane * ldui] = xi[i];
  }
}

template <typename S>
__global__ void __launch_bounds__(32) signedLUWarpKernel(S* LU, Index ld, int n, S* s, S* T, Index ldt) {
  signedLUWarp<S>(LU, ld, n, LU, ld, s, T, ldt, threadIdx.x);  // each lane reads its row before writing it
}

/// Warps of tsqrTopRowsLUKernel: 16 x 2 columns, so that warp 0's signed LU keeps its rows in registers (128 per
/// thread; with 32 warps it would have 64).
constexpr int kTopRowsWarps = 16;

// ReconstructWY's first step in one launch: Q1, the top n x n block of tile 0's H_0 ... H_{n-1} [C_0; 0] (the top of
// the level-0 Q), formed as tsqrTileApplyQKernel does, goes to shared memory, and warp 0 runs the signed LU on it
// (signedLUWarp). One block; this replaced a launch computing Q1 into global memory followed by signedLUWarpKernel.
template <typename S>
__global__ void __launch_bounds__(32 * kTopRowsWarps, 1)
    tsqrTopRowsLUKernel(const S* __restrict__ X, Index ldx, Index m, int n, Index tiles, const S* __restrict__ tau,
                        const S* __restrict__ C, Index ldc, S* __restrict__ LU, Index ldlu, S* __restrict__ s,
                        S* __restrict__ T, Index ldt, S* __restrict__ Uinv, Index ldui) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* V = reinterpret_cast<S*>(smem);  // the reflectors, then Q1 (ld NC + 1)
  __shared__ S sTau[NC];
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, 1));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTopRowsWarps;
  S x[kColsPerWarp][kSlots];
  applyTileReflectors<S, kTopRowsWarps>(X, ldx, 0, nr, n, 0, tau, C, ldc, V, sTau, x);
  __syncthreads();  // every warp is done reading V
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) V[lane + (warp + kTopRowsWarps * q) * (NC + 1)] = x[q][0];  // rows 0..31
  __syncthreads();
  // Warp 0 runs the LU and then T; warp 1 computes U^{-1} meanwhile, as soon as warp 0 has published U.
  __shared__ S sU[NC][NC + 1];
  if (warp == 0) signedLUWarp<S>(V, NC + 1, n, LU, ldlu, s, T, ldt, lane, sU);
  else if (warp == 1) {
    barSync(1, 64);
    upperInverseWarp<S>(sU, n, Uinv, ldui, lane);
  }
}

template <typename K>
void allowSharedMemory(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    TCQR_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

/// True when a level has enough tiles for the 8-warp shape to fill the GPU.
bool manyTiles(Index tiles) {
  int dev = 0, sms = 0;
  TCQR_CHECK(cudaGetDevice(&dev));
  TCQR_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return tiles >= Index(kManyTilesPerSM) * sms;
}

void checkTileShape(Index m, Index n, Index tiles, const char* who) {
  if (n > NC || (m + tiles - 1) / tiles > TR)
    detail::throwError(ErrorSource::Kernel, 0, "invalid tile shape", who, __FILE__, __LINE__);
}

template <typename S, int kTileWarps, bool kFormQ>
void launchTileQRShape(unsigned grid, cudaStream_t stream, S* X, Index ldx, Index m, Index n, Index tiles, S* tau,
                       S* Rout, Index ldr, const S* src, Index lds, int* notFinite, bool storeAll,
                       std::uint32_t* lastRow, std::uint32_t cap) {
  const size_t bytes = sizeof(S) * TR * NC;  // the reflectors
  allowSharedMemory(tsqrTileQRKernel<S, kTileWarps, kFormQ>, bytes);
  tsqrTileQRKernel<S, kTileWarps, kFormQ><<<grid, 32 * kTileWarps, bytes, stream>>>(
      X, ldx, m, static_cast<int>(n), tiles, tau, Rout, ldr, src, lds, notFinite, storeAll, lastRow, cap);
}

}  // namespace

template <typename S>
void launchTsqrTileQR(S* X, Index ldx, Index m, Index n, Index tiles, S* tau, S* Rout, Index ldr, cudaStream_t stream,
                      const S* src, Index lds, int* notFinite, bool storeAll, std::uint32_t* lastRow,
                      std::uint32_t cap, bool formQ) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrTileQR");
  const unsigned grid = static_cast<unsigned>(tiles);
  if (formQ && !storeAll && src)
    detail::throwError(ErrorSource::Kernel, 0, "formQ needs storeAll", "launchTsqrTileQR", __FILE__, __LINE__);
  const bool store = formQ || storeAll || !src;
  constexpr int kFew = kFewTilesWarps<S>;
  if (formQ)  // the top of a tree: few tiles, the latency shape
    launchTileQRShape<S, kFew, true>(grid, stream, X, ldx, m, n, tiles, tau, Rout, ldr, src, lds, notFinite, store,
                                     lastRow, cap);
  else if (manyTiles(tiles))
    launchTileQRShape<S, 8, false>(grid, stream, X, ldx, m, n, tiles, tau, Rout, ldr, src, lds, notFinite, store,
                                   lastRow, cap);
  else
    launchTileQRShape<S, kFew, false>(grid, stream, X, ldx, m, n, tiles, tau, Rout, ldr, src, lds, notFinite, store,
                                      lastRow, cap);
  TCQR_CHECK_LAUNCH("tsqrTileQRKernel");
}

template <typename S>
void launchTsqrTileApplyQ(S* X, Index ldx, Index m, Index n, Index tiles, const S* tau, const S* C, Index ldc,
                          cudaStream_t stream) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrTileApplyQ");
  const size_t bytes = sizeof(S) * TR * NC;
  const unsigned grid = static_cast<unsigned>(tiles);
  if (manyTiles(tiles)) {
    allowSharedMemory(tsqrTileApplyQKernel<S, 8>, bytes);
    tsqrTileApplyQKernel<S, 8><<<grid, 8 * 32, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, C, ldc);
  } else {
    allowSharedMemory(tsqrTileApplyQKernel<S, 32>, bytes);
    tsqrTileApplyQKernel<S, 32><<<grid, 32 * 32, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, C, ldc);
  }
  TCQR_CHECK_LAUNCH("tsqrTileApplyQKernel");
}

template <typename S>
void launchTsqrApplyQReconstructWY(const S* X, Index ldx, Index m, Index n, Index tiles, const S* tauTiles, const S* C,
                                   Index ldc, const S* LU, Index ldlu, const S* Uinv, Index ldui, const S* s,
                                   const S* R, Index ldr, S* A, Index lda, S* tau, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrApplyQReconstructWY");
  const size_t bytes = sizeof(S) * TR * NC;
  const unsigned grid = static_cast<unsigned>(tiles);
  allowSharedMemory(tsqrTileApplyQReconstructKernel<S, 8>, bytes);
  tsqrTileApplyQReconstructKernel<S, 8><<<grid, 8 * 32, bytes, stream>>>(
      X, ldx, m, static_cast<int>(n), tiles, tauTiles, C, ldc, LU, ldlu, Uinv, ldui, s, R, ldr, A, lda, tau);
  TCQR_CHECK_LAUNCH("tsqrTileApplyQReconstructKernel");
}

template <typename S>
void launchTsqrTopRowsLU(const S* X, Index ldx, Index m, Index n, Index tiles, const S* tau, const S* C, Index ldc,
                         S* LU, Index ldlu, S* s, S* T, Index ldt, S* Uinv, Index ldui, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrTopRowsLU");
  const size_t bytes = sizeof(S) * TR * NC;
  allowSharedMemory(tsqrTopRowsLUKernel<S>, bytes);
  tsqrTopRowsLUKernel<S><<<1, 32 * kTopRowsWarps, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, C,
                                                                   ldc, LU, ldlu, s, T, ldt, Uinv, ldui);
  TCQR_CHECK_LAUNCH("tsqrTopRowsLUKernel");
}

template <typename S>
void launchSignedLU(S* LU, Index ld, Index n, S* s, cudaStream_t stream, S* T, Index ldt) {
  if (n <= 0) return;
  if (n <= NC) {
    signedLUWarpKernel<S><<<1, 32, 0, stream>>>(LU, ld, static_cast<int>(n), s, T, ldt);
    TCQR_CHECK_LAUNCH("signedLUWarpKernel");
    return;
  }
  signedLUKernel<S><<<1, 256, 0, stream>>>(LU, ld, static_cast<int>(n), s, T, ldt);
  TCQR_CHECK_LAUNCH("signedLUKernel");
}

#define TCQR_INSTANTIATE(S)                                                                                        \
  template void launchTsqrTileQR<S>(S*, Index, Index, Index, Index, S*, S*, Index, cudaStream_t, const S*, Index,  \
                                    int*, bool, std::uint32_t*, std::uint32_t, bool);                              \
  template void launchTsqrTileApplyQ<S>(S*, Index, Index, Index, Index, const S*, const S*, Index, cudaStream_t);   \
  template void launchTsqrApplyQReconstructWY<S>(const S*, Index, Index, Index, Index, const S*, const S*, Index,   \
                                                 const S*, Index, const S*, Index, const S*, const S*, Index, S*,   \
                                                 Index, S*, cudaStream_t);                                          \
  template void launchSignedLU<S>(S*, Index, Index, S*, cudaStream_t, S*, Index);                                 \
  template void launchTsqrTopRowsLU<S>(const S*, Index, Index, Index, Index, const S*, const S*, Index, S*, Index, \
                                       S*, S*, Index, S*, Index, cudaStream_t);
TCQR_INSTANTIATE(float)
TCQR_INSTANTIATE(double)
#undef TCQR_INSTANTIATE

}  // namespace kernels
}  // namespace tcqr
