// TensorCoreHouseholderQ.h - the Q factor of a TensorCoreHouseholderQR, as Eigen's HouseholderSequence is for
// HouseholderQR: an expression that can be assigned to a dense matrix or multiplied with one. Every operation runs
// on the backend that holds the factorization (for the CUDA backend: GEMMs with the compact WY form
// Q = I - Y T Y^T, never a loop over reflectors on the host).
#ifndef TCQR_TENSORCOREHOUSEHOLDERQ_H
#define TCQR_TENSORCOREHOUSEHOLDERQ_H

#include <algorithm>
#include <type_traits>

#include <Eigen/Core>

#include "detail/HostMemory.h"

namespace Eigen {

template <typename QRType>
class TensorCoreHouseholderQ;

namespace internal {

/// \internal Shape tag: assignment to a dense matrix goes through evalTo() (EigenBase2EigenBase).
struct TensorCoreHouseholderQShape {
  static std::string debugName() { return "TensorCoreHouseholderQShape"; }
};

template <typename QRType>
struct traits<TensorCoreHouseholderQ<QRType>> {
  typedef typename QRType::Scalar Scalar;
  typedef typename QRType::MatrixType::StorageIndex StorageIndex;
  typedef Dense StorageKind;
  typedef MatrixXpr XprKind;
  enum {
    RowsAtCompileTime = QRType::RowsAtCompileTime,
    ColsAtCompileTime = QRType::RowsAtCompileTime,
    MaxRowsAtCompileTime = QRType::MaxRowsAtCompileTime,
    MaxColsAtCompileTime = QRType::MaxRowsAtCompileTime,
    Flags = 0
  };
};

template <typename QRType>
struct evaluator_traits<TensorCoreHouseholderQ<QRType>> : public evaluator_traits_base<TensorCoreHouseholderQ<QRType>> {
  typedef TensorCoreHouseholderQShape Shape;
};

template <typename T>
struct tcqr_is_identity : std::false_type {};
template <typename S, typename P>
struct tcqr_is_identity<CwiseNullaryOp<scalar_identity_op<S>, P>> : std::true_type {};

/// \internal A plain matrix type with the given compile-time sizes that Eigen accepts (1xN must be row-major).
template <typename Scalar, int R, int C>
using tcqr_plain_t = Matrix<Scalar, R, C, (R == 1 && C != 1) ? RowMajor : ColMajor>;

/// \internal Whether an expression of type T is column-major storage the backends can address as (data(), ld): a
/// plain matrix or a MapBase (Map, Ref, a block of storage), not row-major, of the given scalar. DirectAccessBit alone
/// is not enough: Eigen sets it on IndexedView and CwiseUnaryView too, whose data() does not exist or is not the
/// values. The inner stride must still be checked at run time (tcqr_col_major_ld).
template <typename Scalar, typename T>
constexpr bool tcqr_direct_col_major() {
  return (std::is_base_of<PlainObjectBase<T>, T>::value || std::is_base_of<MapBase<T, ReadOnlyAccessors>, T>::value) &&
         !(int(traits<T>::Flags) & RowMajorBit) && std::is_same<typename traits<T>::Scalar, Scalar>::value;
}

/// \internal The leading dimension of a tcqr_direct_col_major() expression, or 0 if its strides do not allow one.
template <typename T>
Index tcqr_col_major_ld(const T& x) {
  if (x.innerStride() != 1) return 0;
  if (x.cols() <= 1) return (std::max)(x.rows(), Index(1));
  return x.outerStride() >= x.rows() ? x.outerStride() : 0;
}

/// \internal Runs f(ptr, ld) on a column-major r x c buffer that ends up in dst: dst itself when it is a plain
/// column-major matrix, otherwise a temporary copied into dst afterwards.
template <typename Dst, typename F>
void tcqr_write_col_major(Dst& dst, Index r, Index c, F&& f) {
  typedef typename Dst::Scalar Scalar;
  constexpr bool direct = std::is_base_of<PlainObjectBase<Dst>, Dst>::value && !(int(Dst::Flags) & RowMajorBit);
  if constexpr (direct) {
    dst.resize(r, c);  // (Eigen has already sized dst when it calls evalTo, so whether it is fresh is not known here)
    tcqr::detail::adviseFreshHostMemory(dst.data(), sizeof(Scalar) * std::size_t(r * c));
    f(dst.data(), dst.outerStride());
  } else {
    Matrix<Scalar, Dynamic, Dynamic> tmp(r, c);
    tcqr::detail::adviseFreshHostMemory(tmp.data(), sizeof(Scalar) * std::size_t(r * c));
    f(tmp.data(), r);
    dst = tmp;
  }
}

}  // namespace internal

/// \brief The orthogonal factor Q of a TensorCoreHouseholderQR, returned by householderQ().
///
/// Supports what code written for Eigen's HouseholderSequence does with it:
/// \code
/// MatrixXf Q     = qr.householderQ();                            // full m x m Q
/// MatrixXf Qthin = qr.householderQ() * MatrixXf::Identity(m, n);  // thin Q (identity generated on the device)
/// MatrixXf C     = qr.householderQ().transpose() * B;            // Q^T B
/// MatrixXf D     = B * qr.householderQ();                        // B Q
/// MatrixXf Qk    = qr.householderQ().setLength(k);               // H_0 ... H_{k-1}
/// B.applyOnTheLeft(qr.householderQ().adjoint());
/// \endcode
/// Products are evaluated immediately into a plain matrix. The object refers to the decomposition, which must
/// outlive it and must not be recomputed while it is used. In-place products (applyOnTheLeft/Right) on column-major
/// storage work on that storage directly: if the backend throws (tcqr::Error), it may be left partly overwritten.
template <typename QRType>
class TensorCoreHouseholderQ : public EigenBase<TensorCoreHouseholderQ<QRType>> {
 public:
  typedef typename QRType::Scalar Scalar;
  enum {
    RowsAtCompileTime = QRType::RowsAtCompileTime,
    ColsAtCompileTime = QRType::RowsAtCompileTime,
    MaxRowsAtCompileTime = QRType::MaxRowsAtCompileTime,
    MaxColsAtCompileTime = QRType::MaxRowsAtCompileTime
  };

