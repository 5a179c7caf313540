// panel_kernels.cu - a whole Householder panel (at most 32 columns, up to 32768 rows in float and 16384 in double) in
// one launch: the panel lives in the registers of a thread-block cluster (sm_90, up to 16 blocks; beyond 24576 float
// and 12288 double rows partly in the blocks' shared memory, see kPanelRegRowsBesideShared), and every
// reduction over the rows is a shuffle reduce-scatter inside each warp, a sum over the block's warps in shared
// memory and an exchange of the blocks' partial sums through distributed shared memory: by default pushed with
// st.async and counted on each receiver's mbarrier (no fence and no cluster-wide rendezvous per column), with
// TCQR_PANEL_EXCHANGE=barrier plain stores closed by one cluster barrier. Unlike the TSQR panel (a tree of tile QRs, a tree of Q applications and ReconstructWY: six launches and
// about 7 x 32 dependent column steps per panel) this is plain column-by-column Householder QR with Eigen's
// reflector convention, so there is nothing to reconstruct, a zero tail gives tau = 0, and T comes out of the same
// reductions (larft's Y^T v_j are the dot products of v_j with the columns left of it).
//
// Per column j the cluster runs one reduction (two when the short cut below is refused):
//   p_k = sum_{i >= j} v_i A(i, k) for every k != j: for k > j the update's w = v^T A, for k < j T's Y^T v_j;
//   slot j: S = sum_{i >= j} A(i, j+1)^2 before the update.
// The next column's tail norm then needs no reduction of its own: H_j is orthogonal on rows >= j, so after the
// update sum_{i >= j+2} A(i, j+1)^2 = S - A(j, j+1)^2 - A(j+1, j+1)^2, whose two entries every thread computes from
// values their owners pushed before the barrier. That difference loses digits when the column's weight sits in
// rows j and j+1; below a quarter of S it is recomputed by a reduction of its own (as LAPACK's xLAQPS recomputes
// downdated column norms), so the squared tail norm is within a few ulps of S of the direct sum.
//
// All blocks sum the partial sums in the same order, so every thread of the cluster holds bit-identical totals and
// takes the same branches (a divergent branch around a cluster barrier would hang).
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <cooperative_groups.h>

#include "../src/CudaCheck.hpp"
#include "../src/kernels.hpp"
#include "device_math.cuh"

namespace cg = cooperative_groups;

