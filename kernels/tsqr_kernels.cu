// tsqr_kernels.cu - the TSQR panel (TPDS'25 §V.A; PPoPP'23 §5.1-5.2): a Householder QR of one tile per thread block
// with the column distribution of Fig. 4 (right): warp w owns columns w, w+8, ..., so every reduction is one warp's
// shuffle, and ReconstructWY (Ballard et al.) as a signed LU plus one pass over the rows of the explicit Q.
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "../src/CudaCheck.hpp"
#include "../src/Tunables.hpp"
#include "../src/kernels.hpp"

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

template <typename S>
__device__ __forceinline__ S tinyNormSq();
template <>
__device__ __forceinline__ float tinyNormSq<float>() { return FLT_MIN; }
template <>
__device__ __forceinline__ double tinyNormSq<double>() { return DBL_MIN; }

// Register-resident tile (TPDS'25 Fig. 4, right): column c belongs to warp c % kTileWarps, which keeps it in
// registers as slot c / kTileWarps; lane l holds rows l, l+32, ..., l+224 (kSlots values). Every reduction is a
// shuffle inside one warp; the reflector of step j is published through a double-buffered shared vector, so one
// barrier per column suffices. 8 warps x 4 columns (rather than 32 warps x 1) lets several tiles share an SM and
// gives each warp 4 independent columns to overlap.
//
// Two shapes of the same kernel, chosen per TSQR level (launchers below): 8 warps x 4 columns for levels with many
// tiles (several tiles share an SM, each warp overlaps 4 independent columns: level 0 of 8388608 x 32 float went from
// 4.5 to 2.8 ms), 32 warps x 1 column for levels with few tiles, where only a tile's latency counts (30 us against
// 39 us for 8 warps).
constexpr int kSlots = TR / 32;
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
  } else {
    static_assert(kCols == 1, "tile shapes: 4 or 1 columns per warp");
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
      if (lane + 32 * k > j) sq += x[q][k] * x[q][k];
    sq = warpSum(sq);
    const S alpha = __shfl_sync(0xffffffffu, x[q][0], j);  // row j < 32 lives in slot 0 of lane j
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
      const int r = lane + 32 * k;
      if (r > j) x[q][k] *= scale;
      else if (r == j) x[q][k] = beta;
      v[r] = (r > j) ? x[q][k] : ((r == j) ? S(1) : S(0));
    }
    if (lane == 0) sTau[j] = tj;
  }
}

