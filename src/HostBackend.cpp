// HostBackend.cpp - the Host backend: the same recursive algorithm with Eigen as the BLAS. This is what CPU-only CI
// tests end to end, and the fallback when no GPU is present.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "HostOps.hpp"
#include "Tunables.hpp"
#include "tcqr/Error.h"
#include "tcqr/detail/QRState.h"

namespace tcqr {
namespace detail {

namespace {

template <typename S>
class HostQRState final : public QRState<S> {
 public:
  Backend backend() const noexcept override { return Backend::Host; }
  std::unique_ptr<QRState<S>> clone() const override { return std::unique_ptr<QRState<S>>(new HostQRState(*this)); }

  S* staging(Index count) override {
    if (static_cast<Index>(m_stage.size()) < count) m_stage.resize(static_cast<size_t>(count));
    return m_stage.data();
  }

  void factorStaged(Index rows, Index cols) override {
    m_rows = rows;
    m_cols = cols;
    const Index k = std::min(rows, cols);
    // The staged input becomes the factorization storage; the previous storage becomes the next staging buffer.
    std::swap(m_a, m_stage);
    m_notFinite = !allFiniteContiguous(m_a.data(), rows * cols);  // (staged: ld == rows)
    m_tau.assign(static_cast<size_t>(k), S(0));
    m_scratch.resize(static_cast<size_t>(factorTotalScratch(rows, cols, nb(), panelKind())));
    m_blocks.clear();
    HostOps<S> ops;
    m_mode = resolvePrecision(m_precision, std::is_same<S, double>::value, Backend::Host, rows, cols);
    ops.mode = m_mode;
    ops.maxMergedCols = hostMaxMergedCols(ops.mode, rows);
    std::vector<S> colScale(scalesColumns(ops.mode, cols) ? static_cast<size_t>(cols) : 0);
    std::vector<char> identity;  // columns whose tau must be 0, which a TSQR leaf cannot give (Algorithms.hpp)
    if (anyTsqrLeaf(panelKind(), rows, k, nb())) identity = hostIdentityReflectorColumns(viewA());
    m_t.assign(static_cast<size_t>(k * k), S(0));
    m_tPending = false;
    if (panelKind() == PanelKind::Geqrf && k == cols && k > 0 && k <= nb()) {
      // One Eigen-style panel and no trailing update: what factor() would run, except that T (a Gram matrix of the
      // reflectors, about half the panel's flops, needed only by later products with Q) is formed on first use
      // (ensureT). 1000 x 10 took 1.7-2.2x Eigen's time with T formed here (bench/results/host-cpu.md).
      ops.geqrfPanel(viewA(), m_tau.data());
      m_blocks.assign(1, 0);
      m_tPending = true;
      return;
    }
    factor(ops, viewA(), m_tau.data(), viewT(), nb(), panelKind(), m_scratch.data(),
           colScale.empty() ? nullptr : colScale.data(), identity.empty() ? nullptr : identity.data(), &m_blocks);
  }

  Index rows() const noexcept override { return m_rows; }
  Index cols() const noexcept override { return m_cols; }
  bool inputNotFinite() const override { return m_notFinite; }

  void copyQR(S* dst, Index ld) const override {
    for (Index j = 0; j < m_cols; ++j) std::memcpy(dst + j * ld, m_a.data() + j * m_rows, sizeof(S) * m_rows);
  }
  void copyTau(S* dst) const override { std::copy(m_tau.begin(), m_tau.end(), dst); }
  void copyDiagonal(S* dst) const override {
    for (Index i = 0; i < std::min(m_rows, m_cols); ++i) dst[i] = m_a[static_cast<size_t>(i + i * m_rows)];
  }

  void applyQ(S* B, Index bRows, Index bCols, Index ldb, bool onLeft, bool transpose, Index length) override {
    const Index k = std::min(m_rows, m_cols);
    if (length < 0 || length > k) throw Error(ErrorSource::Usage, 0, "applyQ", "applyQ: invalid reflector count");
    const Index c = onLeft ? bCols : bRows;
    ensureT();
    m_scratch.resize(std::max(m_scratch.size(), static_cast<size_t>(applyScratchSize(length, c))));
    HostOps<S> ops;
    applyWYBlocks(ops, viewA().leftCols(length), viewT(), View<S>(B, bRows, bCols, ldb), onLeft, transpose,
                  m_scratch.data(), &m_blocks);
  }

  void formQ(S* dst, Index qCols, Index ld, bool transpose, Index length) override {
    MapM<S>(dst, m_rows, qCols, Eigen::OuterStride<>(ld)).setIdentity();
    applyQ(dst, m_rows, qCols, ld, true, transpose, length);
  }

