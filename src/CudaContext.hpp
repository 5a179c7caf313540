// CudaContext.hpp - the device-side lifecycle shared by the CUDA state classes (internal; includes CUDA headers):
// the device, the cuBLAS and cuSOLVER handles, the object's own stream or a borrowed user stream, and the event that
// orders work after the legacy default stream. CudaQRState (CudaBackend.cpp) and CudaTallSkinnyState
// (TallSkinnyCuda.cpp) each own one.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <memory>
#include <string>
#include <type_traits>

#include "CudaOps.hpp"
#include "FactorGraph.hpp"
#include "StatePool.hpp"

namespace tcqr {
namespace detail {

/// \internal
/// The handles and the stream of one CUDA state object. Everything the object queues runs on stream(): the user's
/// stream when one was set, otherwise a non-blocking stream owned here. The cuBLAS and cuSOLVER handles always run
/// on stream().
///
/// Destruction order. A state class holds device buffers that work still queued on stream() may use, so it must
///   1. declare its CudaContext as its FIRST data member: members are destroyed in reverse declaration order, so the
///      context (and with it the streams) outlives every buffer, and a constructor that throws after the context was
///      built still destroys it (and so releases the handles) after the buffers; and
///   2. call synchronizeNoThrow() in its destructor body, which runs before any member is destroyed, so that no
///      queued work still uses a buffer when the buffers' destructors free them.
/// The context's own destructor synchronises once more (nothing is queued by then) and destroys what it created.
class CudaContext {
 public:
  /// Binds to the current device. Throws tcqr::Error (NoDevice) when no device is usable, or the failing call's
  /// error; on failure everything created so far is released.
  CudaContext() {
    if (!cudaDeviceAvailable())
      throw Error(ErrorSource::NoDevice, 0, "cudaGetDeviceCount",
                  "Backend::Cuda requested but no usable CUDA device is present");
    TCQR_CHECK(cudaGetDevice(&m_device));
    TCQR_CHECK(cudaDeviceGetAttribute(&m_sms, cudaDevAttrMultiProcessorCount, m_device));
    m_contextId = currentContextId();  // (the device's primary context, bound by the call above)
    try {
      TCQR_CHECK(cublasCreate(&m_blas));
      TCQR_CHECK(cusolverDnCreate(&m_solver));
      TCQR_CHECK(cusolverDnCreateParams(&m_params));
      // True FP32/FP64: no TF32 behind the user's back. The precision modes pick tensor cores per call (the compute
      // type of cublasGemmEx), and FP64Emulated through the handle's emulation strategy (CudaQRState::setPrecision).
      TCQR_CHECK(cublasSetMathMode(m_blas, CUBLAS_DEFAULT_MATH));
      applyStream();  // creates the own stream
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~CudaContext() noexcept {
    synchronizeNoThrow();
    destroy();
  }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const noexcept { return m_device; }
  /// The id of the CUDA context everything here was created in (0: unknown; StatePool keeps no such state).
  unsigned long long contextId() const noexcept { return m_contextId; }
  int multiprocessors() const noexcept { return m_sms; }
  cublasHandle_t blas() const noexcept { return m_blas; }
  cusolverDnHandle_t solver() const noexcept { return m_solver; }
  cusolverDnParams_t params() const noexcept { return m_params; }
  /// The user's stream, or null when the object runs on its own stream.
  cudaStream_t userStream() const noexcept { return m_userStream; }

  /// The stream all work is queued on: the user's, or the own non-blocking stream (created on first use).
  cudaStream_t stream() const {
    if (m_userStream) return m_userStream;
    if (!m_ownStream) TCQR_CHECK(cudaStreamCreateWithFlags(&m_ownStream, cudaStreamNonBlocking));
    return m_ownStream;
  }

  /// The main lane's stream beside the look-ahead lanes (mainLanePriority): non-blocking, at the device's greatest
  /// priority, created on first use (with its fork and join events, all or none); forkMainLane and joinMainLane
  /// bracket each use (factorQueued in CudaBackend.cpp).
  cudaStream_t mainLaneStream() const {
    if (!m_mainLane) {
      cudaStream_t t = nullptr;
      cudaEvent_t fork = nullptr, join = nullptr;
      try {
        TCQR_CHECK(cudaStreamCreateWithPriority(&t, cudaStreamNonBlocking, greatestPriority()));
        TCQR_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        TCQR_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
      } catch (...) {
        if (join) TCQR_CHECK_NOTHROW(cudaEventDestroy(join));
        if (fork) TCQR_CHECK_NOTHROW(cudaEventDestroy(fork));
        if (t) TCQR_CHECK_NOTHROW(cudaStreamDestroy(t));
        throw;
      }
      m_mainLane = t;
      m_mainLaneFork = fork;
      m_mainLaneJoin = join;
    }
    return m_mainLane;
  }
  /// Queues work on mainLaneStream() from here: it waits for what stream() holds, and the handles run on it. Where
  /// that fails half-way the handles are back on stream() (the caller joins as after a use).
  void forkMainLane() const {
    const cudaStream_t t = mainLaneStream();
    try {
      TCQR_CHECK(cudaEventRecord(m_mainLaneFork, stream()));
      TCQR_CHECK(cudaStreamWaitEvent(t, m_mainLaneFork, 0));
      bindHandles(t);
    } catch (...) {
      bindHandlesNoThrow(stream());
      throw;
    }
  }
  /// The reverse of forkMainLane: stream() waits for mainLaneStream()'s work, and the handles run on stream() again
  /// whatever fails (a capture already invalidated fails the record; the handles must not stay on the lane, where a
  /// later solve's products would race with its copies on stream()).
  void joinMainLane() const {
    try {
      if (m_mainLane) {
        TCQR_CHECK(cudaEventRecord(m_mainLaneJoin, m_mainLane));
        TCQR_CHECK(cudaStreamWaitEvent(stream(), m_mainLaneJoin, 0));
      }
    } catch (...) {
      bindHandlesNoThrow(stream());
      throw;
    }
    bindHandles(stream());
  }

  /// Runs on `s` from now on (null: the own stream). Work queued on the old stream completes first, since work on
  /// the new one may touch the same buffers.
  void setStream(cudaStream_t s) {
    if (s == m_userStream) return;
    synchronize();
    m_userStream = s;
    applyStream();
  }

  /// Waits until everything queued on stream() has completed, and on the look-ahead lanes (joined into stream()
  /// normally, but not after a factorization that threw between a fork and its join).
  void synchronize() const {
    DeviceGuard g(m_device);
    TCQR_CHECK(cudaStreamSynchronize(stream()));
    if (m_mainLane) TCQR_CHECK(cudaStreamSynchronize(m_mainLane));
    for (const CudaLane& l : m_lanes)
      if (l.stream) TCQR_CHECK(cudaStreamSynchronize(l.stream));
  }

  /// For destructors: waits for the user's stream (if set) and the own stream (if created), reporting failures to
  /// stderr instead of throwing.
  void synchronizeNoThrow() const noexcept {
    if (m_userStream) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(m_userStream));
    if (m_ownStream) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(m_ownStream));
    if (m_mainLane) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(m_mainLane));
    // Normally joined into stream() already; not after a computation that threw half-way.
    for (const CudaLane& l : m_lanes)
      if (l.stream) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(l.stream));
  }

