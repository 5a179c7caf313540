// TensorCoreHouseholderQR.h - drop-in replacement for Eigen::HouseholderQR whose factorization runs on the GPU
// (recursive Householder QR, Algorithm 1 of TPDS'25) or, without a GPU, on the host with the same algorithm.
#ifndef TCQR_TENSORCOREHOUSEHOLDERQR_H
#define TCQR_TENSORCOREHOUSEHOLDERQR_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <type_traits>

#include <Eigen/Core>
#include <Eigen/Householder>

#include "Backend.h"
#include "Error.h"
#include "TensorCoreHouseholderQ.h"
#include "detail/HostMemory.h"
#include "detail/QRState.h"

namespace Eigen {

template <typename MatrixType_>
class TensorCoreHouseholderQR;

namespace internal {
template <typename MatrixType_>
struct traits<TensorCoreHouseholderQR<MatrixType_>> : traits<MatrixType_> {
  typedef MatrixXpr XprKind;
  typedef SolverStorage StorageKind;
  typedef int StorageIndex;
  enum { Flags = 0 };
};
}  // namespace internal

/// \brief Householder QR decomposition with the interface of Eigen::HouseholderQR, computed with tensor-core-ready
/// recursive Householder QR on a CUDA GPU when one is present.
///
/// \tparam MatrixType_ a plain Eigen matrix type of float or double (dynamic or fixed size, column- or row-major).
///
/// Replace `HouseholderQR<MatrixXf>` by `TensorCoreHouseholderQR<MatrixXf>` and include `<Eigen/TensorCoreQR>`:
/// \code
/// #include <Eigen/TensorCoreQR>
/// Eigen::TensorCoreHouseholderQR<Eigen::MatrixXf> qr(A);
/// Eigen::VectorXf x = qr.solve(b);
/// \endcode
///
/// Results follow Eigen's conventions exactly: matrixQR() holds R on and above the diagonal and the essential
/// Householder vectors below it, hCoeffs() holds Eigen's tau, so
/// `HouseholderSequence<MatrixType, HCoeffsType>(matrixQR(), hCoeffs())` reproduces Q.
///
/// Differences a user can observe:
/// - compute() may return before the GPU is done; every accessor waits as needed.
/// - Results live on the backend; matrixQR() and hCoeffs() copy them to the host on first use after compute().
/// - Concurrent calls on one object from several threads are not supported (const ones included): they share the
///   object's staging buffer and stream. Use one object per thread.
/// - In-place decomposition through Ref<> matrix types is not supported.
///
/// \sa Eigen::HouseholderQR, tcqr::Backend
template <typename MatrixType_>
class TensorCoreHouseholderQR : public SolverBase<TensorCoreHouseholderQR<MatrixType_>> {
 public:
  typedef MatrixType_ MatrixType;
  typedef SolverBase<TensorCoreHouseholderQR> Base;
  friend class SolverBase<TensorCoreHouseholderQR>;
  template <typename>
  friend class TensorCoreHouseholderQ;

  EIGEN_GENERIC_PUBLIC_INTERFACE(TensorCoreHouseholderQR)
  enum {
    MaxRowsAtCompileTime = MatrixType::MaxRowsAtCompileTime,
    MaxColsAtCompileTime = MatrixType::MaxColsAtCompileTime
  };
  typedef Matrix<Scalar, RowsAtCompileTime, RowsAtCompileTime, (MatrixType::Flags & RowMajorBit) ? RowMajor : ColMajor,
                 MaxRowsAtCompileTime, MaxRowsAtCompileTime>
      MatrixQType;
  typedef typename internal::plain_diag_type<MatrixType>::type HCoeffsType;
  typedef typename internal::plain_row_type<MatrixType>::type RowVectorType;
  /// The type returned by householderQ(); products and assignment run on the factorization's backend.
  typedef TensorCoreHouseholderQ<TensorCoreHouseholderQR> HouseholderSequenceType;
  /// Eigen's own type, as returned by householderSequence() (host evaluation).
  typedef HouseholderSequence<MatrixType, typename internal::remove_all<typename HCoeffsType::ConjugateReturnType>::type>
      EigenHouseholderSequenceType;

