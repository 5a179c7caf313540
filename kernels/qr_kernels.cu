// qr_kernels.cu - the small kernels of the recursive QR: forming explicit unit-lower Y blocks, the T factor of the
// compact WY form, identities for Q, and the non-finite input scan. Indices are 64-bit throughout so that matrices
// with more than 2^31 entries work.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cfloat>
#include <type_traits>

#include "../src/CudaCheck.hpp"
#include "../src/Tunables.hpp"
#include "../src/kernels.hpp"

namespace tcqr {
namespace kernels {

namespace {

constexpr int kThreads = detail::kElementwiseThreads;

inline unsigned gridFor(Index total) {
  // Grid-stride loops below: cap the grid, every thread loops.
  const Index blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

template <typename S>
__global__ void copyUnitLowerKernel(const S* __restrict__ src, Index lds, S* __restrict__ dst, Index ldd, Index m,
                                    Index n) {
  const Index total = m * n;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total; idx += Index(gridDim.x) * blockDim.x) {
    const Index j = idx / m, i = idx - j * m;
    S v = S(0);
    if (i > j) v = src[i + j * lds];
    else if (i == j) v = S(1);
    dst[i + j * ldd] = v;
  }
}

template <typename S>
__global__ void setIdentityKernel(S* A, Index lda, Index m, Index n) {
  const Index total = m * n;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total; idx += Index(gridDim.x) * blockDim.x) {
    const Index j = idx / m, i = idx - j * m;
    A[i + j * lda] = (i == j) ? S(1) : S(0);
  }
}

template <typename S>
struct Vec16;  // 16-byte vector of S
template <>
struct Vec16<float> {
  using type = float4;
  __device__ static bool finite(const float4& v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z) && isfinite(v.w); }
};
template <>
struct Vec16<double> {
  using type = double2;
  __device__ static bool finite(const double2& v) { return isfinite(v.x) && isfinite(v.y); }
};

// Contiguous, 16-byte aligned input: 16-byte loads, several in flight per thread.
template <typename S>
__global__ void flagNonFiniteContiguousKernel(const S* __restrict__ A, Index total, int* flag) {
  using V = typename Vec16<S>::type;
  constexpr int W = 16 / sizeof(S);
  const V* Av = reinterpret_cast<const V*>(A);
  const Index nvec = total / W, stride = Index(gridDim.x) * blockDim.x;
  bool bad = false;
  Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < nvec; i += 4 * stride) {
    const V a = Av[i], b = Av[i + stride], c = Av[i + 2 * stride], d = Av[i + 3 * stride];
    bad |= !(Vec16<S>::finite(a) && Vec16<S>::finite(b) && Vec16<S>::finite(c) && Vec16<S>::finite(d));
  }
  for (; i < nvec; i += stride) bad |= !Vec16<S>::finite(Av[i]);
  for (Index t = nvec * W + blockIdx.x * Index(blockDim.x) + threadIdx.x; t < total; t += stride)
    bad |= !isfinite(A[t]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicExch(flag, 1);
}

template <typename S>
__global__ void flagNonFiniteKernel(const S* __restrict__ A, Index lda, Index m, Index n, int* flag) {
  const Index total = m * n;
  bool bad = false;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total; idx += Index(gridDim.x) * blockDim.x) {
    const Index j = idx / m, i = idx - j * m;
    bad |= !isfinite(A[i + j * lda]);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicExch(flag, 1);
}

// Column scan: each block reads a chunk of kScanRowsPerThread * blockDim.x rows of one column (blockIdx.y strides over
// the columns), coalesced, several loads in flight per thread. The chunk's last nonzero row, capped, is merged by one
// atomicMax per block, skipped when the stored value is already as large (for a full column that is every block but
// the first few, so the atomics do not serialise on the n addresses).
constexpr int kScanRowsPerThread = 16;

__device__ __forceinline__ std::uint32_t warpMax(std::uint32_t v) {  // (__reduce_max_sync needs sm_80)
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// With `scale`, what goes to dst is A(:, j) * scale[j]; dst may then be A itself (each entry is read and written by
// the same thread, hence no __restrict__ on A and dst).
template <typename S, bool kVec>
__global__ void scanColumnsKernel(const S* A, Index lda, Index m, Index n, std::uint32_t cap, std::uint32_t* lastRow,
                                  int* notFinite, S* dst, Index ldd, const S* __restrict__ scale) {
  using V = typename Vec16<S>::type;
  constexpr int W = kVec ? 16 / sizeof(S) : 1;  // rows per access: 16-byte accesses where the layout allows
  __shared__ std::uint32_t sLast[kThreads / 32];
  const Index r0 = blockIdx.x * Index(kScanRowsPerThread) * blockDim.x;
  for (Index j = blockIdx.y; j < n; j += gridDim.y) {
    const S* col = A + j * lda;
    S* out = dst ? dst + j * ldd : nullptr;
    const S f = scale ? scale[j] : S(1);
    std::uint32_t last = 0;  // 1 + last nonzero row seen, capped
    bool bad = false;
    auto visit = [&](Index r, S x) {
      bad |= !isfinite(x);
      if (x != S(0)) last = static_cast<std::uint32_t>(r + 1 < Index(cap) ? r + 1 : Index(cap));
    };
#pragma unroll
    for (int k = 0; k < kScanRowsPerThread / W; ++k) {
      const Index r = r0 + (threadIdx.x + Index(k) * blockDim.x) * W;  // rows grow with k
      if (kVec && r + W <= m) {
        V v = *reinterpret_cast<const V*>(col + r);
        S* x = reinterpret_cast<S*>(&v);
#pragma unroll
        for (int i = 0; i < W; ++i) visit(r + i, x[i]);
        if (out) {
          if (scale) {
#pragma unroll
            for (int i = 0; i < W; ++i) x[i] *= f;
          }
          *reinterpret_cast<V*>(out + r) = v;
        }
      } else {
        for (Index i = r; i < r + W && i < m; ++i) {
          const S x = col[i];
          visit(i, x);
          if (out) out[i] = scale ? x * f : x;
        }
      }
    }
    last = warpMax(last);
    if (threadIdx.x % 32 == 0) sLast[threadIdx.x / 32] = last;
    if (__syncthreads_or(bad) && threadIdx.x == 0 && notFinite) atomicExch(notFinite, 1);
    if (threadIdx.x < 32) {
      std::uint32_t v = threadIdx.x < blockDim.x / 32 ? sLast[threadIdx.x] : 0u;
      v = warpMax(v);
      if (threadIdx.x == 0 && v > *(volatile std::uint32_t*)(lastRow + j)) atomicMax(lastRow + j, v);
    }
    __syncthreads();  // sLast is rewritten for the next column
  }
}

// C = alpha sum_b P_b + beta C for `batch` contiguous p x c partial products P_b (split-K GEMM). Block x sums 32
// consecutive entries of the p*c outputs: lane l takes entry l, the 8 warps split the batches (coalesced 128-byte
// rows of P), then one shared-memory reduction. The sums run in double (for float too: the point of the chunked
// products is a short accumulation in FP32, and the reduction should not add a long one back; it is memory-bound).
template <typename S>
__global__ void __launch_bounds__(256) addBatchesKernel(const S* __restrict__ P, Index batch, Index p, Index pc,
                                                        S alpha, S beta, S* C, Index ldc) {
  __shared__ double part[8][33];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const Index o = blockIdx.x * Index(32) + lane;
  double acc = 0.0;
  if (o < pc) {
#pragma unroll 8
    for (Index b = warp; b < batch; b += 8) acc += P[b * pc + o];
  }
  part[warp][lane] = acc;
  __syncthreads();
  if (warp == 0 && o < pc) {
    double sum = 0.0;
#pragma unroll
    for (int w = 0; w < 8; ++w) sum += part[w][lane];
    const Index j = o / p, i = o - j * p;
    S* c = C + i + j * ldc;
    *c = beta == S(0) ? static_cast<S>(double(alpha) * sum) : static_cast<S>(double(alpha) * sum + double(beta) * *c);
  }
}

// The partial products of launchSmallTN: block b writes P_b (p x c, contiguous at P + b p c) = the sum over its row
// blocks (RB rows each, grid-stride) of A(rows)^T B(rows), for p, c <= 64 = W. In float a row block's sum runs in
// float through shared memory and the row blocks' sums are added in double, rounded to float once; in double all of a
// block's rows are summed in one chain of double FMAs. Thread (tx, ty) of the 16 x 16 owns the entries
// (tx + 16 i, ty + 16 j), i, j < MT; RB keeps the two operand tiles at about 33 KB of shared memory.
// Each thread loads its PER entries of a row block into registers with every load issued before the first is used
// (a first version let four be in flight), and where a block sums several row blocks the next one's loads are in
// flight while the current one is multiplied. (With the default kSmallTnBlocksPerSM and the factorization's inner
// dimensions of at most kSmallTnMaxInner each block gets one row block on a 132-SM H200, so the prefetch acts only with
// fewer blocks: TCQR_SMALL_TN_BLOCKS_PER_SM, the GPU test's small block counts.)
template <typename S, int MT>
struct SmallTnShape {
  static constexpr int W = 16 * MT, LD = W + 1;
  static constexpr int RB = (sizeof(S) == 4 ? 4096 : 2048) / W;  // float: 128 / 64 rows; double: 64 / 32
  static constexpr int PER = RB * W / 256;                         // entries of each operand per thread and row block
  static_assert(RB * W % 256 == 0, "a row block spreads evenly over the 256 threads");
};

template <typename S, int MT>
__global__ void __launch_bounds__(256) smallTnKernel(const S* __restrict__ A, Index lda, const S* __restrict__ B,
                                                     Index ldb, Index k, int p, int c, S* __restrict__ P) {
  using Shape = SmallTnShape<S, MT>;
  constexpr int LD = Shape::LD, RB = Shape::RB, PER = Shape::PER;
  __shared__ S As[RB * LD], Bs[RB * LD];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  // Entry e of a thread is row kk = (tid + 256 e) % RB, column (tid + 256 e) / RB of the row block: consecutive
  // threads read consecutive rows of a column (coalesced); the columns beyond p (c) and the rows beyond k are zeros.
  S ra[PER], rb[PER];
  auto fetch = [&](Index r0) {
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int idx = tid + 256 * e, kk = idx % RB, col = idx / RB;
      const Index row = r0 + kk;
      const bool in = row < k;
      ra[e] = (in && col < p) ? A[row + col * lda] : S(0);
      rb[e] = (in && col < c) ? B[row + col * ldb] : S(0);
    }
  };
  // Double sums every row block into the same accumulators; float sums a row block in float (acc) and adds that to
  // double totals. (A separate double acc cost double's 64 x 64 kernel 32 registers and half its occupancy.)
  constexpr bool kDirect = std::is_same<S, double>::value;
  double total[MT][MT];
  S acc[MT][MT];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < MT; ++j) total[i][j] = 0.0, acc[i][j] = S(0);
  const Index rowBlocks = (k + RB - 1) / RB;
  if (Index(blockIdx.x) < rowBlocks) fetch(Index(blockIdx.x) * RB);
  for (Index blk = blockIdx.x; blk < rowBlocks; blk += gridDim.x) {
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int idx = tid + 256 * e, kk = idx % RB, col = idx / RB;
      As[kk * LD + col] = ra[e];
      Bs[kk * LD + col] = rb[e];
    }
    __syncthreads();
    if (blk + gridDim.x < rowBlocks) fetch((blk + gridDim.x) * RB);
#pragma unroll 8
    for (int kk = 0; kk < RB; ++kk) {
      S a[MT], b[MT];
#pragma unroll
      for (int i = 0; i < MT; ++i) a[i] = As[kk * LD + tx + 16 * i];
#pragma unroll
      for (int j = 0; j < MT; ++j) b[j] = Bs[kk * LD + ty + 16 * j];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < MT; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    if (!kDirect) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < MT; ++j) total[i][j] += double(acc[i][j]), acc[i][j] = S(0);
    }
    __syncthreads();  // the tiles are rewritten for the next row block
  }
  S* mine = P + Index(blockIdx.x) * p * c;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      const int r = tx + 16 * i, col = ty + 16 * j;
      if (r < p && col < c) mine[r + col * p] = kDirect ? acc[i][j] : static_cast<S>(total[i][j]);
    }
}

