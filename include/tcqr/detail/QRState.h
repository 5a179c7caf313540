// detail/QRState.h - the plain-type boundary between the header-only Eigen front end and the compiled
// library. The front end only ever sees this interface; the Host and CUDA implementations live in src/.
#ifndef TCQR_DETAIL_QRSTATE_H
#define TCQR_DETAIL_QRSTATE_H

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "../Backend.h"

namespace tcqr {
namespace detail {

/// \internal
/// One factorization, owned by one TensorCoreHouseholderQR object. Storage is column-major throughout:
/// after factor(), `QR` (rows x cols, ld = rows) holds R on and above the diagonal and the essential parts of the
/// Householder vectors below it (LAPACK/Eigen layout), `tau` holds min(rows, cols) coefficients, and the backend
/// additionally keeps T (k x k, the compact WY form) such that H_0 H_1 ... H_{k-1} = I - Y T Y^T, or a product of
/// such blocks with their T's on T's diagonal (docs/DESIGN.md, "Compact WY").
///
/// Host buffers handed out by this interface (staging()) are pinned memory on the CUDA backend. A pointer stays valid
/// until the next call that takes a size.
template <typename Scalar>
class QRState {
 public:
  virtual ~QRState() = default;
  virtual Backend backend() const noexcept = 0;
  virtual std::unique_ptr<QRState> clone() const = 0;

  /// Returns a host buffer of at least `count` scalars. Writing the input matrix there (column-major) and calling
  /// factorStaged() factors it; the same buffer is used for every host<->device round trip of this object.
  virtual Scalar* staging(Index count) = 0;

  /// Factors the rows x cols column-major matrix written at staging() (ld = rows). May return before the device
  /// finishes; every accessor below waits as needed.
  virtual void factorStaged(Index rows, Index cols) = 0;

  /// Factors the rows x cols column-major host matrix A (leading dimension ld >= rows), which may be modified once
  /// this returns. This default copies A into staging() and calls factorStaged(); the CUDA backend copies A to the
  /// device directly (no host copy: the driver stages pageable memory itself).
  virtual void factorHost(const Scalar* A, Index rows, Index cols, Index ld) {
    Scalar* dst = staging(rows * cols);
    for (Index j = 0; j < cols; ++j) std::copy(A + j * ld, A + j * ld + rows, dst + j * rows);
    factorStaged(rows, cols);
  }

  /// Factors a matrix already in device memory (CUDA backend only; the Host backend throws). The input is copied
  /// device-to-device into the object's storage and is not modified. `stream` may be null: the object's stream.
  virtual void factorDevice(const Scalar* dA, Index rows, Index cols, Index ld, CUstream_st* stream);

  virtual Index rows() const noexcept = 0;
  virtual Index cols() const noexcept = 0;
  /// True when the input held a NaN or an infinity (checked on the backend that factored it), or when a conversion to
  /// FP16 overflowed during the factorization (CUDA backend; the results are then as unspecified).
  virtual bool inputNotFinite() const = 0;

  /// Copies the packed factorization (rows x cols, column-major) into host memory at dst with leading dimension ld.
  virtual void copyQR(Scalar* dst, Index ld) const = 0;
  /// Copies the min(rows, cols) Householder coefficients.
  virtual void copyTau(Scalar* dst) const = 0;
  /// Copies the diagonal of R (min(rows, cols) values).
  virtual void copyDiagonal(Scalar* dst) const = 0;

  /// In place on the host buffer B (bRows x bCols, leading dimension ldb):
  ///   onLeft:  B <- op(Q_L) B   (bRows == rows())
  ///   !onLeft: B <- B op(Q_L)   (bCols == rows())
  /// where Q_L = H_0 ... H_{length-1} and op is transpose when `transpose`.
  virtual void applyQ(Scalar* B, Index bRows, Index bCols, Index ldb, bool onLeft, bool transpose, Index length) = 0;