  static_assert(std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value,
                "TensorCoreHouseholderQR supports float and double matrices");
  static_assert(std::is_base_of<PlainObjectBase<MatrixType>, MatrixType>::value,
                "TensorCoreHouseholderQR needs a plain Matrix type (Ref<> in-place decomposition is not supported)");

  /// Default constructor; call compute() before anything else.
  TensorCoreHouseholderQR() : m_rows(0), m_cols(0) {}

  /// Preallocates host storage for a rows x cols problem (device storage is sized by compute()).
  TensorCoreHouseholderQR(Index rows, Index cols)
      : m_qr(rows, cols), m_hCoeffs((std::min)(rows, cols)), m_rows(rows), m_cols(cols) {}

  /// Computes the decomposition of \a matrix (any Eigen expression, Map or plain matrix).
  template <typename InputType>
  explicit TensorCoreHouseholderQR(const EigenBase<InputType>& matrix) : m_rows(0), m_cols(0) {
    compute(matrix.derived());
  }

  /// Computes the decomposition of \a matrix on the given backend.
  template <typename InputType>
  TensorCoreHouseholderQR(const EigenBase<InputType>& matrix, tcqr::Backend backend)
      : m_backend(backend), m_rows(0), m_cols(0) {
    compute(matrix.derived());
  }

  /// Deep copy: the copy owns its own device storage (a device-to-device copy on the CUDA backend).
  TensorCoreHouseholderQR(const TensorCoreHouseholderQR& other)
      : m_qr(other.m_qr), m_hCoeffs(other.m_hCoeffs), m_backend(other.m_backend), m_stream(other.m_stream),
        m_blockSize(other.m_blockSize), m_panel(other.m_panel), m_precision(other.m_precision), m_state(other.m_state ? other.m_state->clone() : nullptr),
        m_rows(other.m_rows), m_cols(other.m_cols), m_isInitialized(other.m_isInitialized),
        m_qrValid(other.m_qrValid), m_tauValid(other.m_tauValid) {}
  TensorCoreHouseholderQR& operator=(const TensorCoreHouseholderQR& other) {
    if (this != &other) {
      TensorCoreHouseholderQR tmp(other);
      *this = std::move(tmp);
    }
    return *this;
  }
  TensorCoreHouseholderQR(TensorCoreHouseholderQR&&) noexcept = default;
  TensorCoreHouseholderQR& operator=(TensorCoreHouseholderQR&&) noexcept = default;

#ifdef EIGEN_PARSED_BY_DOXYGEN
  /// Solves A x = b in the least-squares sense (as HouseholderQR::solve); lazy, evaluated on assignment.
  template <typename Rhs>
  inline const Solve<TensorCoreHouseholderQR, Rhs> solve(const MatrixBase<Rhs>& b) const;
#endif

  /// Computes the decomposition of \a matrix. The matrix is copied once (column-major storage straight to the device
  /// on the CUDA backend, anything else into pinned staging memory and from there asynchronously to the device) and
  /// may be modified as soon as compute() returns. On the CUDA
  /// backend compute() returns once the upload and the input scan that chooses the panels are done (see
  /// computeOnDevice); the factorization itself is then still running.
  template <typename InputType>
  TensorCoreHouseholderQR& compute(const EigenBase<InputType>& matrix) {
    const Index m = matrix.rows(), n = matrix.cols();
    prepare(tcqr::resolveBackend(m_backend, m, n), m, n);
    // Column-major storage goes to the backend as it is (on the CUDA backend straight to the device, no host copy).
    if constexpr (internal::tcqr_direct_col_major<Scalar, InputType>()) {
      if (m * n > 0) {
        if (const Index ld = internal::tcqr_col_major_ld(matrix.derived())) {
          m_state->factorHost(matrix.derived().data(), m, n, ld);
          m_isInitialized = true;
          return *this;
        }
      }
    }
    if (m * n > 0) {
      Map<Matrix<Scalar, Dynamic, Dynamic>> staged(m_state->staging(m * n), m, n);
      staged = matrix.derived();
    }
    m_state->factorStaged(m, n);
    m_isInitialized = true;
    return *this;
  }

