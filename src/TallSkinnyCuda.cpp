// TallSkinnyCuda.cpp - Eigen::TensorCoreTallSkinnyQR on the CUDA backend: the generic driver of TallSkinny.hpp with
// CudaOps (TSQR kernels, cuBLAS, cuSOLVER for the recursion's short panels). Everything is queued on one stream; a
// computation synchronises once, after the input scan, where it computes tau (see run()).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "CudaContext.hpp"
#include "CudaOps.hpp"
#include "StatePool.hpp"
#include "TallSkinny.hpp"
#include "Tunables.hpp"
#include "tcqr/detail/TallSkinnyState.h"

namespace tcqr {
namespace detail {

namespace {

template <typename S>
struct Dgmm;
template <>
struct Dgmm<float> {
  static void left(cublasHandle_t h, Index m, Index n, const float* A, Index lda, const float* d, float* C, Index ldc) {
    TCQR_CHECK(cublasSdgmm_64(h, CUBLAS_SIDE_LEFT, m, n, A, lda, d, 1, C, ldc));
  }
};
template <>
struct Dgmm<double> {
  static void left(cublasHandle_t h, Index m, Index n, const double* A, Index lda, const double* d, double* C,
                   Index ldc) {
    TCQR_CHECK(cublasDdgmm_64(h, CUBLAS_SIDE_LEFT, m, n, A, lda, d, 1, C, ldc));
  }
};

template <typename S>
struct TallSkinnyCudaOps : CudaOps<S> {
  void scaleRows(View<S> src, const S* d, View<S> dst) {
    if (dst.empty()) return;
    const auto t = this->traced("scaleRows (cuBLAS dgmm)");
    Dgmm<S>::left(this->blas, dst.rows, dst.cols, src.p, src.ld, d, dst.p, dst.ld);
  }
};

template <typename S>
class CudaTallSkinnyState final : public TallSkinnyState<S> {
 public:
  // The context (first member) is built first; if a buffer below fails, the members built so far are destroyed,
  // the context last, which releases its handles and stream.
  CudaTallSkinnyState() {
    m_flags.reserve(2);
    m_hostFlags.reserve(2);
    m_hostFlags.get()[0] = m_hostFlags.get()[1] = 0;
  }
  ~CudaTallSkinnyState() override {
    // Work still queued (on our stream or the user's) may use the buffers, which the member destructors free after
    // this body; the context, destroyed last, then destroys the handles and the stream (see CudaContext).
    m_ctx.synchronizeNoThrow();
  }

  Backend backend() const noexcept override { return Backend::Cuda; }

  S* staging(Index count) override {
    synchronize();  // a previous transfer may still read the buffer
    return m_stage.reserve(std::max<Index>(count, 1));
  }

  void computeStaged(Index rows, Index cols, unsigned what) override {
    DeviceGuard g(m_ctx.device());
    allocate(rows, cols, what);
    if (rows * cols > 0)
      TCQR_CHECK(cudaMemcpyAsync(m_a.get(), m_stage.get(), sizeof(S) * rows * cols, cudaMemcpyHostToDevice, stream()));
    run();
  }

  void computeHost(const S* A, Index rows, Index cols, Index ld, unsigned what) override {
    DeviceGuard g(m_ctx.device());
    allocate(rows, cols, what);
    // The driver stages pageable memory itself; synchronizing the stream after the copy (which also waits for work
    // queued before it) and before the factorization is queued is what lets the caller modify A once compute()
    // returns, whatever the driver's staging does.
    if (rows * cols > 0) {
      TCQR_CHECK(cudaMemcpy2DAsync(m_a.get(), sizeof(S) * rows, A, sizeof(S) * ld, sizeof(S) * rows, cols,
                                   cudaMemcpyHostToDevice, stream()));
      synchronize();
    }
    run();
  }

