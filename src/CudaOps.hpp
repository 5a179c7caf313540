// CudaOps.hpp - the device side of the backend-generic algorithms (internal): owning device/pinned buffers, typed
// cuBLAS wrappers, and CudaOps, the "Ops" of Algorithms.hpp and Tsqr.hpp on one stream. Shared by the CUDA state
// classes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tcqr/Backend.h"

#include "Algorithms.hpp"
#include "CudaCheck.hpp"
#include "OpTrace.hpp"
#include "StatePool.hpp"
#include "kernels.hpp"

namespace tcqr {
namespace detail {

// ---------------------------------------------------------------------------------------------------------------
// Owning buffers (grow-only; a failed allocation leaves the buffer empty and throws)

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }
  T* reserve(Index count) {
    if (count > m_cap) {
      release();
      void* p = nullptr;
      TCQR_CHECK(cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T)));
      m_p = static_cast<T*>(p);
      m_cap = count;
    }
    return m_p;
  }
  void release() noexcept {
    if (m_p) TCQR_CHECK_NOTHROW(cudaFree(m_p));
    m_p = nullptr;
    m_cap = 0;
  }
  T* get() const { return m_p; }
  Index capacity() const { return m_cap; }
  /// The bytes reserve(count) would add to what the buffer holds (it frees the old buffer before allocating).
  std::size_t growthBytes(Index count) const noexcept {
    return count > m_cap ? static_cast<std::size_t>(count - m_cap) * sizeof(T) : std::size_t(0);
  }

 private:
  T* m_p = nullptr;
  Index m_cap = 0;
};

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }
  T* reserve(Index count) {
    if (count > m_cap) {
      release();
      void* p = nullptr;
      TCQR_CHECK(cudaMallocHost(&p, static_cast<size_t>(count) * sizeof(T)));
      m_p = static_cast<T*>(p);
      m_cap = count;
    }
    return m_p;
  }
  void release() noexcept {
    if (m_p) TCQR_CHECK_NOTHROW(cudaFreeHost(m_p));
    m_p = nullptr;
    m_cap = 0;
  }
  T* get() const { return m_p; }

 private:
  T* m_p = nullptr;
  Index m_cap = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Typed vendor calls. Each wraps one call in TCQR_CHECK so that the error message names the real routine.

template <typename S>
struct Blas;

#define TCQR_DEFINE_BLAS(S, P, CUDA_TYPE)                                                                          \
  template <>                                                                                                      \
  struct Blas<S> {                                                                                                 \
    static constexpr cudaDataType type = CUDA_TYPE;                                                                \
    static void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, Index m, Index n, Index k,     \
                     S alpha, const S* A, Index lda, const S* B, Index ldb, S beta, S* C, Index ldc) {            \
      TCQR_CHECK(cublas##P##gemm_64(h, ta, tb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc));                  \
    }                                                                                                              \
    static void gemmStridedBatchedTN(cublasHandle_t h, Index m, Index n, Index k, const S* A, Index lda, Index sa, \
                                     const S* B, Index ldb, Index sb, S* C, Index ldc, Index sc, Index batch) {    \
      const S one = 1, zero = 0;                                                                                   \
      TCQR_CHECK(cublas##P##gemmStridedBatched_64(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, lda, sa, B, ldb,  \
                                                  sb, &zero, C, ldc, sc, batch));                                  \
    }                                                                                                              \
    /* B <- op(T) B (side left) or B op(T), T upper triangular, in place (cuBLAS's out-of-place form with C = B) */ \
    static void trmmUpper(cublasHandle_t h, cublasSideMode_t side, cublasOperation_t op, Index m, Index n,         \
                          const S* T, Index ldt, S* B, Index ldb) {                                                \
      const S one = 1;                                                                                             \
      TCQR_CHECK(cublas##P##trmm_64(h, side, CUBLAS_FILL_MODE_UPPER, op, CUBLAS_DIAG_NON_UNIT, m, n, &one, T, ldt, \
                                    B, ldb, B, ldb));                                                              \
    }                                                                                                              \
    static void trsmLeftUpper(cublasHandle_t h, cublasOperation_t op, Index m, Index n, const S* R, Index ldr,     \
                              S* B, Index ldb) {                                                                   \
      const S one = 1;                                                                                             \
      TCQR_CHECK(cublas##P##trsm_64(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, op, CUBLAS_DIAG_NON_UNIT, m, n,  \
                                    &one, R, ldr, B, ldb));                                                        \
    }                                                                                                              \
  };
TCQR_DEFINE_BLAS(float, S, CUDA_R_32F)
TCQR_DEFINE_BLAS(double, D, CUDA_R_64F)
#undef TCQR_DEFINE_BLAS

inline cublasOperation_t cuOp(Op o) { return o == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T; }

// ---------------------------------------------------------------------------------------------------------------
// The Ops of Algorithms.hpp on the device.

/// Converted operands of a low-precision GEMM: grow-only, sized before a factorization starts (see
/// conversionBytes), grown with a synchronisation only if a later call needs more. Growing retries once after freeing
/// the device's idle kept states (StatePool::orRelease), as the allocations made before a factorization do.
struct ConversionWork {
  DeviceBuffer<char> buffer;
  char* reserve(Index bytes, cudaStream_t stream) {
    if (bytes <= buffer.capacity()) return buffer.get();
    TCQR_CHECK(cudaStreamSynchronize(stream));  // queued GEMMs may read the old one
    return StatePool::orRelease([&] { return buffer.reserve(bytes); });
  }
};

/// The input's last-nonzero-row record (written by kernels::launchScanColumns or the TSQR level-0 tile kernel) and its
/// host copy, from which the host chooses the leaf panels (identityReflectorColumns).
struct LastRowRecord {
  DeviceBuffer<std::uint32_t> device;
  PinnedBuffer<std::uint32_t> host;
  /// Grows both to n entries, first waiting for `stream` (a queued transfer may still target the host copy).
  void reserve(Index n, cudaStream_t stream) {
    if (n <= device.capacity()) return;
    TCQR_CHECK(cudaStreamSynchronize(stream));
    device.reserve(n);
    host.reserve(n);
  }
  /// Copies the first k entries to the host, waits for `stream` (and so for everything queued before), and returns
  /// identityReflectorColumns of them.
  std::vector<char> identityColumns(Index k, cudaStream_t stream) {
    TCQR_CHECK(cudaMemcpyAsync(host.get(), device.get(), sizeof(std::uint32_t) * k, cudaMemcpyDeviceToHost, stream));
    TCQR_CHECK(cudaStreamSynchronize(stream));
    return identityReflectorColumns(host.get(), k);
  }
};

/// Bytes one converted element of an operand takes in `mode` (TF32x3 keeps two FP32 parts, FP16x3 two FP16 parts).
inline Index conversionElementBytes(Precision mode) {
  switch (mode) {
    case Precision::TF32x3: return 2 * sizeof(float);
    case Precision::FP16x3: return 2 * 2;
    case Precision::FP16:
    case Precision::BF16: return 2;
    default: return 0;
  }
}
/// Split-K for C = A^T B with a small C and a long inner dimension in FP32 (CudaOps::gemmSplitK): cuBLAS's SGEMM picks
/// kernels that stream A and B at 0.6-0.9 TB/s for these shapes; strided-batched GEMMs over chunks of kSplitKChunk
/// rows plus a reduction reach 1.3 TB/s (bench/skinny_gemm_bench, H100, bench/results/h100-skinny-gemm.csv; for
/// double cuBLAS is already at 2.4-2.9 TB/s and the split gains little, so it is float only). Below about 2^20
/// inner rows the split loses.
constexpr Index kSplitKChunk = 8192, kSplitKMinInner = Index(1) << 20, kSplitKMaxOut = 64;
/// Workspace (bytes) of the split-K partials for inner dimensions up to m.
inline Index splitKBytes(Index m) {
  return m < kSplitKMinInner ? 0 : Index(sizeof(float)) * (m / kSplitKChunk) * kSplitKMaxOut * kSplitKMaxOut + 256;
}

