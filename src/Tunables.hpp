// Tunables.hpp - named tuning constants, in one place.
#pragma once

#include <cstddef>

namespace tcqr {
namespace detail {

/// Panel width of the recursion on the Host backend (Eigen's own blocked QR uses 48).
constexpr std::ptrdiff_t kHostBlockSize = 32;
/// Panel width of the recursion on the CUDA backend: columns factored by cusolverDnXgeqrf before the recursion
/// switches to GEMMs. Measured on the H100 (2026-11-26, qr_bench --block-size): 64 and 128 within 2%, 256 3-25%
/// slower, 512 up to 3.8x slower (double 8192^2).
constexpr std::ptrdiff_t kCudaBlockSize = 64;
/// Threads per block of the element-wise kernels.
constexpr int kElementwiseThreads = 256;

}  // namespace detail
}  // namespace tcqr

namespace tcqr {
namespace detail {

/// TSQR tile (TPDS'25 §V.A.2): rows of one tile, factored by one thread block. 256 as in the paper.
constexpr std::ptrdiff_t kTsqrTileRows = 256;
/// Widest panel the TSQR tile kernel factors (one warp-width of columns).
constexpr std::ptrdiff_t kTsqrMaxCols = 32;
/// Threads per TSQR tile block (8 warps; each warp owns every 8th column).
constexpr int kTsqrThreads = 256;

}  // namespace detail
}  // namespace tcqr
