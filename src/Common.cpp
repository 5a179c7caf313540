// Common.cpp - backend-independent pieces of the public API.
#include "tcqr/Backend.h"
#include "tcqr/Error.h"

namespace tcqr {

const char* backendName(Backend b) noexcept {
  switch (b) {
    case Backend::Auto: return "Auto";
    case Backend::Host: return "Host";
    case Backend::Cuda: return "Cuda";
  }
  return "?";
}

Backend resolveBackend(Backend requested, Index rows, Index cols) noexcept {
  if (requested != Backend::Auto) return requested;
  return (cudaDeviceAvailable() && rows * cols >= autoCudaMinElements()) ? Backend::Cuda : Backend::Host;
}

bool Error::isOutOfMemory() const noexcept {
  // cudaErrorMemoryAllocation = 2, CUBLAS_STATUS_ALLOC_FAILED = 3, CUSOLVER_STATUS_ALLOC_FAILED = 2.
  switch (m_source) {
    case ErrorSource::Cuda: return m_status == 2;
    case ErrorSource::Cublas: return m_status == 3;
    case ErrorSource::Cusolver: return m_status == 2;
    default: return false;
  }
}

}  // namespace tcqr