/// Chunked accumulation of long inner dimensions (CudaOps::gemmChunkedTN). A cuBLAS GEMM accumulates its whole inner
/// dimension k in one running sum per entry of C, so its rounding error grows with k; in the recursion the products
/// W1^T A2 and Y1^T W2 run over all m rows, and their error dominated the factorization's. Measured on the H100
/// (2026-11-26, precision_accuracy, 4096^2 N(0,1); cuSOLVER 12004) with those products summed over 16 chunks of 256
/// rows: FP32 backward error 1.5e-6 against 2.2e-6 unchunked (SGEQRF 7.2e-7, issue bound 1.9e-6), FP64 3.1e-15
/// against 4.6e-15 (DGEQRF 2.9e-15), TF32x3 6.4e-6 against 2.3e-5; 16384^2 FP32 1.9e-6 against 3.8e-6 (SGEQRF
/// 1.7e-6). Chunking every product (the N-type ones, inner dimension n1, through C) by 64 reached 7.1e-7 / 2.1e-15.
/// The cost is memory traffic: each chunk's partial product is written and read back once (in double, results of
/// kTnSequentialTiles tiles or more add their chunks into C instead), so a large result gets
/// kAccumChunks chunks: 16384^2 FP32 379.5 ms against 350.4 unchunked, FP64 379.5 against 359.3, TF32x3 344 against
/// 285, 4096^2 FP32 29.3 against 26.9 ms. A small result gets more: the batched product must still fill the GPU
/// (with 16 chunks only, a 64 x 64 result over 2097152 rows in double ran on 16 x 1 blocks, and 2097152 x 128
/// double went from 23.1 to 26.5 ms, 524288 x 512 float from 28.8 to 54.0 ms), and its partials are cheap.
/// The N-type chunks, accumulated through C, cost more for less (FP32 16384^2 425 ms for 1.2e-6 with chunks of 256)
/// and are not used.
constexpr Index kAccumChunk = 256, kAccumChunks = 16;
/// Output tile (rows and columns) assumed per thread block of a batched product, and the blocks per multiprocessor
/// its chunks should give at least.
constexpr Index kAccumTile = 128, kAccumBlocksPerSM = 4;
/// Tiles of kAccumTile^2 in a rows x cols result.
inline Index accumTiles(Index rows, Index cols) {
  return ((rows + kAccumTile - 1) / kAccumTile) * ((cols + kAccumTile - 1) / kAccumTile);
}
/// gemmChunkedTN runs its chunks one after another, each accumulated into C (beta = 1), where the result has at least
/// this many tiles of kAccumTile^2: one chunk's product then fills the GPU, and C is written and read once per chunk
/// instead of 16 partial products going to memory and back (a C of up to about 40 MB also stays in L2, the H100's is
/// 50 MB; the 32768^2 FP64 results of 64 MB gained as well). Same roundings in FP64 (the partials were summed in
/// double too); in FP32 C sums the chunk sums in FP32 instead of double. H100, same binary, alternating
/// (bench/results/logs/2026-11-27-h100-tn-sequential-chunks-ab.log): FP64 16384^2 224.2-228.7 ms to 217.0 (64
/// tiles) and 218.6-221.0 (132), 32768^2 1282 to 1221 (64); FP32 16384^2 within 1% (64 and 132); at 132 and 264
/// tiles TF32x3, the tall shapes and 4096^2 within noise; backward errors at 16384^2 unchanged (FP64 3.53e-15, FP32
/// 1.21-1.22e-6). Double only: in float the same switch cost FP32 1.5-2.3% at 4096^2 and 8192^2 and TF32x3 1% at
/// 131072 x 2048 (`...-tn-sequential-float-72931ae.log`), so float keeps the batched partials (their double sums).
/// TCQR_TN_SEQ_TILES=<t> sets the threshold for both (0: always the batched partials).
constexpr Index kTnSequentialTiles = 64;
inline Index tnSequentialTiles(bool isDouble) {
  static const Index v = envIndex("TCQR_TN_SEQ_TILES", -1);  // (-1: unset)
  return v >= 0 ? v : (isDouble ? kTnSequentialTiles : 0);
}
/// The chunk of a k-long TN product with a rows x cols result on a GPU with `sms` multiprocessors: a multiple of
/// kAccumChunk, long enough for at most max(kAccumChunks, the chunks that fill the GPU) chunks.
inline Index accumChunkFor(Index k, Index rows, Index cols, int sms) {
  const Index tiles = accumTiles(rows, cols);
  const Index fill = (kAccumBlocksPerSM * sms + tiles - 1) / tiles;
  const Index chunks = std::max(kAccumChunks, fill);
  const Index min = (k + chunks - 1) / chunks;
  return std::max(kAccumChunk, (min + kAccumChunk - 1) / kAccumChunk * kAccumChunk);
}
/// Bytes of the partials of CudaOps::smallTN's largest product in a factorization of an m x n matrix (results of at
/// most min(n, 64) columns and rows, inner dimension at most min(m, kSmallTnMaxInner)).
inline Index smallTnPartialBytes(Index m, Index n, Index elemBytes, int sms) {
  const Index k = std::min(m, kSmallTnMaxInner), w = std::min<Index>(n, 64);
  if (k < kSmallTnMinInner || w < 1) return 0;
  return kernels::smallTnBlocks(k, w, w, elemBytes, smallTnBlocksPerSM() * sms) * w * w * elemBytes;
}

/// Partials workspace (bytes) reserved up front for factor() of an m x n matrix: what the largest TN products of
/// the recursion (W1^T A2 and Y1^T W2: n1 x n2 over m rows) need at once, capped at the matrix's own size, but at
/// least what any product whose chunks are set by filling the GPU needs (kAccumBlocksPerSM sms tiles); products that
/// need more run in column passes (CudaOps::gemmChunkedTN).
/// Where gemmChunkedTN adds the chunks of results of `sequentialTiles` tiles or more into C (double), only smaller
/// results use the partials: at most max(kAccumChunks, GPU-filling) chunks of fewer than sequentialTiles tiles, which
/// caps the reservation at about 210 MB in double on an H100 (16384^2 FP64 reserved 2.1 GB before, 32768^2 8.6 GB).
/// At least smallTnPartialBytes (at most 17 MB in double on an H100), so that CudaOps::smallTN never grows it.
inline Index accumPartialBytes(Index m, Index n, Index elemBytes, int sms, Index sequentialTiles = 0) {
  const Index smallTn = smallTnPartialBytes(m, n, elemBytes, sms);
  const Index k = std::min(m, n);
  if (k < 2) return smallTn;
  const Index n1 = std::max<Index>(1, k / 2), n2 = std::max<Index>(1, n - n1);
  const Index need = (m / accumChunkFor(m, n1, n2, sms)) * n1 * n2 * elemBytes;
  const Index floor = std::max(Index(32) << 20, kAccumBlocksPerSM * sms * kAccumTile * kAccumTile * elemBytes);
  Index bytes = std::min(need, std::max(floor, m * n * elemBytes));
  if (sequentialTiles > 0) {
    // t tiles (t < sequentialTiles) with max(16, ceil(4 sms / t)) chunks: at most (17 t + 4 sms) tiles of partials.
    const Index small = ((kAccumChunks + 1) * (sequentialTiles - 1) + kAccumBlocksPerSM * sms) * kAccumTile *
                        kAccumTile * elemBytes;
    bytes = std::min(bytes, std::max(floor, small));
  }
  return std::max(bytes, smallTn);
}

/// Conversion workspace for factor() of an m x n matrix: the largest pair of GEMM operands in the recursion and the
/// WY applications is bounded by (m + 8) x (n + min(m, n)) elements (W^T A2 reads W, m x n1, and A2, m x n2). In
/// FP32 the same buffer holds the split-K partials.
/// The float modes reserve the split-K partials too: solve() and the Q products run in FP32 whatever the mode.
/// The products with T on tensor cores (tProductMode) convert T (of at most the merge cap's order, or about half of
/// min(m, n) without a cap: the widest merged left child) and its partner of at most n columns, with the fused
/// products' copies (DupScales); the larger of the two bounds is reserved. (Should a product ever need more,
/// ConversionWork::reserve grows it, waiting for the stream.)
inline Index conversionBytes(Precision mode, Index m, Index n) {
  const Index e = conversionElementBytes(mode);
  const bool floatMode = mode != Precision::FP64 && mode != Precision::FP64Emulated;
  const Index split = floatMode ? splitKBytes(m) : 0;
  Index bytes = e == 0 ? split : std::max(split, e * (m + 8) * (n + std::min(m, n) + 16) + 256);
  const Index et = conversionElementBytes(tProductMode(mode));
  if (et > 0) {
    const Index k = std::min(m, n), cap = maxMergedCols(mode, m);
    const Index kt = std::min(k, cap > 0 ? cap : k / 2 + kCudaBlockSize);
    // (and the fused NN products' copies of hi's first chunk, at most kt entries of the inner dimension, one part each)
    bytes = std::max(bytes, et * (kt + 8) * (kt + n + 16) + et / 2 * kt * (kt + n + 24) + 768);
  }
  return bytes;
}