namespace tcqr {
namespace kernels {

namespace {

constexpr int kPanelWarps = 8;
constexpr int kPanelThreads = 32 * kPanelWarps;
constexpr int kPanelMaxCluster = 16;
constexpr int kPanelCols = 32;

template <typename S>
struct PanelShared {
  S red[2][kPanelWarps][32];              // the warps' sums of one reduction (double-buffered with part)
  S part[2][kPanelMaxCluster][32];        // the blocks' partial sums (double-buffered: see clusterReduce)
  S own[2][4];                            // single entries pushed by their owners
  S stage[4];                             // kAsync: those entries on their way (rank 0), see pushOwn
  S T[kPanelCols][kPanelCols + 1];        // T by columns, T[k][i] = T(i, k) (rank 0)
  unsigned long long bar[2];              // kAsync: mbarriers counting the bytes pushed into part[b] and own[b]
};

// ---- the exchange without cluster barriers (kAsync) ----------------------------------------------------------------
// Each block pushes its partial sums into every block's part[buf] with st.async, whose bytes complete a transaction
// count on the receiving block's mbarrier bar[buf]; the receiver's thread 0 arms bar[buf] once per reduction with the
// bytes it expects (arrive.expect_tx; the arrival keeps the phase open until then, so bytes that come first are
// counted against it), and every thread waits for the phase. No fence and no cluster-wide rendezvous per column:
// a block waits only for the data it needs. Buffer reuse is safe with two buffers for the reason given at
// clusterReduce: a block pushes reduction r + 2 into buffer r % 2 only after it received everyone's reduction r + 1,
// which each block sends only after it finished reading its reduction r.

__device__ __forceinline__ unsigned smemAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
/// The shared::cluster address of the same variable in block `rank` of the cluster.
__device__ __forceinline__ unsigned clusterAddress(unsigned local, int rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(local), "r"(rank) : "memory");
  return r;
}
__device__ __forceinline__ void stAsync(unsigned remote, float v, unsigned remoteBar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote),
               "r"(__float_as_uint(v)), "r"(remoteBar)
               : "memory");
}
__device__ __forceinline__ void stAsync(unsigned remote, double v, unsigned remoteBar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];\n" ::"r"(remote),
               "l"(__double_as_longlong(v)), "r"(remoteBar)
               : "memory");
}
__device__ __forceinline__ void barInit(unsigned bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void barArm(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barWait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void clusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void clusterWait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

/// One butterfly stage of reduceScatter32 (and reduceScatter16): lanes with bit O set keep the upper O of their 2 O values, the others the
/// lower O, each adding its partner's copy of the half it keeps.
template <int O, typename S, int N>
__device__ __forceinline__ void reduceScatterStage(S (&p)[N], bool upper) {
  static_assert(2 * O <= N, "reduceScatterStage: stage wider than the values");
#pragma unroll
  for (int q = 0; q < O; ++q) {
    const S send = upper ? p[q] : p[q + O];
    const S keep = upper ? p[q + O] : p[q];
    p[q] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}

/// Lane l ends with the warp's sum of value l in p[0]; 31 shuffles for 32 sums. (Stages as templates: nvcc kept
/// a loop over them, and with it p, in local memory.)
template <typename S>
__device__ __forceinline__ void reduceScatter32(S (&p)[32], int lane) {
  reduceScatterStage<16>(p, (lane & 16) != 0);
  reduceScatterStage<8>(p, (lane & 8) != 0);
  reduceScatterStage<4>(p, (lane & 4) != 0);
  reduceScatterStage<2>(p, (lane & 2) != 0);
  reduceScatterStage<1>(p, (lane & 1) != 0);
}

/// The same for 16 values: lanes l and l + 16 both end with the warp's sum of value l & 15 in p[0]; 16 shuffles.
template <typename S>
__device__ __forceinline__ void reduceScatter16(S (&p)[16], int lane) {
  reduceScatterStage<8>(p, (lane & 8) != 0);
  reduceScatterStage<4>(p, (lane & 4) != 0);
  reduceScatterStage<2>(p, (lane & 2) != 0);
  reduceScatterStage<1>(p, (lane & 1) != 0);
  p[0] += __shfl_xor_sync(0xffffffffu, p[0], 16);
}

/// The cluster's sum of `value` (lane l of each warp contributes value l, or every lane the same single value with
/// kOne), returned in lane l of every warp of every block (kOne: in every thread). `between` runs after this thread
/// arrived at the cluster barrier and before it waits. Buffer `buf` of part must not be read by anyone any more: the
/// previous reduction used the other one, and nobody passes this reduction's barrier before every block has read
/// that one's totals, so two buffers suffice. For the same reason `between` must not read part or own: other blocks
/// may already be writing the other buffer once this thread has arrived.
template <bool kAsync, bool kOne, typename S, class F>
__device__ __forceinline__ S clusterReduce(PanelShared<S>& sh, S value, int buf, unsigned& parity, unsigned ownMask,
                                           int C, int rank, int warp, int lane, cg::cluster_group& cluster,
                                           F&& between) {
  const int slot = kOne ? 0 : lane;
  // kAsync: C blocks push 1 (kOne) or 32 values each, and rank 0 forwards the own slots of ownMask (pushOwn).
  if (kAsync && threadIdx.x == 0)
    barArm(smemAddress(&sh.bar[buf]),
           unsigned(C * (kOne ? 1 : 32) + __popc(ownMask)) * unsigned(sizeof(S)));
  if (kOne) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) value += __shfl_xor_sync(0xffffffffu, value, o);
    if (lane == 0) sh.red[buf][warp][0] = value;
  } else {
    sh.red[buf][warp][lane] = value;
  }
  __syncthreads();
  S b = S(0);
#pragma unroll
  for (int w = 0; w < kPanelWarps; ++w) b += sh.red[buf][w][slot];
  if (kAsync && rank == 0 && warp == kPanelWarps - 1 && ((ownMask >> lane) & 1u)) {
    const S v = sh.stage[lane];
#pragma unroll 1
    for (int q = 0; q < C; ++q)
      stAsync(clusterAddress(smemAddress(&sh.own[buf][lane]), q), v, clusterAddress(smemAddress(&sh.bar[buf]), q));
  }
  // Warp q pushes this block's partial sums to blocks q, q + kPanelWarps, ...
  if (!kOne || lane == 0) {
    if constexpr (kAsync) {
#pragma unroll 1
      for (int q = warp; q < C; q += kPanelWarps)
        stAsync(clusterAddress(smemAddress(&sh.part[buf][rank][slot]), q), b,
                clusterAddress(smemAddress(&sh.bar[buf]), q));
    } else {
      for (int q = warp; q < C; q += kPanelWarps) *cluster.map_shared_rank(&sh.part[buf][rank][slot], q) = b;
    }
  }
  if constexpr (kAsync) {
    // (sh.red is double-buffered for this variant: a warp past the wait may start the next reduction while another
    // still reads this one's sums; the next reduction's __syncthreads keeps it from the one after.)
    between();
    barWait(smemAddress(&sh.bar[buf]), (parity >> buf) & 1u);
    parity ^= 1u << buf;
  } else {
    __syncwarp();  // (the .aligned barrier needs the whole warp; only some lanes pushed)
    clusterArrive();
    between();
    clusterWait();
  }
  S tot = S(0);
  for (int q = 0; q < C; ++q) tot += sh.part[buf][q][slot];
  return tot;
}

/// Pushes v into slot `slot` of own[buf] of every block of the cluster (before the pusher's next arrive). kAsync:
/// stages it in this block's stage[slot], from where the next clusterReduce (whose ownMask must name the slot)
/// forwards it with st.async after its __syncthreads. (Pushing with st.async from here, in the owners' divergent
/// branches, cost the float kernel with 4 rows per thread 40 registers and spills; plain stores did not.)
template <bool kAsync, typename S>
__device__ __forceinline__ void pushOwn(PanelShared<S>& sh, S v, int buf, int slot, int C, cg::cluster_group& cluster) {
  if constexpr (kAsync) {
    sh.stage[slot] = v;
  } else {
    for (int q = 0; q < C; ++q) *cluster.map_shared_rank(&sh.own[buf][slot], q) = v;
  }
}


/// Columns of the kernel's loop body (see householderPanelKernel).
constexpr int kPanelWindow = 1;

/// Whether the kernel with R rows per thread forms each column's 32 sums in two halves (see the kernel).
template <typename S, int R>
constexpr bool kSplitSums = sizeof(S) == 8 && R >= 3;

/// Householder QR of A (m x n, n <= 32, m >= n) in place, Eigen's convention (R on and above the diagonal, the
/// essential parts of the reflectors below it, tau = 0 for a tail with squared norm at most the smallest normal
/// number), and T (n x n, upper triangular, zero below) of H_0 ... H_{n-1} = I - Y T Y^T. One cluster of C blocks;
/// block b holds rows b * (R + RS) * 256 + r * 256 + thread, r < R in registers and R <= r < R + RS in its dynamic
/// shared memory (RS x 32 x 256 values; each thread reads and writes only its own entries there, so they need no
/// synchronisation). Registers and shared memory together hold a taller panel than the registers alone (see
/// kPanelMaxRS).
///
/// Registers can only be indexed at compile time, but the loop over the columns runs from instruction cache: fully
/// unrolled over the 32 columns (about 200 KB of code per instantiation, run once per launch) every fetch missed,
/// 112 us per 16384 x 32 TF32 panel of 16384^2 on the H100, no faster than the TSQR panel. So the loop body handles
/// kPanelWindow columns, the current ones always in registers 0 .. kPanelWindow - 1, and after each window the
/// columns rotate left by kPanelWindow (32 moves per row): logical column k sits in register (k - off) & 31, off =
/// the columns rotated away so far. Measured per panel at 16384^2 TF32 (H100, TCQR_TRACE): windows of 4 columns
/// 104.5 us, 2 columns 94.4 us, 1 column 90.3 us (ncu at 4 columns: half the stall cycles per instruction were
/// waiting for an instruction fetch or at a barrier). On the H200 (2026-11-29) a window of 2 was again slower: 126.0
/// against 112.6 us per double panel of 16384^2, 82.1 against 72.6 per FP16x3 panel.
template <typename S, int R, int RS, bool kAsync>
__global__ void __launch_bounds__(kPanelThreads, 1)
    householderPanelKernel(S* __restrict__ A, Index lda, int m, int n, S* __restrict__ tau, S* __restrict__ T,
                           Index ldt) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cg::cluster_group cluster = cg::this_cluster();
  const int C = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  __shared__ PanelShared<S> sh;
  extern __shared__ __align__(16) unsigned char panelRows[];
  // Shared-memory row r (r < RS), column k of this thread: rowsOf[(r * kPanelCols + k) * kPanelThreads].
  S* const rowsOf = reinterpret_cast<S*>(panelRows) + tid;

  // Rows of register r: base + r * kPanelThreads. Only rank 0's r = 0 can hold a row < 33 (a column or reflector
  // index, or the one after it), so comparisons with j need `lr` alone: the row for r = 0 on rank 0, larger than any
  // j elsewhere.
  const Index base = Index(rank) * ((R + RS) * kPanelThreads) + tid;
  const int lr = rank == 0 ? tid : kPanelThreads;
  // Distributed shared memory may only be accessed once every block of the cluster runs: arrive now, wait after the
  // loads (which hide it). Nothing is published yet, hence relaxed; kAsync publishes its mbarriers' initialisation.
  if constexpr (kAsync) {
    if (tid == 0) {
      barInit(smemAddress(&sh.bar[0]));
      barInit(smemAddress(&sh.bar[1]));
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncwarp();
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  } else {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  }
  S a[R][kPanelCols];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const Index i = base + Index(r) * kPanelThreads;
#pragma unroll
    for (int k = 0; k < kPanelCols; ++k) a[r][k] = (i < m && k < n) ? A[i + Index(k) * lda] : S(0);
  }
#pragma unroll
  for (int r = 0; r < RS; ++r) {
    const Index i = base + Index(R + r) * kPanelThreads;
#pragma unroll 8
    for (int k = 0; k < kPanelCols; ++k)
      rowsOf[(r * kPanelCols + k) * kPanelThreads] = (i < m && k < n) ? A[i + Index(k) * lda] : S(0);
  }

  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");

  int buf = 0;
  unsigned parity = 0;  // kAsync: bit b = the phase of bar[b] the next reduction on buffer b waits for
  bool exact = true;   // column j's tail norm needs a reduction of its own (always for column 0)
  S alpha = S(0), tail2 = S(0);
  S myTau = S(0);      // lane j: tau_j
  // T's column j - 1, formed during the next barrier from the previous column's reduction: lane q holds p of the
  // column in register q, whose logical column is (q + zOff) & 31.
  S zPrev = S(0), tauPrev = S(0);
  int zOff = 0;
  const bool tWarp = rank == 0 && warp == 0;
  // T(0 : j, j) = -tau_j T(0 : j, 0 : j) p(0 : j), T(j, j) = tau_j.
  // (Unrolled with a predicate: the loads and shuffles of all k issue at once; a loop to j paid their latency j times.)
  auto tColumn = [&](int j, S z, S tj, int zo) {
    S acc = S(0);
#pragma unroll
    for (int k = 0; k < kPanelCols; ++k) {
      const S zk = __shfl_sync(0xffffffffu, z, (k - zo) & 31);
      if (k < j) acc = fma(sh.T[k][lane], zk, acc);
    }
    sh.T[j][lane] = lane < j ? -tj * acc : (lane == j ? tj : S(0));
    __syncwarp();
  };

  int off = 0;
  for (; off < n; off += kPanelWindow) {
    const int lim = n - off;  // registers q < lim hold columns < n (for q > the current column: right of it)
    // Shared-memory row r's entry of the column in register q: column (q + off) & 31, as the registers rotate
    // (atRight: q < lim, where that is off + q, an offset the compiler folds; at: any q, columns left of the current
    // one wrapped into the registers q >= 32 - off, for T's sums).
    S* const cur = rowsOf + off * kPanelThreads;
    auto atRight = [&](int r, int q) -> S& { return cur[(r * kPanelCols + q) * kPanelThreads]; };
    auto at = [&](int r, int q) -> S& { return rowsOf[(r * kPanelCols + ((q + off) & 31)) * kPanelThreads]; };
#pragma unroll
    for (int jj = 0; jj < kPanelWindow; ++jj) {
      const int j = off + jj;
      if (j >= n) break;
      if (exact) {
        S s = S(0);
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (r > 0 || lr > j) s = fma(a[r][jj], a[r][jj], s);
#pragma unroll
        for (int r = 0; r < RS; ++r) s = fma(atRight(r, jj), atRight(r, jj), s);
        if (rank == 0 && tid == j) pushOwn<kAsync>(sh, a[0][jj], buf, 3, C, cluster);
        const int jPrev = j - 1;
        const S z = zPrev, tp = tauPrev;
        const int zo = zOff;
        tail2 = clusterReduce<kAsync, true>(sh, s, buf, parity, 1u << 3, C, rank, warp, lane, cluster, [&] {
          if (jPrev >= 0 && tWarp) tColumn(jPrev, z, tp, zo);
        });
        alpha = sh.own[buf][3];
        buf ^= 1;
      }
      // Reflector j (Eigen's makeHouseholderInPlace).
      S beta = alpha, tj = S(0), scale = S(0);
      if (!(tail2 <= tinyNormSq<S>())) {
        beta = sqrt(alpha * alpha + tail2);
        if (alpha >= S(0)) beta = -beta;
        tj = (beta - alpha) / beta;
        scale = S(1) / (alpha - beta);
      }
      if (lane == j) myTau = tj;
      S v[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r > 0 || lr > j) {
          a[r][jj] *= scale;
          v[r] = a[r][jj];
        } else {
          if (lr == j) a[r][jj] = beta;
          v[r] = lr == j ? S(1) : S(0);
        }
      }
      S vs[RS > 0 ? RS : 1];
#pragma unroll
      for (int r = 0; r < RS; ++r) vs[r] = atRight(r, jj) *= scale;
      if (j == 0 && n == 1) {  // no column right of it, no T column left of it
        if (tWarp) tColumn(0, S(0), tj, 0);
        break;
      }
      // The column's reduction: p_k = v^T A(:, k) for k != j, slot j = S (see the file comment), by register.
      // kSplitSums: the 32 sums as two halves of 16 (double with 3 rows per thread: a[3][32] and p[32] would need
      // 256 registers for themselves alone; in halves the kernel takes 255 with 52-68 bytes of spills, against
      // 436-568 whole), each reduce-scattered on its own.
      S mine;  // lane l: the warp's p_l
      const bool next = j + 1 < n;
      if constexpr (kSplitSums<S, R>) {
        static_assert(kPanelWindow < 16, "the slot of S must be in the first half");
        static_assert(RS == 0, "kSplitSums has no shared-memory rows (double's take 2 + 2 rows per thread)");
        if (next && rank == 0) {
          if (tid == j) pushOwn<kAsync>(sh, a[0][jj + 1], buf, 0, C, cluster);
          if (tid == j + 1) {
            pushOwn<kAsync>(sh, a[0][jj + 1], buf, 1, C, cluster);
            pushOwn<kAsync>(sh, v[0], buf, 2, C, cluster);
          }
        }
        S lo;
        {
          S p[16];
#pragma unroll
          for (int q = 0; q < 16; ++q) p[q] = S(0);
#pragma unroll
          for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int q = 0; q < 16; ++q)
              if (q != jj) p[q] = fma(v[r], a[r][q], p[q]);
            if (r > 0 || lr >= j) p[jj] = fma(a[r][jj + 1], a[r][jj + 1], p[jj]);
          }
          reduceScatter16(p, lane);
          lo = p[0];
        }
        S hi;
        {
          S p[16];
#pragma unroll
          for (int q = 0; q < 16; ++q) p[q] = S(0);
#pragma unroll
          for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int q = 0; q < 16; ++q) p[q] = fma(v[r], a[r][16 + q], p[q]);
          }
          reduceScatter16(p, lane);
          hi = p[0];
        }
        mine = lane < 16 ? lo : hi;
      } else {
        S p[kPanelCols];
#pragma unroll
        for (int q = 0; q < kPanelCols; ++q) p[q] = S(0);
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int q = 0; q < kPanelCols; ++q)
            if (q != jj) p[q] = fma(v[r], a[r][q], p[q]);
          if (r > 0 || lr >= j) p[jj] = fma(a[r][jj + 1], a[r][jj + 1], p[jj]);
        }