// kFormQ (one tile, the top of a tree; launchTsqrTileQR's formQ): a separate instantiation, so that the shapes of the
// wide levels compile exactly as without it, with a register budget of its own (one block per SM: it runs alone).
template <typename S, int kTileWarps, bool kFormQ = false>
__global__ void __launch_bounds__(32 * kTileWarps, (kFormQ ? 1 : kTileBlocksPerSM<S, kTileWarps>)) tsqrTileQRKernel(S* __restrict__ X, Index ldx, Index m, int n,
                                                                 Index tiles, S* __restrict__ tau,
                                                                 S* __restrict__ Rout, Index ldr,
                                                                 const S* __restrict__ src, Index lds,
                                                                 int* notFinite, bool storeAll,
                                                                 std::uint32_t* lastRow, std::uint32_t cap) {
  extern __shared__ __align__(16) unsigned char smem[];  // kFormQ only: the reflectors, TR x NC
  __shared__ S sv[2][TR];
  __shared__ S sTau[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTileWarps;

  // The input: X itself, or src (level 0 read straight from the caller's matrix, checked for NaN/Inf on the way).
  const S* in = src ? src : X;
  const Index ldin = src ? lds : ldx;
  S x[kColsPerWarp][kSlots];
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
  if (lastRow) {  // 1 + the last nonzero row of each column, capped (launchScanColumns' record, for free here)
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

  // Look-ahead by one column: in step j every warp applies reflector j to its columns, and the warp owning column
  // j + 1 then builds reflector j + 1 at once, so one barrier per step separates publishing a reflector from its use
  // and the critical path of a step is one reflection plus one reflector (rather than a warp's whole update plus one
  // reflector plus a second wait).
  if (warp == 0) makeReflector<S, kTileWarps>(x, 0, sv[0], sTau, lane);
  __syncthreads();
  for (int j = 0; j < n; ++j) {
    const S tj = sTau[j];
    const S* v = sv[j & 1];
    S vr[kSlots];
#pragma unroll
    for (int k = 0; k < kSlots; ++k) vr[k] = v[lane + 32 * k];
    // Columns c = warp + kTileWarps q > j take reflector j (those >= n are zero and stay zero).
    const int q0 = j < warp ? 0 : (j - warp) / kTileWarps + 1;
    reflectFrom<S, kColsPerWarp>(q0, vr, x, tj, lane);
    if (j + 1 < n && warp == (j + 1) % kTileWarps)
      makeReflector<S, kTileWarps>(x, j + 1, sv[(j + 1) & 1], sTau, lane);
    __syncthreads();
  }

#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c >= n) continue;
    if (!kFormQ && (storeAll || t == 0)) storeColumn(x[q], X + r0 + c * ldx, nr, lane);
    if (lane < n) Rout[t * n + lane + c * ldr] = (lane <= c) ? x[q][0] : S(0);
    if (lane == 0) tau[t * n + c] = sTau[c];
  }
  if constexpr (!kFormQ) return;

  // The tile's explicit Q, column c = H_0 ... H_{n-1} e_c = H_0 ... H_c e_c (the reflectors j > c are zero in row c
  // and leave e_c alone): what tsqrTileApplyQKernel computes from C = I (the same operations in the same order for
  // the 32-warp shape, which a single tile gets), without its launch, its identity C and its reading the reflectors
  // back. The reflectors go to shared memory, their unit diagonal explicit.
  S* V = reinterpret_cast<S*>(smem);
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int r = lane + 32 * k;
      V[c * TR + r] = reflectorEntry(r, c, x[q][k]);
      x[q][k] = (c < n && r == c) ? S(1) : S(0);
    }
  }
  __syncthreads();
  applySharedReflectors<S, kTileWarps, true>(V, sTau, n, x, warp, lane);
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c < n) storeColumn(x[q], X + r0 + c * ldx, nr, lane);
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
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int r = lane + 32 * k;
      if (c < n) {
        V[c * TR + r] = reflectorEntry(r, c, (r < nr) ? X[r0 + r + c * ldx] : S(0));
      }
      x[q][k] = (c < n && r < n) ? C[t * n + r + c * ldc] : S(0);
    }
    if (c < n && lane == 0) sTau[c] = tau[t * n + c];
  }
  __syncthreads();
  applySharedReflectors<S, kTileWarps, false>(V, sTau, n, x, warp, lane);
}

// The apply step of a level. With out == nullptr the result overwrites the tile in X; otherwise only tile 0 runs
// (grid of one block) and its first outRows rows go to out (ld ldo): the top rows of Q that ReconstructWY's LU needs
// before the fused kernel below may run.
template <typename S, int kTileWarps>
__global__ void __launch_bounds__(32 * kTileWarps, (kTileBlocksPerSM<S, kTileWarps>)) tsqrTileApplyQKernel(S* __restrict__ X, Index ldx, Index m, int n,
                                                                     Index tiles, const S* __restrict__ tau,
                                                                     const S* __restrict__ C, Index ldc,
                                                                     S* __restrict__ out, Index ldo, int outRows) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* V = reinterpret_cast<S*>(smem);  // TR x n, unit lower trapezoid made explicit
  __shared__ S sTau[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTileWarps;

  S x[kColsPerWarp][kSlots];
  applyTileReflectors<S, kTileWarps>(X, ldx, r0, nr, n, t, tau, C, ldc, V, sTau, x);
  S* dst = out ? out : X + r0;
  const Index ldd = out ? ldo : ldx;
  const int rowsOut = out ? min(nr, outRows) : nr;
#pragma unroll
  for (int q = 0; q < kColsPerWarp; ++q) {
    const int c = warp + kTileWarps * q;
    if (c < n) storeColumn(x[q], dst + c * ldd, rowsOut, lane);
  }
}

