// qr_bench_kernels.hpp - the few device kernels the benchmark needs to measure errors in double precision
// (definitions in qr_bench_kernels.cu). Benchmark-only; not part of the library.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace qrbench {

/// dst (m x n, column-major, leading dimension ldd) = src (leading dimension lds) converted to double.
/// With upperOnly, entries strictly below the diagonal are written as 0 (extracts R from a packed QR factor).
template <typename S>
cudaError_t convertToDouble(const S* src, std::int64_t lds, double* dst, std::int64_t ldd, std::int64_t m,
                            std::int64_t n, bool upperOnly, cudaStream_t stream);

/// *acc += sum over the m x n matrix A of (A(i,j) - delta_ij * minusIdentity)^2, accumulated in double.
/// *acc is device memory and must be zeroed by the caller.
cudaError_t accumulateSquares(const double* A, std::int64_t lda, std::int64_t m, std::int64_t n, bool minusIdentity,
                              double* acc, cudaStream_t stream);

}  // namespace qrbench
