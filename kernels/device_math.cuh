// device_math.cuh - small device helpers shared by the kernels (included by kernels/*.cu only, never by a user header).
#pragma once

#include <cfloat>

namespace tcqr {
namespace kernels {

/// The squared tail norm at or below which a Householder reflector is the identity (tau = 0, as LAPACK's xLARFG
/// for a zero tail): the smallest normal number of S.
template <typename S>
__device__ __forceinline__ S tinyNormSq();
template <>
__device__ __forceinline__ float tinyNormSq<float>() { return FLT_MIN; }
template <>
__device__ __forceinline__ double tinyNormSq<double>() { return DBL_MIN; }

}  // namespace kernels
}  // namespace tcqr