// Householder reflector of one column x (m entries), Eigen's makeHouseholder / LAPACK larfg, in two launches:
// partial sums of squares of the tail x(1 : m) (the first block also saves x(0), which the second launch overwrites),
// then every block reduces the partials, and applies beta, tau and the scaling 1 / (x0 - beta) to its rows.
constexpr int kColumnBlocks = 256;
static_assert(kColumnBlocks + 1 <= detail::kColumnReflectorScratch, "columnReflector's scratch");

template <typename S>
__global__ void __launch_bounds__(256) columnSumSquaresKernel(const S* __restrict__ x, Index m, S* partial) {
  __shared__ S warpSums[8];
  S acc = S(0);
  for (Index r = 1 + blockIdx.x * Index(blockDim.x) + threadIdx.x; r < m; r += Index(gridDim.x) * blockDim.x)
    acc += x[r] * x[r];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) warpSums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    S sum = S(0);
    for (int w = 0; w < 8; ++w) sum += warpSums[w];
    partial[blockIdx.x] = sum;
    if (blockIdx.x == 0) partial[kColumnBlocks] = x[0];
  }
}

template <typename S>
__global__ void __launch_bounds__(256) columnReflectorKernel(S* __restrict__ x, Index m, const S* partial, int blocks,
                                                             S* tau) {
  __shared__ S sScale;
  if (threadIdx.x < 32) {
    S sum = S(0);
    for (int b = threadIdx.x; b < blocks; b += 32) sum += partial[b];
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x == 0) {
      const S c0 = partial[kColumnBlocks];
      // Eigen: a tail with squared norm at most the smallest normal number gives the identity (tau = 0, beta = c0).
      const bool identity = sum <= (sizeof(S) == 4 ? S(FLT_MIN) : S(DBL_MIN));
      S beta = c0, t = S(0), scale = S(0);
      if (!identity) {
        beta = sqrt(c0 * c0 + sum);
        if (c0 >= S(0)) beta = -beta;
        t = (beta - c0) / beta;
        scale = S(1) / (c0 - beta);
      }
      sScale = scale;
      if (blockIdx.x == 0) {
        *tau = t;
        x[0] = beta;
      }
    }
  }
  __syncthreads();
  const S scale = sScale;
  for (Index r = 1 + blockIdx.x * Index(blockDim.x) + threadIdx.x; r < m; r += Index(gridDim.x) * blockDim.x)
    x[r] *= scale;  // (scale = 0 for the identity: Eigen stores a zero essential part)
}