#pragma unroll
        for (int r = 0; r < RS; ++r) {
#pragma unroll
          for (int q = 0; q < kPanelCols; ++q)
            if (q != jj) p[q] = fma(vs[r], at(r, q), p[q]);
          // (next: register jj + 1 holds a column < n; at j = 31 atRight(r, jj + 1) would lie past the rows)
          if (next) p[jj] = fma(atRight(r, jj + 1), atRight(r, jj + 1), p[jj]);
        }
        if (next && rank == 0) {
          if (tid == j) pushOwn<kAsync>(sh, a[0][jj + 1], buf, 0, C, cluster);
          if (tid == j + 1) {
            pushOwn<kAsync>(sh, a[0][jj + 1], buf, 1, C, cluster);
            pushOwn<kAsync>(sh, v[0], buf, 2, C, cluster);
          }
        }
        reduceScatter32(p, lane);
        mine = p[0];
      }
      const bool pending = j > 0 && !exact;  // T's previous column not formed yet
      {
        const int jPrev = j - 1;
        const S z = zPrev, tp = tauPrev;
        const int zo = zOff;
        zPrev = clusterReduce<kAsync, false>(sh, mine, buf, parity, next ? 7u : 0u, C, rank, warp,
                                             lane, cluster, [&] {
          if (pending && tWarp) tColumn(jPrev, z, tp, zo);
        });
      }
      const S tot = zPrev;
      const S own0 = sh.own[buf][0], own1 = sh.own[buf][1], own2 = sh.own[buf][2];
      buf ^= 1;
      tauPrev = tj;
      zOff = off;
      // The update of the columns right of j: registers jj + 1 .. lim - 1, in groups of 8 registers (exits between
      // groups; lim is the same in the whole cluster). Inside a group, registers q >= lim (columns left of the
      // current one, or beyond n) get c = 0, which leaves them as they are (up to the sign of a zero) wherever v is
      // finite, which it is for finite input (a non-finite v, from a non-finite column, also writes NaN into the
      // finished reflectors those registers hold: results of such input are unspecified, info() says
      // NumericalIssue), instead of an exit at every register: the
      // exit after each register made every shuffle wait for the previous register's update (shuffle, multiply, FMAs
      // and a branch, up to 31 times in a row per column; ncu, double 12288 x 32), while in a group the shuffles issue
      // back to back between the multiplies and FMAs (SASS of the double 12288 x 32 panel under ncu: 5.47M warp
      // instructions at 4.96 cycles each, 101.9 us, against 5.21M at 5.36 cycles, 104.2 us, with the exit). (Without the groups, every column updated all 31 registers: the double kernel then executed 15%
      // more instructions and was no faster.) The shared-memory rows keep the guard: past 32 - off an address would
      // reach the next row's entries.