  TensorCoreHouseholderQ(const QRType& qr, bool transposed, Index length)
      : m_qr(&qr), m_trans(transposed), m_length(length) {}

  Index rows() const { return m_qr->rows(); }
  Index cols() const { return m_qr->rows(); }
  /// Number of reflectors used (Eigen's HouseholderSequence::length()).
  Index length() const { return m_length; }
  /// Uses only the first k reflectors, as HouseholderSequence::setLength().
  TensorCoreHouseholderQ& setLength(Index k) {
    eigen_assert(k >= 0 && k <= (std::min)(m_qr->rows(), m_qr->cols()) && "setLength: invalid length");
    m_length = k;
    return *this;
  }
  TensorCoreHouseholderQ transpose() const { return TensorCoreHouseholderQ(*m_qr, !m_trans, m_length); }
  TensorCoreHouseholderQ adjoint() const { return transpose(); }  // real scalars only
  TensorCoreHouseholderQ inverse() const { return transpose(); }
  TensorCoreHouseholderQ conjugate() const { return *this; }
  bool isTransposed() const { return m_trans; }

  /// Writes the full rows() x rows() matrix into dst (what `MatrixXf Q = qr.householderQ();` calls).
  template <typename Dest>
  void evalTo(Dest& dst) const {
    internal::tcqr_write_col_major(dst, rows(), rows(), [&](Scalar* p, Index ld) {
      m_qr->state().formQ(p, rows(), ld, m_trans, m_length);
    });
  }

  /// this * other, evaluated on the decomposition's backend. An identity right-hand side (the thin-Q idiom) is
  /// generated where Q lives instead of being copied there.
  template <typename OtherDerived>
  internal::tcqr_plain_t<Scalar, RowsAtCompileTime, OtherDerived::ColsAtCompileTime> operator*(
      const MatrixBase<OtherDerived>& other) const {
    eigen_assert(other.rows() == rows() && "TensorCoreHouseholderQ * B: size mismatch");
    internal::tcqr_plain_t<Scalar, RowsAtCompileTime, OtherDerived::ColsAtCompileTime> result;
    if (internal::tcqr_is_identity<OtherDerived>::value) {
      internal::tcqr_write_col_major(result, rows(), other.cols(), [&](Scalar* p, Index ld) {
        m_qr->state().formQ(p, other.cols(), ld, m_trans, m_length);
      });
    } else {
      productInto(other.derived(), result, true);
    }
    return result;
  }

