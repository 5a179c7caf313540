// CudaBackend.cpp - the CUDA backend: cuBLAS GEMM/TRMM/TRSM, cuSOLVER geqrf for the panel, and the kernels of
// kernels/*.cu, driven by the backend-generic recursion of Algorithms.hpp. Everything is queued on one stream; the
// factorization synchronises once, after the input scan that decides which leaf panels may use TSQR (runFactor).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "CudaContext.hpp"
#include "CudaOps.hpp"
#include "FactorGraph.hpp"
#include "StatePool.hpp"
#include "Tunables.hpp"
#include "tcqr/detail/QRState.h"

namespace tcqr {
namespace detail {

// ---------------------------------------------------------------------------------------------------------------
// Error path

const char* cusolverStatusName(cusolverStatus_t s) noexcept {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "CUSOLVER_STATUS_UNKNOWN";
  }
}

static const char* baseName(const char* file) {
  const char* s = std::strrchr(file, '/');
  return s ? s + 1 : file;
}

void throwError(ErrorSource src, int status, const char* statusName, const char* call, const char* file, int line) {
  std::string msg = std::string(call) + " failed: " + (statusName ? statusName : "?") + " (" + std::to_string(status) +
                    ") [" + baseName(file) + ":" + std::to_string(line) + "]";
  throw Error(src, status, call, msg);
}

void checkNoThrow(cudaError_t s, const char* call, const char* file, int line) noexcept {
  if (s != cudaSuccess) {
    cudaGetLastError();
    std::fprintf(stderr, "tcqr: %s failed: %s [%s:%d]\n", call, cudaGetErrorName(s), baseName(file), line);
  }
}

namespace {

template <typename S>
class CudaQRState;
/// The QRState an object owns: `state` wrapped so that its destruction hands it to StatePool.
template <typename S>
std::unique_ptr<QRState<S>> pooled(std::unique_ptr<CudaQRState<S>> state);

template <typename S>
class CudaQRState final : public QRState<S> {
 public:
  // The context (first member) is built first; if a buffer below fails, the members built so far are destroyed,
  // the context last, which releases its handles and stream.
  CudaQRState() {
    m_flags.reserve(2);
    m_hostFlags.reserve(2);
    m_hostFlags.get()[0] = m_hostFlags.get()[1] = 0;
  }
  ~CudaQRState() override {
    // Work still queued (on our stream or the user's) may use the buffers, which the member destructors free after
    // this body; the context, destroyed last, then destroys the handles and the stream (see CudaContext).
    m_ctx.synchronizeNoThrow();
  }

  Backend backend() const noexcept override { return Backend::Cuda; }

  std::unique_ptr<QRState<S>> clone() const override {
    DeviceGuard g(m_ctx.device());
    std::unique_ptr<CudaQRState> c = StatePool::takeOrMake<CudaQRState>();
    c->m_nb = m_nb;
    c->m_panel = m_panel;
    c->setPrecision(m_precision);
    c->m_ctx.setStream(m_ctx.userStream());  // nothing is queued on c's stream yet
    synchronize();
    // Sized for the storage precision: a copy only multiplies by Q and solves (in S, makeOps), and its next compute()
    // sizes its buffers again, so FP16x3's operand workspace (about twice the matrix) would be dead weight.
    c->allocateOrRelease(m_rows, m_cols, kStorageMode, 0);  // (no lanes: it factors nothing)
    c->m_mode = m_mode;  // the mode the copied factorization ran in
    const Index k = std::min(m_rows, m_cols);
    copyD2D(c->m_a.get(), m_a.get(), m_rows * m_cols);
    copyD2D(c->m_t.get(), m_t.get(), k * k);
    copyD2D(c->m_tau.get(), m_tau.get(), k);
    c->m_blocks = m_blocks;  // T's block structure goes with T
    std::memcpy(c->m_hostFlags.get(), m_hostFlags.get(), 2 * sizeof(int));
    synchronize();  // the copies were queued on this object's stream
    return pooled(std::move(c));
  }

  int device() const noexcept { return m_ctx.device(); }
  unsigned long long contextId() const noexcept { return m_ctx.contextId(); }

  /// Device memory held by the state's buffers and workspaces (StatePool's bound).
  std::size_t deviceBytes() const noexcept {
    const auto n = [](Index count, std::size_t size) { return static_cast<std::size_t>(count) * size; };
    return n(m_a.capacity() + m_t.capacity() + m_tau.capacity() + m_scratch.capacity() + m_rhs.capacity() +
                 m_colScale.capacity(),
             sizeof(S)) +
           n(m_conversion.buffer.capacity() + m_partials.buffer.capacity() + m_work.capacity(), 1) +
           n(m_flags.capacity(), sizeof(int)) + n(m_lastRow.device.capacity(), sizeof(std::uint32_t)) +
           m_ctx.deviceBytes();
  }

  /// Makes this state what a new object's is (the front end then applies its settings), keeping the handles,
  /// streams, device buffers and graphs for StatePool: waits for the work queued so far, leaves the caller's stream
  /// (which may be destroyed once its object is), forgets the tracer, and frees the pinned staging buffer (the one
  /// host buffer the size of a matrix; the small pinned records stay). False when that failed (e.g. a sticky CUDA
  /// error): the state is then destroyed instead.
  bool recycle() noexcept {
    try {
      DeviceGuard g(m_ctx.device());
      m_ctx.setStream(nullptr);  // waits for the caller's stream first
      synchronize();
      m_nb = 0;
      m_panel = Panel::Auto;
      setPrecision(Precision::Default);
      m_rows = m_cols = 0;
      m_mode = Precision::Default;
      m_blocks.clear();
      m_hostFlags.get()[0] = m_hostFlags.get()[1] = 0;
      m_stage.release();
      m_ctx.dropTrace();
      // A kept state holds no look-ahead lanes: their green context would make cudaDeviceReset() fail (CudaContext::
      // greenLaneStream). Its graphs go too (their kernel nodes belong to the green context); the lanes' workspaces
      // stay for the next object's lanes.
      if (m_ctx.hasLanes()) {
        m_graph.clear();
        m_ctx.releaseLanes(true);
      }
      m_laneCount = 0;
      m_misses.clear();
      m_lastFactored = Miss{};
      return true;
    } catch (...) {
      return false;
    }
  }

