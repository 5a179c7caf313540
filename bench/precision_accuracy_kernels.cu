// precision_accuracy_kernels.cu - see precision_accuracy_kernels.hpp.
#include "precision_accuracy_kernels.hpp"

namespace precacc {
namespace {

constexpr int kThreads = 256;

unsigned gridFor(std::int64_t total) {
  const std::int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 8192 ? 8192 : blocks));  // grid-stride loops below
}

__global__ void affineKernel(double* x, std::int64_t count, double a, double b) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::int64_t(gridDim.x) * blockDim.x)
    x[i] = a * x[i] + b;
}

__global__ void scaleColumnsKernel(double* A, std::int64_t lda, std::int64_t m, std::int64_t n, const double* s) {
  const std::int64_t total = m * n;
  for (std::int64_t idx = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx / m, i = idx - j * m;
    A[i + j * lda] *= s[j];
  }
}

__global__ void columnSquaresKernel(const double* A, std::int64_t lda, std::int64_t m, double* out) {
  const std::int64_t j = blockIdx.x;
  const double* col = A + j * lda;
  double s = 0.0;
  for (std::int64_t i = threadIdx.x; i < m; i += blockDim.x) s += col[i] * col[i];
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  __shared__ double partial[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) t += partial[w];
    out[j] = t;
  }
}

__global__ void toFloatKernel(const double* src, std::int64_t lds, float* dst, std::int64_t ldd, std::int64_t m,
                              std::int64_t n) {
  const std::int64_t total = m * n;
  for (std::int64_t idx = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx / m, i = idx - j * m;
    dst[i + j * ldd] = __double2float_rn(src[i + j * lds]);
  }
}

}  // namespace

cudaError_t affine(double* x, std::int64_t count, double a, double b, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  affineKernel<<<gridFor(count), kThreads, 0, stream>>>(x, count, a, b);
  return cudaGetLastError();
}

cudaError_t scaleColumns(double* A, std::int64_t lda, std::int64_t m, std::int64_t n, const double* s,
                         cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  scaleColumnsKernel<<<gridFor(m * n), kThreads, 0, stream>>>(A, lda, m, n, s);
  return cudaGetLastError();
}

cudaError_t columnSquares(const double* A, std::int64_t lda, std::int64_t m, std::int64_t n, double* out,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (m <= 0) return cudaMemsetAsync(out, 0, sizeof(double) * n, stream);
  columnSquaresKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(A, lda, m, out);
  return cudaGetLastError();
}

cudaError_t toFloat(const double* src, std::int64_t lds, float* dst, std::int64_t ldd, std::int64_t m, std::int64_t n,
                    cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  toFloatKernel<<<gridFor(m * n), kThreads, 0, stream>>>(src, lds, dst, ldd, m, n);
  return cudaGetLastError();
}

}  // namespace precacc