  void computeDevice(const S* dA, Index rows, Index cols, Index ld, unsigned what, CUstream_st* userStream) override {
    if (rows < 0 || cols < 0 || rows < cols || ld < std::max<Index>(rows, 1) || (rows * cols > 0 && dA == nullptr))
      throw Error(ErrorSource::Usage, 0, "computeOnDevice",
                  "computeOnDevice: invalid arguments (null pointer, rows < cols, negative size or ld < rows)");
    DeviceGuard g(m_ctx.device());
    setStream(userStream);
    allocate(rows, cols, what);
    // Without a user stream the work runs on the object's non-blocking stream: order it after everything already
    // queued on the legacy default stream (where a caller that passes no stream most likely produced dA).
    if (!userStream) m_ctx.orderAfterLegacyStream();
    // The TSQR paths read dA in their first kernel (which also flags NaN/Inf); the recursive path and the one-kernel
    // panel need the copy, which their input scan makes in the same pass. Either way dA must stay unchanged until the
    // computation has run on the stream.
    run(View<S>(const_cast<S*>(dA), rows, cols, ld), !readsInputInPlace(rows, cols, what));
  }

  Index rows() const noexcept override { return m_rows; }
  Index cols() const noexcept override { return m_cols; }
  unsigned computed() const noexcept override { return m_what; }

  bool inputNotFinite() const override {
    synchronize();
    return m_hostFlags.get()[0] != 0;
  }

  void copyR(S* dst, Index ld) const override { copyToHost(dst, ld, m_r.get(), m_cols, m_cols); }
  void copyThinQ(S* dst, Index ld) const override { copyToHost(dst, ld, deviceThinQ(), m_rows, m_cols); }
  void copyQR(S* dst, Index ld) const override { copyToHost(dst, ld, deviceQR(), m_rows, m_cols); }
  void copyTau(S* dst) const override { copyToHost(dst, m_cols, deviceTau(), m_cols, 1); }
  void copyT(S* dst, Index ld) const override { copyToHost(dst, ld, deviceT(), m_cols, m_cols); }

  const S* deviceR() const override { return m_r.get(); }
  const S* deviceThinQ() const override {
    if (!(m_what & kTallSkinnyThinQ)) return nullptr;
    return tallSkinnySeparateQ(m_what) ? m_q.get() : m_a.get();
  }
  const S* deviceQR() const override { return (m_what & kTallSkinnyWY) ? m_a.get() : nullptr; }
  const S* deviceTau() const override { return (m_what & kTallSkinnyWY) ? m_tau.get() : nullptr; }
  const S* deviceT() const override { return (m_what & kTallSkinnyWY) ? m_t.get() : nullptr; }

  void synchronize() const override { m_ctx.synchronize(); }

  void setStream(CUstream_st* s) override { m_ctx.setStream(s); }

  int device() const noexcept { return m_ctx.device(); }
  unsigned long long contextId() const noexcept { return m_ctx.contextId(); }

  /// Device memory held by the state's buffers and workspaces (StatePool's bound).
  std::size_t deviceBytes() const noexcept {
    const auto n = [](Index count, std::size_t size) { return static_cast<std::size_t>(count) * size; };
    return n(m_a.capacity() + m_q.capacity() + m_r.capacity() + m_t.capacity() + m_tau.capacity() +
                 m_scratch.capacity(),
             sizeof(S)) +
           n(m_work.capacity() + m_conversion.buffer.capacity(), 1) + n(m_flags.capacity(), sizeof(int)) +
           n(m_lastRow.device.capacity(), sizeof(std::uint32_t)) + m_ctx.deviceBytes();
  }

  /// As CudaQRState::recycle: what a new object's state is, keeping handles, streams and device buffers; leaves the
  /// caller's stream, forgets the tracer and frees the pinned staging buffer. False (the state is destroyed instead)
  /// on failure.
  bool recycle() noexcept {
    try {
      DeviceGuard g(m_ctx.device());
      m_ctx.setStream(nullptr);  // waits for the caller's stream first
      synchronize();
      m_rows = m_cols = 0;
      m_what = 0;
      m_hostFlags.get()[0] = m_hostFlags.get()[1] = 0;
      m_stage.release();
      m_ctx.dropTrace();
      return true;
    } catch (...) {
      return false;
    }
  }

