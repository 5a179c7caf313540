// TallSkinnyQR.h - standalone tall-skinny QR (TSQR) of an m x n matrix with m >= n: R only, the thin Q, or the
// compact WY form, on the GPU or (same algorithm) on the host.
#ifndef TCQR_TALLSKINNYQR_H
#define TCQR_TALLSKINNYQR_H

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>

#include <Eigen/Core>

#include "Backend.h"
#include "Error.h"
#include "TensorCoreHouseholderQ.h"  // internal::tcqr_write_col_major
#include "detail/TallSkinnyState.h"

namespace tcqr {

/// \brief What TensorCoreTallSkinnyQR::compute() produces; combine with `|`. R is always computed.
enum TallSkinnyOutputs : unsigned {
  ComputeR = 0x1,      ///< R only (matrixR()): the TSQR tree alone, the fastest mode
  ComputeThinQ = 0x2,  ///< also the thin Q (thinQ()), m x n with orthonormal columns and Q R = A
  ComputeWY = 0x4      ///< also the compact WY form: matrixQR(), hCoeffs() (Eigen's layout and tau) and matrixT()
};

}  // namespace tcqr

namespace Eigen {

/// \brief QR decomposition A = Q R of a tall-skinny matrix (rows >= cols) by a TSQR tree on the GPU, with a choice of
/// outputs: R only, the thin Q (orthogonalization of a block of vectors), or the compact WY form.
///
/// \tparam MatrixType_ a plain Eigen matrix type of float or double (the type of thinQ() and matrixQR()).
///
/// \code
/// #include <Eigen/TensorCoreQR>
/// Eigen::TensorCoreTallSkinnyQR<Eigen::MatrixXf> ts;
/// ts.compute(A);                              // R only
/// Eigen::MatrixXf R = ts.matrixR();           // n x n, Eigen::HouseholderQR's R up to rounding
/// ts.compute(V, tcqr::ComputeThinQ);          // orthonormal basis of span(V)
/// Eigen::MatrixXf Q = ts.thinQ();             // m x n, Q R = V
/// ts.compute(A, tcqr::ComputeWY);             // Householder vectors, tau and T: H_0...H_{n-1} = I - Y T Y^T
/// \endcode
///
/// Conventions: R (and so Q) follow Eigen::HouseholderQR's signs, and with ComputeWY matrixQR()/hCoeffs() equal
/// HouseholderQR's matrixQR()/hCoeffs() up to rounding, tau = 0 for zero columns included. Without ComputeWY, on a
/// column that Householder leaves unreflected (tau = 0: a zero column, or sparse columns such as those of an upper
/// triangular or permutation matrix) R's diagonal sign and the thin Q's column may differ from Eigen's; Q R = A
/// holds either way.
///
/// For cols <= 32 the tree is used directly (ComputeR: the tree's levels and an n x n sign fix only; ComputeWY on the
/// GPU: one kernel where a thread-block cluster holds the matrix, float up to 32768 rows and double up to 16384 on the
/// H200);
/// wider matrices go through the recursive QR with 32-column panels (see docs/DESIGN.md).
///
/// Results stay on the backend and are copied to the host on first use of an accessor after compute(). compute()
/// may return before the GPU is done. Not copyable (the results may be large device buffers); movable.
///
/// \sa Eigen::TensorCoreHouseholderQR, Eigen::HouseholderQR, tcqr::TallSkinnyOutputs
template <typename MatrixType_>
class TensorCoreTallSkinnyQR {
 public:
  typedef MatrixType_ MatrixType;
  typedef typename MatrixType::Scalar Scalar;
  typedef typename MatrixType::RealScalar RealScalar;
  typedef Eigen::Index Index;
  enum {
    RowsAtCompileTime = MatrixType::RowsAtCompileTime,
    ColsAtCompileTime = MatrixType::ColsAtCompileTime,
    MaxRowsAtCompileTime = MatrixType::MaxRowsAtCompileTime,
    MaxColsAtCompileTime = MatrixType::MaxColsAtCompileTime
  };
  /// n x n (R and T).
  typedef Matrix<Scalar, ColsAtCompileTime, ColsAtCompileTime,
                 (MatrixType::Flags & RowMajorBit) && ColsAtCompileTime != 1 ? RowMajor : ColMajor,
                 MaxColsAtCompileTime, MaxColsAtCompileTime>
      MatrixRType;
  typedef typename internal::plain_diag_type<MatrixType>::type HCoeffsType;

