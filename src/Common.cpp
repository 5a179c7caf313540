// Common.cpp - backend-independent pieces of the public API.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "Tunables.hpp"
#include "tcqr/Backend.h"
#include "tcqr/Error.h"
#include "tcqr/detail/HostMemory.h"

namespace tcqr {

const char* backendName(Backend b) noexcept {
  switch (b) {
    case Backend::Auto: return "Auto";
    case Backend::Host: return "Host";
    case Backend::Cuda: return "Cuda";
  }
  return "?";
}

const char* precisionName(Precision p) noexcept {
  switch (p) {
    case Precision::Default: return "Default";
    case Precision::FP32: return "FP32";
    case Precision::TF32x3: return "TF32x3";
    case Precision::TF32: return "TF32";
    case Precision::FP16: return "FP16";
    case Precision::BF16: return "BF16";
    case Precision::FP64: return "FP64";
    case Precision::FP64Emulated: return "FP64Emulated";
    case Precision::FP16x3: return "FP16x3";
  }
  return "?";
}

bool precisionSupported(Precision p, bool isDouble) noexcept {
  switch (p) {
    case Precision::Default: return true;
    case Precision::FP64:
    case Precision::FP64Emulated: return isDouble;
    default: return !isDouble;
  }
}

Precision resolvePrecision(Precision p, bool isDouble, Backend backend, Index rows, Index cols) noexcept {
  if (p != Precision::Default) return p;
  if (isDouble) return Precision::FP64;
  const bool gpu = resolveBackend(backend, rows, cols) == Backend::Cuda;
  const bool large = std::min(rows, cols) >= detail::kDefaultFp16x3MinDim &&
                     rows * cols >= detail::kDefaultFp16x3MinElements;
  return gpu && large ? Precision::FP16x3 : Precision::FP32;
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

namespace detail {

namespace {

/// The transparent huge page size (2 MiB on x86-64; 512 MiB on arm64 kernels with 64 KiB pages), 0 where the kernel
/// has none.
std::uintptr_t hugePageBytes() {
  long long v = 0;
  if (FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r")) {
    if (std::fscanf(f, "%lld", &v) != 1) v = 0;
    std::fclose(f);
  }
  return v > 0 && (v & (v - 1)) == 0 ? static_cast<std::uintptr_t>(v) : 0;
}

}  // namespace

void adviseFreshHostMemory(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool enabled = envIndex("TCQR_HUGEPAGE_RESULTS", 1) != 0;
  static const std::uintptr_t huge = hugePageBytes();
  if (!enabled || huge == 0 || p == nullptr || bytes < std::max<std::size_t>(kHugePageAdviceMinBytes, 2 * huge))
    return;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) & ~(huge - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(huge - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace detail
}  // namespace tcqr