#pragma unroll
      for (int g = 0; g < kPanelCols; g += 8) {
        if (g + 8 <= jj + 1) continue;  // (compile time)
        if (g >= lim) break;
#pragma unroll
        for (int q = (g > jj + 1 ? g : jj + 1); q < g + 8; ++q) {
          const S t = __shfl_sync(0xffffffffu, tot, q);
          const S c = q < lim ? tj * t : S(0);
#pragma unroll
          for (int r = 0; r < R; ++r) a[r][q] = fma(-c, v[r], a[r][q]);
#pragma unroll
          for (int r = 0; r < RS; ++r)
            if (q < lim) atRight(r, q) = fma(-c, vs[r], atRight(r, q));
        }
      }
      if (!next) {
        if (tWarp) tColumn(j, tot, tj, off);
        break;
      }
      // Column j+1's tail norm from S (see the file comment); the owners' registers hold the same two entries.
      const S Ssum = __shfl_sync(0xffffffffu, tot, jj);
      const S c1 = tj * __shfl_sync(0xffffffffu, tot, jj + 1);
      const S r0 = fma(-c1, S(1), own0);
      const S r1 = fma(-c1, own2, own1);
      const S t2 = (Ssum - r0 * r0) - r1 * r1;
      exact = !(t2 > S(0.25) * Ssum);  // (if exact, T's column j is formed during that reduction's barrier)
      if (!exact) {
        alpha = r1;
        tail2 = t2;
      }
    }
    if (off + kPanelWindow >= n) break;
    // The next window into registers 0 .. kPanelWindow - 1.
