// precision_kernels.cu - operand conversion for the tensor-core precision modes (TPDS'25 §V.C.1 and §V.C.3) and the
// power-of-two column scaling that keeps FP16 in range (HPDC'20 §3.5).
//
// Every conversion reads a column-major FP32 block (any leading dimension, any alignment) and writes a packed copy
// whose leading dimension is a multiple of 8 elements, with the padding rows zeroed. Each thread handles 8
// consecutive rows of one column: a 16-byte (half/bf16) or two 16-byte (float) stores, and 16-byte loads when the
// source column is 16-byte aligned. The zero padding lets a GEMM whose inner dimension is the stored row count run
// with that dimension rounded up to a multiple of 8 (the padded products are exact zeros).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../src/CudaCheck.hpp"
#include "../src/kernels.hpp"

namespace tcqr {
namespace kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerThread = 8;

/// Round to TF32 (10 explicit mantissa bits), to nearest with ties away from zero, as cvt.rna.tf32.f32. The result is
/// an FP32 value whose low 13 mantissa bits are zero, so a tensor core consumes it without further rounding.
__device__ __forceinline__ float roundTf32(float x) {
  if (!isfinite(x)) return x;
  unsigned u = __float_as_uint(x);
  u = (u + 0x1000u) & 0xFFFFE000u;
  return __uint_as_float(u);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ __half fromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Loads rows [i, i + 8) of column j (zeros past `rows`).
__device__ __forceinline__ void load8(const float* __restrict__ A, Index lda, Index rows, Index i, Index j,
                                      float v[kRowsPerThread]) {
  const float* col = A + j * lda;
  const bool aligned = ((reinterpret_cast<std::uintptr_t>(col + i) & 15u) == 0);
  if (aligned && i + kRowsPerThread <= rows) {
    const float4 a = *reinterpret_cast<const float4*>(col + i);
    const float4 b = *reinterpret_cast<const float4*>(col + i + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) v[r] = (i + r < rows) ? col[i + r] : 0.0f;
  }
}

/// Calls f(v, offset, i, j) for every group of 8 rows of every column of A (v: those rows, zeros past `rows`; offset:
/// the group's first element in the packed copy with leading dimension ldo; i, j: its first row and its column),
/// grid-stride.
template <class F>
__device__ __forceinline__ void forEachGroup(const float* __restrict__ A, Index lda, Index rows, Index cols, Index ldo,
                                             F&& f, Index padded = 0) {
  // (padded: the rows written per column, zeros below `rows`; paddedRows(rows) where ldo leaves room for more.)
  const Index groups = (padded > 0 ? padded : ldo) / kRowsPerThread, total = groups * cols;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total; idx += Index(gridDim.x) * blockDim.x) {
    const Index j = idx / groups, i = (idx - j * groups) * kRowsPerThread;
    float v[kRowsPerThread];
    load8(A, lda, rows, i, j, v);
    f(v, i + j * ldo, i, j);
  }
}

/// Whether a finite x became infinite in y (an overflow of the conversion; NaN and infinite inputs are flagged where
/// the input is read, see launchFlagNonFinite).
__device__ __forceinline__ bool overflowed(float x, float y) { return isinf(y) && isfinite(x); }

template <typename T>
__global__ void convertKernel(const float* __restrict__ A, Index lda, Index rows, Index cols, T* __restrict__ out,
                              Index ldo, int* overflow) {
  forEachGroup(A, lda, rows, cols, ldo, [&](const float(&v)[kRowsPerThread], Index o, Index, Index) {
    alignas(16) T h[kRowsPerThread];
    bool over = false;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      h[r] = fromFloat<T>(v[r]);
      over |= overflowed(v[r], float(h[r]));
    }
    *reinterpret_cast<uint4*>(out + o) = *reinterpret_cast<const uint4*>(h);
    if (over && overflow) *overflow = 1;
  });
}

/// Whether the group of rows [i, i + 8) of column j is in `dup`'s leading block (SplitDup).
__device__ __forceinline__ bool inDup(const SplitDup& dup, Index i, Index j) {
  return dup.p != nullptr && (dup.cols ? j : i) < dup.count;
}