/// One look-ahead lane of factorRecursive: a stream, its own cuBLAS handle (limited to part of the GPU, see
/// CudaContext::fillLanes), the events that order it against the main lane, and its own GEMM workspaces.
struct CudaLane {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cudaEvent_t fork = nullptr, done = nullptr;
  ConversionWork* conversion = nullptr;
  ConversionWork* partials = nullptr;
};

template <typename S>
struct CudaOps {
  cublasHandle_t blas;
  cusolverDnHandle_t solver;
  cusolverDnParams_t params;
  cudaStream_t stream;
  DeviceBuffer<char>* work;
  std::vector<char>* hostWork;
  int* dInfo;
  Precision mode = Precision::Default;  ///< arithmetic of gemm() (Default: S); gemmExact() always runs in S
  ConversionWork* conversion = nullptr;  ///< operand copies of the tensor-core modes (null for FP32/FP64)
  ConversionWork* partials = nullptr;    ///< chunked-accumulation partials (gemmChunkedTN); null: plain products
  /// factorRecursive's look-ahead lanes (CudaContext::fillLanes; laneCount 0: none). pendingLanes: bit q set while
  /// lane q has work the main lane has not waited for.
  const CudaLane* laneTable = nullptr;
  int laneCount = 0;
  unsigned pendingLanes = 0;
  OpTrace* trace = nullptr;  ///< TCQR_TRACE=1: per-operation GPU times (OpTrace.hpp); null otherwise
  int sms = 1;               ///< multiprocessors of the device (the chunk counts of gemmChunkedTN)
  Index maxMergedCols = 0;  ///< factorRecursive's merge cap (0: none; backends set Tunables' maxMergedCols)
  bool eagerSpine = false;  ///< factorRecursive's eager lane (backends set Tunables' eagerSpineUpdates)
  Index panelKernelRows = 0;  ///< householderPanel's row limit (usePanelKernel; 0: not used)
  int panelPriority = 0;  ///< householderPanel's launch priority (0: the stream's; CudaContext::fillLanes)
  int panelRowsPerThread = 0;  ///< launchHouseholderPanel's choice (0: its own)
  /// Set to 1 (not cleared) when converting an operand to FP16 rounds a finite entry to infinity (FP16 and FP16x3; a
  /// factorization points it at the flag that info() reports as NumericalIssue); null: not checked. (Last, so that
  /// the benchmarks' aggregate initializations of the first members stay valid.)
  int* dOverflow = nullptr;

  OpTraceScope traced(const char* label, double flops = 0) const { return OpTraceScope(trace, label, stream, flops); }
  /// The trace's kinds of GEMM: by shape class, and the large ones also by transposition (TN: the long-sum products
  /// over the rows, chunked where gemmChunkedTN applies).
  static const char* gemmLabel(Op ta, Op tb, Index m, Index n, Index k) {
    if (k <= 64) return "gemm inner<=64";
    if (std::min(m, n) <= 64) return "gemm result<=64 wide";
    if (ta == Op::T) return tb == Op::N ? "gemm large TN" : "gemm large TT";
    return tb == Op::N ? "gemm large NN" : "gemm large NT";
  }
  static double gemmFlops(Index m, Index n, Index k) { return 2.0 * double(m) * double(n) * double(k); }
  /// Trace label of a storage-precision product (gemmExact): mk = the larger of its result rows and inner dimension
  /// (T's order in trmmUpperGemm's blocks and the merges), n = its result columns. For finding where T's products lose
  /// their rate in situ (FP16 32768^2: about 20 TFLOP/s overall, against 41-50 for the same shapes alone).
  static const char* exactLabel(Index m, Index n, Index k) {
    const Index mk = std::max(m, k);
    if (n <= 256) return mk <= 256 ? "gemmExact mk<=256 n<=256" : "gemmExact mk>256 n<=256";
    if (mk <= 256) return "gemmExact mk<=256 n>256";
    return mk <= 1024 ? "gemmExact mk<=1024 n>256" : "gemmExact mk>1024 n>256";
  }

  int lanes() const { return laneCount; }
  /// Lane q waits for everything queued on this lane so far, then f(ops of lane q) queues work on it. Only
  /// GEMM-type work (applyWYBlocks) runs there: no cuSOLVER handle, no lanes of its own, no per-operation trace
  /// (TCQR_TRACE records the lane's whole work as one operation beside the main lane), and its own cuBLAS handle (a
  /// cuBLAS workspace must not serve two streams at once) and workspaces.
  template <class F>
  void runOnLane(int q, F&& f) {
    const CudaLane& l = laneTable[q];
    TCQR_CHECK(cudaEventRecord(l.fork, stream));
    TCQR_CHECK(cudaStreamWaitEvent(l.stream, l.fork, 0));
    CudaOps o = *this;
    o.blas = l.blas;
    o.stream = l.stream;
    o.solver = nullptr;
    o.conversion = l.conversion;  // (sized like the main lane's by CudaContext::reserveLanes)
    o.partials = partials ? l.partials : nullptr;
    o.laneTable = nullptr;
    o.laneCount = 0;
    o.pendingLanes = 0;
    o.trace = nullptr;
    pendingLanes |= 1u << q;  // from here on, even if f throws half-way
    {
      // Traced as one operation beside the main lane: from when the lane may start (its fork) to its last operation.
      static const char* const kLabels[] = {"lane 0 work", "lane 1 work", "lane 2 work", "lane 3 work"};
      static_assert(sizeof(kLabels) / sizeof(kLabels[0]) == kMaxLanes, "a trace label per look-ahead lane");
      const OpTraceScope t(trace, kLabels[q], l.stream, 0, true);  // (q < laneCount <= kMaxLanes)
      f(o);
    }
    TCQR_CHECK(cudaEventRecord(l.done, l.stream));
  }
  void joinLane(int q) {
    if (!(pendingLanes & (1u << q))) return;
    // Traced: the time the main lane waits here for lane q (its two events bracket the wait on the main stream).
    const auto t = traced("join (waiting for a lane)");
    TCQR_CHECK(cudaStreamWaitEvent(stream, laneTable[q].done, 0));
    pendingLanes &= ~(1u << q);
  }
  /// The main lane waits for every lane with queued work (factor()'s guard, also when unwinding: lane q's event
  /// may then not cover its last operations, so the lane's stream itself is waited for).
  void joinAllLanes() noexcept {
    for (int q = 0; q < laneCount; ++q) {
      if (!(pendingLanes & (1u << q))) continue;
      TCQR_CHECK_NOTHROW(cudaEventRecord(laneTable[q].done, laneTable[q].stream));
      TCQR_CHECK_NOTHROW(cudaStreamWaitEvent(stream, laneTable[q].done, 0));
    }
    pendingLanes = 0;
  }

