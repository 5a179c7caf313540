// tsqr_kernels.cu - the TSQR panel (TPDS'25 §V.A; PPoPP'23 §5.1-5.2): a Householder QR of one tile per thread block
// with the column distribution of Fig. 4 (right): warp w owns columns w, w+8, ..., so every reduction is one warp's
// shuffle, and ReconstructWY (Ballard et al.) as a signed LU plus one pass over the rows of the explicit Q.
#include <cfloat>
#include <cmath>

#include "../src/CudaCheck.hpp"
#include "../src/Tunables.hpp"
#include "../src/kernels.hpp"

namespace tcqr {
namespace kernels {

namespace {

constexpr int TR = static_cast<int>(detail::kTsqrTileRows);
constexpr int NC = static_cast<int>(detail::kTsqrMaxCols);
constexpr int kThreads = detail::kTsqrThreads;
constexpr int kWarps = kThreads / 32;

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

// Shared memory: the tile column-major with leading dimension TR (lanes read consecutive rows: no bank conflicts).
template <typename S>
__global__ void __launch_bounds__(kThreads) tsqrTileQRKernel(S* __restrict__ X, Index ldx, Index m, int n,
                                                             Index tiles, S* __restrict__ tau, S* __restrict__ Rout,
                                                             Index ldr) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* a = reinterpret_cast<S*>(smem);
  __shared__ S sTau[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int c = 0; c < n; ++c)
    for (int r = threadIdx.x; r < nr; r += kThreads) a[c * TR + r] = X[r0 + r + c * ldx];
  __syncthreads();

  for (int j = 0; j < n; ++j) {
    if (warp == 0) {  // the reflector of column j (Eigen's makeHouseholder: same signs, same zero-tail rule)
      S* col = a + j * TR;
      S sq = S(0);
      for (int r = j + 1 + lane; r < nr; r += 32) sq += col[r] * col[r];
      sq = warpSum(sq);
      const S alpha = col[j];
      __syncwarp();
      S tj, beta;
      if (sq <= tinyNormSq<S>()) {
        tj = S(0);
        beta = alpha;
        for (int r = j + 1 + lane; r < nr; r += 32) col[r] = S(0);
      } else {
        beta = sqrt(alpha * alpha + sq);
        if (alpha >= S(0)) beta = -beta;
        tj = (beta - alpha) / beta;
        const S scale = S(1) / (alpha - beta);
        for (int r = j + 1 + lane; r < nr; r += 32) col[r] *= scale;
      }
      if (lane == 0) {
        col[j] = beta;
        sTau[j] = tj;
      }
    }
    __syncthreads();
    const S tj = sTau[j];
    if (tj != S(0)) {
      const S* v = a + j * TR;
      for (int c = j + 1 + warp; c < n; c += kWarps) {
        S* col = a + c * TR;
        S d = (lane == 0) ? col[j] : S(0);
        for (int r = j + 1 + lane; r < nr; r += 32) d += v[r] * col[r];
        d = warpSum(d) * tj;
        __syncwarp();
        if (lane == 0) col[j] -= d;
        for (int r = j + 1 + lane; r < nr; r += 32) col[r] -= d * v[r];
      }
    }
    __syncthreads();
  }

