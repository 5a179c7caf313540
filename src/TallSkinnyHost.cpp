// TallSkinnyHost.cpp - Eigen::TensorCoreTallSkinnyQR on the Host backend: the generic driver of TallSkinny.hpp with
// HostOps (the same tiling, tree and reconstruction as the CUDA kernels), so CI tests the GPU path's logic.
#include <algorithm>
#include <cstring>
#include <vector>

#include "HostOps.hpp"
#include "TallSkinny.hpp"
#include "Tunables.hpp"
#include "tcqr/Error.h"
#include "tcqr/detail/TallSkinnyState.h"

namespace tcqr {
namespace detail {

namespace {

template <typename S>
struct TallSkinnyHostOps : HostOps<S> {
  void scaleRows(View<S> src, const S* d, View<S> dst) {
    if (dst.empty()) return;
    map(dst) = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>>(d, dst.rows).asDiagonal() * map(src);
  }
};

template <typename S>
void copyColumns(const S* src, Index ldSrc, S* dst, Index ldDst, Index rows, Index cols) {
  for (Index j = 0; j < cols; ++j) std::memcpy(dst + j * ldDst, src + j * ldSrc, sizeof(S) * rows);
}

template <typename S>
class HostTallSkinnyState final : public TallSkinnyState<S> {
 public:
  Backend backend() const noexcept override { return Backend::Host; }

  S* staging(Index count) override {
    if (static_cast<Index>(m_stage.size()) < count) m_stage.resize(static_cast<size_t>(count));
    return m_stage.data();
  }

  void computeStaged(Index rows, Index cols, unsigned what) override {
    m_rows = rows;
    m_cols = cols;
    m_what = what | 0x1u;
    std::swap(m_a, m_stage);  // the staged input becomes the working storage
    m_notFinite = !allFiniteContiguous(m_a.data(), rows * cols);  // (staged: ld == rows)
    const Index n = cols;
    const bool needT = tallSkinnyNeedsT(rows, cols, what);
    m_tau.assign(needT ? static_cast<size_t>(n) : 0, S(0));
    m_q.resize(tallSkinnySeparateQ(what) ? static_cast<size_t>(rows * n) : 0);
    m_r.assign(static_cast<size_t>(n * n), S(0));
    m_t.assign(needT ? static_cast<size_t>(n * n) : 0, S(0));
    m_scratch.resize(static_cast<size_t>(tallSkinnyScratchSize(rows, cols, what, kTsqrMaxCols, PanelKind::Tsqr)));

    TallSkinnyViews<S> v;
    v.A = View<S>(m_a.data(), rows, n, rows);
    v.Q = tallSkinnySeparateQ(what) ? View<S>(m_q.data(), rows, n, rows) : v.A;
    v.R = View<S>(m_r.data(), n, n, n);
    v.T = View<S>(m_t.data(), n, n, n);
    v.tau = m_tau.data();
    v.scratch = m_scratch.data();
    TallSkinnyHostOps<S> ops;
    // Panel::Tsqr throughout (the host default for TensorCoreHouseholderQR is Geqrf): this class is the TSQR API,
    // and CI should exercise the TSQR panels inside the recursion for n > 32 as well.
    std::vector<char> identity;
    if (tallSkinnyPath(rows, cols, what) != TallSkinnyPath::Tree) identity = hostIdentityReflectorColumns(v.A);
    tallSkinnyQR(ops, v, what, kTsqrMaxCols, PanelKind::Tsqr, View<S>(), nullptr,
                 identity.empty() ? nullptr : identity.data());
  }

  void computeDevice(const S*, Index, Index, Index, unsigned, CUstream_st*) override {
    throw Error(ErrorSource::Usage, 0, "computeOnDevice", "computeOnDevice needs the CUDA backend");
  }

  Index rows() const noexcept override { return m_rows; }
  Index cols() const noexcept override { return m_cols; }
  unsigned computed() const noexcept override { return m_what; }
  bool inputNotFinite() const override { return m_notFinite; }

  void copyR(S* dst, Index ld) const override { copyColumns(m_r.data(), m_cols, dst, ld, m_cols, m_cols); }
  void copyThinQ(S* dst, Index ld) const override { copyColumns(deviceThinQ(), m_rows, dst, ld, m_rows, m_cols); }
  void copyQR(S* dst, Index ld) const override { copyColumns(m_a.data(), m_rows, dst, ld, m_rows, m_cols); }
  void copyTau(S* dst) const override { std::copy(m_tau.begin(), m_tau.end(), dst); }
  void copyT(S* dst, Index ld) const override { copyColumns(m_t.data(), m_cols, dst, ld, m_cols, m_cols); }

  const S* deviceR() const override { return m_r.data(); }
  const S* deviceThinQ() const override {
    if (!(m_what & kTallSkinnyThinQ)) return nullptr;
    return tallSkinnySeparateQ(m_what) ? m_q.data() : m_a.data();
  }
  const S* deviceQR() const override { return (m_what & kTallSkinnyWY) ? m_a.data() : nullptr; }
  const S* deviceTau() const override { return (m_what & kTallSkinnyWY) ? m_tau.data() : nullptr; }
  const S* deviceT() const override { return (m_what & kTallSkinnyWY) ? m_t.data() : nullptr; }

  void synchronize() const override {}
  void setStream(CUstream_st*) override {}

 private:
  std::vector<S> m_a, m_q, m_r, m_t, m_tau, m_stage, m_scratch;
  Index m_rows = 0, m_cols = 0;
  unsigned m_what = 0;
  bool m_notFinite = false;
};

}  // namespace

template <typename S>
std::unique_ptr<TallSkinnyState<S>> makeHostTallSkinnyState() {
  return std::unique_ptr<TallSkinnyState<S>>(new HostTallSkinnyState<S>());
}
template std::unique_ptr<TallSkinnyState<float>> makeHostTallSkinnyState<float>();
template std::unique_ptr<TallSkinnyState<double>> makeHostTallSkinnyState<double>();

}  // namespace detail
}  // namespace tcqr