  void gemm(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    if (C.empty()) return;
    const Index k = (ta == Op::N) ? A.cols : A.rows;
    if (k == 0) {
      if (beta == S(0)) setZero(C);
      return;  // beta == 1 everywhere else in the algorithms
    }
    const auto t = traced(gemmLabel(ta, tb, C.rows, C.cols, k), gemmFlops(C.rows, C.cols, k));
    if (mode == Precision::FP32 || mode == Precision::FP64 || mode == Precision::Default ||
        (errorCorrected(mode) && x3ProductInFp32(mode, C.rows, C.cols, k))) {
      if (ta == Op::T && tb == Op::N) {
        if (smallTN(alpha, A, B, beta, C, k)) return;
        auto batched = [&](Index c0, Index nc, Index kc, Index batch, S* P) {
          Blas<S>::gemmStridedBatchedTN(blas, C.rows, nc, kc, A.p, A.ld, kc, B.p + c0 * B.ld, B.ld, kc, P, C.rows,
                                        C.rows * nc, batch);
        };
        auto plain = [&](Index c0, Index nc, Index k0, Index kk, S b) {
          Blas<S>::gemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, C.rows, nc, kk, alpha, A.p + k0, A.ld, B.p + k0 + c0 * B.ld,
                        B.ld, b, C.p + c0 * C.ld, C.ld);
        };
        if (gemmSplitK(C.rows, C.cols, k, alpha, beta, C.p, C.ld, batched, plain)) return;
        if (gemmChunkedTN(C.rows, C.cols, k, alpha, beta, C.p, C.ld, batched, plain)) return;
      }
      Blas<S>::gemm(blas, cuOp(ta), cuOp(tb), C.rows, C.cols, k, alpha, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld);
      return;
    }
    if (halfNarrowInTf32(mode, C.rows, C.cols, k)) {  // (see there)
      CudaOps tf32 = *this;
      tf32.mode = Precision::TF32;
      tf32.gemmMode(ta, tb, alpha, A, B, beta, C, k);
      return;
    }
    gemmMode(ta, tb, alpha, A, B, beta, C, k);
  }
  /// C = alpha A^T B + beta C by kernels::launchSmallTN where C is at most 64 x 64 and k within [smallTnMinInner,
  /// kSmallTnMaxInner] (see there). Its block count, and so its summation order, depends on k, the device and
  /// TCQR_SMALL_TN_BLOCKS_PER_SM (read once per process) only:
  /// the partials workspace is sized for it up front (accumPartialBytes) and grows here, waiting for the stream, if a
  /// later call needs more. (Capping the blocks by the workspace's size instead, as 93fd079 did, made the bits depend
  /// on what the object had factored before; found in review.) Returns false (nothing done) elsewhere.
  bool smallTN(S alpha, View<S> A, View<S> B, S beta, View<S> C, Index k) {
    const Index minInner = smallTnMinInner();
    if (partials == nullptr || minInner <= 0 || k < minInner || k > kSmallTnMaxInner || C.rows > 64 || C.cols > 64)
      return false;
    const Index maxBlocks = smallTnBlocksPerSM() * sms;
    const Index blocks = kernels::smallTnBlocks(k, C.rows, C.cols, Index(sizeof(S)), maxBlocks);
    S* P = reinterpret_cast<S*>(partials->reserve(blocks * C.rows * C.cols * Index(sizeof(S)), stream));
    kernels::launchSmallTN<S>(A.p, A.ld, B.p, B.ld, k, C.rows, C.cols, alpha, beta, C.p, C.ld, P,
                              static_cast<int>(maxBlocks), stream);
    return true;
  }
  /// Whether gemmChunkedTN chunks a k-long TN product with a rows x cols result: with a partials workspace and at
  /// least two chunks.
  bool chunksTN(Index rows, Index cols, Index k) const {
    return partials != nullptr && k / accumChunkFor(k, rows, cols, sms) >= 2;
  }
  /// C (rows x cols, ldc) = alpha A^T B + beta C with a k-long inner dimension, accumulated in chunks of
  /// accumChunkFor(k, rows, cols, sms) rows: one after another through C for double results of at least
  /// kTnSequentialTiles tiles, else with the partials in `partials` (gemmChunks). Returns false (nothing done) where
  /// chunksTN does not hold.
  template <class Batched, class Plain>
  bool gemmChunkedTN(Index rows, Index cols, Index k, S alpha, S beta, S* C, Index ldc, Batched batched, Plain plain) {
    if (!chunksTN(rows, cols, k)) return false;
    const Index kc = accumChunkFor(k, rows, cols, sms);
    const Index seq = tnSequentialTiles(std::is_same<S, double>::value);
    if (seq > 0 && accumTiles(rows, cols) >= seq) {
      // The chunks one after another, each accumulated into C (see kTnSequentialTiles).
      for (Index k0 = 0; k0 < k; k0 += kc) plain(0, cols, k0, std::min(kc, k - k0), k0 == 0 ? beta : S(1));
      return true;
    }
    gemmChunks(rows, cols, k, kc, alpha, beta, C, ldc, *partials, false, batched, plain);
    return true;
  }
  /// The chunked TN product of gemmChunkedTN and gemmSplitK: the products of the k / kc chunks of kc rows are
  /// computed separately (batched(c0, nc, kc, batch, P) writes the partials of columns c0 .. c0 + nc of C to P,
  /// rows x nc each, stride rows * nc) and summed in double by a reduction kernel; the remainder rows go straight
  /// into C (plain(c0, nc, k0, kk, beta)). `grow`: the workspace grows to hold the partials of all columns;
  /// otherwise C is done in column passes when they do not fit its present size.
  template <class Batched, class Plain>
  void gemmChunks(Index rows, Index cols, Index k, Index kc, S alpha, S beta, S* C, Index ldc, ConversionWork& work,
                  bool grow, Batched batched, Plain plain) {
    const Index batch = k / kc, rest = k - batch * kc;
    const Index colBytes = Index(sizeof(S)) * batch * rows;
    const Index per = grow ? cols : std::min(cols, std::max<Index>(1, work.buffer.capacity() / colBytes));
    S* P = reinterpret_cast<S*>(work.reserve(colBytes * per, stream));
    for (Index c0 = 0; c0 < cols; c0 += per) {
      const Index nc = std::min(per, cols - c0);
      batched(c0, nc, kc, batch, P);
      S b = beta;
      if (rest > 0) {
        plain(c0, nc, batch * kc, rest, beta);
        b = S(1);
      }
      kernels::launchAddBatches<S>(P, batch, rows, nc, alpha, b, C + c0 * ldc, ldc, stream);
    }
  }
  /// C = alpha A^T B + beta C as strided-batched products over chunks of kSplitKChunk rows and a reduction, where that
  /// is faster than cuBLAS's own choice (float, C at most 64 x 64, at least 2^20 rows; see kSplitKChunk). Returns
  /// false (nothing done) elsewhere. The partials live in the conversion workspace, unused by FP32 products.
  template <class Batched, class Plain>
  bool gemmSplitK(Index rows, Index cols, Index k, S alpha, S beta, S* C, Index ldc, Batched batched, Plain plain) {
    if (!std::is_same<S, float>::value || conversion == nullptr || k < kSplitKMinInner || rows > kSplitKMaxOut ||
        cols > kSplitKMaxOut)
      return false;
    gemmChunks(rows, cols, k, kSplitKChunk, alpha, beta, C, ldc, *conversion, true, batched, plain);
    return true;
  }
  /// S = beta S + Y^T Y. formT reads only the upper triangle; the GPU keeps the full GEMM (a syrk was not measured).
  void gramUpper(View<S> Y, S beta, View<S> Sm) { gemmExact(Op::T, Op::N, S(1), Y, Y, beta, Sm); }

  /// C = alpha op(A) op(B) + beta C in the storage precision, whatever the mode (small products inside a panel).
  void gemmExact(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    if (C.empty()) return;
    const Index k = (ta == Op::N) ? A.cols : A.rows;
    if (k == 0) {
      if (beta == S(0)) setZero(C);
      return;
    }
    const auto t = traced(exactLabel(C.rows, C.cols, k), gemmFlops(C.rows, C.cols, k));
    Blas<S>::gemm(blas, cuOp(ta), cuOp(tb), C.rows, C.cols, k, alpha, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld);
  }

  /// A product with T (Algorithms.hpp trmmUpperGemm and the merges): in tProductMode's error-corrected arithmetic on
  /// converted operands where tProductOnTensorCores, else gemmExact.
  void gemmT(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C);

  void trmmLowerAcc(Op opL, S alpha, View<S> L, View<S> Z, View<S> C, Index cutoff, TrmmScheme scheme) {
    const auto t = traced("trmmLowerAcc", double(L.rows) * double(L.rows) * double(Z.cols));
    // (TF32x3/FP16x3 with a narrow triangle or few columns: each block product then runs in FP32, x3ProductInFp32.)
    if (!convertsOperands() || (errorCorrected(mode) && x3ProductInFp32(mode, L.rows, Z.cols, L.rows))) {
      trmmLowerAccGeneric(*this, opL, alpha, L, Z, C, cutoff, scheme);
      return;
    }
    trmmConverted(opL, alpha, L, Z, C, cutoff, scheme);
  }
  /// True for the modes whose GEMMs convert their operands (TF32x3, FP16x3, FP16, BF16).
  bool convertsOperands() const { return conversionElementBytes(mode) > 0; }

  // The conversion workspace is free before the first GEMM of a factorization; it holds the column maxima and sums.
  void columnScales(View<S> A, S* d) {
    const auto t = traced("columnScales");
    void* w = conversion->reserve(16 * std::max<Index>(A.cols, 1), stream);
    kernels::launchColumnScales<S>(A.p, A.ld, A.rows, A.cols, d, w, stream);
  }
  void scaleColumns(View<S> A, const S* d, bool inverse, bool upperOnly) {
    const auto t = traced("scaleColumns");
    kernels::launchScaleColumns<S>(A.p, A.ld, A.rows, A.cols, d, inverse, upperOnly, stream);
  }

 private:
  void gemmMode(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C, Index k);
  void trmmConverted(Op opL, S alpha, View<S> L, View<S> Z, View<S> C, Index cutoff, TrmmScheme scheme);

 public:
  void geqrfPanel(View<S> A, S* tau) {
    if (A.empty()) return;
    const auto t = traced("geqrfPanel (cuSOLVER)");
    size_t dBytes = 0, hBytes = 0;
    TCQR_CHECK(cusolverDnXgeqrf_bufferSize(solver, params, A.rows, A.cols, Blas<S>::type, A.p, A.ld, Blas<S>::type,
                                           tau, Blas<S>::type, &dBytes, &hBytes));
    work->reserve(static_cast<Index>(dBytes));
    if (hostWork->size() < hBytes) hostWork->resize(hBytes);
    TCQR_CHECK(cusolverDnXgeqrf(solver, params, A.rows, A.cols, Blas<S>::type, A.p, A.ld, Blas<S>::type, tau,
                                Blas<S>::type, work->get(), dBytes, hBytes ? hostWork->data() : nullptr, hBytes,
                                dInfo));
  }

  /// Householder QR and T of a panel of at most panelKernelRows rows and 32 columns in one kernel (one thread-block
  /// cluster, kernels/panel_kernels.cu).
  void householderPanel(View<S> A, S* tau, View<S> T) {
    const auto t = traced("householderPanel (cluster)");
    kernels::launchHouseholderPanel<S>(A.p, A.ld, A.rows, A.cols, tau, T.p, T.ld, stream, panelRowsPerThread,
                                      panelPriority);
  }

  /// The Householder reflector of the single column A (m x 1) in place, Eigen's convention (tau = 0 for a zero tail
  /// whatever the height; cuSOLVER's geqrf does not guarantee that for very tall panels). `scratch`:
  /// kColumnReflectorScratch scalars.
  void columnReflector(View<S> A, S* tau, S* scratch) {
    const auto t = traced("columnReflector");
    kernels::launchColumnReflector<S>(A.p, A.rows, tau, scratch, stream);
  }

  void copyUnitLower(View<S> src, View<S> dst) {
    const auto t = traced("copyUnitLower");
    kernels::launchCopyUnitLower<S>(src.p, src.ld, dst.p, dst.ld, dst.rows, dst.cols, stream);
  }
  void formT(View<S> Sm, const S* tau, View<S> T) {
    const auto t = traced("formT");
    kernels::launchFormT<S>(Sm.p, Sm.ld, tau, T.p, T.ld, T.rows, stream);
  }
  /// The top of a compact-WY update with at most 32 reflectors (and Ytop at most 32 rows) in one kernel
  /// (kernels::launchSmallUpdateTop). zIn false: Z is output only.
  void smallUpdateTop(View<S> Ytop, View<S> T, View<S> Btop, View<S> Z, bool transpose, bool zIn = true) {
    const auto t = traced("smallUpdateTop");
    kernels::launchSmallUpdateTop<S>(Ytop.p, Ytop.ld, T.p, T.ld, Ytop.cols, Ytop.rows, Btop.p, Btop.ld, Z.p, Z.ld,
                                     Z.cols, transpose, zIn, stream);
  }
  /// The merge of two compact WY forms of at most 32 reflectors each in one kernel (kernels::launchMergeSmallT).
  void mergeSmallT(View<S> Y1mid, View<S> Y2top, View<S> T, Index n1, Index n2, bool hasBottom) {
    const auto t = traced("mergeSmallT");
    kernels::launchMergeSmallT<S>(Y1mid.p, Y1mid.ld, Y2top.p, Y2top.ld, T.p, T.ld, n1, n2, hasBottom, stream);
  }
  void trmmRightUpper(View<S> B, View<S> T) {
    const auto t = traced("trmmRightUpper (cuBLAS)");
    if (!B.empty()) Blas<S>::trmmUpper(blas, CUBLAS_SIDE_RIGHT, CUBLAS_OP_N, B.rows, B.cols, T.p, T.ld, B.p, B.ld);
  }
  void trsmLeftUpper(Op op, View<S> R, View<S> B) {
    const auto t = traced("trsmLeftUpper (cuBLAS)");
    if (!B.empty()) Blas<S>::trsmLeftUpper(blas, cuOp(op), B.rows, B.cols, R.p, R.ld, B.p, B.ld);
  }
  void setZero(View<S> A) {
    const auto t = traced("setZero");
    if (!A.empty())
      TCQR_CHECK(cudaMemset2DAsync(A.p, A.ld * sizeof(S), 0, A.rows * sizeof(S), A.cols, stream));
  }
  void setIdentity(View<S> A) {
    const auto t = traced("setIdentity");
    kernels::launchSetIdentity<S>(A.p, A.ld, A.rows, A.cols, stream);
  }
  void copy(View<S> src, View<S> dst) {
    const auto t = traced("copy");
    if (!dst.empty())
      TCQR_CHECK(cudaMemcpy2DAsync(dst.p, dst.ld * sizeof(S), src.p, src.ld * sizeof(S), dst.rows * sizeof(S),
                                   dst.cols, cudaMemcpyDeviceToDevice, stream));
  }
  void tsqrTileQR(View<S> X, Index tiles, S* tau, View<S> Rout) {
    const auto t = traced("tsqr tile QR (upper levels)");
    kernels::launchTsqrTileQR<S>(X.p, X.ld, X.rows, X.cols, tiles, tau, Rout.p, Rout.ld, stream);
  }
  void tsqrTileQRFrom(View<S> src, View<S> X, Index tiles, S* tau, View<S> Rout, int* notFinite,
                      bool storeAll = true, std::uint32_t* lastRow = nullptr) {
    const auto t = traced("tsqr tile QR (level 0)");
    kernels::launchTsqrTileQR<S>(X.p, X.ld, X.rows, X.cols, tiles, tau, Rout.p, Rout.ld, stream, src.p, src.ld,
                                 notFinite, storeAll, lastRow, exactIdentityCap(X.rows, X.cols));
  }
  void tsqrTileQRFormQ(View<S> X, S* tau, View<S> R) {
    const auto t = traced("tsqr top tile QR + Q");
    kernels::launchTsqrTileQR<S>(X.p, X.ld, X.rows, X.cols, 1, tau, R.p, R.ld, stream, nullptr, 0, nullptr, true,
                                 nullptr, 0, /*formQ=*/true);
  }
  void tsqrTileApplyQ(View<S> X, Index tiles, const S* tau, View<S> C) {
    const auto t = traced("tsqr apply Q");
    kernels::launchTsqrTileApplyQ<S>(X.p, X.ld, X.rows, X.cols, tiles, tau, C.p, C.ld, stream);
  }
  void signedLU(View<S> LU, S* s, View<S> T = View<S>()) {
    const auto t = traced("tsqr signed LU");
    kernels::launchSignedLU<S>(LU.p, LU.ld, LU.rows, s, stream, T.p, T.ld);
  }
  void tsqrTopRowsLU(View<S> X, Index tiles, const S* tau, View<S> C, View<S> LU, S* s, View<S> T, View<S> Uinv) {
    const auto t = traced("tsqr top rows of Q + signed LU");
    kernels::launchTsqrTopRowsLU<S>(X.p, X.ld, X.rows, X.cols, tiles, tau, C.p, C.ld, LU.p, LU.ld, s, T.p, T.ld,
                                    Uinv.p, Uinv.ld, stream);
  }
  void tsqrApplyQReconstructWY(View<S> X, Index tiles, const S* tauTiles, View<S> C, View<S> LU, View<S> Uinv,
                               const S* s, View<S> R, View<S> A, S* tau) {
    const auto t = traced("tsqr level-0 Q + ReconstructWY");
    kernels::launchTsqrApplyQReconstructWY<S>(X.p, X.ld, X.rows, X.cols, tiles, tauTiles, C.p, C.ld, LU.p, LU.ld,
                                              Uinv.p, Uinv.ld, s, R.p, R.ld, A.p, A.ld, tau, stream);
  }
};