__global__ void splitTf32Kernel(const float* __restrict__ A, Index lda, Index rows, Index cols, float* __restrict__ hi,
                                float* __restrict__ lo, Index ldo, Index padded, SplitDup dup) {
  forEachGroup(A, lda, rows, cols, ldo, [&](const float(&v)[kRowsPerThread], Index o, Index i, Index j) {
    float h[kRowsPerThread], l[kRowsPerThread];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      h[r] = roundTf32(v[r]);
      l[r] = roundTf32(v[r] - h[r]);  // exact difference; rounded so the tensor core sees what we emulate on the host
    }
    float4* ph = reinterpret_cast<float4*>(hi + o);
    float4* pl = reinterpret_cast<float4*>(lo + o);
    ph[0] = make_float4(h[0], h[1], h[2], h[3]);
    ph[1] = make_float4(h[4], h[5], h[6], h[7]);
    pl[0] = make_float4(l[0], l[1], l[2], l[3]);
    pl[1] = make_float4(l[4], l[5], l[6], l[7]);
    if (inDup(dup, i, j)) {  // (TF32x3's parts are not scaled: dup.scale is 1)
      float4* pd = reinterpret_cast<float4*>(static_cast<float*>(dup.p) + o);
      pd[0] = ph[0], pd[1] = ph[1];
    }
  }, padded);
}

/// FP16x3's split: hi = fp16(x), lo = fp16((x - hi) loScale) (x - hi is exact in FP32); in dup's block also
/// hi dup.scale (exact: a power of two, unless it overflows).
__global__ void splitHalfKernel(const float* __restrict__ A, Index lda, Index rows, Index cols, __half* __restrict__ hi,
                                __half* __restrict__ lo, Index ldo, Index padded, float loScale, SplitDup dup,
                                int* overflow) {
  forEachGroup(A, lda, rows, cols, ldo, [&](const float(&v)[kRowsPerThread], Index o, Index i, Index j) {
    alignas(16) __half h[kRowsPerThread];
    alignas(16) __half l[kRowsPerThread];
    bool over = false;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      h[r] = __float2half_rn(v[r]);
      l[r] = __float2half_rn((v[r] - __half2float(h[r])) * loScale);
      over |= overflowed(v[r], __half2float(h[r]));
    }
    *reinterpret_cast<uint4*>(hi + o) = *reinterpret_cast<const uint4*>(h);
    *reinterpret_cast<uint4*>(lo + o) = *reinterpret_cast<const uint4*>(l);
    if (inDup(dup, i, j)) {
      alignas(16) __half d[kRowsPerThread];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        d[r] = __float2half_rn(__half2float(h[r]) * dup.scale);
        over |= overflowed(v[r], __half2float(d[r]));
      }
      *reinterpret_cast<uint4*>(static_cast<__half*>(dup.p) + o) = *reinterpret_cast<const uint4*>(d);
    }
    if (over && overflow) *overflow = 1;
  }, padded);
}

inline unsigned gridFor(Index total) {
  const Index blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

// Column scales in grid-wide passes (grid: row chunks x columns, so a tall matrix with few columns still fills the
// GPU; one block per column took 28 ms for 8388608 x 32 on the H100). Double:
//   1. m_j = max_i |a_ij|, by atomicMax on the bit patterns (non-negative IEEE values order like unsigned integers;
//      a NaN's pattern is above infinity's, so a NaN column comes out non-finite);
//   2. s_j = sum_i (a_ij / m_j)^2 accumulated in double (no overflow or underflow for any finite column);
//   3. d_j = 2^-e with 2^(e-1) <= m_j sqrt(s_j) < 2^e (frexp), so the scaled column has norm in [1/2, 1) and the
//      scaling is exact (e is clamped so that d_j stays finite: a column of subnormals only is scaled by the largest
//      power of two); a zero or non-finite column keeps d_j = 1.
// Float (the FP16 mode's case) needs no maximum: a float squared in double neither overflows (at most 1.2e77) nor
// underflows (at least 2.0e-90), so s_j = sum_i a_ij^2 in double is one pass and step 3 takes m_j = 1. The two passes
// and the division per element read 4.3 GB in 4.1 ms at 32768^2 (H100, TCQR_TRACE, 1fe1112).
template <typename S>
struct Bits;
template <>
struct Bits<float> {
  using type = unsigned int;
  __device__ static type of(float x) { return __float_as_uint(x); }
  __device__ static float value(type b) { return __uint_as_float(b); }
};
template <>
struct Bits<double> {
  using type = unsigned long long;
  __device__ static type of(double x) { return static_cast<type>(__double_as_longlong(x)); }
  __device__ static double value(type b) { return __longlong_as_double(static_cast<long long>(b)); }
};

constexpr int kScaleRowsPerBlock = kThreads * 16;

template <typename S>
__global__ void columnMaxKernel(const S* __restrict__ A, Index lda, Index rows, typename Bits<S>::type* maxBits) {
  const Index j = blockIdx.y;
  const S* col = A + j * lda;
  const Index r0 = Index(blockIdx.x) * kScaleRowsPerBlock, r1 = min(rows, r0 + kScaleRowsPerBlock);
  S big = 0;
  for (Index i = r0 + threadIdx.x; i < r1; i += blockDim.x) {
    const S v = fabs(col[i]);
    big = (v > big || v != v) ? v : big;  // keeps a NaN
  }
  __shared__ S red[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const S other = __shfl_xor_sync(0xffffffffu, big, o);
    big = (other > big || other != other) ? other : big;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = big;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) big = (red[w] > big || red[w] != red[w]) ? red[w] : big;
    atomicMax(maxBits + j, Bits<S>::of(big));
  }
}