#pragma unroll
    for (int r = 0; r < R; ++r) {
      S t[kPanelWindow];
#pragma unroll
      for (int q = 0; q < kPanelWindow; ++q) t[q] = a[r][q];
#pragma unroll
      for (int q = 0; q + kPanelWindow < kPanelCols; ++q) a[r][q] = a[r][q + kPanelWindow];
#pragma unroll
      for (int q = 0; q < kPanelWindow; ++q) a[r][kPanelCols - kPanelWindow + q] = t[q];
    }
  }

  // kAsync: no block leaves while another's stores into it may be in flight (every block's last wait saw all of its
  // incoming bytes; this covers the outgoing ones too).
  if constexpr (kAsync) {
    __syncwarp();
    asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
  }
  // Results: register q holds column (q + off) & 31; rank 0's warp 0 formed T.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const Index i = base + Index(r) * kPanelThreads;
    if (i < m) {
#pragma unroll
      for (int q = 0; q < kPanelCols; ++q) {
        const int k = (q + off) & (kPanelCols - 1);
        if (k < n) A[i + Index(k) * lda] = a[r][q];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RS; ++r) {
    const Index i = base + Index(R + r) * kPanelThreads;
    if (i < m) {
#pragma unroll 8
      for (int k = 0; k < kPanelCols; ++k)
        if (k < n) A[i + Index(k) * lda] = rowsOf[(r * kPanelCols + k) * kPanelThreads];
    }
  }
  if (tWarp) {
    if (lane < n) tau[lane] = myTau;
    for (int k = 0; k < n; ++k)
      if (lane < n) T[lane + Index(k) * ldt] = sh.T[k][lane];
  }
#endif
}