// double: native FP64 or cuBLAS's fixed-point emulation (the handle's emulation strategy is set by the state).
template <>
inline void CudaOps<double>::gemmMode(Op ta, Op tb, double alpha, View<double> A, View<double> B, double beta,
                                      View<double> C, Index k) {
  TCQR_CHECK(cublasGemmEx_64(blas, cuOp(ta), cuOp(tb), C.rows, C.cols, k, &alpha, A.p, CUDA_R_64F, A.ld, B.p,
                             CUDA_R_64F, B.ld, &beta, C.p, CUDA_R_64F, C.ld, CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT,
                             CUBLAS_GEMM_DEFAULT));
}

// float on tensor cores. The converted-operand modes (TF32x3, FP16, BF16) write packed copies (ld a multiple of 8,
// zero padding rows, kernels/precision_kernels.cu) into the conversion workspace and multiply those.

/// TF32x3's hi*hi product is summed through C in chunks of at most this much of its inner dimension (the two
/// correction products, 2^-11 smaller, are not). The tensor cores do not round their FP32 running sums to nearest, so a
/// long product's error drifts with its inner dimension, and the hi*hi products with inner dimensions up to the merge
/// cap (1024) were what put TF32x3 outside the FP32 bound. H100, 4096^2, same binary
/// (bench/results/logs/2026-11-27-h100-x3-inner-chunks.log): backward error 2.76e-6 (uniform) / 2.95e-6 (geometric)
/// unchunked, 1.75e-6 / 1.42e-6 with chunks of 256 (1.53e-6 / 1.21e-6 with 128; issue bound 1.9e-6, FP32 mode 7.95e-7
/// / 5.89e-7); chunking all three products instead of hi*hi alone gave the same errors. Each chunk is one more pass
/// over C: 16384^2 took 205 ms against 195-197 with chunks of 256, 225-227 with 128, and 228 with all three products
/// chunked by 256. The row-chunked long sums (gemmChunkedTN) are not split further: their chunks (accumChunkFor) are
/// 256 rows at 4096^2 but 1024 at 16384^2 and 2048 at 32768^2, which is presumably why TF32x3's backward error there
/// (2.6e-6 at 16384^2, 4.1e-6 at 32768^2) is 2.2x FP32's rather than within the 4096^2 bound (not measured further).
/// TCQR_X3_HIHI_CHUNK=0 turns the chunking off (for measurements); other values are rounded up to a multiple of 16
/// (so that every chunk's operands stay 16-byte aligned).
constexpr Index kX3HiHiChunk = 256;
inline Index x3HiHiChunk() {
  static const Index chunk = (envIndex("TCQR_X3_HIHI_CHUNK", kX3HiHiChunk) + 15) / 16 * 16;
  return chunk;
}