  S* staging(Index count) override {
    synchronize();  // a previous transfer may still read the buffer
    return m_stage.reserve(std::max<Index>(count, 1));
  }

  void factorStaged(Index rows, Index cols) override {
    DeviceGuard g(m_ctx.device());
    allocate(rows, cols);
    if (rows * cols > 0)
      TCQR_CHECK(cudaMemcpyAsync(m_a.get(), m_stage.get(), sizeof(S) * rows * cols, cudaMemcpyHostToDevice, stream()));
    runFactor();
  }

  void factorHost(const S* A, Index rows, Index cols, Index ld) override {
    DeviceGuard g(m_ctx.device());
    allocate(rows, cols);
    // The driver stages pageable memory itself; synchronizing the stream after the copy (which also waits for work
    // queued before it) and before the factorization is queued is what lets the caller modify A once compute()
    // returns, whatever the driver's staging does.
    if (rows * cols > 0) {
      TCQR_CHECK(cudaMemcpy2DAsync(m_a.get(), sizeof(S) * rows, A, sizeof(S) * ld, sizeof(S) * rows, cols,
                                   cudaMemcpyHostToDevice, stream()));
      synchronize();
    }
    runFactor();
  }

  void factorDevice(const S* dA, Index rows, Index cols, Index ld, CUstream_st* userStream) override {
    if (rows < 0 || cols < 0 || ld < std::max<Index>(rows, 1) || (rows * cols > 0 && dA == nullptr))
      throw Error(ErrorSource::Usage, 0, "computeOnDevice",
                  "computeOnDevice: invalid arguments (null pointer, negative size or ld < rows)");
    DeviceGuard g(m_ctx.device());
    setStream(userStream);
    allocate(rows, cols);
    // Without a user stream the work runs on the object's non-blocking stream: order it after everything already
    // queued on the legacy default stream (where a caller that passes no stream most likely produced dA).
    if (!userStream) m_ctx.orderAfterLegacyStream();
    // When the whole factorization is one TSQR panel, its level 0 reads dA directly, which saves the device-to-device
    // copy (one of the few passes over a tall-skinny A); otherwise dA is copied into the object's storage.
    runFactor(View<S>(const_cast<S*>(dA), rows, cols, ld), onePanel(rows, cols));
  }

  Index rows() const noexcept override { return m_rows; }
  Index cols() const noexcept override { return m_cols; }

  bool inputNotFinite() const override {
    synchronize();
    return m_hostFlags.get()[0] != 0;
  }