  /// cuBLAS's emulation strategy (FP64Emulated), on every handle.
  void setEmulationStrategy(cublasEmulationStrategy_t strategy) {
    m_emulation = strategy;
    TCQR_CHECK(cublasSetEmulationStrategy(m_blas, strategy));
    for (const CudaLane& l : m_lanes)
      if (l.blas) TCQR_CHECK(cublasSetEmulationStrategy(l.blas, strategy));
  }

  /// Gives `ops` the first `count` look-ahead lanes of factorRecursive (at most kMaxLanes; created and their
  /// workspaces sized by reserveLanes): non-blocking streams of the state's green context where there is one
  /// (greenLaneStream; else plain streams), each with its own cuBLAS handle (math mode and emulation strategy as
  /// blas(); an explicit workspace of its own when graphs are on) whose GEMMs may use all but `reserveSMs`
  /// multiprocessors (cublasSetSmCountTarget; -1: half of them, -2: those outside the green context, half where there
  /// is none; clamped to leave the lanes at least one), so
  /// that the main lane's panel kernels and GEMMs find free ones (bench/overlap_probe: with every SM taken, a TF32 GEMM
  /// let 10% of a chain of panels run beside it, with 16 left free 80%). The lanes' own small kernels are not limited.
  /// Fork/join events and GEMM workspaces of its own. Also sets ops.panelPriority (the panels beside the lanes'
  /// GEMMs). Every fork is joined into stream() before factor() returns or throws (its guard), and synchronize()
  /// waits for the lanes too.
  template <typename S>
  void fillLanes(CudaOps<S>& ops, int count, int reserveSMs) const {
    count = std::min(count, kMaxLanes);
    if (count <= 0) return;
    for (int q = 0; q < count; ++q) {
      CudaLane& l = m_lanes[static_cast<size_t>(q)];
      if (!l.stream) createLane(l, q);
    }
    if (reserveSMs == -2) reserveSMs = m_green != nullptr && m_greenSMs > 0 ? m_sms - m_greenSMs : -1;
    const int reserve = std::min(reserveSMs < 0 ? m_sms / 2 : reserveSMs, m_sms - 1);
    const int target = reserve > 0 ? m_sms - reserve : 0;  // 0: no limit
    for (int q = 0; q < count; ++q) TCQR_CHECK(cublasSetSmCountTarget(m_lanes[static_cast<size_t>(q)].blas, target));
    ops.laneTable = m_lanes.data();
    ops.laneCount = count;
    ops.panelPriority = greatestPriority();  // (placed before the lanes' queued GEMM blocks)
  }
  /// Creates the first `count` lanes and sizes their GEMM workspaces like the main lane's (`conversionBytes`,
  /// `partialBytes`): a lane's product runs in column passes as wide as its partials workspace holds, so an empty
  /// one would run it a column at a time. For the state's allocate(), so that a factorization allocates nothing.
  /// `greenOnly` (the default lanes, which lose on plain streams): a lane made now that gets no green stream throws
  /// instead of taking a plain one (CudaQRState::allocate then factors without lanes).
  void reserveLanes(int count, Index conversionBytes, Index partialBytes, bool greenOnly = false) const {
    count = std::min(count, kMaxLanes);
    bool grows = false;
    for (int q = 0; q < count; ++q) {
      CudaLane& l = m_lanes[static_cast<size_t>(q)];
      if (!l.stream) createLane(l, q, greenOnly);
      grows = grows || conversionBytes > l.conversion->buffer.capacity() ||
              partialBytes > l.partials->buffer.capacity();
    }
    if (grows) synchronize();  // queued lane work may still use the buffers about to be replaced
    for (int q = 0; q < count; ++q) {
      const CudaLane& l = m_lanes[static_cast<size_t>(q)];
      if (conversionBytes > 0) l.conversion->buffer.reserve(conversionBytes);
      if (partialBytes > 0) l.partials->buffer.reserve(partialBytes);
    }
  }
  /// What reserveLanes(count, conversionBytes, partialBytes) and the lanes' creation would add to deviceBytes() (not
  /// counting the handles' and the green context's own allocations).
  std::size_t laneGrowthBytes(int count, Index conversionBytes, Index partialBytes) const noexcept {
    std::size_t bytes = 0;
    for (int q = 0; q < std::min(count, kMaxLanes); ++q) {
      const size_t i = static_cast<size_t>(q);
      bytes += m_laneConversion[i].buffer.growthBytes(conversionBytes) +
               m_lanePartials[i].buffer.growthBytes(partialBytes);
      if (graphReplayEnabled()) bytes += m_laneBlasWorkspace[i].growthBytes(laneBlasWorkspaceBytes());
    }
    return bytes;
  }
  /// Device memory held here: the lanes' GEMM workspaces and cuBLAS's explicit workspace.
  std::size_t deviceBytes() const noexcept {
    std::size_t bytes = static_cast<std::size_t>(m_blasWorkspace.capacity());
    for (size_t q = 0; q < m_lanes.size(); ++q)
      bytes += static_cast<std::size_t>(m_laneConversion[q].buffer.capacity() + m_lanePartials[q].buffer.capacity() +
                                        m_laneBlasWorkspace[q].capacity());
    return bytes;
  }
  /// Whether the look-ahead lanes can run on a green context here (greenLaneStream): 13.0 headers, a driver with the
  /// entry points, sm_90 or later (the thread-block clusters the green context keeps whole came with it), not switched
  /// off (TCQR_LANES_GREEN=0), and no failed attempt on this state. The default lanes need it (allocate).
  bool greenLanesPossible() const {
#if CUDA_VERSION >= 13000
    if (lookaheadGreenSMs() == 0 || m_greenFailed) return false;
    if (m_green) return true;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, m_device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9 && greenApi().usable();
#else
    return false;
#endif
  }
  /// Whether the look-ahead lanes' green context exists, made now if greenLanesPossible() and it does not yet: for
  /// the default lanes (CudaQRState::allocate), which lose on plain streams, so that a device the driver cannot split
  /// (under MPS or MIG, say) runs without lanes instead. A failure is remembered until releaseLanes
  /// (greenContextFailures counts them).
  bool greenLanesReady() const {
#if CUDA_VERSION >= 13000
    if (!greenLanesPossible()) return false;
    if (!m_green) makeGreenContext();
    return m_green != nullptr;
#else
    return false;
#endif
  }
  /// Whether look-ahead lanes or their green context exist (made by fillLanes or reserveLanes).
  bool hasLanes() const noexcept {
    for (const CudaLane& l : m_lanes)
      if (l.stream || l.blas) return true;
    return m_green != nullptr;
  }
  /// Destroys the lanes (streams, handles, events) and the green context, after the work queued on them (the caller
  /// synchronized), and unless keepWorkspaces their workspaces too. For the state pool (a kept state must not hold a
  /// green context, which would make a later cudaDeviceReset() fail; it keeps the workspaces, which the next object's
  /// lanes then take instead of allocating them again), for a failed allocation and for destroy(). The next
  /// fillLanes or reserveLanes makes the lanes again.
  void releaseLanes(bool keepWorkspaces = false) const noexcept {
    for (CudaLane& l : m_lanes) destroyLane(l);
    if (!keepWorkspaces) {
      releaseLaneBuffers();
      for (DeviceBuffer<char>& w : m_laneBlasWorkspace) w.release();
    }
#if CUDA_VERSION >= 13000
    if (m_green) greenApi().destroy(m_green);
#endif
    m_green = nullptr;
    m_greenSMs = 0;
    m_greenFailed = false;
  }
  /// The device's greatest stream priority (for the panel kernels beside the lanes' GEMMs).
  int greatestPriority() const {
    int least = 0, greatest = 0;
    TCQR_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return greatest;
  }
  /// Frees the lanes' GEMM workspaces (conversion and partials; releaseLanes also frees their cuBLAS workspaces).
  void releaseLaneBuffers() const noexcept {
    for (size_t q = 0; q < m_lanes.size(); ++q) {
      m_laneConversion[q].buffer.release();
      m_lanePartials[q].buffer.release();
    }
  }