 private:
  // Panel width of the recursion (n > kTsqrMaxCols): the TSQR tile width, with Hybrid panels (the one-kernel panel
  // where a cluster holds it, TSQR for other panels of at least kTsqrAutoMinRows rows, cuSOLVER below), as
  // TensorCoreHouseholderQR's Panel::Auto on this backend.
  static constexpr Index kNb = kTsqrMaxCols;
  static constexpr PanelKind kPanel = PanelKind::Hybrid;

  cudaStream_t stream() const { return m_ctx.stream(); }

  /// usePanelKernel's row limit (0: the one-kernel panel is not used: TCQR_PANEL_KERNEL=0, or no cluster support).
  static Index panelKernelRows() { return panelKernelEnabled() ? kernels::householderPanelMaxRows<S>() : 0; }
  /// Whether the first kernel of the computation for rows x cols reads a device input in place (the TSQR tree and
  /// panel); otherwise the input scan copies it into m_a first (the recursion, and the one-kernel panel).
  static bool readsInputInPlace(Index rows, Index cols, unsigned what) {
    switch (tallSkinnyPath(rows, cols, what)) {
      case TallSkinnyPath::Tree: return true;
      case TallSkinnyPath::Panel: return rows > panelKernelRows();
      default: return false;
    }
  }

  TallSkinnyCudaOps<S> makeOps() const {
    TallSkinnyCudaOps<S> ops;
    m_ctx.fillOps(ops);
    ops.work = &m_work;
    ops.hostWork = &m_hostWork;
    ops.dInfo = m_flags.get() + 1;
    ops.conversion = &m_conversion;  // (default mode: only the float split-K partials, CudaOps::gemmSplitK)
    ops.panelKernelRows = panelKernelRows();  // the Panel path and the recursion's leaves (usePanelKernel)
    ops.panelRowsPerThread = panelKernelRowsPerThread();
    // No look-ahead lanes (factorRecursive's): on tall matrices the panels' tiles already fill the GPU, and the
    // split update only adds GEMM calls (the first-leaf look-ahead measured 8-15% slower there, 06b3e8b).
    return ops;
  }