/// Four consecutive entries of a 16-byte aligned shared row, with 16-byte loads (one instruction for float).
template <typename S>
__device__ __forceinline__ void load4(const S* p, S (&v)[4]);
template <>
__device__ __forceinline__ void load4<float>(const float* p, float (&v)[4]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
template <>
__device__ __forceinline__ void load4<double>(const double* p, double (&v)[4]) {
  const double2 a = reinterpret_cast<const double2*>(p)[0], b = reinterpret_cast<const double2*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

/// Blocks per SM of the fused kernel (8-warp shape only: with 1024 threads the 32-entry row of Y cannot stay in
/// registers): 3 for float, so that the row fits in 85 registers without spilling, 2 for double.
template <typename S>
constexpr int kFusedBlocksPerSM = sizeof(S) == 4 ? 3 : 2;

// Level 0 of the explicit Q fused with ReconstructWY's row pass: each tile's rows of Q are formed in registers,
// transposed through shared memory (V's buffer, free once the reflectors are applied), and one thread per row writes
// the packed factor (Y below the diagonal, S R on and above it in tile 0) and W. This saves writing Q and reading it
// back (2 m n values). LU, s and T must hold the signed LU of Q's top n x n block and T = U S L^{-T}
// (tsqrTileApplyQKernel with out = LU, then signedLUKernel). X and A may alias (no __restrict__): a block reads its
// own tile before the barrier and writes only its own rows after it.
//
// Per row i >= n: Y(i,:) = -Q(i,:) U^{-1} by forward substitution, then W(i,:) = Y(i,:) T (W = Y T as in the geqrf
// panel); rows i < n (tile 0): Y(i,:) is row i of the unit lower L. The row of Y lives in registers and the
// substitution runs four columns at a time, so U and T are read with one 16-byte shared load per four products
// (a version reading them entry by entry was bound by shared-load instructions: 9.1 ms against 8.7 ms unfused for
// 8388608 x 32 float on the H100).
template <typename S, int kTileWarps>
__global__ void __launch_bounds__(32 * kTileWarps, kFusedBlocksPerSM<S>)
    tsqrTileApplyQReconstructKernel(const S* X, Index ldx, Index m, int n, Index tiles,
                                    const S* __restrict__ tauTiles, const S* __restrict__ C, Index ldc,
                                    const S* __restrict__ LU, Index ldlu, const S* __restrict__ s,
                                    const S* __restrict__ T, Index ldt, const S* __restrict__ R, Index ldr, S* A,
                                    Index lda, S* __restrict__ W, Index ldw, S* __restrict__ tau) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* V = reinterpret_cast<S*>(smem);
  __shared__ S sTau[NC];
  __shared__ __align__(16) S sL[NC][NC];  // sL[i][k] = L1(i, k): unit lower, zero above the diagonal
  __shared__ __align__(16) S sU[NC][NC];  // sU[k][j] = U(k, j): upper (identity beyond n)
  __shared__ __align__(16) S sT[NC][NC];  // sT[k][j] = T(k, j): upper (zero beyond n)
  __shared__ S sS[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kColsPerWarp = NC / kTileWarps;

  for (int idx = threadIdx.x; idx < NC * NC; idx += blockDim.x) {
    const int r = idx / NC, c = idx % NC;
    const bool in = r < n && c < n;
    sL[r][c] = (r == c) ? S(1) : ((in && r > c) ? LU[r + c * ldlu] : S(0));
    sU[r][c] = (in && r <= c) ? LU[r + c * ldlu] : ((r == c) ? S(1) : S(0));
    sT[r][c] = (in && r <= c) ? T[r + c * ldt] : S(0);
  }
  for (int j = threadIdx.x; j < NC; j += blockDim.x) sS[j] = (j < n) ? s[j] : S(1);

  {
    S x[kColsPerWarp][kSlots];
    applyTileReflectors<S, kTileWarps>(X, ldx, r0, nr, n, t, tauTiles, C, ldc, V, sTau, x);
    __syncthreads();  // every warp is done reading V
#pragma unroll
    for (int q = 0; q < kColsPerWarp; ++q) {
      const int c = warp + kTileWarps * q;
#pragma unroll
      for (int k = 0; k < kSlots; ++k) V[c * TR + lane + 32 * k] = x[q][k];  // columns c >= n are never read
    }
  }
  __syncthreads();
  if (t == 0)
    for (int j = threadIdx.x; j < n; j += blockDim.x) tau[j] = sU[j][j] * sS[j];

  const int r = threadIdx.x;
  if (r >= nr) return;
  const Index i = r0 + r;
  S y[NC];  // this row of Y; zero beyond n (U is the identity there and Q's row is zero)
  S* a = A + i;  // walks along the row: one address register rather than one per column
  if (i >= n) {
#pragma unroll
    for (int j0 = 0; j0 < NC; j0 += 4) {
      S acc[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) acc[jj] = (j0 + jj < n) ? -V[(j0 + jj) * TR + r] : S(0);
#pragma unroll
      for (int k = 0; k < j0; ++k) {
        S u[4];
        load4(&sU[k][j0], u);
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) acc[jj] -= y[k] * u[jj];
      }
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
        for (int kk = 0; kk < jj; ++kk) acc[jj] -= y[j0 + kk] * sU[j0 + kk][j0 + jj];
        y[j0 + jj] = acc[jj] / sU[j0 + jj][j0 + jj];
        if (j0 + jj < n) {
          *a = y[j0 + jj];
          a += lda;
        }
      }
    }
  } else {
    const int ii = static_cast<int>(i);
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      y[j] = sL[ii][j];
      if (j < n) {
        *a = (j < ii) ? y[j] : sS[ii] * R[ii + j * ldr];
        a += lda;
      }
    }
  }
  S* w = W + i;
