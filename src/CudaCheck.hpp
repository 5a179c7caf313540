// CudaCheck.hpp - the one error path for CUDA, cuBLAS and cuSOLVER calls (internal; includes CUDA headers).
#pragma once

#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "tcqr/Error.h"

namespace tcqr {
namespace detail {

const char* cusolverStatusName(cusolverStatus_t s) noexcept;

[[noreturn]] void throwError(ErrorSource src, int status, const char* statusName, const char* call, const char* file,
                             int line);

inline void check(cudaError_t s, const char* call, const char* file, int line) {
  if (s != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so the object stays usable
    throwError(ErrorSource::Cuda, static_cast<int>(s), cudaGetErrorName(s), call, file, line);
  }
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    cudaGetLastError();
    throwError(ErrorSource::Cublas, static_cast<int>(s), cublasGetStatusName(s), call, file, line);
  }
}
inline void check(cusolverStatus_t s, const char* call, const char* file, int line) {
  if (s != CUSOLVER_STATUS_SUCCESS) {
    cudaGetLastError();
    throwError(ErrorSource::Cusolver, static_cast<int>(s), cusolverStatusName(s), call, file, line);
  }
}

/// For destructors and noexcept paths: report to stderr, never throw.
void checkNoThrow(cudaError_t s, const char* call, const char* file, int line) noexcept;

}  // namespace detail
}  // namespace tcqr

#define TCQR_CHECK(expr) ::tcqr::detail::check((expr), #expr, __FILE__, __LINE__)
#define TCQR_CHECK_NOTHROW(expr) ::tcqr::detail::checkNoThrow((expr), #expr, __FILE__, __LINE__)
/// After a kernel launch: launch-configuration errors surface here, execution errors at the next synchronisation.
#define TCQR_CHECK_LAUNCH(name) ::tcqr::detail::check(cudaGetLastError(), name, __FILE__, __LINE__)
