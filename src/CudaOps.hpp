// CudaOps.hpp - the device side of the backend-generic algorithms (internal): owning device/pinned buffers, typed
// cuBLAS wrappers, and CudaOps, the "Ops" of Algorithms.hpp and Tsqr.hpp on one stream. Shared by the CUDA state
// classes.
#pragma once

#include <vector>

#include "Algorithms.hpp"
#include "CudaCheck.hpp"
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
    static void trmmRightUpper(cublasHandle_t h, Index m, Index n, const S* T, Index ldt, S* B, Index ldb) {      \
      const S one = 1;                                                                                             \
      TCQR_CHECK(cublas##P##trmm_64(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,                    \
                                    CUBLAS_DIAG_NON_UNIT, m, n, &one, T, ldt, B, ldb, B, ldb));                    \
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

template <typename S>
struct CudaOps {
  cublasHandle_t blas;
  cusolverDnHandle_t solver;
  cusolverDnParams_t params;
  cudaStream_t stream;
  DeviceBuffer<char>* work;
  std::vector<char>* hostWork;
  int* dInfo;

  void gemm(Op ta, Op tb, S alpha, View<S> A, View<S> B, S beta, View<S> C) {
    if (C.empty()) return;
    const Index k = (ta == Op::N) ? A.cols : A.rows;
    if (k == 0) {
      if (beta == S(0)) setZero(C);
      return;  // beta == 1 everywhere else in the algorithms
    }
    Blas<S>::gemm(blas, cuOp(ta), cuOp(tb), C.rows, C.cols, k, alpha, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld);
  }

  void geqrfPanel(View<S> A, S* tau) {
    if (A.empty()) return;
    size_t dBytes = 0, hBytes = 0;
    TCQR_CHECK(cusolverDnXgeqrf_bufferSize(solver, params, A.rows, A.cols, Blas<S>::type, A.p, A.ld, Blas<S>::type,
                                           tau, Blas<S>::type, &dBytes, &hBytes));
    work->reserve(static_cast<Index>(dBytes));
    if (hostWork->size() < hBytes) hostWork->resize(hBytes);
    TCQR_CHECK(cusolverDnXgeqrf(solver, params, A.rows, A.cols, Blas<S>::type, A.p, A.ld, Blas<S>::type, tau,
                                Blas<S>::type, work->get(), dBytes, hBytes ? hostWork->data() : nullptr, hBytes,
                                dInfo));
  }

  void copyUnitLower(View<S> src, View<S> dst) {
    kernels::launchCopyUnitLower<S>(src.p, src.ld, dst.p, dst.ld, dst.rows, dst.cols, stream);
  }
  void formT(View<S> Sm, const S* tau, View<S> T) {
    kernels::launchFormT<S>(Sm.p, Sm.ld, tau, T.p, T.ld, T.rows, stream);
  }
  void trmmRightUpper(View<S> B, View<S> T) {
    if (!B.empty()) Blas<S>::trmmRightUpper(blas, B.rows, B.cols, T.p, T.ld, B.p, B.ld);
  }
  void trsmLeftUpper(Op op, View<S> R, View<S> B) {
    if (!B.empty()) Blas<S>::trsmLeftUpper(blas, cuOp(op), B.rows, B.cols, R.p, R.ld, B.p, B.ld);
  }
  void setZero(View<S> A) {
    if (!A.empty())
      TCQR_CHECK(cudaMemset2DAsync(A.p, A.ld * sizeof(S), 0, A.rows * sizeof(S), A.cols, stream));
  }
  void setIdentity(View<S> A) { kernels::launchSetIdentity<S>(A.p, A.ld, A.rows, A.cols, stream); }
  void copy(View<S> src, View<S> dst) {
    if (!dst.empty())
      TCQR_CHECK(cudaMemcpy2DAsync(dst.p, dst.ld * sizeof(S), src.p, src.ld * sizeof(S), dst.rows * sizeof(S),
                                   dst.cols, cudaMemcpyDeviceToDevice, stream));
  }
  void tsqrTileQR(View<S> X, Index tiles, S* tau, View<S> Rout) {
    kernels::launchTsqrTileQR<S>(X.p, X.ld, X.rows, X.cols, tiles, tau, Rout.p, Rout.ld, stream);
  }
  void tsqrTileApplyQ(View<S> X, Index tiles, const S* tau, View<S> C) {
    kernels::launchTsqrTileApplyQ<S>(X.p, X.ld, X.rows, X.cols, tiles, tau, C.p, C.ld, stream);
  }
  void signedLU(View<S> LU, S* s) { kernels::launchSignedLU<S>(LU.p, LU.ld, LU.rows, s, stream); }
  void reconstructWY(View<S> Q, View<S> LU, const S* s, View<S> R, View<S> A, View<S> W, S* tau) {
    kernels::launchReconstructWY<S>(Q.p, Q.ld, Q.rows, Q.cols, LU.p, LU.ld, s, R.p, R.ld, A.p, A.ld, W.p, W.ld, tau,
                                    stream);
  }
};

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