// One block; the recurrence is sequential in i, each step a triangular mat-vec spread over the threads.
template <typename S>
__global__ void formTKernel(const S* __restrict__ Sm, Index lds, const S* __restrict__ tau, S* T, Index ldt, Index k) {
  for (Index idx = threadIdx.x; idx < k * k; idx += blockDim.x) {
    const Index j = idx / k, i = idx - j * k;
    if (i > j) T[i + j * ldt] = S(0);
  }
  for (Index i = 0; i < k; ++i) {
    const S ti = tau[i];
    for (Index r = threadIdx.x; r < i; r += blockDim.x) {
      S acc = S(0);
      for (Index c = r; c < i; ++c) acc += T[r + c * ldt] * Sm[c + i * lds];
      T[r + i * ldt] = -ti * acc;
    }
    if (threadIdx.x == 0) T[i + i * ldt] = ti;
    __syncthreads();
  }
}

// formTKernel for k <= 32 in one warp: the recurrence only ever combines entries of one row of T, so lane r keeps row r
// in registers and needs no other lane; S is staged in shared memory, read as broadcasts. The block version pays a
// barrier per column: 30 us per call on the H100 (TCQR_TRACE, 2026-11-26), once per cuSOLVER panel.
template <typename S>
__global__ void __launch_bounds__(32) formTWarpKernel(const S* __restrict__ Sm, Index lds, const S* __restrict__ tau,
                                                      S* T, Index ldt, int k) {
  __shared__ S sM[32][33];  // sM[i][c] = S(c, i)
  __shared__ S sTau[32];
  const int r = threadIdx.x;
  for (int i = 0; i < k; ++i) sM[i][r] = (r < k) ? Sm[r + i * lds] : S(0);
  sTau[r] = (r < k) ? tau[r] : S(0);
  __syncwarp();
  S t[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    if (i >= k) break;
    S acc = S(0);
#pragma unroll
    for (int c = 0; c < i; ++c) acc += t[c] * sM[i][c];  // t[c] = 0 for c < r
    t[i] = (r < i) ? -sTau[i] * acc : ((r == i) ? sTau[i] : S(0));
  }
  if (r < k) {
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (i < k) T[r + i * ldt] = t[i];
  }
}