#pragma unroll
  for (int j0 = 0; j0 < NC; j0 += 4) {
    S acc[4] = {S(0), S(0), S(0), S(0)};
#pragma unroll
    for (int k = 0; k < j0 + 4; ++k) {  // T is upper triangular: rows k > j contribute zeros
      S tk[4];
      load4(&sT[k][j0], tk);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) acc[jj] += y[k] * tk[jj];
    }
#pragma unroll
    for (int jj = 0; jj < 4; ++jj)
      if (j0 + jj < n) {
        *w = acc[jj];
        w += ldw;
      }
  }
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

// The same for n <= 32 in one warp, without a barrier: lane i keeps row i of M in registers (constant indices, the
// loops are unrolled), the pivot row is broadcast by shuffles, and T's rows are solved independently from L in shared
// memory (every lane reads the same entry at a time: broadcasts). The 256-thread kernel above pays a block barrier
// per step and re-reads global memory: 38 us per call on the H100 (TCQR_TRACE, 2026-11-26), on every TSQR panel.
template <typename S>
__global__ void __launch_bounds__(32) signedLUWarpKernel(S* LU, Index ld, int n, S* s, S* T, Index ldt) {
  __shared__ S sL[NC][NC + 1];  // sL[j][k] = L(j, k), k < j
  __shared__ S sS[NC];
  const int lane = threadIdx.x;
  S row[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) row[c] = (lane < n && c < n) ? -LU[lane + c * ld] : S(0);
  S sign = S(1);
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
    }
  }
  if (lane < n) {
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (c < n) LU[lane + c * ld] = row[c];
    s[lane] = sign;
  }
  if (!T) return;
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

}  // namespace