/// The launch configuration of one cluster of c blocks (the whole grid) on `stream`.
struct ClusterLaunch {
  cudaLaunchAttribute attr[2] = {};
  cudaLaunchConfig_t cfg = {};
  ClusterLaunch(int c, cudaStream_t stream, int priority = 0, std::size_t smemBytes = 0) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(c);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(static_cast<unsigned>(c));
    cfg.blockDim = dim3(kPanelThreads);
    cfg.dynamicSmemBytes = smemBytes;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (priority != 0) {
      attr[1].id = cudaLaunchAttributePriority;
      attr[1].val.priority = priority;
      cfg.numAttrs = 2;
    }
  }
  ClusterLaunch(const ClusterLaunch&) = delete;  // cfg points into attr
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

/// Which exchange the kernel uses: the st.async + mbarrier exchange (kAsync, the default) unless TCQR_PANEL_EXCHANGE
/// is "barrier", which selects the cluster-barrier exchange (kept for comparisons: H100, 16384^2 TF32, TCQR_TRACE,
/// 2026-11-27: 66-71 us per panel with kAsync against 88.5-90 us). Read once.
bool panelExchangeAsync() {
  static const bool async = [] {
    const char* v = std::getenv("TCQR_PANEL_EXCHANGE");
    return v == nullptr || std::strcmp(v, "barrier") != 0;
  }();
  return async;
}

/// Dynamic shared memory of the kernel with RS rows per thread there.
template <typename S, int RS>
constexpr std::size_t kPanelRowsBytes = std::size_t(RS) * kPanelCols * kPanelThreads * sizeof(S);

/// Largest cluster (in blocks) the device runs householderPanelKernel<S, R, RS, kAsync> with, 0 if none (not sm_90+).
/// Also allows the kernel its dynamic shared memory (needed above 48 KiB) on this device, before any launch of it, in
/// both exchange variants (a cluster of one block takes the barrier one whatever kAsync says: launchPanelR).
template <typename S, int R, int RS, bool kAsync>
int clusterLimit() {
  // Any failure of the queries below means no cluster (the caller falls back to the TSQR panel), not an exception.
  auto ok = [](cudaError_t e) {
    if (e == cudaSuccess) return true;
    cudaGetLastError();
    return false;
  };
  int device = 0;
  if (!ok(cudaGetDevice(&device))) return 0;
  static std::mutex mu;
  static int known[64];
  static bool done[64];
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0 || device >= 64) return 0;
  if (done[device]) return known[device];
  int major = 0;
  // The kernel's body exists only when compiled for sm_90 or later: a build for older architectures alone, run on a
  // Hopper through its PTX, has an empty kernel (ptxVersion tells).
  cudaFuncAttributes fa{};
  int limit = 0;
  if (ok(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)) && major >= 9 &&
      ok(cudaFuncGetAttributes(&fa, householderPanelKernel<S, R, RS, kAsync>)) && fa.ptxVersion >= 90 &&
      ok(cudaFuncSetAttribute(householderPanelKernel<S, R, RS, kAsync>,
                              cudaFuncAttributeNonPortableClusterSizeAllowed, 1)) &&
      ok(cudaFuncSetAttribute(householderPanelKernel<S, R, RS, kAsync>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, int(kPanelRowsBytes<S, RS>))) &&
      (RS == 0 || ok(cudaFuncSetAttribute(householderPanelKernel<S, R, RS, !kAsync>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kPanelRowsBytes<S, RS>))))) {
    // Every size from 16 down: a GPC may hold 12-15 of these blocks but not 16 (smaller parts, MIG slices).
    for (int c = kPanelMaxCluster; c >= 1 && limit == 0; --c) {
      const ClusterLaunch launch(c, nullptr, 0, kPanelRowsBytes<S, RS>);
      int clusters = 0;
      if (ok(cudaOccupancyMaxActiveClusters(&clusters, householderPanelKernel<S, R, RS, kAsync>, &launch.cfg)) &&
          clusters > 0)
        limit = c;
    }
  }
  known[device] = limit;
  done[device] = true;
  return limit;
}

