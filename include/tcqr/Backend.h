// Backend.h - choice of execution backend, and queries about the CUDA runtime, without CUDA headers.
#ifndef TCQR_BACKEND_H
#define TCQR_BACKEND_H

#include <cstdint>

// cudaStream_t is `struct CUstream_st*`; declaring the struct keeps CUDA headers out of user code while
// letting users pass their own streams with no cast.
struct CUstream_st;

namespace tcqr {

using Index = std::ptrdiff_t;

/// \brief Where a decomposition runs.
///
/// - Auto: the CUDA backend when a usable CUDA device is present and the problem has at least
///   autoCudaMinElements() entries, otherwise the Host backend. Both give the same results up to rounding.
/// - Host: Eigen on the CPU (the same recursive algorithm; what CPU-only CI tests).
/// - Cuda: cuBLAS/cuSOLVER and this library's kernels. Throws tcqr::Error when no usable device exists or
///   the library was built without CUDA.
enum class Backend { Auto, Host, Cuda };

/// \brief The panel factorization at the leaves of the recursive QR.
///
/// - Auto: the backend's measured default: on the GPU, Tsqr for panels of at least 4096 rows and Geqrf below; on
///   the host, Geqrf (see docs/DESIGN.md).
/// - Geqrf: Householder QR of the panel (cuSOLVER geqrf on the GPU, Eigen's reflectors on the host), then W = Y T.
/// - Tsqr: tall-skinny QR tree with 256-row tiles, explicit Q, and ReconstructWY (panels of at most 32 columns;
///   wider requests fall back to Geqrf).
enum class Panel { Auto, Geqrf, Tsqr };

/// Human-readable name ("Auto", "Host", "Cuda").
const char* backendName(Backend b) noexcept;

/// True when the library was compiled with CUDA support.
bool builtWithCuda() noexcept;

/// True when the library was built with CUDA and at least one CUDA device can be used.
/// The answer is computed once per process.
bool cudaDeviceAvailable() noexcept;

/// Below this number of matrix entries Backend::Auto stays on the host: a kernel launch and a PCIe round trip
/// cost more than Eigen's whole factorization there.
constexpr Index autoCudaMinElements() noexcept { return Index(256) * 256; }

/// Resolves Auto for a problem of the given size; Host and Cuda are returned unchanged.
Backend resolveBackend(Backend requested, Index rows, Index cols) noexcept;

}  // namespace tcqr

#endif  // TCQR_BACKEND_H