/// A converted operand: `hi` (and `lo` for the x3 modes) with leading dimension `ld`; element offsets via at(). With
/// `pair` non-null (convertOperands' stacked layouts, whole operands only) hi and lo also form one operand with twice
/// the inner dimension, pairK entries of it each: [hi lo] along the inner dimension from `pair` for the left operand,
/// [lo hi] for the right one, so that one product gives both correction terms (convertedProduct).
/// With pairDup > 0 the pair is followed by a copy of hi's first pairDup entries along the inner dimension (scaled,
/// see DupScales), so that the pair's product also gives hi*hi's first chunk.
struct ConvertedOperand {
  char* hi = nullptr;
  char* lo = nullptr;
  Index ld = 0, elemBytes = 0;
  char* pair = nullptr;
  Index pairK = 0, pairDup = 0;
  ConvertedOperand at(Index r, Index c) const {
    const Index off = (r + c * ld) * elemBytes;
    return {hi + off, lo ? lo + off : nullptr, ld, elemBytes, nullptr, 0, 0};
  }
};

/// Whether the left operand a and the right operand b of a product with inner dimension k are paired for one product
/// of both correction terms ([hi lo] [lo; hi], inner dimension 2k).
inline bool pairedFor(const ConvertedOperand& a, const ConvertedOperand& b, Index k) {
  return a.pair && b.pair && a.pairK == k && b.pairK == k;
}
/// Whether that pair also holds hi*hi's first chunk (of a.pairDup entries): [hi lo s_l hi_c] [lo; hi; s_r hi_c].
inline bool fusedFor(const ConvertedOperand& a, const ConvertedOperand& b, Index k) {
  return pairedFor(a, b, k) && a.pairDup > 0 && a.pairDup == b.pairDup;
}

/// FP16x3's duplicated hi chunk (fusedFor) is scaled by a power of two on the left and one on the right operand, whose
/// product 2^11 = kFp16x3LoScale puts hi*hi on the scale of the correction terms (their product's alpha is
/// alpha / 2^11). The split is chosen per product from what bounds its operands (TF32x3's parts are not scaled):
/// - kDupScalesYLeft (2^11, 1): gemmMode's paired NN products, whose left operand is a block of Householder vectors
///   (applyYT's Y Z: the recursion's updates, in the object's mode; the products with other left operands, B Y in
///   applyYT's right-hand branch and the tall-skinny Q's Y M, run in the storage precision). Their entries are at most
///   1 in magnitude (|v_i| = |x_i| / (|x_0| + ||x||); ReconstructWY gives the same vectors), so 2^11 hi stays within
///   2048, far below FP16's 65504 (it would overflow only from |x| >= 32), while the right operand (T^T (Y^T B)) has
///   no such bound.
/// - kDupScalesT (2^6, 2^5): gemmT's NN products (FP16's and FP16x3's T products, tProductMode): in a factorization a
///   merge's T1 times P = -(Y1^T Y2) and X = T1 P times T2 (the updates' T^T (Y^T B) is TN, not fused; T times Y^T B
///   would be NN). Within a factorization that scales A's columns to norms below 1 (scalesColumns: FP16 always,
///   FP16x3 wherever a product can reach the tensor cores) |Y^T B| and |P| are at most |y| |b| <= sqrt(2) and 2
///   (tProductMode); T and X have no proven bound, but measured max |T_ij| <= 2 and max |X_ij| <= 1.4
///   (tests/studies/t_magnitude_study). The copies overflow only from 1024 on the left and 2048 on the right: a margin
///   of 500x or more on either side, where 2^11 on T or X would have left 16x. Should one overflow anyway, the split
///   flags it (CudaOps::dOverflow) and the factorization's info() says NumericalIssue.
struct DupScales {
  float left, right;
};
constexpr DupScales kDupScalesYLeft{2048.0f, 1.0f}, kDupScalesT{64.0f, 32.0f};
static_assert(kDupScalesYLeft.left * kDupScalesYLeft.right == kFp16x3LoScale &&
                  kDupScalesT.left * kDupScalesT.right == kFp16x3LoScale,
              "the duplicated chunk's scales must give 2^11");

/// How convertOperand lays out an x3 mode's two parts (the others have one). Blocks: hi, then lo after it (the
/// default). The rest put them side by side along the inner dimension of a product, for one product of both
/// correction terms: RowsHiFirst / RowsLoFirst for an operand whose inner dimension is its rows (each column holds
/// paddedRows(rows) entries of one part, then as many of the other; ld twice that), ColsHiFirst for one whose inner
/// dimension is its columns (lo's columns right after hi's).
enum class SplitLayout { Blocks, RowsHiFirst, RowsLoFirst, ColsHiFirst };

/// Bytes of the converted copy of a rows x cols operand (256-byte aligned so the next copy starts aligned), with `dup`
/// more entries along the inner dimension for an x3 mode's fused layouts (convertOperand): `dup` more columns for
/// ColsHiFirst, rows for the Rows layouts.
inline Index convertedBytes(Precision mode, Index rows, Index cols, SplitLayout layout = SplitLayout::Blocks,
                            Index dup = 0) {
  Index bytes = kernels::paddedRows(rows) * cols * conversionElementBytes(mode);
  if (dup > 0) bytes += (layout == SplitLayout::ColsHiFirst ? kernels::paddedRows(rows) : cols) * dup *
                        (conversionElementBytes(mode) / 2);  // (one part's copy)
  return (bytes + 255) / 256 * 256;
}

/// Converts X into `w` (convertedBytes(mode, X.rows, X.cols, layout, dup) bytes) for `mode`; `layout` places an x3
/// mode's parts. With dup > 0 (the paired layouts only) a copy of hi's first dup columns (ColsHiFirst, the left
/// operand) or rows (RowsLoFirst, the right one) follows the pair along the inner dimension, scaled by `dupScale` in
/// FP16x3 (DupScales).
inline ConvertedOperand convertOperand(Precision mode, View<float> X, char* w, cudaStream_t stream, int* overflow,
                                       SplitLayout layout = SplitLayout::Blocks, Index dup = 0,
                                       float dupScale = 1.0f) {
  const Index padded = kernels::paddedRows(X.rows);
  if (mode == Precision::FP16x3 || mode == Precision::TF32x3) {
    const Index part = mode == Precision::FP16x3 ? 2 : Index(sizeof(float));
    ConvertedOperand c{w, nullptr, padded, part, nullptr, 0, 0};
    kernels::SplitDup d;
    switch (layout) {
      case SplitLayout::Blocks:  // (lo at half the rounded size: ld * cols parts each)
        c.lo = w + convertedBytes(mode, X.rows, X.cols) / 2;
        break;
      case SplitLayout::ColsHiFirst:
        c.lo = w + padded * X.cols * part;
        c.pair = w, c.pairK = X.cols;
        if (dup > 0) {
          d.p = w + 2 * padded * X.cols * part;
          d.count = dup, d.cols = true, d.scale = mode == Precision::FP16x3 ? dupScale : 1.0f;
        }
        break;
      case SplitLayout::RowsHiFirst:
      case SplitLayout::RowsLoFirst: {
        const bool hiFirst = layout == SplitLayout::RowsHiFirst;
        c.ld = 2 * padded + dup;
        c.hi = hiFirst ? w : w + padded * part;
        c.lo = hiFirst ? w + padded * part : w;
        c.pair = w, c.pairK = padded;
        if (dup > 0) {
          d.p = w + 2 * padded * part;
          d.count = dup, d.cols = false, d.scale = mode == Precision::FP16x3 ? dupScale : 1.0f;
        }
        break;
      }
    }
    c.pairDup = dup;
    const Index ldOut = layout == SplitLayout::Blocks ? 0 : c.ld;
    if (mode == Precision::FP16x3)
      kernels::launchSplitHalf(X.p, X.ld, X.rows, X.cols, reinterpret_cast<__half*>(c.hi),
                               reinterpret_cast<__half*>(c.lo), kFp16x3LoScale, stream, ldOut, d, overflow);
    else
      kernels::launchSplitTf32(X.p, X.ld, X.rows, X.cols, reinterpret_cast<float*>(c.hi),
                               reinterpret_cast<float*>(c.lo), stream, ldOut, d);
    return c;
  }
  const Index ld = padded;
  if (mode == Precision::FP16)
    kernels::launchConvertFromFloat(X.p, X.ld, X.rows, X.cols, reinterpret_cast<__half*>(w), stream, overflow);
  else
    kernels::launchConvertFromFloat(X.p, X.ld, X.rows, X.cols, reinterpret_cast<__nv_bfloat16*>(w), stream);
  return {w, nullptr, ld, 2};
}

