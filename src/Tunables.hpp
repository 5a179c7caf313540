// Tunables.hpp - named tuning constants, in one place.
#pragma once

#include <cstddef>

namespace tcqr {
namespace detail {

/// Panel width of the recursion on the Host backend (Eigen's own blocked QR uses 48).
constexpr std::ptrdiff_t kHostBlockSize = 32;
/// Panel width of the recursion on the CUDA backend: columns factored by cusolverDnXgeqrf before the recursion
/// switches to GEMMs. Chosen by measurement on the H100 (bench/results), see docs/DESIGN.md.
constexpr std::ptrdiff_t kCudaBlockSize = 128;
/// Threads per block of the element-wise kernels.
constexpr int kElementwiseThreads = 256;

}  // namespace detail
}  // namespace tcqr