  /// Orders the work queued on stream() from now on after everything already queued on the legacy default stream
  /// (where a caller that passes no stream most likely produced its input). For the calls given no user stream,
  /// which then run on the own non-blocking stream.
  void orderAfterLegacyStream() {
    if (!m_ready) TCQR_CHECK(cudaEventCreateWithFlags(&m_ready, cudaEventDisableTiming));
    TCQR_CHECK(cudaEventRecord(m_ready, cudaStreamLegacy));
    TCQR_CHECK(cudaStreamWaitEvent(stream(), m_ready, 0));
  }

  /// Sets the fields of `ops` that come from the context (handles and stream); the caller sets the workspaces, the
  /// info pointer and the mode. `traced`: the ops' calls are recorded for the next reportTrace (TCQR_TRACE=1); only
  /// a computation that reports (a factorization) should pass true, or its records would land in the next report.
  template <typename S>
  void fillOps(CudaOps<S>& ops, bool traced = true) const {
    ops.blas = m_blas;
    ops.solver = m_solver;
    ops.params = m_params;
    ops.stream = stream();
    ops.sms = m_sms;
    if (traced && OpTrace::enabled() && !m_trace) m_trace.reset(new OpTrace());
    ops.trace = traced ? m_trace.get() : nullptr;
  }

