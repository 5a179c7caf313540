// precision_accuracy_kernels.hpp - device helpers of precision_accuracy (definitions in precision_accuracy_kernels.cu):
// building the test matrices in double on the device and per-column norms of the error evaluation. Benchmark-only;
// not part of the library. Column-major storage, 64-bit indices; each call queues work on `stream` and returns the
// launch status.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace precacc {

/// x[i] = a * x[i] + b for i < count.
cudaError_t affine(double* x, std::int64_t count, double a, double b, cudaStream_t stream);

/// A(:, j) *= s[j] for the m x n matrix A (leading dimension lda); s is device memory.
cudaError_t scaleColumns(double* A, std::int64_t lda, std::int64_t m, std::int64_t n, const double* s,
                         cudaStream_t stream);

/// out[j] = sum_i A(i, j)^2, accumulated in double (one block per column); out is device memory.
cudaError_t columnSquares(const double* A, std::int64_t lda, std::int64_t m, std::int64_t n, double* out,
                          cudaStream_t stream);

/// dst (ld = ldd) = src (ld = lds) rounded to float, to nearest.
cudaError_t toFloat(const double* src, std::int64_t lds, float* dst, std::int64_t ldd, std::int64_t m, std::int64_t n,
                    cudaStream_t stream);

}  // namespace precacc