  void copyToHost(S* dst, Index ld, const S* src, Index rows, Index cols) const {
    if (rows * cols == 0 || src == nullptr) return;
    DeviceGuard g(m_ctx.device());
    TCQR_CHECK(cudaMemcpy2DAsync(dst, sizeof(S) * ld, src, sizeof(S) * rows, sizeof(S) * rows, cols,
                                 cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }

  // Sizes every buffer the computation needs (grow-only). On failure (out of memory) all device memory of the
  // object is released, so a failed compute() leaks nothing and the next one starts clean.
  void allocate(Index rows, Index cols, unsigned what) {
    const Index n = cols;
    const bool needT = tallSkinnyNeedsT(rows, cols, what);
    const Index need[6] = {std::max<Index>(rows * n, 1),
                           tallSkinnySeparateQ(what) ? std::max<Index>(rows * n, 1) : 0,
                           std::max<Index>(n * n, 1),
                           needT ? std::max<Index>(n * n, 1) : 0,
                           std::max<Index>(n, 1),
                           std::max<Index>(tallSkinnyScratchSize(rows, cols, what, kNb, kPanel), 1)};
    DeviceBuffer<S>* bufs[6] = {&m_a, &m_q, &m_r, &m_t, &m_tau, &m_scratch};
    bool grows = false;
    for (int i = 0; i < 6; ++i) grows |= need[i] > bufs[i]->capacity();
    if (grows) synchronize();  // queued work may still use the buffers that are about to be replaced
    m_rows = m_cols = 0;
    m_what = 0;
    // Memory kept for later objects (StatePool) must not make this one fail: on out-of-memory it is freed and the
    // allocation tried once more.
    StatePool::orRelease([&] { allocateBuffers(rows, cols, need, bufs, needT); });
    m_rows = rows;
    m_cols = cols;
    m_what = what | 0x1u;
  }
  void allocateBuffers(Index rows, Index n, const Index* need, DeviceBuffer<S>* const* bufs, bool needT) {
    try {
      for (int i = 0; i < 6; ++i) bufs[i]->reserve(need[i]);
      const Index splitK = std::is_same<S, float>::value ? splitKBytes(rows) : 0;
      if (splitK > m_conversion.buffer.capacity()) {
        synchronize();
        m_conversion.buffer.reserve(splitK);
      }
      m_lastRow.reserve(n, stream());
      // cuSOLVER's workspace for the recursion's geqrf panels (the first panel is the largest), sized here so that
      // it is never reallocated while queued work may use it.
      const Index w = std::min(n, kNb);
      if (needT && m_workQueried != std::make_pair(rows, w)) {  // (a Panel path with an identity column too)
        size_t dBytes = 0, hBytes = 0;
        TCQR_CHECK(cusolverDnXgeqrf_bufferSize(m_ctx.solver(), m_ctx.params(), rows, w, Blas<S>::type, m_a.get(),
                                               rows, Blas<S>::type, m_tau.get(), Blas<S>::type, &dBytes, &hBytes));
        if (static_cast<Index>(dBytes) > m_work.capacity()) synchronize();
        m_work.reserve(static_cast<Index>(dBytes));
        if (m_hostWork.size() < hBytes) m_hostWork.resize(hBytes);
        m_workQueried = std::make_pair(rows, w);
      }
    } catch (...) {
      m_workQueried = std::make_pair(Index(-1), Index(-1));
      for (int i = 0; i < 6; ++i) bufs[i]->release();
      m_work.release();
      m_lastRow.device.release();
      m_conversion.buffer.release();
      throw;
    }
  }

  // Factors m_a, or src when given (a TSQR path: the tile kernel reads it and flags NaN/Inf; m_a is then output only),
  // or with copySrc (the Recursive path) a copy of src made by the input scan.
  void run(View<S> src = View<S>(), bool copySrc = false) {
    const Index m = m_rows, n = m_cols;
    TCQR_CHECK(cudaMemsetAsync(m_flags.get(), 0, 2 * sizeof(int), stream()));
    // Where tau is computed (every path but the tree), the columns whose reflector must be the identity decide which
    // panels go to geqrf (identityReflectorColumns); the host waits for that scan, which also flags NaN/Inf.
    std::vector<char> identity;
    if (tallSkinnyPath(m, n, m_what) != TallSkinnyPath::Tree && n > 0) {
      const View<S> in = src.p ? src : View<S>(m_a.get(), m, n, m);
      kernels::launchScanColumns<S>(in.p, in.ld, m, n, exactIdentityCap(m, n), m_lastRow.device.get(),
                                    m_flags.get(), stream(), copySrc ? m_a.get() : nullptr, m);
      if (copySrc) src = View<S>();
      identity = m_lastRow.identityColumns(n, stream());
    } else if (src.p == nullptr) {
      kernels::launchFlagNonFinite<S>(m_a.get(), m, m, n, m_flags.get(), stream());
    }
    TallSkinnyViews<S> v;
    v.A = View<S>(m_a.get(), m, n, m);
    v.Q = tallSkinnySeparateQ(m_what) ? View<S>(m_q.get(), m, n, m) : v.A;
    v.R = View<S>(m_r.get(), n, n, n);
    v.T = View<S>(m_t.get(), n, n, n);
    v.tau = m_tau.get();
    v.scratch = m_scratch.get();
    TallSkinnyCudaOps<S> ops = makeOps();
    // (src: the tree's level 0 flags NaN/Inf where no scan ran)
    tallSkinnyQR(ops, v, m_what, kNb, kPanel, src, src.p && identity.empty() ? m_flags.get() : nullptr,
                 identity.empty() ? nullptr : identity.data());
    TCQR_CHECK(cudaMemcpyAsync(m_hostFlags.get(), m_flags.get(), 2 * sizeof(int), cudaMemcpyDeviceToHost, stream()));
    traceReport(m, n);
  }

  void traceReport(Index m, Index n) const {
    char title[128];
    std::snprintf(title, sizeof(title), "TensorCoreTallSkinnyQR<%s> %lld x %lld, what=%u",
                  sizeof(S) == 4 ? "float" : "double", static_cast<long long>(m), static_cast<long long>(n), m_what);
    m_ctx.reportTrace(title);
  }

  // First member: constructed before and destroyed after every buffer below (see CudaContext).
  CudaContext m_ctx;
  DeviceBuffer<S> m_a, m_q, m_r, m_t, m_tau, m_scratch;
  mutable DeviceBuffer<char> m_work;
  mutable ConversionWork m_conversion;
  DeviceBuffer<int> m_flags;
  LastRowRecord m_lastRow;  // the input scan of run()
  PinnedBuffer<S> m_stage;
  PinnedBuffer<int> m_hostFlags;
  mutable std::vector<char> m_hostWork;
  Index m_rows = 0, m_cols = 0;
  unsigned m_what = 0;
  std::pair<Index, Index> m_workQueried{-1, -1};  // panel shape the cuSOLVER workspace was last sized for
};

/// \internal
/// The TallSkinnyState of one object: forwards every call and hands the state to StatePool when the object is
/// destroyed (as PooledCudaQRState, CudaBackend.cpp).
template <typename S>
class PooledCudaTallSkinnyState final : public TallSkinnyState<S> {
 public:
  explicit PooledCudaTallSkinnyState(std::unique_ptr<CudaTallSkinnyState<S>> state) : m_s(std::move(state)) {}
  ~PooledCudaTallSkinnyState() override { giveToPool(m_s); }
  PooledCudaTallSkinnyState(const PooledCudaTallSkinnyState&) = delete;
  PooledCudaTallSkinnyState& operator=(const PooledCudaTallSkinnyState&) = delete;

  // Every member of TallSkinnyState, computeHost (which has a default implementation) included.
  Backend backend() const noexcept override { return m_s->backend(); }
  S* staging(Index count) override { return m_s->staging(count); }
  void computeStaged(Index rows, Index cols, unsigned what) override { m_s->computeStaged(rows, cols, what); }
  void computeHost(const S* A, Index rows, Index cols, Index ld, unsigned what) override {
    m_s->computeHost(A, rows, cols, ld, what);
  }
  void computeDevice(const S* dA, Index rows, Index cols, Index ld, unsigned what, CUstream_st* stream) override {
    m_s->computeDevice(dA, rows, cols, ld, what, stream);
  }
  Index rows() const noexcept override { return m_s->rows(); }
  Index cols() const noexcept override { return m_s->cols(); }
  unsigned computed() const noexcept override { return m_s->computed(); }
  bool inputNotFinite() const override { return m_s->inputNotFinite(); }
  void copyR(S* dst, Index ld) const override { m_s->copyR(dst, ld); }
  void copyThinQ(S* dst, Index ld) const override { m_s->copyThinQ(dst, ld); }
  void copyQR(S* dst, Index ld) const override { m_s->copyQR(dst, ld); }
  void copyTau(S* dst) const override { m_s->copyTau(dst); }
  void copyT(S* dst, Index ld) const override { m_s->copyT(dst, ld); }
  const S* deviceR() const override { return m_s->deviceR(); }
  const S* deviceThinQ() const override { return m_s->deviceThinQ(); }
  const S* deviceQR() const override { return m_s->deviceQR(); }
  const S* deviceTau() const override { return m_s->deviceTau(); }
  const S* deviceT() const override { return m_s->deviceT(); }
  void synchronize() const override { m_s->synchronize(); }
  void setStream(CUstream_st* stream) override { m_s->setStream(stream); }

 private:
  std::unique_ptr<CudaTallSkinnyState<S>> m_s;
};

}  // namespace

template <typename S>
std::unique_ptr<TallSkinnyState<S>> makeCudaTallSkinnyState() {
  return std::unique_ptr<TallSkinnyState<S>>(
      new PooledCudaTallSkinnyState<S>(StatePool::takeOrMake<CudaTallSkinnyState<S>>()));
}
template std::unique_ptr<TallSkinnyState<float>> makeCudaTallSkinnyState<float>();
template std::unique_ptr<TallSkinnyState<double>> makeCudaTallSkinnyState<double>();

}  // namespace detail
}  // namespace tcqr