  void solve(S* B, Index nrhs, Index ldb, bool transposed) override {
    if (m_tPending) {  // one panel, T not formed: the reflectors one by one, as Eigen::HouseholderQR::solve does
      solveWithReflectors(B, nrhs, ldb, transposed);
      return;
    }
    ensureT();
    m_scratch.resize(std::max(m_scratch.size(), static_cast<size_t>(solveScratchSize(m_rows, m_cols, nrhs))));
    HostOps<S> ops;
    detail::solve(ops, viewA(), viewT(), View<S>(B, std::max(m_rows, m_cols), nrhs, ldb), transposed,
                  m_scratch.data(), &m_blocks);
  }

  const S* deviceQR() const override { return m_a.data(); }
  const S* deviceTau() const override { return m_tau.data(); }
  void synchronize() const override {}
  void setBlockSize(Index nb) override { m_nb = nb; }
  void setPanel(Panel panel) override { m_panel = panel; }
  void setPrecision(Precision precision) override { m_precision = precision; }
  Precision activePrecision() const noexcept override { return m_mode; }
  Index blockSize() const noexcept override { return nb(); }
  void setStream(CUstream_st*) override {}

 private:
  /// solve() where T was not formed (factorStaged's one-panel case, m >= n): Q^T b with Eigen's HouseholderSequence
  /// over the packed factor and tau (a reflector at a time for few right-hand sides), which is about as fast as
  /// forming T would be alone for one right-hand side, then R; transposed, R^T first and Q last (detail::solve's
  /// order).
  void solveWithReflectors(S* B, Index nrhs, Index ldb, bool transposed) {
    using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
    using Vec = Eigen::Matrix<S, Eigen::Dynamic, 1>;
    const Index m = m_rows, n = m_cols;
    const Eigen::Map<const Mat> a(m_a.data(), m, n);
    const Eigen::Map<const Vec> tau(m_tau.data(), n);
    MapM<S> b(B, m, nrhs, Eigen::OuterStride<>(ldb));
    const auto q = Eigen::householderSequence(a, tau);
    const auto r = a.topRows(n).template triangularView<Eigen::Upper>();
    if (!transposed) {
      b.applyOnTheLeft(q.adjoint());
      r.solveInPlace(b.topRows(n));
    } else {
      r.transpose().solveInPlace(b.topRows(n));
      b.bottomRows(m - n).setZero();
      b.applyOnTheLeft(q);
    }
  }

  /// Forms T where factorStaged left it for later (one panel): the same operations factor()'s leaf runs after the
  /// panel (formPanelT), on the same A and tau, so T is what an eager factorization gives.
  void ensureT() {
    if (!m_tPending) return;
    const Index k = std::min(m_rows, m_cols);
    m_scratch.resize(std::max(m_scratch.size(), static_cast<size_t>(2 * k * k)));
    HostOps<S> ops;  // (formPanelT's Gram matrix and T do not depend on the precision mode)
    formPanelT(ops, viewA(), m_tau.data(), viewT(), m_scratch.data());
    m_tPending = false;
  }

  Index nb() const {
    if (m_nb > 0) return m_nb;
    return panelKind() == PanelKind::Tsqr ? kTsqrMaxCols : kHostBlockSize;
  }
  PanelKind panelKind() const { return m_panel == Panel::Tsqr ? PanelKind::Tsqr : PanelKind::Geqrf; }
  View<S> viewA() { return View<S>(m_a.data(), m_rows, m_cols, m_rows); }
  /// T (k x k) of the compact WY form (Algorithms.hpp), with the block structure m_blocks.
  View<S> viewT() {
    const Index k = std::min(m_rows, m_cols);
    return View<S>(m_t.data(), k, k, k);
  }

  std::vector<S> m_a, m_t, m_tau, m_stage, m_scratch;
  std::vector<Index> m_blocks;  // the WY blocks of m_t (factor(); empty: one block)
  Index m_rows = 0, m_cols = 0, m_nb = 0;
  Panel m_panel = Panel::Auto;
  Precision m_precision = Precision::Default;
  Precision m_mode = Precision::Default;  // of the current factorization (factorStaged)
  bool m_notFinite = false;
  bool m_tPending = false;  // T not formed yet (factorStaged's one-panel case; ensureT)
};

}  // namespace

template <typename S>
void QRState<S>::factorDevice(const S*, Index, Index, Index, CUstream_st*) {
  throw Error(ErrorSource::Usage, 0, "factorDevice", "computeOnDevice needs the CUDA backend");
}

template <typename S>
std::unique_ptr<QRState<S>> makeHostQRState() {
  return std::unique_ptr<QRState<S>>(new HostQRState<S>());
}

template class QRState<float>;
template class QRState<double>;
template std::unique_ptr<QRState<float>> makeHostQRState<float>();
template std::unique_ptr<QRState<double>> makeHostQRState<double>();

}  // namespace detail
}  // namespace tcqr
