// kernels.hpp - launchers of the CUDA kernels in kernels/*.cu (internal). Each launcher validates its arguments,
// returns early on empty input, launches on the given stream, checks the launch, and never synchronises.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace tcqr {
namespace kernels {

using Index = std::int64_t;

/// dst (m x n) = unit lower trapezoid of src: src below the diagonal, 1 on it, 0 above.
template <typename S>
void launchCopyUnitLower(const S* src, Index lds, S* dst, Index ldd, Index m, Index n, cudaStream_t stream);

/// A (m x n) = identity (ones on the main diagonal, zeros elsewhere).
template <typename S>
void launchSetIdentity(S* A, Index lda, Index m, Index n, cudaStream_t stream);

/// *flag = 1 if any entry of A (m x n) is NaN or infinite; *flag is left untouched otherwise.
template <typename S>
void launchFlagNonFinite(const S* A, Index lda, Index m, Index n, int* flag, cudaStream_t stream);

/// Upper triangular T (k x k) of the compact WY form from S = Y^T Y and tau (LAPACK larft, forward, columnwise):
/// T(i,i) = tau_i, T(0:i,i) = -tau_i T(0:i,0:i) S(0:i,i). Zeroes T below its diagonal.
template <typename S>
void launchFormT(const S* Sm, Index lds, const S* tau, S* T, Index ldt, Index k, cudaStream_t stream);

}  // namespace kernels
}  // namespace tcqr