  static_assert(std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value,
                "TensorCoreTallSkinnyQR supports float and double matrices");
  static_assert(std::is_base_of<PlainObjectBase<MatrixType>, MatrixType>::value,
                "TensorCoreTallSkinnyQR needs a plain Matrix type");

  /// Default constructor; call compute() or computeOnDevice() before anything else.
  TensorCoreTallSkinnyQR() = default;

  /// Computes the decomposition of \a matrix with the outputs \a what (tcqr::TallSkinnyOutputs bits).
  template <typename InputType>
  explicit TensorCoreTallSkinnyQR(const EigenBase<InputType>& matrix, unsigned what = tcqr::ComputeR) {
    compute(matrix.derived(), what);
  }

  TensorCoreTallSkinnyQR(const TensorCoreTallSkinnyQR&) = delete;
  TensorCoreTallSkinnyQR& operator=(const TensorCoreTallSkinnyQR&) = delete;
  TensorCoreTallSkinnyQR(TensorCoreTallSkinnyQR&&) noexcept = default;
  TensorCoreTallSkinnyQR& operator=(TensorCoreTallSkinnyQR&&) noexcept = default;

  /// Computes A = Q R of \a matrix (rows >= cols; any Eigen expression), producing the outputs \a what. The matrix is
  /// copied once and may be modified as soon as compute() returns. Throws tcqr::Error (ErrorSource::Usage) for
  /// rows < cols or unknown bits in \a what.
  template <typename InputType>
  TensorCoreTallSkinnyQR& compute(const EigenBase<InputType>& matrix, unsigned what = tcqr::ComputeR) {
    const Index m = matrix.rows(), n = matrix.cols();
    checkArguments(m, n, what, "compute");
    prepare(tcqr::resolveBackend(m_backend, m, n), m, n);
    // Column-major storage goes to the backend as it is (on the CUDA backend straight to the device, no host copy).
    if constexpr (internal::tcqr_direct_col_major<Scalar, InputType>()) {
      if (m * n > 0) {
        if (const Index ld = internal::tcqr_col_major_ld(matrix.derived())) {
          m_state->computeHost(matrix.derived().data(), m, n, ld, what);
          m_isInitialized = true;
          return *this;
        }
      }
    }
    if (m * n > 0) {
      Map<Matrix<Scalar, Dynamic, Dynamic>> staged(m_state->staging(m * n), m, n);
      staged = matrix.derived();
    }
    m_state->computeStaged(m, n, what);
    m_isInitialized = true;
    return *this;
  }

  /// Computes A = Q R of a rows x cols column-major matrix in device memory (leading dimension \a ld), with no host
  /// copy; \a dA is not modified. Work is queued on \a stream (kept for later calls; null: the object's own stream,
  /// ordered after the work already queued on the legacy default stream) and the call returns without waiting for
  /// the factorization. With ComputeWY (or n > 32) it first waits for a scan of \a dA, because the scan decides
  /// which panels may use TSQR (columns that must get tau = 0, see DESIGN.md); R and the thin Q alone never wait.
  /// Requires the CUDA backend. Throws tcqr::Error (ErrorSource::Usage) on rows < cols, a null \a dA, ld < rows,
  /// negative sizes, unknown bits in \a what, or an object set to Backend::Host.
  TensorCoreTallSkinnyQR& computeOnDevice(const Scalar* dA, Index rows, Index cols, Index ld,
                                          CUstream_st* stream = nullptr, unsigned what = tcqr::ComputeR) {
    checkArguments(rows, cols, what, "computeOnDevice");
    if (ld < (std::max)(rows, Index(1)) || (rows * cols > 0 && dA == nullptr))
      throw tcqr::Error(tcqr::ErrorSource::Usage, 0, "computeOnDevice",
                        "TensorCoreTallSkinnyQR::computeOnDevice: null pointer or ld < rows");
    if (m_backend == tcqr::Backend::Host)
      throw tcqr::Error(tcqr::ErrorSource::Usage, 0, "computeOnDevice",
                        "TensorCoreTallSkinnyQR::computeOnDevice: this object is set to Backend::Host");
    m_stream = stream;
    prepare(tcqr::Backend::Cuda, rows, cols);
    m_state->computeDevice(dA, rows, cols, ld, what, stream);
    m_isInitialized = true;
    return *this;
  }

