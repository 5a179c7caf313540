// detail/TallSkinnyState.h - the plain-type boundary of Eigen::TensorCoreTallSkinnyQR (as QRState.h is for
// TensorCoreHouseholderQR): the header-only front end sees only this interface; the Host and CUDA implementations
// live in src/TallSkinnyHost.cpp and src/TallSkinnyCuda.cpp.
#ifndef TCQR_DETAIL_TALLSKINNYSTATE_H
#define TCQR_DETAIL_TALLSKINNYSTATE_H

#include <algorithm>
#include <memory>

#include "../Backend.h"

namespace tcqr {
namespace detail {

/// \internal
/// One tall-skinny factorization A = Q R of an m x n matrix (m >= n), owned by one TensorCoreTallSkinnyQR object.
/// `what` is a combination of tcqr::TallSkinnyOutputs bits. Every buffer is column-major with ld = rows:
///   R     n x n upper triangular (zeros below the diagonal), Eigen::HouseholderQR's signs; always computed;
///   Q     m x n thin Q with Q R = A (ComputeThinQ);
///   QR    m x n packed factor in Eigen/LAPACK layout, tau (n), T (n x n upper) with H_0...H_{n-1} = I - Y T Y^T
///         (ComputeWY).
template <typename Scalar>
class TallSkinnyState {
 public:
  virtual ~TallSkinnyState() = default;
  virtual Backend backend() const noexcept = 0;

  /// Host buffer of at least `count` scalars (pinned on the CUDA backend): write the input there (column-major,
  /// ld = rows) and call computeStaged().
  virtual Scalar* staging(Index count) = 0;
  /// Factors the rows x cols matrix at staging(). May return before the device finishes.
  virtual void computeStaged(Index rows, Index cols, unsigned what) = 0;
  /// Factors the rows x cols column-major host matrix A (leading dimension ld >= rows), which may be modified once
  /// this returns. This default copies A into staging() and calls computeStaged(); the CUDA backend copies A to the
  /// device directly.
  virtual void computeHost(const Scalar* A, Index rows, Index cols, Index ld, unsigned what) {
    Scalar* dst = staging(rows * cols);
    for (Index j = 0; j < cols; ++j) std::copy(A + j * ld, A + j * ld + rows, dst + j * rows);
    computeStaged(rows, cols, what);
  }
  /// Factors a matrix in device memory (CUDA backend only; the Host backend throws). dA is not modified.
  virtual void computeDevice(const Scalar* dA, Index rows, Index cols, Index ld, unsigned what,
                             CUstream_st* stream) = 0;

  virtual Index rows() const noexcept = 0;
  virtual Index cols() const noexcept = 0;
  /// The outputs of the last computation (ComputeR always included).
  virtual unsigned computed() const noexcept = 0;
  /// True when the input held a NaN or an infinity.
  virtual bool inputNotFinite() const = 0;

  // Copies to host memory (dst with leading dimension ld); each waits for the computation.
  virtual void copyR(Scalar* dst, Index ld) const = 0;
  virtual void copyThinQ(Scalar* dst, Index ld) const = 0;
  virtual void copyQR(Scalar* dst, Index ld) const = 0;
  virtual void copyTau(Scalar* dst) const = 0;
  virtual void copyT(Scalar* dst, Index ld) const = 0;

  // Where the results live (device pointers on the CUDA backend, host pointers on the Host backend); null for an
  // output that was not computed.
  virtual const Scalar* deviceR() const = 0;
  virtual const Scalar* deviceThinQ() const = 0;
  virtual const Scalar* deviceQR() const = 0;
  virtual const Scalar* deviceTau() const = 0;
  virtual const Scalar* deviceT() const = 0;

  virtual void synchronize() const = 0;
  /// Runs on a user stream (null: the object's own stream). No effect on the Host backend.
  virtual void setStream(CUstream_st* stream) = 0;
};

/// Factories, explicitly instantiated for float and double in the library. The CUDA one throws tcqr::Error when no
/// device is usable or the library was built without CUDA.
template <typename Scalar>
std::unique_ptr<TallSkinnyState<Scalar>> makeHostTallSkinnyState();
template <typename Scalar>
std::unique_ptr<TallSkinnyState<Scalar>> makeCudaTallSkinnyState();

template <typename Scalar>
std::unique_ptr<TallSkinnyState<Scalar>> makeTallSkinnyState(Backend resolved) {
  return resolved == Backend::Cuda ? makeCudaTallSkinnyState<Scalar>() : makeHostTallSkinnyState<Scalar>();
}

}  // namespace detail
}  // namespace tcqr

#endif  // TCQR_DETAIL_TALLSKINNYSTATE_H