/// *out += the block's sum of `sum` (every thread's value; a warp shuffle, then the warps' sums in shared memory).
__device__ __forceinline__ void addBlockSum(double sum, double* out) {
  __shared__ double red[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) sum += red[w];
    atomicAdd(out, sum);
  }
}

template <typename S>
__global__ void columnSumKernel(const S* __restrict__ A, Index lda, Index rows,
                                const typename Bits<S>::type* __restrict__ maxBits, double* sums) {
  const Index j = blockIdx.y;
  const S big = Bits<S>::value(maxBits[j]);
  if (!(big > S(0)) || !isfinite(big)) return;
  const S* col = A + j * lda;
  const Index r0 = Index(blockIdx.x) * kScaleRowsPerBlock, r1 = min(rows, r0 + kScaleRowsPerBlock);
  double sum = 0;
  for (Index i = r0 + threadIdx.x; i < r1; i += blockDim.x) {
    const double x = double(col[i]) / double(big);
    sum += x * x;
  }
  addBlockSum(sum, sums + j);
}

__global__ void columnSumSquaresKernel(const float* __restrict__ A, Index lda, Index rows, double* sums) {
  const Index j = blockIdx.y;
  const float* col = A + j * lda;
  const Index r0 = Index(blockIdx.x) * kScaleRowsPerBlock, r1 = min(rows, r0 + kScaleRowsPerBlock);
  double sum = 0;
  for (Index i = r0 + threadIdx.x; i < r1; i += blockDim.x) {
    const double x = col[i];
    sum = fma(x, x, sum);
  }
  addBlockSum(sum, sums + j);
}

__global__ void columnScaleFinishFloatKernel(Index cols, const double* __restrict__ sums, float* __restrict__ d) {
  for (Index j = blockIdx.x * Index(blockDim.x) + threadIdx.x; j < cols; j += Index(gridDim.x) * blockDim.x) {
    const double s = sums[j];
    if (!(s > 0.0) || !isfinite(s)) {  // a zero column, or one holding an infinity or a NaN
      d[j] = 1.0f;
      continue;
    }
    int e = 0;
    frexp(sqrt(s), &e);
    // (A column of norm below 2^-127, e.g. of subnormals only, gets 2^127: 2^-e would overflow a float. Its scaled
    // norm is then below 1/2, which is harmless.)
    e = max(e, -127);
    d[j] = float(ldexp(1.0, -e));
  }
}

template <typename S>
__global__ void columnScaleFinishKernel(Index cols, const typename Bits<S>::type* __restrict__ maxBits,
                                        const double* __restrict__ sums, S* __restrict__ d) {
  for (Index j = blockIdx.x * Index(blockDim.x) + threadIdx.x; j < cols; j += Index(gridDim.x) * blockDim.x) {
    const S big = Bits<S>::value(maxBits[j]);
    if (!(big > S(0)) || !isfinite(big)) {
      d[j] = S(1);
      continue;
    }
    int e = 0;
    frexp(double(big) * sqrt(sums[j]), &e);
    e = max(e, sizeof(S) == 4 ? -127 : -1023);  // (as in the float kernel: 2^-e must stay finite)
    d[j] = S(ldexp(1.0, -e));
  }
}