  for (int c = 0; c < n; ++c)
    for (int r = threadIdx.x; r < nr; r += kThreads) X[r0 + r + c * ldx] = a[c * TR + r];
  for (int j = threadIdx.x; j < n; j += kThreads) tau[t * n + j] = sTau[j];
  for (int idx = threadIdx.x; idx < n * n; idx += kThreads) {
    const int c = idx / n, i = idx - c * n;
    Rout[t * n + i + c * ldr] = (i <= c) ? a[c * TR + i] : S(0);
  }
}

// X_tile <- H_0 ... H_{n-1} [C_t; 0]. Columns of the result are independent, so each warp runs all n reflectors on
// its own columns without block-wide barriers.
template <typename S>
__global__ void __launch_bounds__(kThreads) tsqrTileApplyQKernel(S* __restrict__ X, Index ldx, Index m, int n,
                                                                 Index tiles, const S* __restrict__ tau,
                                                                 const S* __restrict__ C, Index ldc) {
  extern __shared__ __align__(16) unsigned char smem[];
  S* v = reinterpret_cast<S*>(smem);
  S* x = v + TR * NC;
  __shared__ S sTau[NC];
  const Index t = blockIdx.x;
  const Index r0 = tsqrTileBegin(m, tiles, t);
  const int nr = static_cast<int>(tsqrTileBegin(m, tiles, t + 1) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int c = 0; c < n; ++c)
    for (int r = threadIdx.x; r < nr; r += kThreads) {
      v[c * TR + r] = X[r0 + r + c * ldx];
      x[c * TR + r] = (r < n) ? C[t * n + r + c * ldc] : S(0);
    }
  for (int j = threadIdx.x; j < n; j += kThreads) sTau[j] = tau[t * n + j];
  __syncthreads();

  for (int c = warp; c < n; c += kWarps) {
    S* col = x + c * TR;
    for (int j = n - 1; j >= 0; --j) {
      const S tj = sTau[j];
      if (tj == S(0)) continue;
      const S* vj = v + j * TR;
      S d = (lane == 0) ? col[j] : S(0);
      for (int r = j + 1 + lane; r < nr; r += 32) d += vj[r] * col[r];
      d = warpSum(d) * tj;
      __syncwarp();
      if (lane == 0) col[j] -= d;
      for (int r = j + 1 + lane; r < nr; r += 32) col[r] -= d * vj[r];
      __syncwarp();
    }
  }
  __syncthreads();
  for (int c = 0; c < n; ++c)
    for (int r = threadIdx.x; r < nr; r += kThreads) X[r0 + r + c * ldx] = x[c * TR + r];
}

// One block. M = -Q1, then at step k the sign s_k = sign(M_kk) (1 for zero) makes the pivot s_k + M_kk >= 1 in
// magnitude: the LU of S - Q1 needs no pivoting.
template <typename S>
__global__ void signedLUKernel(S* LU, Index ld, int n, S* s) {
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
}

// One thread per row; the row lives in registers (NC entries, loops fully unrolled so indices are constants).
template <typename S>
__global__ void __launch_bounds__(256) reconstructWYKernel(const S* Q, Index ldq, Index m, int n, const S* LU,
                                                           Index ldlu, const S* s, const S* R, Index ldr, S* A,
                                                           Index lda, S* W, Index ldw, S* tau) {
  __shared__ S sL[NC][NC + 1];  // sL[j][k] = L1(j, k), unit lower (identity beyond n)
  __shared__ S sU[NC][NC + 1];  // sU[k][j] = U(k, j), upper (identity beyond n)
  __shared__ S sS[NC];
  for (int idx = threadIdx.x; idx < NC * NC; idx += blockDim.x) {
    const int r = idx / NC, c = idx % NC;
    const bool in = r < n && c < n;
    sL[r][c] = (r == c) ? S(1) : ((in && r > c) ? LU[r + c * ldlu] : S(0));
    sU[r][c] = (in && r <= c) ? LU[r + c * ldlu] : ((r == c) ? S(1) : S(0));
  }
  for (int j = threadIdx.x; j < NC; j += blockDim.x) sS[j] = (j < n) ? s[j] : S(1);
  __syncthreads();
  if (blockIdx.x == 0)
    for (int j = threadIdx.x; j < n; j += blockDim.x) tau[j] = sU[j][j] * sS[j];

  const Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  S q[NC], w[NC];
#pragma unroll
  for (int j = 0; j < NC; ++j) q[j] = (j < n) ? Q[i + j * ldq] : S(0);
  // W(i,:) Y1^T = I(i,:) - Q(i,:) S_n : forward substitution with the unit lower L1.
#pragma unroll
  for (int j = 0; j < NC; ++j) {
    S acc = ((i == j) ? S(1) : S(0)) - q[j] * sS[j];
#pragma unroll
    for (int k = 0; k < j; ++k) acc -= sL[j][k] * w[k];
    w[j] = acc;
  }
  if (i >= n) {
    // Y(i,:) U = -Q(i,:)  (reuses q for y).
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      S acc = -q[j];
#pragma unroll
      for (int k = 0; k < j; ++k) acc -= q[k] * sU[k][j];
      q[j] = acc / sU[j][j];
    }
    for (int j = 0; j < n; ++j) A[i + j * lda] = q[j];
  } else {
    const int ii = static_cast<int>(i);
    for (int j = 0; j < n; ++j) A[i + j * lda] = (j < ii) ? sL[ii][j] : sS[ii] * R[ii + j * ldr];
  }
  for (int j = 0; j < n; ++j) W[i + j * ldw] = w[j];
}

template <typename K>
void allowSharedMemory(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    TCQR_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

template <typename S>
void launchTsqrTileQR(S* X, Index ldx, Index m, Index n, Index tiles, S* tau, S* Rout, Index ldr, cudaStream_t stream) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  if (n > NC || (m + tiles - 1) / tiles > TR)
    detail::throwError(ErrorSource::Kernel, 0, "invalid tile shape", "launchTsqrTileQR", __FILE__, __LINE__);
  const size_t bytes = sizeof(S) * TR * NC;
  allowSharedMemory(tsqrTileQRKernel<S>, bytes);
  tsqrTileQRKernel<S><<<static_cast<unsigned>(tiles), kThreads, bytes, stream>>>(X, ldx, m, static_cast<int>(n), tiles,
                                                                                 tau, Rout, ldr);
  TCQR_CHECK_LAUNCH("tsqrTileQRKernel");
}

template <typename S>
void launchTsqrTileApplyQ(S* X, Index ldx, Index m, Index n, Index tiles, const S* tau, const S* C, Index ldc,
                          cudaStream_t stream) {
  if (m <= 0 || n <= 0 || tiles <= 0) return;
  if (n > NC || (m + tiles - 1) / tiles > TR)
    detail::throwError(ErrorSource::Kernel, 0, "invalid tile shape", "launchTsqrTileApplyQ", __FILE__, __LINE__);
  const size_t bytes = 2 * sizeof(S) * TR * NC;
  allowSharedMemory(tsqrTileApplyQKernel<S>, bytes);
  tsqrTileApplyQKernel<S><<<static_cast<unsigned>(tiles), kThreads, bytes, stream>>>(X, ldx, m, static_cast<int>(n),
                                                                                     tiles, tau, C, ldc);
  TCQR_CHECK_LAUNCH("tsqrTileApplyQKernel");
}

template <typename S>
void launchSignedLU(S* LU, Index ld, Index n, S* s, cudaStream_t stream) {
  if (n <= 0) return;
  signedLUKernel<S><<<1, 256, 0, stream>>>(LU, ld, static_cast<int>(n), s);
  TCQR_CHECK_LAUNCH("signedLUKernel");
}

template <typename S>
void launchReconstructWY(const S* Q, Index ldq, Index m, Index n, const S* LU, Index ldlu, const S* s, const S* R,
                         Index ldr, S* A, Index lda, S* W, Index ldw, S* tau, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (n > NC) detail::throwError(ErrorSource::Kernel, 0, "n > 32", "launchReconstructWY", __FILE__, __LINE__);
  const Index blocks = (m + 255) / 256;
  reconstructWYKernel<S><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(Q, ldq, m, static_cast<int>(n), LU, ldlu,
                                                                            s, R, ldr, A, lda, W, ldw, tau);
  TCQR_CHECK_LAUNCH("reconstructWYKernel");
}

#define TCQR_INSTANTIATE(S)                                                                                        \
  template void launchTsqrTileQR<S>(S*, Index, Index, Index, Index, S*, S*, Index, cudaStream_t);                 \
  template void launchTsqrTileApplyQ<S>(S*, Index, Index, Index, Index, const S*, const S*, Index, cudaStream_t); \
  template void launchSignedLU<S>(S*, Index, Index, S*, cudaStream_t);                                           \
  template void launchReconstructWY<S>(const S*, Index, Index, Index, const S*, Index, const S*, const S*, Index, \
                                       S*, Index, S*, Index, S*, cudaStream_t);
TCQR_INSTANTIATE(float)
TCQR_INSTANTIATE(double)
#undef TCQR_INSTANTIATE

}  // namespace kernels
}  // namespace tcqr