// Rows per thread: float up to 6 (a[6][32] and p[32] take 255 registers, with 16-28 bytes of spills in the st.async
// variant; 5 take 248-254 and none), double up to 3 (with p[32] 3 spilled 436-568 bytes, with kSplitSums 52-68; ptxas
// -v, nvcc 13.0, sm_90).
template <typename S>
constexpr int kPanelMaxR = sizeof(S) == 4 ? 6 : 3;

// Panels taller than kPanelMaxR rows per thread hold kPanelRegRowsBesideShared rows per thread in registers and up
// to kPanelMaxRS more in shared memory: float 6 + 2 (64 KiB; 16 blocks then hold 32768 rows), double 2 + 2 (128 KiB,
// 16384 rows). Each shared-memory row costs per column 32 loads for the sums and up to 32 loads and stores for the
// update, against the TSQR panel's six launches. Double keeps 2 rows in registers there, not 3: 3 + 1 spilled 240
// bytes (ptxas, st.async variant) and 2 + 2 none, and FP64 16384^2 took 181.2 / 180.9 ms with 2 + 2 against 183.1 /
// 181.5 with 3 + 1 and 184.7 / 185.2 without shared-memory rows (H200, alternating, medians of 3).
template <typename S>
constexpr int kPanelRegRowsBesideShared = sizeof(S) == 4 ? 6 : 2;
template <typename S>
constexpr int kPanelMaxRS = 2;

/// kPanelMaxR, or less where TCQR_PANEL_MAX_ROWS_PER_THREAD=<r> asks (r >= 1; anything else is ignored; for
/// measurements: float's R = 5 and 6 extend the kernel from 16384 to 20480 and 24576 rows; a cap below kPanelMaxR also
/// leaves out the rows in shared memory). Read once per process, so
/// that the largest panel a factorization plans with (householderPanelMaxRows) is the one the launch accepts.
template <typename S>
int panelMaxR() {
  static const int cap = [] {
    const char* v = std::getenv("TCQR_PANEL_MAX_ROWS_PER_THREAD");
    char* end = nullptr;
    const long r = v ? std::strtol(v, &end, 10) : 0;
    return v && end != v && *end == '\0' && r >= 1 && r <= 64 ? static_cast<int>(r) : 0;
  }();
  return cap > 0 ? std::min(cap, kPanelMaxR<S>) : kPanelMaxR<S>;
}

/// kPanelMaxRS, or less where TCQR_PANEL_MAX_SMEM_ROWS=<r> asks (r >= 0; 0: registers only, at most 24576 float and
/// 12288 double rows, and the shared-memory instantiations are not even set up; in double 1 is the same, since 2 + 1
/// rows per thread are no more than the registers' 3; for measurements). Read once per process, as panelMaxR.
template <typename S>
int panelMaxRS() {
  static const int cap = [] {
    const char* v = std::getenv("TCQR_PANEL_MAX_SMEM_ROWS");
    char* end = nullptr;
    const long r = v ? std::strtol(v, &end, 10) : -1;
    return v && end != v && *end == '\0' && r >= 0 && r <= 64 ? static_cast<int>(r) : -1;
  }();
  return cap >= 0 ? std::min(cap, kPanelMaxRS<S>) : kPanelMaxRS<S>;
}

template <typename S, int R, int RS = 0>
void launchPanelR(S* A, Index lda, Index m, Index n, S* tau, S* T, Index ldt, int C, cudaStream_t stream,
                  int priority) {
  const ClusterLaunch launch(C, stream, priority, kPanelRowsBytes<S, RS>);
  // (st.async is undefined in a cluster of one block: PTX ISA, st.async. Panels of at most 256 rows keep the barrier.)
  auto kernel = panelExchangeAsync() && C > 1 ? householderPanelKernel<S, R, RS, true>
                                              : householderPanelKernel<S, R, RS, false>;
  detail::check(cudaLaunchKernelEx(&launch.cfg, kernel, A, lda, static_cast<int>(m), static_cast<int>(n), tau, T, ldt),
                "cudaLaunchKernelEx(householderPanelKernel)", __FILE__, __LINE__);
}

template <typename S, int R, int RS = 0>
int clusterLimitOfExchange() {
  return panelExchangeAsync() ? clusterLimit<S, R, RS, true>() : clusterLimit<S, R, RS, false>();
}

/// f() (a non-negative int) for the current device, computed on the first call per device and kept in `known` (the
/// value + 1; 0: not yet known; two threads may both compute it, with the same result); 0 where the device cannot be
/// asked or its index is beyond the table. For the panel's limits, which are asked for every panel.
template <class F>
int oncePerDevice(std::atomic<int> (&known)[64], F&& f) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // (this call's own error)
    return 0;
  }
  if (device < 0 || device >= 64) return 0;
  if (const int k = known[device].load(std::memory_order_relaxed)) return k - 1;
  const int v = f();
  known[device].store(v + 1, std::memory_order_relaxed);
  return v;
}