/// Both operands of a product converted for `mode`, one after the other in the conversion workspace `work` (grown,
/// waiting for `stream`, if too small).
struct ConvertedPair {
  ConvertedOperand a, b;
};
/// With `paired` (whole products only, gemmMode's and gemmT's: trmmConverted takes blocks of its copies) and an x3
/// mode, the parts are laid out for convertedProduct's one product of both correction terms, where the shapes allow: TN
/// always, NN where the inner dimension k is a multiple of 8 (the left operand pairs k columns of hi with k of lo, so
/// the right operand's [lo; hi] must have no padding rows between its parts: paddedRows(k) == k).
/// TCQR_X3_PAIRED=0 keeps the blocks (for measurements). With `fuseChunk` >= 0 as well, an NN pair also holds hi*hi's
/// first chunk of that many entries (0: all of hi*hi; fusedFor), its copies scaled by `scales` in FP16x3: the caller
/// chooses them from what bounds its operands (DupScales).
inline ConvertedPair convertOperands(Precision mode, View<float> A, View<float> B, ConversionWork& work,
                                     cudaStream_t stream, int* overflow, Op ta = Op::N, Op tb = Op::N,
                                     bool paired = false,
                                     Index fuseChunk = -1, DupScales scales = kDupScalesYLeft) {
  SplitLayout la = SplitLayout::Blocks, lb = SplitLayout::Blocks;
  Index dup = 0;
  if (paired && errorCorrected(mode) && x3PairedCorrections() && tb == Op::N) {
    if (ta == Op::T) {
      la = SplitLayout::RowsHiFirst;
      lb = SplitLayout::RowsLoFirst;
    } else if (A.cols % 8 == 0) {
      la = SplitLayout::ColsHiFirst;
      lb = SplitLayout::RowsLoFirst;
      // hi*hi's first chunk in the pair's product (fusedFor): a chunk is a multiple of 16, A.cols of 8.
      if (fuseChunk >= 0 && x3FusedFirstChunk()) dup = fuseChunk > 0 ? std::min(fuseChunk, A.cols) : A.cols;
    }
  }
  const Index bytesA = convertedBytes(mode, A.rows, A.cols, la, dup);
  const Index bytesB = convertedBytes(mode, B.rows, B.cols, lb, dup);
  char* w = work.reserve(bytesA + bytesB, stream);
  return {convertOperand(mode, A, w, stream, overflow, la, dup, scales.left),
          convertOperand(mode, B, w + bytesA, stream, overflow, lb, dup, scales.right)};
}

/// TF32x3's row-chunked TN products (gemmChunkedTN) chunk the hi*hi product only; the two correction products run over
/// the whole inner dimension straight into C. With all three chunked, two of them read the partials back and wrote
/// them again before the reduction read them: 16384^2 205.4-207.6 ms against 194.9-195.2 now, 32768^2 999-1006
/// against 952-954, 131072 x 2048 55.7-56.0 against 54.1-54.2, the accuracy at 4096^2 unchanged (H100, same binary,
/// alternating; bench/results/logs/2026-11-27-h100-x3-tn-corrections-ab.log). TCQR_X3_TN=chunked restores the old way
/// (for measurements).
inline bool x3TnCorrectionsWhole() {
  static const bool whole = [] {
    const char* v = std::getenv("TCQR_X3_TN");
    return v == nullptr || std::strcmp(v, "chunked") != 0;
  }();
  return whole;
}