  /// R (cols x cols, upper triangular): Eigen::HouseholderQR's R (its matrixQR()'s upper triangle) up to rounding.
  const MatrixRType& matrixR() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    if (!m_rValid) {
      internal::tcqr_write_col_major(m_r, m_cols, m_cols, [&](Scalar* p, Index ld) { m_state->copyR(p, ld); });
      m_rValid = true;
    }
    return m_r;
  }

  /// The thin Q (rows x cols, orthonormal columns, thinQ() * matrixR() = A). Needs tcqr::ComputeThinQ.
  const MatrixType& thinQ() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    eigen_assert((m_state->computed() & tcqr::ComputeThinQ) && "thinQ() needs compute(A, tcqr::ComputeThinQ)");
    if (!m_qValid) {
      internal::tcqr_write_col_major(m_q, m_rows, m_cols, [&](Scalar* p, Index ld) { m_state->copyThinQ(p, ld); });
      m_qValid = true;
    }
    return m_q;
  }

  /// The packed factorization in Eigen/LAPACK layout (R on and above the diagonal, the essential parts of the
  /// Householder vectors Y below it), as Eigen::HouseholderQR::matrixQR(). Needs tcqr::ComputeWY.
  const MatrixType& matrixQR() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    eigen_assert((m_state->computed() & tcqr::ComputeWY) && "matrixQR() needs compute(A, tcqr::ComputeWY)");
    if (!m_qrValid) {
      internal::tcqr_write_col_major(m_qr, m_rows, m_cols, [&](Scalar* p, Index ld) { m_state->copyQR(p, ld); });
      m_qrValid = true;
    }
    return m_qr;
  }

  /// The Householder coefficients (Eigen's tau). Needs tcqr::ComputeWY.
  const HCoeffsType& hCoeffs() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    eigen_assert((m_state->computed() & tcqr::ComputeWY) && "hCoeffs() needs compute(A, tcqr::ComputeWY)");
    if (!m_tauValid) {
      m_hCoeffs.resize(m_cols);
      if (m_cols > 0) m_state->copyTau(m_hCoeffs.data());
      m_tauValid = true;
    }
    return m_hCoeffs;
  }

  /// T (cols x cols, upper triangular) of the compact WY form: H_0 H_1 ... H_{n-1} = I - Y T Y^T, with Y the unit
  /// lower trapezoid of matrixQR(). Needs tcqr::ComputeWY.
  const MatrixRType& matrixT() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    eigen_assert((m_state->computed() & tcqr::ComputeWY) && "matrixT() needs compute(A, tcqr::ComputeWY)");
    if (!m_tValid) {
      internal::tcqr_write_col_major(m_t, m_cols, m_cols, [&](Scalar* p, Index ld) { m_state->copyT(p, ld); });
      m_tValid = true;
    }
    return m_t;
  }

  inline Index rows() const { return m_rows; }
  inline Index cols() const { return m_cols; }
  /// The outputs of the last computation (tcqr::TallSkinnyOutputs bits; ComputeR always set).
  unsigned computed() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    return m_state->computed();
  }

  /// Success, or NumericalIssue when the input contained NaN or infinity (results are then unspecified).
  ComputationInfo info() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    return m_state->inputNotFinite() ? NumericalIssue : Success;
  }

  /// Requested backend (used by the next compute()).
  tcqr::Backend backend() const { return m_backend; }
  /// Backend that holds the current results (Host or Cuda).
  tcqr::Backend activeBackend() const {
    eigen_assert(m_isInitialized && "TensorCoreTallSkinnyQR is not initialized.");
    return m_state->backend();
  }
  /// Chooses the backend for the next compute() (Auto: CUDA when a device is present and the matrix has at least
  /// tcqr::autoCudaMinElements() entries, as for TensorCoreHouseholderQR).
  TensorCoreTallSkinnyQR& setBackend(tcqr::Backend backend) {
    m_backend = backend;
    return *this;
  }
  /// Runs CUDA work on a user stream (null: the object's own stream).
  TensorCoreTallSkinnyQR& setStream(CUstream_st* stream) {
    m_stream = stream;
    if (m_state) m_state->setStream(stream);
    return *this;
  }
  /// Waits for all queued work of this object.
  void synchronize() const {
    if (m_state) m_state->synchronize();
  }

  /// Device pointer to R (cols x cols, ld = cols, zeros below the diagonal); valid until the next compute(). On the
  /// Host backend a host pointer to the same layout.
  const Scalar* deviceR() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceR();
  }
  /// Device pointer to the thin Q (rows x cols, ld = rows); null without tcqr::ComputeThinQ.
  const Scalar* deviceThinQ() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceThinQ();
  }
  /// Device pointer to the packed factor (rows x cols, ld = rows); null without tcqr::ComputeWY.
  const Scalar* deviceMatrixQR() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceQR();
  }
  /// Device pointer to the cols Householder coefficients; null without tcqr::ComputeWY.
  const Scalar* deviceHCoeffs() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceTau();
  }
  /// Device pointer to T (cols x cols, ld = cols, zeros below the diagonal); null without tcqr::ComputeWY.
  const Scalar* deviceT() const {
    eigen_assert(m_isInitialized);
    return m_state->deviceT();
  }

 private:
  static void checkArguments(Index m, Index n, unsigned what, const char* who) {
    if (m < 0 || n < 0 || m < n)
      throw tcqr::Error(tcqr::ErrorSource::Usage, 0, who,
                        std::string("TensorCoreTallSkinnyQR::") + who + ": needs rows >= cols >= 0 (got " +
                            std::to_string(m) + " x " + std::to_string(n) + ")");
    if (what & ~unsigned(tcqr::ComputeR | tcqr::ComputeThinQ | tcqr::ComputeWY))
      throw tcqr::Error(tcqr::ErrorSource::Usage, 0, who,
                        std::string("TensorCoreTallSkinnyQR::") + who + ": unknown bits in `what`");
  }

  void prepare(tcqr::Backend resolved, Index m, Index n) {
    m_isInitialized = false;
    m_rValid = m_qValid = m_qrValid = m_tauValid = m_tValid = false;
    if (!m_state || m_state->backend() != resolved) {
      m_state.reset();  // free the old backend's memory before allocating the new one's
      m_state = tcqr::detail::makeTallSkinnyState<Scalar>(resolved);
      m_state->setStream(m_stream);
    }
    m_rows = m;
    m_cols = n;
  }

  mutable MatrixRType m_r, m_t;
  mutable MatrixType m_q, m_qr;
  mutable HCoeffsType m_hCoeffs;
  tcqr::Backend m_backend = tcqr::Backend::Auto;
  CUstream_st* m_stream = nullptr;
  std::unique_ptr<tcqr::detail::TallSkinnyState<Scalar>> m_state;
  Index m_rows = 0, m_cols = 0;
  bool m_isInitialized = false;
  mutable bool m_rValid = false, m_qValid = false, m_qrValid = false, m_tauValid = false, m_tValid = false;
};

}  // namespace Eigen

#endif  // TCQR_TALLSKINNYQR_H