// The top of a narrow compact-WY update (k <= 32), one warp per column j of B, lane i holding row i:
//   w = Z(:, j) + Yt^T Btop(:, j);  z = op(T) w;  Z(:, j) = z;  Btop(:, j) -= Yt z
// with Yt the unit lower rows x k top of Y (k <= rows <= 32; read from Y's storage: below the diagonal only) and T
// upper triangular. Replaces four launches (the copy of Yt, Yt^T Btop, T's product, the top's TRMM) by one; the long
// products with Y's rows below `rows` stay cuBLAS GEMMs. With rows > k (a Y of at most 32 rows, taken whole: the last
// panels of a square matrix) there are none, and zIn is false: Z is only written.
template <typename S>
__global__ void __launch_bounds__(256) smallUpdateTopKernel(const S* __restrict__ Y, Index ldy, const S* __restrict__ T,
                                                            Index ldt, int k, int rows, S* Btop, Index ldb, S* Z,
                                                            Index ldz, Index c, bool transpose, bool zIn) {
  __shared__ S sY[32][33];  // sY[r][i] = Yt(r, i)
  __shared__ S sT[32][33];  // sT[r][i] = T(r, i), zero outside the upper triangle and beyond k
  for (int idx = threadIdx.x; idx < 32 * 32; idx += blockDim.x) {
    const int r = idx % 32, i = idx / 32;
    sY[r][i] = (r < rows && i < k) ? (r > i ? Y[r + i * ldy] : (r == i ? S(1) : S(0))) : S(0);
    sT[r][i] = (r < k && i < k && r <= i) ? T[r + i * ldt] : S(0);
  }
  __syncthreads();
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (Index j = Index(blockIdx.x) * warps + threadIdx.x / 32; j < c; j += Index(gridDim.x) * warps) {
    const S b = lane < rows ? Btop[lane + j * ldb] : S(0);
    S w = (zIn && lane < k) ? Z[lane + j * ldz] : S(0);
#pragma unroll
    for (int r = 0; r < 32; ++r) w += sY[r][lane] * __shfl_sync(0xffffffffu, b, r);  // (Yt^T b)_lane
    S z = S(0);
    if (transpose) {
#pragma unroll
      for (int r = 0; r < 32; ++r) z += sT[r][lane] * __shfl_sync(0xffffffffu, w, r);  // (T^T w)_lane
    } else {
#pragma unroll
      for (int r = 0; r < 32; ++r) z += sT[lane][r] * __shfl_sync(0xffffffffu, w, r);  // (T w)_lane
    }
    S y = S(0);
#pragma unroll
    for (int r = 0; r < 32; ++r) y += sY[lane][r] * __shfl_sync(0xffffffffu, z, r);  // (Yt z)_lane
    if (lane < k) Z[lane + j * ldz] = z;
    if (lane < rows) Btop[lane + j * ldb] = b - y;
  }
}