  /// \internal dst <- this * src (onLeft) or src * this, dst a fresh plain matrix (the product operators).
  template <typename Src, typename Dest>
  void productInto(const Src& src, Dest& dst, bool onLeft) const {
    // Column-major storage the backend can address goes to it as it is, and the product comes back into dst (on the
    // CUDA backend host to device from src, device to host into dst): no host copy of src into dst first. dst is new
    // (or written whole): huge pages for its first write (detail/HostMemory.h), which cost more than the transfer.
    if constexpr (internal::tcqr_direct_col_major<Scalar, Src>() && internal::tcqr_direct_col_major<Scalar, Dest>()) {
      if (const Index lds = internal::tcqr_col_major_ld(src)) {
        dst.resize(src.rows(), src.cols());
        if (src.size() == 0) return;
        tcqr::detail::adviseFreshHostMemory(dst.data(), sizeof(Scalar) * std::size_t(src.size()));
        m_qr->state().applyQHost(src.data(), lds, dst.data(), dst.outerStride(), src.rows(), src.cols(), onLeft,
                                 m_trans, m_length);
        return;
      }
    }
    // Any other operand is evaluated before apply() takes the transfer buffer: it may solve with this same
    // decomposition (qr.householderQ().transpose() * (A * qr.solve(B))), and solve() uses that buffer too. Evaluating
    // it straight into the buffer (b7c6821) read freed memory when solve() grew it (ASan, Host backend).
    dst.resize(src.rows(), src.cols());
    tcqr::detail::adviseFreshHostMemory(dst.data(), sizeof(Scalar) * std::size_t(src.size()));
    dst = src;
    apply(dst, onLeft);
  }

  /// dst <- this * dst (used by MatrixBase::applyOnTheLeft).
  template <typename Dest>
  void applyThisOnTheLeft(Dest& dst) const {
    eigen_assert(dst.rows() == rows());
    apply(dst, true);
  }
  /// dst <- dst * this (used by MatrixBase::applyOnTheRight).
  template <typename Dest>
  void applyThisOnTheRight(Dest& dst) const {
    eigen_assert(dst.cols() == rows());
    apply(dst, false);
  }

 private:
  template <typename Dest>
  void apply(Dest& dst, bool onLeft) const {
    const Index r = dst.rows(), c = dst.cols();
    if (r == 0 || c == 0) return;
    // Column-major storage the backend can address (a matrix, a Map, a Ref or a block of one) is handed over as it
    // is: the CUDA backend copies it to the device and back itself (from pageable memory, which the driver stages),
    // where the pinned transfer buffer cost a host copy each way besides. (If the backend fails, dst may then be
    // partly overwritten; through the buffer it was left as it was.)
    if constexpr (internal::tcqr_direct_col_major<Scalar, Dest>()) {
      if (const Index ld = internal::tcqr_col_major_ld(dst)) {
        m_qr->state().applyQ(dst.data(), r, c, ld, onLeft, m_trans, m_length);
        return;
      }
    }
    Scalar* buf = m_qr->state().staging(r * c);
    Map<Matrix<Scalar, Dynamic, Dynamic>> B(buf, r, c);
    B = dst;
    m_qr->state().applyQ(buf, r, c, r, onLeft, m_trans, m_length);
    dst = B;
  }

  const QRType* m_qr;
  bool m_trans;
  Index m_length;
};

/// B * Q, evaluated on the decomposition's backend.
template <typename Derived, typename QRType>
internal::tcqr_plain_t<typename Derived::Scalar, Derived::RowsAtCompileTime, QRType::RowsAtCompileTime> operator*(
    const MatrixBase<Derived>& lhs, const TensorCoreHouseholderQ<QRType>& q) {
  eigen_assert(lhs.cols() == q.rows() && "B * TensorCoreHouseholderQ: size mismatch");
  internal::tcqr_plain_t<typename Derived::Scalar, Derived::RowsAtCompileTime, QRType::RowsAtCompileTime> result;
  q.productInto(lhs.derived(), result, false);
  return result;
}

}  // namespace Eigen

#endif  // TCQR_TENSORCOREHOUSEHOLDERQ_H