  /// Forgets the tracer (and whatever a computation that threw left in it), for a state's next owner.
  void dropTrace() noexcept { m_trace.reset(); }

  /// With TCQR_TRACE=1: waits for the computation just queued and prints its per-operation GPU times (OpTrace.hpp).
  void reportTrace(const char* title) const {
    if (m_trace) m_trace->report(title);
  }

 private:
#if CUDA_VERSION >= 13000
  /// The driver's green-context entry points, looked up once through the runtime so that nothing links libcuda; null
  /// where the driver lacks them. (At the header's version: CUdevResource grew since 12.4, and the 12.4 entry points
  /// did not take this header's layout; the green lanes need 13.0 headers and are off in builds with older ones.)
  struct GreenApi {
    PFN_cuDeviceGetDevResource_v12040 getResource = nullptr;
    PFN_cuDevSmResourceSplitByCount_v12040 split = nullptr;
    PFN_cuDevResourceGenerateDesc_v12040 makeDesc = nullptr;
    PFN_cuGreenCtxCreate_v12040 create = nullptr;
    PFN_cuGreenCtxDestroy_v12040 destroy = nullptr;
    PFN_cuGreenCtxStreamCreate_v12050 makeStream = nullptr;
    bool usable() const { return getResource && split && makeDesc && create && destroy && makeStream; }
  };
  static const GreenApi& greenApi() {
    static const GreenApi api = [] {
      auto get = [](const char* name, auto& fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
          fn = reinterpret_cast<std::decay_t<decltype(fn)>>(p);
      };
      GreenApi a;
      get("cuDeviceGetDevResource", a.getResource);
      get("cuDevSmResourceSplitByCount", a.split);
      get("cuDevResourceGenerateDesc", a.makeDesc);
      get("cuGreenCtxCreate", a.create);
      get("cuGreenCtxDestroy", a.destroy);
      get("cuGreenCtxStreamCreate", a.makeStream);
      cudaGetLastError();  // (only these queries' own errors)
      return a;
    }();
    return api;
  }
#endif