  void copyQR(S* dst, Index ld) const override {
    if (m_rows * m_cols == 0) return;
    DeviceGuard g(m_ctx.device());
    TCQR_CHECK(cudaMemcpy2DAsync(dst, sizeof(S) * ld, m_a.get(), sizeof(S) * m_rows, sizeof(S) * m_rows, m_cols,
                                 cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }
  void copyTau(S* dst) const override {
    const Index k = std::min(m_rows, m_cols);
    if (k == 0) return;
    DeviceGuard g(m_ctx.device());
    TCQR_CHECK(cudaMemcpyAsync(dst, m_tau.get(), sizeof(S) * k, cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }
  void copyDiagonal(S* dst) const override {
    const Index k = std::min(m_rows, m_cols);
    if (k == 0) return;
    DeviceGuard g(m_ctx.device());
    TCQR_CHECK(cudaMemcpy2DAsync(dst, sizeof(S), m_a.get(), sizeof(S) * (m_rows + 1), sizeof(S), k,
                                 cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }

  // In place is applyQHost with src == dst.
  void applyQ(S* B, Index bRows, Index bCols, Index ldb, bool onLeft, bool transpose, Index length) override {
    applyQHost(B, ldb, B, ldb, bRows, bCols, onLeft, transpose, length);
  }

  void applyQHost(const S* src, Index lds, S* dst, Index ldd, Index bRows, Index bCols, bool onLeft, bool transpose,
                  Index length) override {
    const Index k = std::min(m_rows, m_cols);
    if (length < 0 || length > k) throw Error(ErrorSource::Usage, 0, "applyQ", "applyQ: invalid reflector count");
    if (bRows * bCols == 0) return;
    DeviceGuard g(m_ctx.device());
    S* dB = reserveOrRelease(m_rhs, bRows * bCols);
    // Both copies from and to pageable memory, staged by the driver; src has been read before the copy back starts
    // (same stream), so src may be dst.
    TCQR_CHECK(cudaMemcpy2DAsync(dB, sizeof(S) * bRows, src, sizeof(S) * lds, sizeof(S) * bRows, bCols,
                                 cudaMemcpyHostToDevice, stream()));
    S* scratch = reserveOrRelease(m_scratch, applyScratchSize(length, onLeft ? bCols : bRows));
    CudaOps<S> ops = makeOps();
    applyWYBlocks(ops, viewA().leftCols(length), viewT(), View<S>(dB, bRows, bCols, bRows), onLeft, transpose,
                  scratch, &m_blocks);
    TCQR_CHECK(cudaMemcpy2DAsync(dst, sizeof(S) * ldd, dB, sizeof(S) * bRows, sizeof(S) * bRows, bCols,
                                 cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }

  void formQ(S* dst, Index qCols, Index ld, bool transpose, Index length) override {
    const Index k = std::min(m_rows, m_cols);
    if (length < 0 || length > k) throw Error(ErrorSource::Usage, 0, "formQ", "formQ: invalid reflector count");
    if (m_rows * qCols == 0) return;
    DeviceGuard g(m_ctx.device());
    S* dQ = reserveOrRelease(m_rhs, m_rows * qCols);
    kernels::launchSetIdentity<S>(dQ, m_rows, m_rows, qCols, stream());
    S* scratch = reserveOrRelease(m_scratch, applyScratchSize(length, qCols));
    CudaOps<S> ops = makeOps();
    applyWYBlocks(ops, viewA().leftCols(length), viewT(), View<S>(dQ, m_rows, qCols, m_rows), true, transpose,
                  scratch, &m_blocks);
    TCQR_CHECK(cudaMemcpy2DAsync(dst, sizeof(S) * ld, dQ, sizeof(S) * m_rows, sizeof(S) * m_rows, qCols,
                                 cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }

  // In place is solveHost with rhs == dst (the rows beyond b's are neither read nor written).
  void solve(S* B, Index nrhs, Index ldb, bool transposed) override { solveHost(B, ldb, B, ldb, nrhs, transposed); }

  void solveHost(const S* rhs, Index ldr, S* dst, Index ldd, Index nrhs, bool transposed) override {
    const Index rowsB = std::max(m_rows, m_cols);
    const Index in = transposed ? m_cols : m_rows, out = transposed ? m_rows : m_cols;
    if (rowsB * nrhs == 0) return;
    DeviceGuard g(m_ctx.device());
    S* dB = reserveOrRelease(m_rhs, rowsB * nrhs);
    // From and to pageable memory: the driver stages both copies. The copy back returns once it has completed, and
    // rhs has been read before it starts (same stream), so rhs and dst may overlap.
    if (in > 0)
      TCQR_CHECK(cudaMemcpy2DAsync(dB, sizeof(S) * rowsB, rhs, sizeof(S) * ldr, sizeof(S) * in, nrhs,
                                   cudaMemcpyHostToDevice, stream()));
    S* scratch = reserveOrRelease(m_scratch, solveScratchSize(m_rows, m_cols, nrhs));
    CudaOps<S> ops = makeOps();
    detail::solve(ops, viewA(), viewT(), View<S>(dB, rowsB, nrhs, rowsB), transposed, scratch, &m_blocks);
    if (out > 0)
      TCQR_CHECK(cudaMemcpy2DAsync(dst, sizeof(S) * ldd, dB, sizeof(S) * rowsB, sizeof(S) * out, nrhs,
                                   cudaMemcpyDeviceToHost, stream()));
    synchronize();
  }

  const S* deviceQR() const override { return m_a.get(); }
  const S* deviceTau() const override { return m_tau.get(); }

  void synchronize() const override { m_ctx.synchronize(); }

  void setBlockSize(Index nb) override { m_nb = nb; }
  void setPanel(Panel panel) override { m_panel = panel; }
  void setPrecision(Precision precision) override {
    m_precision = precision;
    // FP64Emulated: cuBLAS only emulates where its heuristics expect a gain unless told to always do so; on Hopper
    // they never do, and the mode exists to be measured.
    const bool eager = precision == Precision::FP64Emulated;
    m_ctx.setEmulationStrategy(eager ? CUBLAS_EMULATION_STRATEGY_EAGER : CUBLAS_EMULATION_STRATEGY_DEFAULT);
  }
  Precision activePrecision() const noexcept override { return m_mode; }
  Index blockSize() const noexcept override { return nb(); }
  void setStream(CUstream_st* s) override { m_ctx.setStream(s); }

 private:
  Index nb() const {
    if (m_nb > 0) return m_nb;
    return panelKind() == PanelKind::Geqrf ? kCudaBlockSize : kTsqrMaxCols;
  }
  PanelKind panelKind() const {
    switch (m_panel) {
      case Panel::Geqrf: return PanelKind::Geqrf;
      case Panel::Tsqr: return PanelKind::Tsqr;
      default: return PanelKind::Hybrid;
    }
  }
  /// The mode of products in S itself (solve, Q products, and a copy's buffers).
  static constexpr Precision kStorageMode = std::is_same<S, double>::value ? Precision::FP64 : Precision::FP32;
  View<S> viewA() const { return View<S>(m_a.get(), m_rows, m_cols, m_rows); }
  /// T (k x k) of Q = I - Y T Y^T, or of its WY blocks (m_blocks): the compact WY form (Algorithms.hpp).
  View<S> viewT() const {
    const Index k = std::min(m_rows, m_cols);
    return View<S>(m_t.get(), k, k, k);
  }
  /// Whether an m x n factorization is one TSQR panel, whose level 0 can read a device input directly.
  bool onePanel(Index rows, Index cols) const {
    return rows * cols > 0 && cols <= nb() && useTsqr(panelKind(), rows, cols) &&
           !(panelKind() == PanelKind::Hybrid && rows <= panelKernelRows());
  }
  /// usePanelKernel's row limit (0: the one-kernel panel is not used). With the look-ahead lanes too since e1c8029
  /// (until then they kept the TSQR panels, docs/DESIGN.md "Panels"; their default now needs a green context, and a
  /// forced TCQR_LOOKAHEAD on plain streams gets the kernel as well).
  Index panelKernelRows() const {
    if (panelKind() != PanelKind::Hybrid || !panelKernelEnabled()) return 0;
    return kernels::householderPanelMaxRows<S>();
  }

  cudaStream_t stream() const { return m_ctx.stream(); }

  /// Ops for the factorization run in the object's precision mode; every other use (solve, Q products) in S.
  CudaOps<S> makeOps(bool factorization = false) const {
    const Precision mode = factorization ? m_mode : kStorageMode;
    CudaOps<S> ops{};
    m_ctx.fillOps(ops, factorization);
    ops.work = &m_work;
    ops.hostWork = &m_hostWork;
    ops.dInfo = m_flags.get() + 1;
    ops.mode = mode;
    ops.conversion = &m_conversion;
    ops.partials = &m_partials;
    if (factorization) {
      // A conversion to FP16 that overflows (a T far beyond its measured bound, DupScales) makes the results as
      // unspecified as a non-finite input does: info() reports both as NumericalIssue.
      ops.dOverflow = m_flags.get();
      ops.maxMergedCols = maxMergedCols(mode, m_rows);  // only factorRecursive reads it
      ops.eagerSpine = m_eagerSpine;  // (the scratch was sized with it)
      ops.panelKernelRows = panelKernelRows();
      ops.panelRowsPerThread = panelKernelRowsPerThread();
      // factorRecursive's look-ahead; allocate() sized the scratch for this many lanes.
      m_ctx.fillLanes(ops, m_laneCount, lookaheadReserveSMs(mode));
    }
    return ops;
  }

  void copyD2D(S* dst, const S* src, Index count) const {
    if (count > 0) TCQR_CHECK(cudaMemcpyAsync(dst, src, sizeof(S) * count, cudaMemcpyDeviceToDevice, stream()));
  }

  // Resolves the mode of a factorization of rows x cols and sizes every buffer it needs. Precision::Default's FP16x3
  // falls back to FP32 when its buffers do not fit (FP32 needs about 30% less here, no operand halves: 1126 against
  // about 1640 MiB at 8192^2), so that the default does not fail to factor where FP32 would succeed. The object
  // remembers the failure: its next compute() of the shape goes straight to FP32 while the device's free memory is
  // short of what FP16x3 adds, and tries FP16x3 again once it is not (skipsMissed). An explicitly requested mode does
  // not fall back.
  //
  // Likewise the look-ahead lanes where they are on by default (FP64 from 8192^2, below 2^27 entries from an object's
  // second factorization of the shape; FP16x3 from 16384^2; TF32, FP16 and BF16 from 32768 rows and 16384 columns:
  // Tunables.hpp lookaheadLanes): each lane holds scratch and
  // GEMM workspaces of its own, and where they do not fit the factorization runs without them, remembered alike (an
  // explicit TCQR_LOOKAHEAD does not fall back).
  void allocate(Index rows, Index cols) {
    const Precision mode = resolvePrecision(m_precision, std::is_same<S, double>::value, Backend::Cuda, rows, cols);
    Choice choices[3];
    int count = 0;
    // The default lanes only where they run on a green context: on plain streams their GEMMs keep the panel kernel
    // waiting (Tunables.hpp lookaheadGreenSMs).
    const bool defaultLanes = !lookaheadLanesFromEnv();
    // (`again`: this object's last factorization had this shape and mode.) A choice of lanes that allocate will skip
    // anyway does not make the green context (under memory pressure).
    int lanes = lookaheadLanes(mode, rows, cols, m_lastFactored.matches(rows, cols, Choice{mode, 0}));
    if (lanes > 0 && defaultLanes && (skipsMissed(rows, cols, Choice{mode, lanes}) || !m_ctx.greenLanesReady()))
      lanes = 0;
    choices[count++] = {mode, lanes};
    if (lanes > 0 && defaultLanes) choices[count++] = {mode, 0};
    if (m_precision == Precision::Default && mode == Precision::FP16x3)
      choices[count++] = {Precision::FP32, defaultLanes ? 0 : lookaheadLanes(Precision::FP32, rows, cols, false)};
    for (int i = 0; i + 1 < count; ++i) {
      if (skipsMissed(rows, cols, choices[i])) continue;
      try {
        allocateOrRelease(rows, cols, choices[i].mode, choices[i].lanes, defaultLanes);
        forgetMiss(rows, cols, choices[i]);
        m_lastFactored = Miss{rows, cols, Choice{mode, 0}, 0};
        return;
      } catch (const Error& e) {
        // Default lanes that cannot be made (out of memory, or a handle or green context that failed under memory
        // pressure with another status) leave the factorization to run without them.
        const bool laneFallback = defaultLanes && choices[i].lanes > 0 && choices[i + 1].lanes == 0 &&
                                  choices[i + 1].mode == choices[i].mode;
        if (!e.isOutOfMemory() && !laneFallback) throw;
        rememberMiss(rows, cols, choices[i]);
      }
    }
    allocateOrRelease(rows, cols, choices[count - 1].mode, choices[count - 1].lanes, defaultLanes);
    m_lastFactored = Miss{rows, cols, Choice{mode, 0}, 0};
  }

  // A choice of allocate() that failed: out of memory, or default lanes whose handles or green context could not be
  // made (which may be memory pressure reported with another status). On a device that tight every compute() of the
  // shape would otherwise try it again, release everything after the failure (the graphs too) and allocate the
  // fallback again. The next allocate() of the shape skips it while the memory this state could have is short of what
  // it would add (growthBytes, plus kMissMargin for what cuBLAS, the lanes' handles and green context and the graphs
  // allocate themselves) or no larger than when it failed; "could have": the device's free memory, the idle states'
  // that StatePool would free for it, and, for the second test, what this state holds. So it tries again once the
  // memory is back, and a failure that memory does not explain waits for a change of at least kMissMargin.
  struct Choice {
    Precision mode;
    int lanes;
  };
  struct Miss {
    Index rows = -1, cols = -1;
    Choice choice{Precision::Default, 0};
    std::size_t available = 0;  // free + idle + held when it failed
    bool matches(Index r, Index c, const Choice& o) const {
      return rows == r && cols == c && choice.mode == o.mode && choice.lanes == o.lanes;
    }
  };
  static constexpr std::size_t kMissMargin = std::size_t(64) << 20;
  static constexpr std::size_t kMaxMisses = 8;
  // The device memory this state could use beyond what it holds (free, and the device's idle states), or 0 if unknown.
  std::size_t obtainableBytes() const {
    size_t freeBytes = 0, total = 0;
    if (cudaMemGetInfo(&freeBytes, &total) != cudaSuccess) {
      cudaGetLastError();  // (this call's own error)
      return 0;
    }
    return freeBytes + StatePool::instance().idleBytes(m_ctx.device());
  }
  bool skipsMissed(Index rows, Index cols, const Choice& c) const {
    for (const Miss& m : m_misses)
      if (m.matches(rows, cols, c)) {
        const std::size_t obtainable = obtainableBytes();
        return obtainable < growthBytes(rows, cols, c.mode, c.lanes) + kMissMargin ||
               obtainable + deviceBytes() < m.available + kMissMargin;
      }
    return false;
  }
  // (After the failure's releaseAll: what the state holds then is in `available` too.)
  void rememberMiss(Index rows, Index cols, const Choice& c) {
    forgetMiss(rows, cols, c);
    if (m_misses.size() >= kMaxMisses) m_misses.erase(m_misses.begin());
    m_misses.push_back(Miss{rows, cols, c, obtainableBytes() + deviceBytes()});
  }
  void forgetMiss(Index rows, Index cols, const Choice& c) {
    for (size_t i = 0; i < m_misses.size(); ++i)
      if (m_misses[i].matches(rows, cols, c)) {
        m_misses.erase(m_misses.begin() + std::ptrdiff_t(i));
        return;
      }
  }

  // allocateIn, and once more after freeing the device's idle states (StatePool) if it was out of memory.
  void allocateOrRelease(Index rows, Index cols, Precision mode, int lanes, bool greenOnly = false) {
    StatePool::orRelease([&] { allocateIn(rows, cols, mode, lanes, greenOnly); });
  }
  // b.reserve(count), likewise.
  template <typename T>
  static T* reserveOrRelease(DeviceBuffer<T>& b, Index count) {
    return StatePool::orRelease([&] { return b.reserve(count); });
  }

  // The sizes of the main buffers a factorization of rows x cols in `mode` with `lanes` look-ahead lanes needs: A,
  // T (k x k, the compact WY form: the factorization keeps no m x k W), tau and the recursion's scratch in entries,
  // the GEMM workspaces in bytes.
  struct Needs {
    Index a, t, tau, scratch, conversion, partials;
  };
  // (`eager`: eagerSpineUpdates(mode, rows, cols), read once by the caller: allocateIn keeps it for the
  // factorizations.)
  Needs needs(Index rows, Index cols, Precision mode, int lanes, bool eager) const {
    const Index k = std::min(rows, cols);
    return Needs{std::max<Index>(rows * cols, 1),
                 std::max<Index>(k * k, 1),
                 std::max<Index>(k, 1),
                 std::max<Index>(
                     factorTotalScratch(rows, cols, nb(), panelKind(), lanes, maxMergedCols(mode, rows), eager), 1),
                 conversionBytes(mode, rows, cols),
                 accumPartialBytes(rows, cols, Index(sizeof(S)), m_ctx.multiprocessors(),
                                   tnSequentialTiles(std::is_same<S, double>::value))};
  }
  // What allocateIn would add to the device memory held now (a buffer that grows is freed before its larger one is
  // allocated), not counting cuSOLVER's small workspace, the column scales and cuBLAS's own allocations.
  std::size_t growthBytes(Index rows, Index cols, Precision mode, int lanes) const {
    const Needs n = needs(rows, cols, mode, lanes, eagerSpineUpdates(mode, rows, cols));
    return m_a.growthBytes(n.a) + m_t.growthBytes(n.t) + m_tau.growthBytes(n.tau) + m_scratch.growthBytes(n.scratch) +
           m_conversion.buffer.growthBytes(n.conversion) + m_partials.buffer.growthBytes(n.partials) +
           m_ctx.laneGrowthBytes(lanes, n.conversion, n.partials);
  }

  // Sizes every buffer a factorization of rows x cols in `mode` needs. On failure (out of memory) all device memory
  // of the object is released, so a failed compute() leaks nothing and the next one starts clean.
  // `greenOnly`: the lanes are the default ones, made on the green context or not at all (CudaContext::reserveLanes).
  void allocateIn(Index rows, Index cols, Precision mode, int lanes, bool greenOnly = false) {
    const Index k = std::min(rows, cols);
    const bool eager = eagerSpineUpdates(mode, rows, cols);
    const Needs n = needs(rows, cols, mode, lanes, eager);
    const Index need[4] = {n.a, n.t, n.tau, n.scratch};
    const Index convBytes = n.conversion, partialBytes = n.partials;
    const bool grows = need[0] > m_a.capacity() || need[1] > m_t.capacity() ||
                       need[2] > m_tau.capacity() || need[3] > m_scratch.capacity() ||
                       convBytes > m_conversion.buffer.capacity() || partialBytes > m_partials.buffer.capacity();
    if (grows) {
      synchronize();  // queued work may still use the buffers that are about to be replaced
      m_graph.clear();  // a graph refers to buffers by address, which a new buffer (of another size) may reuse
    }
    m_rows = m_cols = 0;
    try {
      m_a.reserve(need[0]);
      m_t.reserve(need[1]);
      m_tau.reserve(need[2]);
      m_scratch.reserve(need[3]);
      if (convBytes > 0) m_conversion.buffer.reserve(convBytes);
      if (partialBytes > 0) m_partials.buffer.reserve(partialBytes);
      m_ctx.reserveLanes(lanes, convBytes, partialBytes, greenOnly);
      if (scalesColumns(mode, cols)) m_colScale.reserve(std::max<Index>(cols, 1));
      m_lastRow.reserve(cols, stream());
      if (k > 0 && m_workQueried != std::make_pair(rows, std::min(k, nb()))) {
        size_t dBytes = 0, hBytes = 0;
        TCQR_CHECK(cusolverDnXgeqrf_bufferSize(m_ctx.solver(), m_ctx.params(), rows, std::min(k, nb()), Blas<S>::type,
                                               m_a.get(), rows, Blas<S>::type, m_tau.get(), Blas<S>::type, &dBytes,
                                               &hBytes));
        if (static_cast<Index>(dBytes) > m_work.capacity()) synchronize();
        m_work.reserve(static_cast<Index>(dBytes));
        if (m_hostWork.size() < hBytes) m_hostWork.resize(hBytes);
        m_workQueried = std::make_pair(rows, std::min(k, nb()));
      }
    } catch (...) {
      releaseAll();
      throw;
    }
    m_rows = rows;
    m_cols = cols;
    m_mode = mode;
    m_laneCount = lanes;
    m_eagerSpine = eager;
  }

  // After a failed allocation: nothing is kept (the object is empty and reusable, see the out-of-memory test).
  void releaseAll() {
    m_ctx.synchronizeNoThrow();  // work queued before the failed allocation may still use the buffers freed here
    m_graph.clear();
    m_rows = m_cols = 0;
    m_mode = Precision::Default;
    m_laneCount = 0;
    m_workQueried = std::make_pair(Index(-1), Index(-1));
    m_a.release();
    m_t.release();
    m_tau.release();
    m_scratch.release();
    m_work.release();
    m_rhs.release();
    m_conversion.buffer.release();
    m_partials.buffer.release();
    m_colScale.release();
    m_ctx.releaseLanes();  // (their handles, cuBLAS workspaces and green context too; made again when needed)
    m_lastRow.device.release();
  }

  // m_a = src (the device input of factorDevice).
  void copyFrom(View<S> src) {
    if (m_rows * m_cols > 0)
      TCQR_CHECK(cudaMemcpy2DAsync(m_a.get(), sizeof(S) * m_rows, src.p, sizeof(S) * src.ld, sizeof(S) * m_rows,
                                   m_cols, cudaMemcpyDeviceToDevice, stream()));
  }

  // Factors the matrix in m_a, or the device matrix `src` (factorDevice): with srcPanel the single TSQR panel read
  // straight from src, otherwise src is first copied into m_a. Every path flags NaN/Inf in m_flags[0] while reading
  // its input (and the FP16 conversions flag their overflows there, CudaOps::dOverflow), and where a TSQR leaf may
  // run it records the last nonzero row of each column in the same pass.
  void runFactor(View<S> src = View<S>(), bool srcPanel = false) {
    TCQR_CHECK(cudaMemsetAsync(m_flags.get(), 0, 2 * sizeof(int), stream()));
    m_blocks.clear();  // one WY block unless factor() says otherwise
    CudaOps<S> ops = makeOps(true);
    const Index k = std::min(m_rows, m_cols);
    // The recursion chooses its leaf panels on the host: identityColumns waits for the record (and for whatever
    // was queued on the stream before it).
    std::vector<char> identity;
    // FP16, FP16x3: power-of-two column scaling against overflow (see factor()).
    S* colScale = scalesColumns(ops.mode, m_cols) ? m_colScale.get() : nullptr;
    bool scaled = false;
    if (srcPanel) {
      TCQR_CHECK(cudaMemsetAsync(m_lastRow.device.get(), 0, sizeof(std::uint32_t) * k, stream()));
      const TsqrTree<S> t =
          tsqrTree(ops, viewA(), m_scratch.get(), src, m_flags.get(), true, m_lastRow.device.get(),
                   /*formTopQ=*/true);
      identity = m_lastRow.identityColumns(k, stream());
      if (!anySet(identity.data(), k)) {
        tsqrPanelFromTree(ops, t, viewA(), m_tau.get(), viewT());
        finishFactor(ops);
        return;
      }
      copyFrom(src);  // the panel is split around such a column (NaN/Inf are flagged already)
    } else if (anyTsqrLeaf(panelKind(), m_rows, k, nb())) {
      // The scan copies the input into m_a, or rewrites m_a in place, scaling the columns on the way when FP16 needs
      // it: that saves factor()'s own pass over A (2097152 x 128 FP16: 0.85 ms of scaleColumns; H100, 7d040b4).
      const View<S> in = src.p ? src : viewA();
      scaled = colScale && columnScalingApplies(m_rows, m_cols, nb());
      if (scaled) ops.columnScales(in, colScale);
      kernels::launchScanColumns<S>(in.p, in.ld, m_rows, m_cols, exactIdentityCap(m_rows, m_cols),
                                    m_lastRow.device.get(), m_flags.get(), stream(),
                                    src.p || scaled ? m_a.get() : nullptr, m_rows, scaled ? colScale : nullptr);
      identity = m_lastRow.identityColumns(k, stream());
    } else {
      if (src.p) copyFrom(src);
      kernels::launchFlagNonFinite<S>(m_a.get(), m_rows, m_rows, m_cols, m_flags.get(), stream());
    }
    factorQueued(ops, identity, colScale, scaled);
    finishFactor(ops);
  }

  // The key of FactorGraph: everything the queued recursion depends on besides the data on the device. The shape,
  // mode, block size and panel kind; the leaf choices (identity columns, column scaling); the stream and every
  // buffer the recursion reads or writes (a buffer that grew has moved); and the tunables makeOps or the products
  // read from the environment on every factorization (those read once per process cannot change).
  FactorGraph::Key graphKey(const CudaOps<S>& ops, const std::vector<char>& identity, const S* colScale,
                            bool scaled) const {
    auto addr = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
    // (Buffers by address and size: cudaMalloc may return a freed address for a larger buffer, and a workspace's
    // size decides how some products are split, CudaOps::gemmChunks. The host workspace is cuSOLVER's.)
    FactorGraph::Key key = {std::uintptr_t(m_rows), std::uintptr_t(m_cols), std::uintptr_t(nb()),
                            std::uintptr_t(panelKind()), std::uintptr_t(ops.mode), std::uintptr_t(scaled),
                            std::uintptr_t(ops.maxMergedCols), std::uintptr_t(ops.eagerSpine),
                            std::uintptr_t(ops.panelKernelRows),
                            std::uintptr_t(ops.panelRowsPerThread), std::uintptr_t(x3PairedCorrections()),
                            std::uintptr_t(x3FusedFirstChunk()), addr(stream()), addr(colScale), addr(m_a.get()),
                            addr(m_t.get()), addr(m_tau.get()), addr(m_scratch.get()), addr(m_work.get()),
                            addr(m_flags.get()), addr(m_conversion.buffer.get()), addr(m_partials.buffer.get()),
                            std::uintptr_t(m_a.capacity()), std::uintptr_t(m_t.capacity()),
                            std::uintptr_t(m_tau.capacity()), std::uintptr_t(m_scratch.capacity()),
                            std::uintptr_t(m_work.capacity()), std::uintptr_t(m_conversion.buffer.capacity()),
                            std::uintptr_t(m_partials.buffer.capacity()), addr(m_hostWork.data()),
                            std::uintptr_t(m_hostWork.size())};
    // The look-ahead lanes: their count, their cuBLAS handles' SM target, and each lane's stream (green or plain;
    // the panels' priority comes with a count above 0) and workspaces. (Not their cuBLAS workspaces, which do not
    // change while the lanes live: whatever ends the lanes drops the graphs.)
    key.push_back(std::uintptr_t(ops.laneCount));
    key.push_back(std::uintptr_t(ops.laneCount > 0 && mainLanePriority(ops.mode)));
    key.push_back(std::uintptr_t(lookaheadReserveSMs(ops.mode) + 1));
    for (int q = 0; q < ops.laneCount; ++q) {
      const CudaLane& l = ops.laneTable[q];
      key.push_back(addr(l.stream));
      key.push_back(addr(l.conversion->buffer.get()));
      key.push_back(std::uintptr_t(l.conversion->buffer.capacity()));
      key.push_back(addr(l.partials->buffer.get()));
      key.push_back(std::uintptr_t(l.partials->buffer.capacity()));
    }
    // The flag values themselves: a column certain to get the identity (kSureIdentity) is left out of the work,
    // one that may get it (kMaybeIdentity) is a leaf of its own.
    key.reserve(key.size() + identity.size());
    for (char c : identity) key.push_back(std::uintptr_t(static_cast<unsigned char>(c)));
    return key;
  }

  // Whether factorQueued may capture or replay on stream s: not with the trace (its events synchronize per
  // operation); not on the legacy or per-thread default stream, nor on a blocking stream (while it is captured, any
  // use of the legacy stream, by any thread, would be invalid), nor on a stream the caller is capturing itself. (The
  // look-ahead lanes' streams join the capture through their fork events.)
  bool graphable(const CudaOps<S>& ops, cudaStream_t s) const {
    if (!graphReplayEnabled() || ops.trace || s == nullptr || s == cudaStreamLegacy ||
        s == cudaStreamPerThread)
      return false;
    unsigned flags = 0;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamGetFlags(s, &flags) != cudaSuccess || cudaStreamIsCapturing(s, &capturing) != cudaSuccess) {
      cudaGetLastError();  // (only the queries' own errors)
      return false;
    }
    return (flags & cudaStreamNonBlocking) != 0 && capturing == cudaStreamCaptureStatusNone;
  }

  // factor() on the prepared input, replayed from a graph where FactorGraph says so (graphable).
  void factorQueued(const CudaOps<S>& ops, const std::vector<char>& identity, S* colScale, bool scaled) {
    auto queue = [&] {
      CudaOps<S> o = ops;  // (each run from the same ops)
      // With lanes, the main lane's work on the greatest-priority stream (mainLanePriority), joined back into the
      // object's stream however factor() leaves (it joins the lanes into o.stream first, also when it throws): by
      // the guard while unwinding, where an error in flight stays the one reported, else in line, where a failed
      // join is the error.
      struct MainLane {
        const CudaContext* ctx = nullptr;
        ~MainLane() {
          if (!ctx) return;
          try {
            ctx->joinMainLane();
          } catch (...) {
          }
        }
      } mainLane;
      if (o.laneCount > 0 && mainLanePriority(o.mode)) {
        mainLane.ctx = &m_ctx;  // (armed first: a fork that fails half-way is joined too)
        m_ctx.forkMainLane();
        o.stream = m_ctx.mainLaneStream();
      }
      factor(o, viewA(), m_tau.get(), viewT(), nb(), panelKind(), m_scratch.get(), colScale,
             identity.empty() ? nullptr : identity.data(), &m_blocks, scaled);
      if (mainLane.ctx) {
        mainLane.ctx = nullptr;
        m_ctx.joinMainLane();
      }
    };
    const cudaStream_t s = stream();
    if (!graphable(ops, s)) {
      queue();
      return;
    }
    const FactorGraph::Key key = graphKey(ops, identity, colScale, scaled);
    if (const FactorGraph::Host* blocks = m_graph.replay(key, s)) {
      m_blocks.assign(blocks->begin(), blocks->end());
      return;
    }
    queue();
    FactorGraph::Key after = graphKey(ops, identity, colScale, scaled);  // (buffers may have grown on the way)
    if (after != key || !m_graph.shouldCapture(key)) {
      m_graph.ranDirectly(std::move(after));
      return;
    }
    // The same work once more, recorded while the GPU runs the direct work queued above. Both produce the same
    // host-side results; the direct run's are kept whether or not the capture succeeds.
    struct Restore {  // the direct run's block list, whatever the capture does
      std::vector<Index>& target;
      std::vector<Index> saved;
      ~Restore() { target.swap(saved); }
    } restore{m_blocks, m_blocks};
    m_blocks.clear();
    m_graph.capture(key, s, ops.laneCount > 0, queue,
                    [&] { return FactorGraph::Host(m_blocks.begin(), m_blocks.end()); });
  }

  void finishFactor(const CudaOps<S>& ops) {
    TCQR_CHECK(cudaMemcpyAsync(m_hostFlags.get(), m_flags.get(), 2 * sizeof(int), cudaMemcpyDeviceToHost, stream()));
    if (ops.trace) {
      char title[128];
      std::snprintf(title, sizeof(title), "TensorCoreHouseholderQR<%s> %lld x %lld, %s",
                    sizeof(S) == 4 ? "float" : "double", static_cast<long long>(m_rows),
                    static_cast<long long>(m_cols), precisionName(ops.mode));
      m_ctx.reportTrace(title);
    }
  }

  // First member: constructed before and destroyed after every buffer below (see CudaContext).
  CudaContext m_ctx;
  DeviceBuffer<S> m_a, m_t, m_tau, m_scratch, m_rhs, m_colScale;
  mutable ConversionWork m_conversion;
  mutable ConversionWork m_partials;
  mutable DeviceBuffer<char> m_work;
  DeviceBuffer<int> m_flags;
  LastRowRecord m_lastRow;  // the input's last nonzero rows (runFactor)
  std::vector<Index> m_blocks;  // the WY blocks of m_t (factor(); empty: one block)
  PinnedBuffer<S> m_stage;
  PinnedBuffer<int> m_hostFlags;
  mutable std::vector<char> m_hostWork;
  Index m_rows = 0, m_cols = 0, m_nb = 0;
  Panel m_panel = Panel::Auto;
  Precision m_precision = Precision::Default;
  Precision m_mode = Precision::Default;  // of the current factorization (allocate)
  int m_laneCount = 0;                     // its look-ahead lanes (allocate)
  bool m_eagerSpine = false;               // whether the last of them is the eager lane (allocate)
  std::vector<Miss> m_misses;  // allocate's choices that failed (skipsMissed), until the object is destroyed
  Miss m_lastFactored;         // the shape and mode of the object's last allocate() (its `lanes` unused)
  std::pair<Index, Index> m_workQueried{-1, -1};  // panel shape the cuSOLVER workspace was last sized for
  FactorGraph m_graph;  // the recursion's graphs (factorQueued)
};

/// \internal
/// The QRState of one object: forwards every call to its CudaQRState and, when the object is destroyed, hands the
/// state to StatePool for the next object (CudaQRState::recycle) instead of destroying it.
template <typename S>
class PooledCudaQRState final : public QRState<S> {
 public:
  explicit PooledCudaQRState(std::unique_ptr<CudaQRState<S>> state) : m_s(std::move(state)) {}
  ~PooledCudaQRState() override { giveToPool(m_s); }
  PooledCudaQRState(const PooledCudaQRState&) = delete;
  PooledCudaQRState& operator=(const PooledCudaQRState&) = delete;

  // Every member of QRState, the ones with a default implementation included (the state's own are the CUDA ones).
  Backend backend() const noexcept override { return m_s->backend(); }
  std::unique_ptr<QRState<S>> clone() const override { return m_s->clone(); }
  S* staging(Index count) override { return m_s->staging(count); }
  void factorStaged(Index rows, Index cols) override { m_s->factorStaged(rows, cols); }
  void factorHost(const S* A, Index rows, Index cols, Index ld) override { m_s->factorHost(A, rows, cols, ld); }
  void factorDevice(const S* dA, Index rows, Index cols, Index ld, CUstream_st* stream) override {
    m_s->factorDevice(dA, rows, cols, ld, stream);
  }
  Index rows() const noexcept override { return m_s->rows(); }
  Index cols() const noexcept override { return m_s->cols(); }
  bool inputNotFinite() const override { return m_s->inputNotFinite(); }
  void copyQR(S* dst, Index ld) const override { m_s->copyQR(dst, ld); }
  void copyTau(S* dst) const override { m_s->copyTau(dst); }
  void copyDiagonal(S* dst) const override { m_s->copyDiagonal(dst); }
  void applyQ(S* B, Index bRows, Index bCols, Index ldb, bool onLeft, bool transpose, Index length) override {
    m_s->applyQ(B, bRows, bCols, ldb, onLeft, transpose, length);
  }
  void applyQHost(const S* src, Index lds, S* dst, Index ldd, Index bRows, Index bCols, bool onLeft, bool transpose,
                  Index length) override {
    m_s->applyQHost(src, lds, dst, ldd, bRows, bCols, onLeft, transpose, length);
  }
  void formQ(S* dst, Index qCols, Index ld, bool transpose, Index length) override {
    m_s->formQ(dst, qCols, ld, transpose, length);
  }
  void solve(S* B, Index nrhs, Index ldb, bool transposed) override { m_s->solve(B, nrhs, ldb, transposed); }
  void solveHost(const S* rhs, Index ldr, S* dst, Index ldd, Index nrhs, bool transposed) override {
    m_s->solveHost(rhs, ldr, dst, ldd, nrhs, transposed);
  }
  const S* deviceQR() const override { return m_s->deviceQR(); }
  const S* deviceTau() const override { return m_s->deviceTau(); }
  void synchronize() const override { m_s->synchronize(); }
  void setBlockSize(Index nb) override { m_s->setBlockSize(nb); }
  Index blockSize() const noexcept override { return m_s->blockSize(); }
  void setPanel(Panel panel) override { m_s->setPanel(panel); }
  void setPrecision(Precision precision) override { m_s->setPrecision(precision); }
  Precision activePrecision() const noexcept override { return m_s->activePrecision(); }
  void setStream(CUstream_st* stream) override { m_s->setStream(stream); }

 private:
  std::unique_ptr<CudaQRState<S>> m_s;
};

template <typename S>
std::unique_ptr<QRState<S>> pooled(std::unique_ptr<CudaQRState<S>> state) {
  return std::unique_ptr<QRState<S>>(new PooledCudaQRState<S>(std::move(state)));
}

}  // namespace

template <typename S>
std::unique_ptr<QRState<S>> makeCudaQRState() {
  return pooled(StatePool::takeOrMake<CudaQRState<S>>());
}
template std::unique_ptr<QRState<float>> makeCudaQRState<float>();
template std::unique_ptr<QRState<double>> makeCudaQRState<double>();

}  // namespace detail

bool builtWithCuda() noexcept { return true; }

std::size_t releaseCachedDeviceMemory() noexcept { return detail::StatePool::instance().release(); }

bool cudaDeviceAvailable() noexcept {
  static const bool available = [] {
    const char* off = std::getenv("TCQR_DISABLE_CUDA");
    if (off && *off && std::strcmp(off, "0") != 0) return false;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return n > 0;
  }();
  return available;
}

}  // namespace tcqr
