// CudaContext.hpp - the device-side lifecycle shared by the CUDA state classes (internal; includes CUDA headers):
// the device, the cuBLAS and cuSOLVER handles, the object's own stream or a borrowed user stream, and the event that
// orders work after the legacy default stream. CudaQRState (CudaBackend.cpp) and CudaTallSkinnyState
// (TallSkinnyCuda.cpp) each own one.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>

#include "CudaOps.hpp"

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

  /// Runs on `s` from now on (null: the own stream). Work queued on the old stream completes first, since work on
  /// the new one may touch the same buffers.
  void setStream(cudaStream_t s) {
    if (s == m_userStream) return;
    synchronize();
    m_userStream = s;
    applyStream();
  }

  /// Waits until everything queued on stream() has completed.
  void synchronize() const {
    DeviceGuard g(m_device);
    TCQR_CHECK(cudaStreamSynchronize(stream()));
  }

  /// For destructors: waits for the user's stream (if set) and the own stream (if created), reporting failures to
  /// stderr instead of throwing.
  void synchronizeNoThrow() const noexcept {
    if (m_userStream) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(m_userStream));
    if (m_ownStream) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(m_ownStream));
    // Normally joined into stream() already; not after a computation that threw half-way.
    if (m_sideStream) TCQR_CHECK_NOTHROW(cudaStreamSynchronize(m_sideStream));
  }

  /// cuBLAS's emulation strategy (FP64Emulated), on both handles.
  void setEmulationStrategy(cublasEmulationStrategy_t strategy) {
    m_emulation = strategy;
    TCQR_CHECK(cublasSetEmulationStrategy(m_blas, strategy));
    if (m_sideBlas) TCQR_CHECK(cublasSetEmulationStrategy(m_sideBlas, strategy));
  }

  /// Gives `ops` the side lane of factorRecursive's look-ahead, created on first use: a non-blocking stream with its
  /// own cuBLAS handle (math mode and emulation strategy as blas(); a cuBLAS workspace must not serve two streams at
  /// once) and the fork/join events. The side lane only ever runs between a fork and a join on stream(), so
  /// synchronizing stream() covers it. Off unless the environment variable TCQR_LOOKAHEAD=1 is set: measured on the
  /// H100 (qr_bench, 2026-11-26, commit 06b3e8b, same process and data) it gained nothing on 16384^2 FP32 (371 against
  /// 369 ms) or 2097152 x 128 and cost 15% on 524288 x 512 (34.7 against 30.1 ms) and 8% on 131072 x 2048: there the
  /// TSQR panel's tiles already occupy the GPU, and the split update adds GEMM calls. Results do not depend on it
  /// beyond rounding.
  template <typename S>
  void fillSideLane(CudaOps<S>& ops) const {
    if (!lookAheadEnabled()) return;
    if (!m_sideStream) createSideLane();
    ops.sideBlas = m_sideBlas;
    ops.sideStream = m_sideStream;
    ops.forkEvent = m_forkEvent;
    ops.sideEvent = m_sideEvent;
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

  /// With TCQR_TRACE=1: waits for the computation just queued and prints its per-operation GPU times (OpTrace.hpp).
  void reportTrace(const char* title) const {
    if (m_trace) m_trace->report(title);
  }

 private:
  static bool lookAheadEnabled() {
    const char* v = std::getenv("TCQR_LOOKAHEAD");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }

  void createSideLane() const {
    try {
      TCQR_CHECK(cudaEventCreateWithFlags(&m_forkEvent, cudaEventDisableTiming));
      TCQR_CHECK(cudaEventCreateWithFlags(&m_sideEvent, cudaEventDisableTiming));
      TCQR_CHECK(cublasCreate(&m_sideBlas));
      TCQR_CHECK(cublasSetMathMode(m_sideBlas, CUBLAS_DEFAULT_MATH));
      TCQR_CHECK(cublasSetEmulationStrategy(m_sideBlas, m_emulation));
      TCQR_CHECK(cudaStreamCreateWithFlags(&m_sideStream, cudaStreamNonBlocking));
      TCQR_CHECK(cublasSetStream(m_sideBlas, m_sideStream));
    } catch (...) {
      destroySideLane();
      throw;
    }
  }
  void destroySideLane() const noexcept {
    if (m_sideBlas) cublasDestroy(m_sideBlas);
    if (m_sideStream) TCQR_CHECK_NOTHROW(cudaStreamDestroy(m_sideStream));
    if (m_forkEvent) TCQR_CHECK_NOTHROW(cudaEventDestroy(m_forkEvent));
    if (m_sideEvent) TCQR_CHECK_NOTHROW(cudaEventDestroy(m_sideEvent));
    m_sideBlas = nullptr;
    m_sideStream = nullptr;
    m_forkEvent = m_sideEvent = nullptr;
  }

  void applyStream() {
    TCQR_CHECK(cublasSetStream(m_blas, stream()));
    TCQR_CHECK(cusolverDnSetStream(m_solver, stream()));
  }

  void destroy() noexcept {
    destroySideLane();
    if (m_ready) TCQR_CHECK_NOTHROW(cudaEventDestroy(m_ready));
    if (m_params) cusolverDnDestroyParams(m_params);
    if (m_solver) cusolverDnDestroy(m_solver);
    if (m_blas) cublasDestroy(m_blas);
    if (m_ownStream) TCQR_CHECK_NOTHROW(cudaStreamDestroy(m_ownStream));
    m_ready = nullptr;
    m_params = nullptr;
    m_solver = nullptr;
    m_blas = nullptr;
    m_ownStream = nullptr;
  }

  int m_device = 0;
  int m_sms = 1;  ///< streaming multiprocessors of m_device
  cublasHandle_t m_blas = nullptr;
  cusolverDnHandle_t m_solver = nullptr;
  cusolverDnParams_t m_params = nullptr;
  mutable cudaStream_t m_ownStream = nullptr;
  cudaStream_t m_userStream = nullptr;
  cudaEvent_t m_ready = nullptr;  ///< orderAfterLegacyStream's event (created on first use)
  cublasEmulationStrategy_t m_emulation = CUBLAS_EMULATION_STRATEGY_DEFAULT;
  // The side lane (fillSideLane), created on first use.
  mutable cublasHandle_t m_sideBlas = nullptr;
  mutable cudaStream_t m_sideStream = nullptr;
  mutable cudaEvent_t m_forkEvent = nullptr, m_sideEvent = nullptr;
  mutable std::unique_ptr<OpTrace> m_trace;  ///< TCQR_TRACE=1 only
};

}  // namespace detail
}  // namespace tcqr