  /// A non-blocking stream for a look-ahead lane on the state's green context (lookaheadGreenSMs multiprocessors of
  /// m_device, created on first use), or null where there is none (greenLanesPossible false, or the driver cannot
  /// split the device or is out of memory): lanes forced by TCQR_LOOKAHEAD then use plain streams, which only costs
  /// speed, and the default lanes are not made (createLane's greenOnly). Where the context exists but makes no stream,
  /// throws. The green context retains the
  /// device's primary context: while it exists, cudaDeviceReset() fails, so the state gives it up with its lanes when
  /// its object is destroyed (releaseLanes from recycle).
  cudaStream_t greenLaneStream() const {
#if CUDA_VERSION >= 13000
    if (!greenLanesReady()) return nullptr;
    // (A context that exists but makes no stream fails the lane: default lanes then fall back to none, CudaQRState::
    // allocate, rather than run on a plain stream.)
    CUstream st = nullptr;
    const CUresult r = greenApi().makeStream(&st, m_green, CU_STREAM_NON_BLOCKING, 0);
    if (r != CUDA_SUCCESS) {
      // Error::status() holds a cudaError_t for ErrorSource::Cuda: the driver's code goes into the name.
      const bool oom = r == CUDA_ERROR_OUT_OF_MEMORY;
      const std::string name = oom ? std::string("CUDA_ERROR_OUT_OF_MEMORY") : "CUresult " + std::to_string(int(r));
      throwError(ErrorSource::Cuda, static_cast<int>(oom ? cudaErrorMemoryAllocation : cudaErrorUnknown), name.c_str(),
                 "cuGreenCtxStreamCreate(&stream, green, CU_STREAM_NON_BLOCKING, 0)", __FILE__, __LINE__);
    }
    ++g_greenLaneStreams;
    return st;
#else
    return nullptr;
#endif
  }
#if CUDA_VERSION >= 13000
  /// m_green: lookaheadGreenSMs multiprocessors of m_device (-1: laneGreenSMs, all but kLookaheadMainSMs rounded down
  /// to the split's granularity). Sets m_greenFailed where the driver refuses, unless for lack of memory (tried again
  /// next time).
  void makeGreenContext() const {
    const GreenApi& api = greenApi();
    CUdevResource all{}, group{}, rest{};
    CUdevResourceDesc desc = nullptr;
    CUgreenCtx g = nullptr;
    unsigned groups = 1;
    CUresult r = api.getResource(CUdevice(m_device), &all, CU_DEV_RESOURCE_TYPE_SM);
    if (r == CUDA_SUCCESS) {
      const unsigned align = std::max(1u, all.sm.smCoscheduledAlignment);
      const int want = lookaheadGreenSMs();
      const unsigned count = want > 0 ? unsigned(want) : laneGreenSMs(all.sm.smCount, align);
      r = count > 0 && count < all.sm.smCount ? api.split(&group, &groups, &all, &rest, 0, count)
                                               : CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS && groups != 1) r = CUDA_ERROR_INVALID_VALUE;
      if (r == CUDA_SUCCESS) r = api.makeDesc(&desc, &group, 1);
      if (r == CUDA_SUCCESS) r = api.create(&g, desc, CUdevice(m_device), CU_GREEN_CTX_DEFAULT_STREAM);
    }
    if (r == CUDA_SUCCESS) {
      m_green = g;
      m_greenSMs = static_cast<int>(group.sm.smCount);
    } else if (r != CUDA_ERROR_OUT_OF_MEMORY) {
      m_greenFailed = true;
      ++g_greenContextFailures;
    }
  }