// A(:, j) *= d_j, or /= d_j when `inverse`; with `upperOnly` only rows i <= j (the R part of a packed QR). Grid: row
// chunks x columns (blockIdx.y + column offset), like the column scales: no index division per element, and with
// upperOnly the chunks below the diagonal return at once (a grid-stride loop over all m n entries with a 64-bit
// division each took as long for R alone as for the whole matrix: 3.1 ms per call at 32768^2, H100, 1fe1112).
template <typename S>
__global__ void scaleColumnsKernel(S* A, Index lda, Index rows, Index c0, const S* __restrict__ d, bool inverse,
                                   bool upperOnly) {
  const Index j = c0 + blockIdx.y;
  const Index r0 = Index(blockIdx.x) * kScaleRowsPerBlock;
  const Index r1 = min(upperOnly ? min(rows, j + 1) : rows, r0 + kScaleRowsPerBlock);
  if (r0 >= r1) return;
  S* col = A + j * lda;
  // (Division for the inverse: d_j may be as small as 2^-129, whose reciprocal overflows a float.)
  const S f = d[j];
  if (inverse)
    for (Index i = r0 + threadIdx.x; i < r1; i += blockDim.x) col[i] /= f;
  else
    for (Index i = r0 + threadIdx.x; i < r1; i += blockDim.x) col[i] *= f;
}

}  // namespace

Index paddedRows(Index rows) { return (rows + kRowsPerThread - 1) / kRowsPerThread * kRowsPerThread; }

template <typename T>
void launchConvertFromFloat(const float* A, Index lda, Index rows, Index cols, T* out, cudaStream_t stream,
                            int* overflow) {
  const Index ldo = paddedRows(rows);
  if (ldo * cols == 0) return;
  convertKernel<T><<<gridFor(ldo / kRowsPerThread * cols), kThreads, 0, stream>>>(A, lda, rows, cols, out, ldo,
                                                                                  overflow);
  TCQR_CHECK_LAUNCH("convertKernel");
}
template void launchConvertFromFloat<__half>(const float*, Index, Index, Index, __half*, cudaStream_t, int*);
template void launchConvertFromFloat<__nv_bfloat16>(const float*, Index, Index, Index, __nv_bfloat16*, cudaStream_t,
                                                    int*);

namespace {
/// The output leading dimension of a split: paddedRows(rows) by default (ldo = 0), else at least that and a multiple
/// of 8 (the stacked layouts of CudaOps' convertOperand).
Index splitLd(Index rows, Index ldo, const char* what) {
  const Index padded = paddedRows(rows);
  if (ldo == 0) return padded;
  if (ldo < padded || ldo % kRowsPerThread != 0)
    detail::throwError(ErrorSource::Kernel, 0, "output leading dimension out of range", what, __FILE__, __LINE__);
  return ldo;
}
/// A duplicated block lies within the operand (its columns, or its padded rows), and one of rows consists of whole
/// groups of 8: the kernels write only the part inside, and a product reading more would read what they never wrote.
void checkDup(const SplitDup& dup, Index rows, Index cols, const char* what) {
  if (dup.p == nullptr) return;
  if (dup.count < 0 || dup.count > (dup.cols ? cols : paddedRows(rows)))
    detail::throwError(ErrorSource::Kernel, 0, "duplicated block beyond the operand", what, __FILE__, __LINE__);
  if (!dup.cols && dup.count % kRowsPerThread != 0)
    detail::throwError(ErrorSource::Kernel, 0, "duplicated rows not a multiple of 8", what, __FILE__, __LINE__);
}
}  // namespace

void launchSplitTf32(const float* A, Index lda, Index rows, Index cols, float* hi, float* lo, cudaStream_t stream,
                     Index ldOut, SplitDup dup) {
  const Index ldo = splitLd(rows, ldOut, "launchSplitTf32"), padded = paddedRows(rows);
  if (padded * cols == 0) return;
  checkDup(dup, rows, cols, "launchSplitTf32");
  splitTf32Kernel<<<gridFor(padded / kRowsPerThread * cols), kThreads, 0, stream>>>(A, lda, rows, cols, hi, lo, ldo,
                                                                                    padded, dup);
  TCQR_CHECK_LAUNCH("splitTf32Kernel");
}