  /// Factors a rows x cols column-major matrix already in device memory (leading dimension \a ld), with no host
  /// copy. The input is left unmodified. Work is queued on \a stream, which the object keeps using afterwards, and
  /// the call returns without waiting for it, except for a scan of \a dA on the stream when TSQR panels may apply
  /// (every matrix with more rows than the panel width on Panel::Auto; for n <= 32 the first TSQR level is the scan):
  /// it finds the columns whose reflector may have to be the identity (tau = 0, as Eigen), which TSQR cannot give,
  /// and so decides the panels. With a null stream the work runs on the object's own stream, ordered after everything
  /// queued so far on the legacy default stream; then call synchronize() (or any host accessor) before reading
  /// deviceMatrixQR() from other streams. Requires the CUDA backend (Backend::Auto resolves to it).
  TensorCoreHouseholderQR& computeOnDevice(const Scalar* dA, Index rows, Index cols, Index ld,
                                           CUstream_st* stream = nullptr) {
    if (m_backend == tcqr::Backend::Host)
      throw tcqr::Error(tcqr::ErrorSource::Usage, 0, "computeOnDevice",
                        "computeOnDevice: this object is set to Backend::Host");
    m_stream = stream;
    prepare(tcqr::Backend::Cuda, rows, cols);
    m_state->factorDevice(dA, rows, cols, ld, stream);
    m_isInitialized = true;
    return *this;
  }

  /// The expression of Q; see TensorCoreHouseholderQ.
  HouseholderSequenceType householderQ() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    return HouseholderSequenceType(*this, false, (std::min)(m_rows, m_cols));
  }

  /// Eigen's own HouseholderSequence over matrixQR() and hCoeffs() (evaluated on the host).
  EigenHouseholderSequenceType householderSequence() const {
    return EigenHouseholderSequenceType(matrixQR(), hCoeffs().conjugate());
  }