// The merge of two compact WY forms of at most 32 reflectors each (one block of 32 x 32 threads, thread (i, j) owns
// entry (i, j)): P = P_bottom - Y1mid^T Y2t, T12 = T1 P T2, T21 = 0, with Y1mid = rows n1 .. n1 + n2 of Y1 (dense),
// Y2t the unit lower n2 x n2 top of Y2 (read below its diagonal from Y2's storage), and P_bottom = -Y1bot^T Y2bot
// already in T12 when hasBottom.
template <typename S>
__global__ void __launch_bounds__(1024) mergeSmallTKernel(const S* __restrict__ Y1mid, Index ld1,
                                                          const S* __restrict__ Y2, Index ld2, S* T, Index ldt, int n1,
                                                          int n2, bool hasBottom) {
  __shared__ S sA[32][33];
  __shared__ S sB[32][33];
  __shared__ S sP[32][33];
  const int i = threadIdx.x, j = threadIdx.y;  // row i of the n1 x n2 result, column j
  S* T12 = T + Index(n1) * ldt;                 // T(0 : n1, n1 : n1 + n2)
  // P = P_bottom - Y1mid^T Y2t: sA = Y1mid (n2 x n1), sB = Y2t (n2 x n2)
  sA[i][j] = (i < n2 && j < n1) ? Y1mid[i + j * ld1] : S(0);
  sB[i][j] = (i < n2 && j < n2) ? (i > j ? Y2[i + j * ld2] : (i == j ? S(1) : S(0))) : S(0);
  __syncthreads();
  S p = (hasBottom && i < n1 && j < n2) ? T12[i + j * ldt] : S(0);
  for (int r = 0; r < 32; ++r) p -= sA[r][i] * sB[r][j];
  sP[i][j] = (i < n1 && j < n2) ? p : S(0);
  __syncthreads();
  // X = T1 P (T1: n1 x n1 upper, at T(0, 0))
  sA[i][j] = (i < n1 && j < n1 && i <= j) ? T[i + j * ldt] : S(0);
  sB[i][j] = (i < n2 && j < n2 && i <= j) ? T[(n1 + i) + (n1 + j) * ldt] : S(0);  // T2
  __syncthreads();
  S x = S(0);
  for (int r = 0; r < 32; ++r) x += sA[i][r] * sP[r][j];
  __syncthreads();
  sP[i][j] = x;
  __syncthreads();
  S t = S(0);
  for (int r = 0; r < 32; ++r) t += sP[i][r] * sB[r][j];  // X T2
  if (i < n1 && j < n2) T12[i + j * ldt] = t;
  if (i < n2 && j < n1) T[(n1 + i) + j * ldt] = S(0);  // T21
}

}  // namespace

