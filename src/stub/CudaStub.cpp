// CudaStub.cpp - the CUDA entry points of a build without CUDA (TCQR_ENABLE_CUDA=OFF): same symbols, each says so.
#include "tcqr/Error.h"
#include "tcqr/detail/QRState.h"
#include "tcqr/detail/TallSkinnyState.h"

namespace tcqr {
namespace detail {

template <typename S>
std::unique_ptr<QRState<S>> makeCudaQRState() {
  throw Error(ErrorSource::NotBuiltWithCuda, 0, "makeCudaQRState",
              "Backend::Cuda requested but tcqr was built without CUDA (TCQR_ENABLE_CUDA=OFF)");
}
template std::unique_ptr<QRState<float>> makeCudaQRState<float>();
template std::unique_ptr<QRState<double>> makeCudaQRState<double>();

template <typename S>
std::unique_ptr<TallSkinnyState<S>> makeCudaTallSkinnyState() {
  throw Error(ErrorSource::NotBuiltWithCuda, 0, "makeCudaTallSkinnyState",
              "Backend::Cuda requested but tcqr was built without CUDA (TCQR_ENABLE_CUDA=OFF)");
}
template std::unique_ptr<TallSkinnyState<float>> makeCudaTallSkinnyState<float>();
template std::unique_ptr<TallSkinnyState<double>> makeCudaTallSkinnyState<double>();

}  // namespace detail

bool builtWithCuda() noexcept { return false; }
bool cudaDeviceAvailable() noexcept { return false; }
std::size_t releaseCachedDeviceMemory() noexcept { return 0; }

}  // namespace tcqr