void launchSplitHalf(const float* A, Index lda, Index rows, Index cols, __half* hi, __half* lo, float loScale,
                     cudaStream_t stream, Index ldOut, SplitDup dup, int* overflow) {
  const Index ldo = splitLd(rows, ldOut, "launchSplitHalf"), padded = paddedRows(rows);
  if (padded * cols == 0) return;
  checkDup(dup, rows, cols, "launchSplitHalf");
  splitHalfKernel<<<gridFor(padded / kRowsPerThread * cols), kThreads, 0, stream>>>(A, lda, rows, cols, hi, lo, ldo,
                                                                                    padded, loScale, dup, overflow);
  TCQR_CHECK_LAUNCH("splitHalfKernel");
}

template <typename S>
void launchColumnScales(const S* A, Index lda, Index rows, Index cols, S* d, void* work, cudaStream_t stream) {
  if (cols == 0) return;
  using B = typename Bits<S>::type;
  B* maxBits = static_cast<B*>(work);
  double* sums = reinterpret_cast<double*>(static_cast<char*>(work) + 8 * cols);
  TCQR_CHECK(cudaMemsetAsync(work, 0, 16 * static_cast<size_t>(cols), stream));
  const Index chunks = (rows + kScaleRowsPerBlock - 1) / kScaleRowsPerBlock;
  if (chunks > 0x7fffffff)
    detail::throwError(ErrorSource::Kernel, 0, "too many rows", "launchColumnScales", __FILE__, __LINE__);
  constexpr Index kMaxGridY = 65535;
  if constexpr (std::is_same<S, float>::value) {
    for (Index c0 = 0; rows > 0 && c0 < cols; c0 += kMaxGridY) {
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min(kMaxGridY, cols - c0)));
      columnSumSquaresKernel<<<grid, kThreads, 0, stream>>>(A + c0 * lda, lda, rows, sums + c0);
      TCQR_CHECK_LAUNCH("columnSumSquaresKernel");
    }
    columnScaleFinishFloatKernel<<<gridFor(cols), kThreads, 0, stream>>>(cols, sums, d);
    TCQR_CHECK_LAUNCH("columnScaleFinishFloatKernel");
  } else {
    for (Index c0 = 0; rows > 0 && c0 < cols; c0 += kMaxGridY) {
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min(kMaxGridY, cols - c0)));
      columnMaxKernel<S><<<grid, kThreads, 0, stream>>>(A + c0 * lda, lda, rows, maxBits + c0);
      TCQR_CHECK_LAUNCH("columnMaxKernel");
      columnSumKernel<S><<<grid, kThreads, 0, stream>>>(A + c0 * lda, lda, rows, maxBits + c0, sums + c0);
      TCQR_CHECK_LAUNCH("columnSumKernel");
    }
    columnScaleFinishKernel<S><<<gridFor(cols), kThreads, 0, stream>>>(cols, maxBits, sums, d);
    TCQR_CHECK_LAUNCH("columnScaleFinishKernel");
  }
}
template void launchColumnScales<float>(const float*, Index, Index, Index, float*, void*, cudaStream_t);
template void launchColumnScales<double>(const double*, Index, Index, Index, double*, void*, cudaStream_t);

template <typename S>
void launchScaleColumns(S* A, Index lda, Index rows, Index cols, const S* d, bool inverse, bool upperOnly,
                        cudaStream_t stream) {
  if (rows * cols == 0) return;
  const Index rowsUsed = upperOnly ? std::min(rows, cols) : rows;
  const Index chunks = (rowsUsed + kScaleRowsPerBlock - 1) / kScaleRowsPerBlock;
  if (chunks > 0x7fffffff)
    detail::throwError(ErrorSource::Kernel, 0, "too many rows", "launchScaleColumns", __FILE__, __LINE__);
  constexpr Index kMaxGridY = 65535;
  for (Index c0 = 0; c0 < cols; c0 += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min(kMaxGridY, cols - c0)));
    scaleColumnsKernel<S><<<grid, kThreads, 0, stream>>>(A, lda, rows, c0, d, inverse, upperOnly);
    TCQR_CHECK_LAUNCH("scaleColumnsKernel");
  }
}
template void launchScaleColumns<float>(float*, Index, Index, Index, const float*, bool, bool, cudaStream_t);
template void launchScaleColumns<double>(double*, Index, Index, Index, const double*, bool, bool, cudaStream_t);

}  // namespace kernels
}  // namespace tcqr