template <typename S>
void launchCopyUnitLower(const S* src, Index lds, S* dst, Index ldd, Index m, Index n, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  copyUnitLowerKernel<S><<<gridFor(m * n), kThreads, 0, stream>>>(src, lds, dst, ldd, m, n);
  TCQR_CHECK_LAUNCH("copyUnitLowerKernel");
}

template <typename S>
void launchSetIdentity(S* A, Index lda, Index m, Index n, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  setIdentityKernel<S><<<gridFor(m * n), kThreads, 0, stream>>>(A, lda, m, n);
  TCQR_CHECK_LAUNCH("setIdentityKernel");
}

template <typename S>
void launchFlagNonFinite(const S* A, Index lda, Index m, Index n, int* flag, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (lda == m && reinterpret_cast<std::uintptr_t>(A) % 16 == 0) {
    int sms = 0, dev = 0;
    TCQR_CHECK(cudaGetDevice(&dev));
    TCQR_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const Index blocks = std::min<Index>((m * n / (16 / sizeof(S)) + kThreads - 1) / kThreads, Index(sms) * 8);
    flagNonFiniteContiguousKernel<S><<<static_cast<unsigned>(std::max<Index>(blocks, 1)), kThreads, 0, stream>>>(
        A, m * n, flag);
    TCQR_CHECK_LAUNCH("flagNonFiniteContiguousKernel");
    return;
  }
  flagNonFiniteKernel<S><<<gridFor(m * n), kThreads, 0, stream>>>(A, lda, m, n, flag);
  TCQR_CHECK_LAUNCH("flagNonFiniteKernel");
}

