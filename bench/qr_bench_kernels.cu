// qr_bench_kernels.cu - device kernels of the benchmark's error measurement (see qr_bench_kernels.hpp).
// 64-bit indices throughout: the benchmark matrices have up to 2^28 entries and user shapes may be larger.
#include "qr_bench_kernels.hpp"

namespace qrbench {
namespace {

constexpr int kThreads = 256;

unsigned gridFor(std::int64_t total) {
  const std::int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));  // grid-stride loops below
}

template <typename S>
__global__ void convertKernel(const S* __restrict__ src, std::int64_t lds, double* __restrict__ dst, std::int64_t ldd,
                              std::int64_t m, std::int64_t n, bool upperOnly) {
  const std::int64_t total = m * n;
  for (std::int64_t idx = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx / m, i = idx - j * m;
    dst[i + j * ldd] = (upperOnly && i > j) ? 0.0 : static_cast<double>(src[i + j * lds]);
  }
}

__global__ void squaresKernel(const double* __restrict__ A, std::int64_t lda, std::int64_t m, std::int64_t n,
                              bool minusIdentity, double* acc) {
  const std::int64_t total = m * n;
  double s = 0.0;
  for (std::int64_t idx = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx / m, i = idx - j * m;
    double v = A[i + j * lda];
    if (minusIdentity && i == j) v -= 1.0;
    s += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  __shared__ double partial[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = lane < kThreads / 32 ? partial[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) atomicAdd(acc, s);
  }
}

}  // namespace

template <typename S>
cudaError_t convertToDouble(const S* src, std::int64_t lds, double* dst, std::int64_t ldd, std::int64_t m,
                            std::int64_t n, bool upperOnly, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  convertKernel<S><<<gridFor(m * n), kThreads, 0, stream>>>(src, lds, dst, ldd, m, n, upperOnly);
  return cudaGetLastError();
}
template cudaError_t convertToDouble<float>(const float*, std::int64_t, double*, std::int64_t, std::int64_t,
                                            std::int64_t, bool, cudaStream_t);
template cudaError_t convertToDouble<double>(const double*, std::int64_t, double*, std::int64_t, std::int64_t,
                                             std::int64_t, bool, cudaStream_t);

cudaError_t accumulateSquares(const double* A, std::int64_t lda, std::int64_t m, std::int64_t n, bool minusIdentity,
                              double* acc, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  squaresKernel<<<gridFor(m * n), kThreads, 0, stream>>>(A, lda, m, n, minusIdentity, acc);
  return cudaGetLastError();
}

}  // namespace qrbench