  /// The packed factorization in LAPACK/Eigen layout (copied from the device on first use after compute()).
  const MatrixType& matrixQR() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    if (!m_qrValid) {
      internal::tcqr_write_col_major(m_qr, m_rows, m_cols, [&](Scalar* p, Index ld) { m_state->copyQR(p, ld); });
      m_qrValid = true;
    }
    return m_qr;
  }

  /// The Householder coefficients (Eigen's tau convention).
  const HCoeffsType& hCoeffs() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    if (!m_tauValid) {
      m_hCoeffs.resize((std::min)(m_rows, m_cols));
      if (m_hCoeffs.size() > 0) m_state->copyTau(m_hCoeffs.data());
      m_tauValid = true;
    }
    return m_hCoeffs;
  }

  /// |det(A)| for square A (product of |R_ii|; may overflow, see logAbsDeterminant()).
  typename MatrixType::RealScalar absDeterminant() const {
    using std::abs;
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    eigen_assert(m_rows == m_cols && "You can't take the determinant of a non-square matrix!");
    return abs(diagonalR().prod());
  }

  /// log |det(A)| for square A.
  typename MatrixType::RealScalar logAbsDeterminant() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    eigen_assert(m_rows == m_cols && "You can't take the determinant of a non-square matrix!");
    return diagonalR().cwiseAbs().array().log().sum();
  }

  inline Index rows() const { return m_rows; }
  inline Index cols() const { return m_cols; }

  /// Success, or NumericalIssue when the input contained NaN or infinity, or (CUDA backend, FP16 and FP16x3) when a
  /// value converted to FP16 during the factorization overflowed (results are then unspecified).
  ComputationInfo info() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    return m_state->inputNotFinite() ? NumericalIssue : Success;
  }

  /// Requested backend (used by the next compute()).
  tcqr::Backend backend() const { return m_backend; }
  /// Backend that holds the current factorization (Host or Cuda).
  tcqr::Backend activeBackend() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    return m_state->backend();
  }
  /// Chooses the backend for the next compute().
  TensorCoreHouseholderQR& setBackend(tcqr::Backend backend) {
    m_backend = backend;
    return *this;
  }
  /// Runs CUDA work on a user stream (null: the object's own stream).
  TensorCoreHouseholderQR& setStream(CUstream_st* stream) {
    m_stream = stream;
    if (m_state) m_state->setStream(stream);
    return *this;
  }
  /// Panel width of the recursion (0: the backend default). For tuning and tests.
  TensorCoreHouseholderQR& setBlockSize(Index nb) {
    eigen_assert(nb >= 0);
    m_blockSize = nb;
    if (m_state) m_state->setBlockSize(nb);
    return *this;
  }

  /// Panel factorization at the leaves of the recursion (tcqr::Panel::Auto: the backend default). For tuning and
  /// tests; every choice gives the same factorization up to rounding.
  TensorCoreHouseholderQR& setPanel(tcqr::Panel panel) {
    m_panel = panel;
    if (m_state) m_state->setPanel(panel);
    return *this;
  }

  /// Arithmetic of the products inside the next compute() (tcqr::Precision::Default: FP64 for double; for float
  /// FP16x3 on the GPU from 1024 rows and columns and 2^24 entries, FP32 below and on the host; see
  /// tcqr::Precision). Throws tcqr::Error for a mode of the other scalar type (e.g. FP16 for double).
  TensorCoreHouseholderQR& setPrecision(tcqr::Precision precision) {
    if (!tcqr::precisionSupported(precision, std::is_same<Scalar, double>::value))
      throw tcqr::Error(tcqr::ErrorSource::Usage, 0, "setPrecision",
                        std::string("setPrecision: ") + tcqr::precisionName(precision) + " does not apply to " +
                            (std::is_same<Scalar, double>::value ? "double" : "float") + " matrices");
    m_precision = precision;
    if (m_state) m_state->setPrecision(precision);
    return *this;
  }
  /// Requested mode (used by the next compute(); tcqr::Precision::Default unless set).
  tcqr::Precision precision() const { return m_precision; }
  /// The mode the current factorization ran in: the requested one, or what Default stood for on its backend and
  /// shape (tcqr::resolvePrecision; FP32 where the device had too little memory for FP16x3).
  tcqr::Precision activePrecision() const {
    eigen_assert(m_isInitialized && "TensorCoreHouseholderQR is not initialized.");
    return m_state->activePrecision();
  }

  /// Device pointer to the packed factorization (rows x cols, ld = rows); valid until the next compute().
  /// On the Host backend, a host pointer to the same layout.
  const Scalar* deviceMatrixQR() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceQR();
  }
  /// Device pointer to the min(rows, cols) Householder coefficients.
  const Scalar* deviceHCoeffs() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceTau();
  }
  /// Waits for all queued work of this object.
  void synchronize() const {
    if (m_state) m_state->synchronize();
  }