template <typename S>
void launchScanColumns(const S* A, Index lda, Index m, Index n, std::uint32_t cap, std::uint32_t* lastRow,
                       int* notFinite, cudaStream_t stream, S* dst, Index ldd, const S* scale) {
  if (n <= 0) return;
  TCQR_CHECK(cudaMemsetAsync(lastRow, 0, sizeof(std::uint32_t) * n, stream));
  if (m <= 0) return;
  const Index chunks = (m + Index(kScanRowsPerThread) * kThreads - 1) / (Index(kScanRowsPerThread) * kThreads);
  if (chunks > 0x7fffffff)
    detail::throwError(ErrorSource::Kernel, 0, "too many rows", "launchScanColumns", __FILE__, __LINE__);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min<Index>(n, 65535)));
  auto aligned = [](const void* p, Index ld) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && (ld * Index(sizeof(S))) % 16 == 0;
  };
  if (aligned(A, lda) && (!dst || aligned(dst, ldd)))
    scanColumnsKernel<S, true><<<grid, kThreads, 0, stream>>>(A, lda, m, n, cap, lastRow, notFinite, dst, ldd, scale);
  else
    scanColumnsKernel<S, false><<<grid, kThreads, 0, stream>>>(A, lda, m, n, cap, lastRow, notFinite, dst, ldd,
                                                               scale);
  TCQR_CHECK_LAUNCH("scanColumnsKernel");
}

template <typename S>
void launchAddBatches(const S* P, Index batch, Index p, Index c, S alpha, S beta, S* C, Index ldc,
                      cudaStream_t stream) {
  if (p <= 0 || c <= 0) return;
  const Index pc = p * c;
  addBatchesKernel<S><<<static_cast<unsigned>((pc + 31) / 32), 256, 0, stream>>>(P, batch, p, pc, alpha, beta, C, ldc);
  TCQR_CHECK_LAUNCH("addBatchesKernel");
}

template <typename S>
void launchSmallTN(const S* A, Index lda, const S* B, Index ldb, Index k, Index p, Index c, S alpha, S beta, S* C,
                   Index ldc, S* partials, int maxBlocks, cudaStream_t stream) {
  if (p <= 0 || c <= 0) return;
  if (p > 64 || c > 64)
    detail::throwError(ErrorSource::Kernel, 0, "p or c > 64", "launchSmallTN", __FILE__, __LINE__);
  static_assert(SmallTnShape<S, 2>::RB == smallTnRowBlock(32, 32, sizeof(S)) &&
                    SmallTnShape<S, 4>::RB == smallTnRowBlock(64, 64, sizeof(S)),
                "smallTnRowBlock (kernels.hpp) must describe the kernel");
  const bool narrow = p <= 32 && c <= 32;
  const Index blocks = smallTnBlocks(k, p, c, sizeof(S), maxBlocks);
  if (narrow)
    smallTnKernel<S, 2><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(A, lda, B, ldb, k, static_cast<int>(p),
                                                                           static_cast<int>(c), partials);
  else
    smallTnKernel<S, 4><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(A, lda, B, ldb, k, static_cast<int>(p),
                                                                           static_cast<int>(c), partials);
  TCQR_CHECK_LAUNCH("smallTnKernel");
  launchAddBatches<S>(partials, blocks, p, c, alpha, beta, C, ldc, stream);
}

template <typename S>
void launchColumnReflector(S* x, Index m, S* tau, S* scratch, cudaStream_t stream) {
  if (m <= 0) return;
  const int blocks = static_cast<int>(std::min<Index>(kColumnBlocks, std::max<Index>(1, (m + 2047) / 2048)));
  columnSumSquaresKernel<S><<<blocks, 256, 0, stream>>>(x, m, scratch);
  TCQR_CHECK_LAUNCH("columnSumSquaresKernel");
  columnReflectorKernel<S><<<blocks, 256, 0, stream>>>(x, m, scratch, blocks, tau);
  TCQR_CHECK_LAUNCH("columnReflectorKernel");
}

