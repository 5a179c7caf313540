// tcqr: tensor-core QR behind Eigen's decomposition interface.
// Error.h - the single exception type for every runtime failure (CUDA, cuBLAS, cuSOLVER, usage).
#ifndef TCQR_ERROR_H
#define TCQR_ERROR_H

#include <stdexcept>
#include <string>

namespace tcqr {

/// Which layer reported a failure. Kept as a plain enum so that this header needs no CUDA header.
enum class ErrorSource { Cuda, Cublas, Cusolver, Kernel, Usage, NoDevice, NotBuiltWithCuda };

/// \brief The one exception type of the library.
///
/// what() names the failing call, the status name and number, and the source location, e.g.
/// `cublasSgemm_v2_64(...) failed: CUBLAS_STATUS_EXECUTION_FAILED (13) [src/CudaBackend.cpp:120]`.
/// The raw status is kept in status() (a cudaError_t / cublasStatus_t / cusolverStatus_t value).
class Error : public std::runtime_error {
 public:
  Error(ErrorSource source, int status, std::string call, const std::string& message)
      : std::runtime_error(message), m_source(source), m_status(status), m_call(std::move(call)) {}

  ErrorSource source() const noexcept { return m_source; }
  int status() const noexcept { return m_status; }
  /// The text of the failing call (or a short description for usage errors).
  const std::string& call() const noexcept { return m_call; }
  /// True when the failure is a device out-of-memory condition (cudaErrorMemoryAllocation,
  /// CUBLAS_STATUS_ALLOC_FAILED or CUSOLVER_STATUS_ALLOC_FAILED).
  bool isOutOfMemory() const noexcept;

 private:
  ErrorSource m_source;
  int m_status;
  std::string m_call;
};

}  // namespace tcqr

#endif  // TCQR_ERROR_H