/// The largest cluster every registers-only instantiation runs with: they differ in registers per thread only, and one
/// size must fit all.
template <typename S>
int panelClusterLimit() {
  static std::atomic<int> known[64];
  return oncePerDevice(known, [] {
    int c = std::min(clusterLimitOfExchange<S, 1>(), clusterLimitOfExchange<S, 2>());
    if constexpr (sizeof(S) == 8) c = std::min(c, clusterLimitOfExchange<double, 3>());
    if constexpr (sizeof(S) == 4) {
      c = std::min(c, clusterLimitOfExchange<float, 3>());
      c = std::min(c, clusterLimitOfExchange<float, 4>());
      c = std::min(c, clusterLimitOfExchange<float, 5>());
      c = std::min(c, clusterLimitOfExchange<float, 6>());
    }
    return c;
  });
}

/// The most rows per thread in shared memory the device allows beside kPanelRegRowsBesideShared in registers:
/// panelMaxRS, or 0 where the instantiations with rows there (up to 148 KiB of shared memory per block in double) do
/// not run clusters as large as the registers-only ones (a part with less shared memory per block keeps the kernel
/// for the panels its registers hold). Remembered per device.
template <typename S>
int panelSharedRows() {
  const int want = panelMaxRS<S>();
  if (want == 0) return 0;
  static std::atomic<int> known[64];
  return oncePerDevice(known, [want] {
    constexpr int RR = kPanelRegRowsBesideShared<S>;
    int c = clusterLimitOfExchange<S, RR, 2>();
    if constexpr (sizeof(S) == 4) c = std::min(c, clusterLimitOfExchange<S, RR, 1>());
    return c > 0 && c >= panelClusterLimit<S>() ? want : 0;
  });
}

}  // namespace

template <typename S>
Index householderPanelMaxRows() {
  // Shared-memory rows only where the rows per thread are not capped below kPanelMaxR (launchHouseholderPanel).
  const int rows = panelMaxR<S>() == kPanelMaxR<S>
                       ? std::max(kPanelMaxR<S>, kPanelRegRowsBesideShared<S> + panelSharedRows<S>())
                       : panelMaxR<S>();
  return Index(panelClusterLimit<S>()) * kPanelThreads * rows;
}

template <typename S>
void launchHouseholderPanel(S* A, Index lda, Index m, Index n, S* tau, S* T, Index ldt, cudaStream_t stream,
                            int rowsPerThread, int priority) {
  if (m <= 0 || n <= 0) return;
  if (n > kPanelCols || m < n || m > householderPanelMaxRows<S>())
    detail::throwError(ErrorSource::Kernel, 0, "panel shape out of range", "launchHouseholderPanel", __FILE__,
                       __LINE__);
  const int limit = panelClusterLimit<S>();
  const int maxR = panelMaxR<S>();
  // Fewest rows per thread that fit the largest cluster: more blocks, less arithmetic each (rowsPerThread > 0 asks
  // for more, for measurements).
  const auto blocks = [m](int rows) { return (m + Index(rows) * kPanelThreads - 1) / (Index(rows) * kPanelThreads); };
  int R = 1;
  while (R < maxR && blocks(R) > limit) ++R;
  R = std::max(R, std::min(rowsPerThread, maxR));
  // Where the registers of the largest cluster do not hold the panel (householderPanelMaxRows allows that only when
  // the rows per thread are not capped and panelSharedRows set the shared-memory instantiations up, for clusters at
  // least that large): kPanelRegRowsBesideShared rows in registers, the fewest in shared memory, rowsPerThread
  // ignored.
  if (blocks(R) > limit) {
    constexpr int RR = kPanelRegRowsBesideShared<S>;
    int RS = 1;
    while (blocks(RR + RS) > limit) ++RS;
    const int C = static_cast<int>(blocks(RR + RS));
    if constexpr (sizeof(S) == 4) {
      if (RS == 1) launchPanelR<S, RR, 1>(A, lda, m, n, tau, T, ldt, C, stream, priority);
      else launchPanelR<S, RR, 2>(A, lda, m, n, tau, T, ldt, C, stream, priority);
    } else {
      // (2 + 1 rows per thread hold no more than 3 in registers: RS is 2.)
      launchPanelR<S, RR, 2>(A, lda, m, n, tau, T, ldt, C, stream, priority);
    }
    return;
  }
  const int C = static_cast<int>(blocks(R));
  if constexpr (sizeof(S) == 4) {
    switch (R) {
      case 1: launchPanelR<S, 1>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      case 2: launchPanelR<S, 2>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      case 3: launchPanelR<S, 3>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      case 4: launchPanelR<S, 4>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      case 5: launchPanelR<S, 5>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      default: launchPanelR<S, 6>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
    }
  } else {
    switch (R) {
      case 1: launchPanelR<S, 1>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      case 2: launchPanelR<S, 2>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
      default: launchPanelR<S, 3>(A, lda, m, n, tau, T, ldt, C, stream, priority); break;
    }
  }
}

template Index householderPanelMaxRows<float>();
template Index householderPanelMaxRows<double>();
template void launchHouseholderPanel<float>(float*, Index, Index, Index, float*, float*, Index, cudaStream_t, int,
                                            int);
template void launchHouseholderPanel<double>(double*, Index, Index, Index, double*, double*, Index, cudaStream_t,
                                             int, int);

}  // namespace kernels
}  // namespace tcqr