template <typename S>
void launchFormT(const S* Sm, Index lds, const S* tau, S* T, Index ldt, Index k, cudaStream_t stream) {
  if (k <= 0) return;
  if (k <= 32) {
    formTWarpKernel<S><<<1, 32, 0, stream>>>(Sm, lds, tau, T, ldt, static_cast<int>(k));
    TCQR_CHECK_LAUNCH("formTWarpKernel");
    return;
  }
  const int threads = k >= 256 ? 256 : static_cast<int>((k + 31) / 32 * 32);
  formTKernel<S><<<1, threads, 0, stream>>>(Sm, lds, tau, T, ldt, k);
  TCQR_CHECK_LAUNCH("formTKernel");
}

template <typename S>
void launchSmallUpdateTop(const S* Y, Index ldy, const S* T, Index ldt, Index k, Index rows, S* Btop, Index ldb, S* Z,
                          Index ldz, Index c, bool transpose, bool zIn, cudaStream_t stream) {
  if (k <= 0 || c <= 0) return;
  if (k > 32 || rows < k || rows > 32)
    detail::throwError(ErrorSource::Kernel, 0, "k > 32, rows < k or rows > 32", "launchSmallUpdateTop", __FILE__,
                       __LINE__);
  const Index blocks = std::min<Index>((c + 7) / 8, 65535);
  smallUpdateTopKernel<S><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      Y, ldy, T, ldt, static_cast<int>(k), static_cast<int>(rows), Btop, ldb, Z, ldz, c, transpose, zIn);
  TCQR_CHECK_LAUNCH("smallUpdateTopKernel");
}

template <typename S>
void launchMergeSmallT(const S* Y1mid, Index ld1, const S* Y2, Index ld2, S* T, Index ldt, Index n1, Index n2,
                       bool hasBottom, cudaStream_t stream) {
  if (n1 <= 0 || n2 <= 0) return;
  if (n1 > 32 || n2 > 32) detail::throwError(ErrorSource::Kernel, 0, "n1 or n2 > 32", "launchMergeSmallT", __FILE__, __LINE__);
  mergeSmallTKernel<S><<<1, dim3(32, 32), 0, stream>>>(Y1mid, ld1, Y2, ld2, T, ldt, static_cast<int>(n1),
                                                      static_cast<int>(n2), hasBottom);
  TCQR_CHECK_LAUNCH("mergeSmallTKernel");
}

#define TCQR_INSTANTIATE(S)                                                                              \
  template void launchCopyUnitLower<S>(const S*, Index, S*, Index, Index, Index, cudaStream_t);        \
  template void launchSetIdentity<S>(S*, Index, Index, Index, cudaStream_t);                           \
  template void launchFlagNonFinite<S>(const S*, Index, Index, Index, int*, cudaStream_t);             \
  template void launchScanColumns<S>(const S*, Index, Index, Index, std::uint32_t, std::uint32_t*, int*,  \
                                     cudaStream_t, S*, Index, const S*);                                \
  template void launchColumnReflector<S>(S*, Index, S*, S*, cudaStream_t);                              \
  template void launchAddBatches<S>(const S*, Index, Index, Index, S, S, S*, Index, cudaStream_t);         \
  template void launchSmallTN<S>(const S*, Index, const S*, Index, Index, Index, Index, S, S, S*, Index, S*, int, \
                                 cudaStream_t);                                                         \
  template void launchFormT<S>(const S*, Index, const S*, S*, Index, Index, cudaStream_t);                \
  template void launchSmallUpdateTop<S>(const S*, Index, const S*, Index, Index, Index, S*, Index, S*, Index, Index, \
                                        bool, bool, cudaStream_t);                                         \
  template void launchMergeSmallT<S>(const S*, Index, const S*, Index, S*, Index, Index, Index, bool, cudaStream_t);
TCQR_INSTANTIATE(float)
TCQR_INSTANTIATE(double)
#undef TCQR_INSTANTIATE

}  // namespace kernels
}  // namespace tcqr