#endif

  /// A lane's cuBLAS workspace (graphs on): the main handle's size, or NVIDIA's 32 MiB before it has one.
  Index laneBlasWorkspaceBytes() const noexcept {
    return m_blasWorkspace.capacity() > 0 ? m_blasWorkspace.capacity() : Index(32) << 20;
  }
  void createLane(CudaLane& l, int q, bool greenOnly = false) const {
    try {
      TCQR_CHECK(cudaEventCreateWithFlags(&l.fork, cudaEventDisableTiming));
      TCQR_CHECK(cudaEventCreateWithFlags(&l.done, cudaEventDisableTiming));
      TCQR_CHECK(cublasCreate(&l.blas));
      TCQR_CHECK(cublasSetMathMode(l.blas, CUBLAS_DEFAULT_MATH));
      TCQR_CHECK(cublasSetEmulationStrategy(l.blas, m_emulation));
      l.stream = greenLaneStream();
      if (!l.stream && greenOnly)  // (e.g. remade after a failed allocation released it, and refused or out of memory)
        throwError(ErrorSource::Cuda, static_cast<int>(cudaErrorNotSupported), "cudaErrorNotSupported",
                   "greenLaneStream() (the default look-ahead lanes need their green context)", __FILE__, __LINE__);
      if (!l.stream) TCQR_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
      TCQR_CHECK(cublasSetStream(l.blas, l.stream));
      if (graphReplayEnabled()) {  // as applyStream: the lanes' GEMMs are captured too
        DeviceBuffer<char>& w = m_laneBlasWorkspace[static_cast<size_t>(q)];
        if (w.capacity() == 0) w.reserve(laneBlasWorkspaceBytes());
        TCQR_CHECK(cublasSetWorkspace(l.blas, w.get(), size_t(w.capacity())));
      }
      l.conversion = &m_laneConversion[static_cast<size_t>(q)];
      l.partials = &m_lanePartials[static_cast<size_t>(q)];
    } catch (...) {
      destroyLane(l);
      throw;
    }
  }
  static void destroyLane(CudaLane& l) noexcept {
    if (l.blas) cublasDestroy(l.blas);
    if (l.stream) TCQR_CHECK_NOTHROW(cudaStreamDestroy(l.stream));
    if (l.fork) TCQR_CHECK_NOTHROW(cudaEventDestroy(l.fork));
    if (l.done) TCQR_CHECK_NOTHROW(cudaEventDestroy(l.done));
    l = CudaLane{};
  }

  void applyStream() {
    if (graphReplayEnabled() && m_blasWorkspace.capacity() == 0) {
      int major = 0;
      TCQR_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, m_device));
      m_blasWorkspace.reserve(Index(major >= 9 ? 32 : 4) << 20);
    }
    bindHandles(stream());
  }
  void bindHandlesNoThrow(cudaStream_t t) const noexcept {
    try {
      bindHandles(t);
    } catch (...) {  // (an error in flight stays the one reported)
    }
  }
  /// Points the main cuBLAS and cuSOLVER handles at stream t.
  void bindHandles(cudaStream_t t) const {
    TCQR_CHECK(cublasSetStream(m_blas, t));
    // An explicit workspace (cublasSetStream resets it to the default pool): captured into a graph (FactorGraph),
    // GEMMs on the default pool add memory nodes of their own (16384^2 FP16x3: 9666 nodes against 8024 with it),
    // which made the capture and the instantiation 1.6x slower (H200, bench/results/logs/2026-11-28-h200-graph-replay.log).
    // The size is NVIDIA's recommendation (cublasSetWorkspace: 32 MiB on Hopper, 4 MiB before). With TCQR_GRAPH=0
    // the handle keeps cuBLAS's own pool, as before graph replay.
    if (m_blasWorkspace.capacity() > 0)
      TCQR_CHECK(cublasSetWorkspace(m_blas, m_blasWorkspace.get(), size_t(m_blasWorkspace.capacity())));
    TCQR_CHECK(cusolverDnSetStream(m_solver, t));
  }

  void destroy() noexcept {
    releaseLanes();
    if (m_ready) TCQR_CHECK_NOTHROW(cudaEventDestroy(m_ready));
    if (m_params) cusolverDnDestroyParams(m_params);
    if (m_solver) cusolverDnDestroy(m_solver);
    if (m_blas) cublasDestroy(m_blas);
    m_blasWorkspace.release();
    if (m_ownStream) TCQR_CHECK_NOTHROW(cudaStreamDestroy(m_ownStream));
    if (m_mainLane) TCQR_CHECK_NOTHROW(cudaStreamDestroy(m_mainLane));
    if (m_mainLaneFork) TCQR_CHECK_NOTHROW(cudaEventDestroy(m_mainLaneFork));
    if (m_mainLaneJoin) TCQR_CHECK_NOTHROW(cudaEventDestroy(m_mainLaneJoin));
    m_ready = nullptr;
    m_params = nullptr;
    m_solver = nullptr;
    m_blas = nullptr;
    m_ownStream = nullptr;
    m_mainLane = nullptr;
    m_mainLaneFork = m_mainLaneJoin = nullptr;
  }

  int m_device = 0;
  unsigned long long m_contextId = 0;
  int m_sms = 1;  ///< streaming multiprocessors of m_device
  cublasHandle_t m_blas = nullptr;
  DeviceBuffer<char> m_blasWorkspace;  ///< m_blas's workspace (applyStream)
  cusolverDnHandle_t m_solver = nullptr;
  cusolverDnParams_t m_params = nullptr;
  mutable cudaStream_t m_ownStream = nullptr;
  cudaStream_t m_userStream = nullptr;
  cudaEvent_t m_ready = nullptr;  ///< orderAfterLegacyStream's event (created on first use)
  mutable cudaStream_t m_mainLane = nullptr;  ///< mainLaneStream (created on first use)
  mutable cudaEvent_t m_mainLaneFork = nullptr, m_mainLaneJoin = nullptr;
  cublasEmulationStrategy_t m_emulation = CUBLAS_EMULATION_STRATEGY_DEFAULT;
  // The look-ahead lanes (fillLanes), created on first use, and their GEMM workspaces.
  mutable std::array<CudaLane, kMaxLanes> m_lanes{};
  mutable std::array<ConversionWork, kMaxLanes> m_laneConversion{};
  mutable std::array<ConversionWork, kMaxLanes> m_lanePartials{};
  mutable std::array<DeviceBuffer<char>, kMaxLanes> m_laneBlasWorkspace{};  ///< the lanes' cuBLAS workspaces
  mutable CUgreenCtx m_green = nullptr;  ///< the lanes' green context (greenLaneStream)
  mutable int m_greenSMs = 0;            ///< its multiprocessors
  mutable bool m_greenFailed = false;    ///< it could not be made: plain streams until releaseLanes
  mutable std::unique_ptr<OpTrace> m_trace;  ///< TCQR_TRACE=1 only
};

}  // namespace detail
}  // namespace tcqr