  /// applyQ() from and to separate host matrices: src (bRows x bCols, leading dimension lds) is read, dst (the same
  /// shape, leading dimension ldd) receives op(Q_L) src or src op(Q_L). src and dst are the same storage (then lds ==
  /// ldd) or do not overlap. This default copies src into dst and applies in place; the CUDA backend copies src to
  /// the device and the result back into dst directly (no host copy).
  virtual void applyQHost(const Scalar* src, Index lds, Scalar* dst, Index ldd, Index bRows, Index bCols, bool onLeft,
                          bool transpose, Index length) {
    if (src == dst && lds != ldd) throw std::invalid_argument("tcqr: applyQHost in place with two leading dimensions");
    if (src != dst)
      for (Index j = 0; j < bCols; ++j) std::copy(src + j * lds, src + j * lds + bRows, dst + j * ldd);
    applyQ(dst, bRows, bCols, ldd, onLeft, transpose, length);
  }

  /// dst (rows() x qCols, ld) <- op(Q_L) * Identity(rows(), qCols), with the identity generated where Q lives.
  virtual void formQ(Scalar* dst, Index qCols, Index ld, bool transpose, Index length) = 0;

  /// In place on host buffer B with max(rows, cols) x nrhs rows (ld = ldb), following Eigen's HouseholderQR:
  ///   !transposed: on entry rows [0, rows()) hold b; on exit rows [0, cols()) hold x minimising ||A x - b||
  ///   (the basic solution when rows < cols).
  ///   transposed: on entry rows [0, cols()) hold b; on exit rows [0, rows()) hold x with A^T x = b
  ///   (the minimum-norm solution when rows > cols).
  virtual void solve(Scalar* B, Index nrhs, Index ldb, bool transposed) = 0;

  /// solve() from and to separate host matrices: rhs holds b (rows() x nrhs, or cols() x nrhs when transposed; leading
  /// dimension ldr) and dst receives x (cols() x nrhs, or rows() x nrhs when transposed; leading dimension ldd); rhs
  /// and dst may overlap. This default goes through staging() and solve(); the CUDA backend copies rhs to the device
  /// and x back directly.
  virtual void solveHost(const Scalar* rhs, Index ldr, Scalar* dst, Index ldd, Index nrhs, bool transposed) {
    const Index m = rows(), n = cols(), ld = m > n ? m : n;
    const Index in = transposed ? n : m, out = transposed ? m : n;
    Scalar* B = staging(ld * nrhs);
    for (Index j = 0; j < nrhs; ++j) std::copy(rhs + j * ldr, rhs + j * ldr + in, B + j * ld);
    solve(B, nrhs, ld, transposed);
    for (Index j = 0; j < nrhs; ++j) std::copy(B + j * ld, B + j * ld + out, dst + j * ldd);
  }

  // Device-side views of the factorization (CUDA backend; the Host backend returns host pointers).
  virtual const Scalar* deviceQR() const = 0;
  virtual const Scalar* deviceTau() const = 0;
  /// Waits until every operation queued by this object has completed.
  virtual void synchronize() const = 0;

  /// Panel width of the recursion (columns factored by the panel kernel); 0 keeps the backend default.
  virtual void setBlockSize(Index nb) = 0;
  virtual Index blockSize() const noexcept = 0;
  /// Panel factorization used by the next factorization.
  virtual void setPanel(Panel panel) = 0;
  /// Arithmetic of the products of the next factorization (validated by the front end for the scalar type).
  virtual void setPrecision(Precision precision) = 0;
  /// The mode the current factorization ran in (Precision::Default resolved for this backend and shape).
  virtual Precision activePrecision() const noexcept = 0;
  /// Makes the object run on a user stream (null: the object's own stream). No effect on the Host backend.
  virtual void setStream(CUstream_st* stream) = 0;
};

/// Factories, explicitly instantiated for float and double in the library.
template <typename Scalar>
std::unique_ptr<QRState<Scalar>> makeHostQRState();
/// Throws tcqr::Error when no device is usable or the library was built without CUDA.
template <typename Scalar>
std::unique_ptr<QRState<Scalar>> makeCudaQRState();

template <typename Scalar>
std::unique_ptr<QRState<Scalar>> makeQRState(Backend resolved) {
  return resolved == Backend::Cuda ? makeCudaQRState<Scalar>() : makeHostQRState<Scalar>();
}

}  // namespace detail
}  // namespace tcqr

#endif  // TCQR_DETAIL_QRSTATE_H