template <typename S>
void launchTsqrTileQR(S* X, Index ldx, Index m, Index n, Index tiles, S* tau, S* Rout, Index ldr, cudaStream_t stream,
                      const S* src, Index lds, int* notFinite, bool storeAll, std::uint32_t* lastRow,
                      std::uint32_t cap, bool formQ) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrTileQR");
  const unsigned grid = static_cast<unsigned>(tiles);
  if (formQ) {  // the top of a tree: few tiles, the latency shape
    if (!storeAll && src)
      detail::throwError(ErrorSource::Kernel, 0, "formQ needs storeAll", "launchTsqrTileQR", __FILE__, __LINE__);
    const size_t bytes = sizeof(S) * TR * NC;  // the reflectors, for the explicit Q
    allowSharedMemory(tsqrTileQRKernel<S, 32, true>, bytes);
    tsqrTileQRKernel<S, 32, true><<<grid, 32 * 32, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, Rout,
                                                                     ldr, src, lds, notFinite, true, lastRow, cap);
  } else if (manyTiles(tiles)) {
    tsqrTileQRKernel<S, 8><<<grid, 8 * 32, 0, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, Rout, ldr, src,
                                                         lds, notFinite, storeAll || !src, lastRow, cap);
  } else {
    tsqrTileQRKernel<S, 32><<<grid, 32 * 32, 0, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, Rout, ldr,
                                                           src, lds, notFinite, storeAll || !src, lastRow, cap);
  }
  TCQR_CHECK_LAUNCH("tsqrTileQRKernel");
}

template <typename S>
void launchTsqrTileApplyQ(S* X, Index ldx, Index m, Index n, Index tiles, const S* tau, const S* C, Index ldc,
                          cudaStream_t stream, S* out, Index ldo, Index outRows) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrTileApplyQ");
  const size_t bytes = sizeof(S) * TR * NC;
  const unsigned grid = out ? 1u : static_cast<unsigned>(tiles);
  const int rowsOut = static_cast<int>(outRows < TR ? outRows : TR);
  if (!out && manyTiles(tiles)) {
    allowSharedMemory(tsqrTileApplyQKernel<S, 8>, bytes);
    tsqrTileApplyQKernel<S, 8><<<grid, 8 * 32, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, C, ldc,
                                                                  out, ldo, rowsOut);
  } else {
    allowSharedMemory(tsqrTileApplyQKernel<S, 32>, bytes);
    tsqrTileApplyQKernel<S, 32><<<grid, 32 * 32, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles, tau, C,
                                                                    ldc, out, ldo, rowsOut);
  }
  TCQR_CHECK_LAUNCH("tsqrTileApplyQKernel");
}

template <typename S>
void launchTsqrApplyQReconstructWY(const S* X, Index ldx, Index m, Index n, Index tiles, const S* tauTiles, const S* C,
                                   Index ldc, const S* LU, Index ldlu, const S* s, const S* T, Index ldt, const S* R,
                                   Index ldr, S* A, Index lda, S* W, Index ldw, S* tau, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  checkTileShape(m, n, tiles, "launchTsqrApplyQReconstructWY");
  const size_t bytes = sizeof(S) * TR * NC;
  const unsigned grid = static_cast<unsigned>(tiles);
  allowSharedMemory(tsqrTileApplyQReconstructKernel<S, 8>, bytes);
  tsqrTileApplyQReconstructKernel<S, 8><<<grid, 8 * 32, bytes, stream>>>(
      X, ldx, m, static_cast<int>(n), tiles, tauTiles, C, ldc, LU, ldlu, s, T, ldt, R, ldr, A, lda, W, ldw, tau);
  TCQR_CHECK_LAUNCH("tsqrTileApplyQReconstructKernel");
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
  template void launchTsqrTileApplyQ<S>(S*, Index, Index, Index, Index, const S*, const S*, Index, cudaStream_t, S*, \
                                        Index, Index);                                                             \
  template void launchTsqrApplyQReconstructWY<S>(const S*, Index, Index, Index, Index, const S*, const S*, Index,   \
                                                 const S*, Index, const S*, const S*, Index, const S*, Index, S*,   \
                                                 Index, S*, Index, S*, cudaStream_t);                               \
  template void launchSignedLU<S>(S*, Index, Index, S*, cudaStream_t, S*, Index);
TCQR_INSTANTIATE(float)
TCQR_INSTANTIATE(double)
#undef TCQR_INSTANTIATE

}  // namespace kernels
}  // namespace tcqr