/// The cuBLAS type of a converted operand, and the compute type of its products.
inline cudaDataType convertedType(Precision mode) {
  return mode == Precision::TF32x3 ? CUDA_R_32F : mode == Precision::BF16 ? CUDA_R_16BF : CUDA_R_16F;
}
inline cublasComputeType_t convertedCompute(Precision mode) {
  return mode == Precision::TF32x3 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/// C (m x n, FP32) = alpha op(A) op(B) + beta C on converted operands: one tensor-core product, or for TF32x3 three
/// (lo*hi, hi*lo, hi*hi, smallest first; each exact in TF32 x TF32, accumulated in FP32; hi*hi in chunks of the inner
/// dimension, see kX3HiHiChunk).
inline void convertedProduct(cublasHandle_t blas, Precision mode, Op ta, Op tb, Index m, Index n, Index k, float alpha,
                             const ConvertedOperand& A, const ConvertedOperand& B, float beta, float* C, Index ldc,
                             Index hiChunk = x3HiHiChunk()) {
  const bool x3 = errorCorrected(mode);
  const cudaDataType type = convertedType(mode);
  const cublasComputeType_t compute = convertedCompute(mode);
  const float one = 1.0f;
  const float alphaLo = alpha * loProductScale(mode);
  auto product = [&](const char* a, const char* b, Index kk, const float* bt, const float* al = nullptr) {
    TCQR_CHECK(cublasGemmEx_64(blas, cuOp(ta), cuOp(tb), m, n, kk, al ? al : &alpha, a, type, A.ld, b, type, B.ld, bt,
                               C, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
  };
  if (!x3) {
    product(A.hi, B.hi, k, &beta);
    return;
  }
  Index first = 0;  // hi*hi's entries of the inner dimension already summed
  if (fusedFor(A, B, k)) {
    // [hi lo s_l hi_c] [lo; hi; s_r hi_c] = hi*lo + lo*hi + 2^11 hi_c*hi_c (FP16x3; TF32x3 unscaled): the small
    // correction terms first, so hi*hi's chunk is summed onto them as onto zero (the chunk's drift, kX3HiHiChunk).
    product(A.pair, B.pair, 2 * k + A.pairDup, &beta, &alphaLo);
    first = A.pairDup;
  } else if (pairedFor(A, B, k)) {
    product(A.pair, B.pair, 2 * k, &beta, &alphaLo);  // [hi lo] [lo; hi] = hi*lo + lo*hi
  } else {
    product(A.lo, B.hi, k, &beta, &alphaLo);
    product(A.hi, B.lo, k, &one, &alphaLo);
  }
  const Index chunk = hiChunk > 0 ? hiChunk : k;
  for (Index k0 = first; k0 < k; k0 += chunk) {
    // (A chunk of the inner dimension: columns of op(A) = A, rows of op(A) = A^T; the other way round for B.)
    const ConvertedOperand a = ta == Op::N ? A.at(0, k0) : A.at(k0, 0);
    const ConvertedOperand b = tb == Op::N ? B.at(k0, 0) : B.at(0, k0);
    product(a.hi, b.hi, std::min(chunk, k - k0), &one);
  }
}

// When both operands store the inner dimension as rows (op(A) = A^T, op(B) = B) it is rounded up to a multiple of 8:
// the padding rows are zeros, so the padded products are exact zeros (TPDS'25 §V.C.3).
template <>
inline void CudaOps<float>::gemmMode(Op ta, Op tb, float alpha, View<float> A, View<float> B, float beta,
                                     View<float> C, Index k) {
  if (mode == Precision::TF32) {
    TCQR_CHECK(cublasGemmEx_64(blas, cuOp(ta), cuOp(tb), C.rows, C.cols, k, &alpha, A.p, CUDA_R_32F, A.ld, B.p,
                               CUDA_R_32F, B.ld, &beta, C.p, CUDA_R_32F, C.ld, CUBLAS_COMPUTE_32F_FAST_TF32,
                               CUBLAS_GEMM_DEFAULT));
    return;
  }
  const Index kk = (ta == Op::T && tb == Op::N) ? kernels::paddedRows(k) : k;
  // (gemmMode's NN products have Householder vectors on the left: DupScales.)
  const ConvertedPair ab =
      convertOperands(mode, A, B, *conversion, stream, dOverflow, ta, tb, /*paired=*/true, x3HiHiChunk(),
                      kDupScalesYLeft);
  const ConvertedOperand &a = ab.a, &b = ab.b;
  if (errorCorrected(mode) && ta == Op::T && tb == Op::N && x3TnCorrectionsWhole() && chunksTN(C.rows, C.cols, kk)) {
    // TF32x3 sums in the tensor cores, which do not round to nearest, so long sums drift: the hi*hi product is chunked
    // like FP32's (see kAccumChunk). The two correction products, 2^-11 smaller, drift 2^-11 less and go straight
    // into C over the whole inner dimension, so only one product writes the partials and the reduction alone reads
    // them back (see x3TnCorrectionsWhole).
    const cudaDataType type = convertedType(mode);
    const cublasComputeType_t compute = convertedCompute(mode);
    const float alphaLo = alpha * loProductScale(mode);
    auto tn = [&](const char* pa, const char* pb, Index nc, Index kr, const float* bt, float* out, Index ldo,
                  const float* al) {
      TCQR_CHECK(cublasGemmEx_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, C.rows, nc, kr, al, pa, type, a.ld, pb, type, b.ld, bt,
                                 out, CUDA_R_32F, ldo, compute, CUBLAS_GEMM_DEFAULT));
    };
    const float one = 1.0f;
    if (pairedFor(a, b, kk)) {
      tn(a.pair, b.pair, C.cols, 2 * kk, &beta, C.p, C.ld, &alphaLo);  // (as in convertedProduct)
    } else {
      tn(a.lo, b.hi, C.cols, kk, &beta, C.p, C.ld, &alphaLo);
      tn(a.hi, b.lo, C.cols, kk, &one, C.p, C.ld, &alphaLo);
    }
    auto batched = [&](Index c0, Index nc, Index kc, Index batch, float* P) {
      const float zero = 0.0f;
      TCQR_CHECK(cublasGemmStridedBatchedEx_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, C.rows, nc, kc, &one, a.hi, type, a.ld,
                                               kc, b.at(0, c0).hi, type, b.ld, kc, &zero, P, CUDA_R_32F, C.rows,
                                               C.rows * nc, batch, compute, CUBLAS_GEMM_DEFAULT));
    };
    auto plain = [&](Index c0, Index nc, Index k0, Index kr, float bt) {
      tn(a.at(k0, 0).hi, b.at(k0, c0).hi, nc, kr, &bt, C.p + c0 * C.ld, C.ld, &alpha);
    };
    gemmChunkedTN(C.rows, C.cols, kk, alpha, 1.0f, C.p, C.ld, batched, plain);  // (true: chunksTN holds)
    return;
  }
  if (errorCorrected(mode) && ta == Op::T && tb == Op::N) {
    // (TCQR_X3_TN=chunked: all three products go through gemmChunkedTN, each adding into the partials or, for large
    // results, into C; with too few rows or no partials workspace, convertedProduct below.)
    auto batched = [&](Index c0, Index nc, Index kc, Index batch, float* P) {
      const float zero = 0.0f, one = 1.0f;
      const float lo = loProductScale(mode);
      const ConvertedOperand bc = b.at(0, c0);
      const char* lhs[3] = {a.lo, a.hi, a.hi};
      const char* rhs[3] = {bc.hi, bc.lo, bc.hi};
      for (int t = 0; t < 3; ++t)
        TCQR_CHECK(cublasGemmStridedBatchedEx_64(blas, CUBLAS_OP_T, CUBLAS_OP_N, C.rows, nc, kc, t < 2 ? &lo : &one,
                                                 lhs[t], convertedType(mode), a.ld, kc, rhs[t], convertedType(mode),
                                                 b.ld, kc, t == 0 ? &zero : &one, P, CUDA_R_32F, C.rows, C.rows * nc,
                                                 batch, convertedCompute(mode), CUBLAS_GEMM_DEFAULT));
    };
    auto plain = [&](Index c0, Index nc, Index k0, Index kr, float bt) {
      convertedProduct(blas, mode, Op::T, Op::N, C.rows, nc, kr, alpha, a.at(k0, 0), b.at(k0, c0), bt,
                       C.p + c0 * C.ld, C.ld);
    };
    if (gemmChunkedTN(C.rows, C.cols, kk, alpha, beta, C.p, C.ld, batched, plain)) return;
  }
  convertedProduct(blas, mode, ta, tb, C.rows, C.cols, kk, alpha, a, b, beta, C.p, C.ld);
}

template <>
inline void CudaOps<double>::gemmT(Op ta, Op tb, double alpha, View<double> A, View<double> B, double beta,
                                   View<double> C) {
  gemmExact(ta, tb, alpha, A, B, beta, C);  // (tProductMode: no double mode multiplies T on tensor cores)
}

// Short inner dimensions (T's order, at most the merge cap): no chunked sums, and none of gemm()'s TN paths.
template <>
inline void CudaOps<float>::gemmT(Op ta, Op tb, float alpha, View<float> A, View<float> B, float beta,
                                  View<float> C) {
  if (C.empty()) return;
  const Index k = (ta == Op::N) ? A.cols : A.rows;
  if (k == 0 || !tProductOnTensorCores(mode, C.rows, C.cols, k)) {
    gemmExact(ta, tb, alpha, A, B, beta, C);
    return;
  }
  const Precision t = tProductMode(mode);
  const auto traceScope = traced("gemmT x3", gemmFlops(C.rows, C.cols, k));
  const Index kk = (ta == Op::T && tb == Op::N) ? kernels::paddedRows(k) : k;  // (as gemmMode)
  // Paired and, in NN products, fused with hi*hi's first chunk (all of hi*hi in FP16, BF16 and TF32, whose T products
  // are unchunked), the copies scaled for T-sized operands on both sides (kDupScalesT).
  const Index t0 = tProductHiHiChunk(mode), hiChunk = t0 < 0 ? x3HiHiChunk() : t0;
  const ConvertedPair ab =
      convertOperands(t, A, B, *conversion, stream, dOverflow, ta, tb, /*paired=*/true, hiChunk, kDupScalesT);
  convertedProduct(blas, t, ta, tb, C.rows, C.cols, kk, alpha, ab.a, ab.b, beta, C.p, C.ld, hiChunk);
}

// The recursive TRMM with L and Z converted once (a per-product conversion re-reads and re-writes the operands at every
// level of the recursion; measured on the H100 at 16384: FP16 TRMM 11.4 ms against 12.7 ms for the full GEMM).
template <>
inline void CudaOps<double>::trmmConverted(Op opL, double alpha, View<double> L, View<double> Z, View<double> C,
                                           Index cutoff, TrmmScheme scheme) {
  trmmLowerAccGeneric(*this, opL, alpha, L, Z, C, cutoff, scheme);  // no double mode converts its operands
}

template <>
inline void CudaOps<float>::trmmConverted(Op opL, float alpha, View<float> L, View<float> Z, View<float> C,
                                          Index cutoff, TrmmScheme scheme) {
  const Index k = L.rows;
  const ConvertedPair lz = convertOperands(mode, L, Z, *conversion, stream, dOverflow);
  const ConvertedOperand &l = lz.a, &z = lz.b;
  auto gemm = [&](Op op, Index lr, Index lc, Index lnr, Index lnc, Index zr, Index cr) {
    const Index rowsC = op == Op::N ? lnr : lnc;
    // Op::T reaching L's last row: the inner dimension runs on into the zero padding rows of both copies (Z has k
    // rows, so both copies have ld = paddedRows(k)), so that it stays a multiple of 8.
    const Index inner = op == Op::N ? lnc : (lr + lnr == k ? l.ld - lr : lnr);
    convertedProduct(blas, mode, op, Op::N, rowsC, Z.cols, inner, alpha, l.at(lr, lc), z.at(zr, 0), 1.0f, C.p + cr,
                     C.ld);
  };
  trmmBlocks(gemm, opL, k, cutoff, scheme);
}

/// Makes the object's device current for the duration of a call.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    TCQR_CHECK(cudaGetDevice(&m_prev));
    if (m_prev != device) TCQR_CHECK(cudaSetDevice(device));
    m_device = device;
  }
  ~DeviceGuard() {
    if (m_prev != m_device) TCQR_CHECK_NOTHROW(cudaSetDevice(m_prev));
  }

 private:
  int m_prev = 0, m_device = 0;
};

}  // namespace detail
}  // namespace tcqr