#ifndef EIGEN_PARSED_BY_DOXYGEN
  template <typename RhsType, typename DstType>
  void _solve_impl(const RhsType& rhs, DstType& dst) const {
    const Index n = m_cols, ld = (std::max)(m_rows, m_cols), nrhs = rhs.cols();
    if (nrhs == 0 || n == 0) {
      dst.resize(n, nrhs);  // (a block as destination: Eigen has sized it; resize only checks)
      dst.setZero();
      return;
    }
    if (solveDirect(rhs, dst, n, false)) return;
    Map<Matrix<Scalar, Dynamic, Dynamic>, 0, OuterStride<>> B(m_state->staging(ld * nrhs), ld, nrhs, OuterStride<>(ld));
    B.topRows(m_rows) = rhs;
    m_state->solve(B.data(), nrhs, ld, false);
    dst = B.topRows(n);
  }

  template <bool Conjugate, typename RhsType, typename DstType>
  void _solve_impl_transposed(const RhsType& rhs, DstType& dst) const {
    const Index m = m_rows, ld = (std::max)(m_rows, m_cols), nrhs = rhs.cols();
    if (nrhs == 0 || m == 0) {
      dst.resize(m, nrhs);
      dst.setZero();
      return;
    }
    if (solveDirect(rhs, dst, m, true)) return;
    Map<Matrix<Scalar, Dynamic, Dynamic>, 0, OuterStride<>> B(m_state->staging(ld * nrhs), ld, nrhs, OuterStride<>(ld));
    B.topRows(m_cols) = rhs;
    m_state->solve(B.data(), nrhs, ld, true);
    dst = B.topRows(m);
  }

  /// \internal Where the right-hand side and the destination (already outRows x nrhs, as Eigen's Solve assignment
  /// leaves it) are column-major storage, the backend reads and writes them as they are (on the CUDA backend straight
  /// to and from the device) instead of through the staging buffer. Returns false where it does not apply.
  template <typename RhsType, typename DstType>
  bool solveDirect(const RhsType& rhs, DstType& dst, Index outRows, bool transposed) const {
    if constexpr (internal::tcqr_direct_col_major<Scalar, RhsType>() &&
                  internal::tcqr_direct_col_major<Scalar, DstType>()) {
      if (dst.rows() != outRows || dst.cols() != rhs.cols()) return false;
      const Index ldr = internal::tcqr_col_major_ld(rhs), ldd = internal::tcqr_col_major_ld(dst);
      if (ldr == 0 || ldd == 0) return false;
      // A plain matrix is written whole (Eigen has just sized it when it is new): huge pages for its first write.
      if constexpr (std::is_base_of<PlainObjectBase<DstType>, DstType>::value)
        tcqr::detail::adviseFreshHostMemory(dst.data(), sizeof(Scalar) * std::size_t(dst.size()));
      m_state->solveHost(rhs.data(), ldr, dst.data(), ldd, rhs.cols(), transposed);
      return true;
    } else {
      (void)rhs, (void)dst, (void)outRows, (void)transposed;
      return false;
    }
  }
#endif

  /// \internal The backend object (for TensorCoreHouseholderQ and advanced use).
  tcqr::detail::QRState<Scalar>& state() const {
    eigen_assert(m_state && "TensorCoreHouseholderQR is not initialized.");
    return *m_state;
  }

 protected:
  void prepare(tcqr::Backend resolved, Index m, Index n) {
    eigen_assert(m >= 0 && n >= 0);
    m_isInitialized = false;
    m_qrValid = m_tauValid = false;
    if (!m_state || m_state->backend() != resolved) {
      m_state.reset();  // free the old backend's memory before allocating the new one's
      m_state = tcqr::detail::makeQRState<Scalar>(resolved);
      m_state->setBlockSize(m_blockSize);
      m_state->setPanel(m_panel);
      m_state->setPrecision(m_precision);
      m_state->setStream(m_stream);
    }
    m_rows = m;
    m_cols = n;
  }

  Matrix<Scalar, Dynamic, 1> diagonalR() const {
    Matrix<Scalar, Dynamic, 1> d((std::min)(m_rows, m_cols));
    if (d.size() > 0) m_state->copyDiagonal(d.data());
    return d;
  }

  mutable MatrixType m_qr;
  mutable HCoeffsType m_hCoeffs;
  tcqr::Backend m_backend = tcqr::Backend::Auto;
  CUstream_st* m_stream = nullptr;
  Index m_blockSize = 0;
  tcqr::Panel m_panel = tcqr::Panel::Auto;
  tcqr::Precision m_precision = tcqr::Precision::Default;
  std::unique_ptr<tcqr::detail::QRState<Scalar>> m_state;
  Index m_rows, m_cols;
  bool m_isInitialized = false;
  mutable bool m_qrValid = false;
  mutable bool m_tauValid = false;
};

}  // namespace Eigen

#endif  // TCQR_TENSORCOREHOUSEHOLDERQR_H
