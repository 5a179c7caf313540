// bench_common.hpp - helpers shared by the benchmark programs (qr_bench, tsqr_bench, precision_accuracy, trmm_bench):
// status checks that throw BenchError, a device buffer, the cuBLAS/cuSOLVER/cuRAND handles of a run, the
// cusolverDn<S|D> geqrf/orgqr entry points, the device and library versions, CUDA-event timing on a stream, the
// double-accumulated Frobenius norm of the error measurements, and the formatting of the outputs (numbers, CSV fields,
// UTC date). Benchmark-only; not part of the library.
//
// Each program is a single translation unit, so everything here is inline (unused pieces cost nothing). frobenius()
// calls qrbench::accumulateSquares: a program that uses it links qr_bench_kernels.cu.
#pragma once

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <cusolverDn.h>

#include "tcqr_bench_commit.h"  // TCQR_BENCH_COMMIT: the commit recorded in the outputs (--commit overrides it),
                                 // generated at build time by bench/commit_stamp.cmake

#include <tcqr/Backend.h>

#include "qr_bench_kernels.hpp"


namespace tcqr_bench {

using i64 = std::int64_t;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------------------------------------------------------
// Status checks. A failing call throws BenchError naming the call, the status and the file:line of the CHECK; the
// programs report it in the row that was running (or stop), see each program.

struct BenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The enumerator's name, or "cusolverStatus N" for a status not listed here. The library has its own
/// (src/CudaBackend.cpp); the benchmarks use only the public headers (trmm_bench aside), so they keep this one.
inline std::string cusolverStatusName(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default: return "cusolverStatus " + std::to_string(int(s));
  }
}

[[noreturn]] inline void fail(const char* call, const std::string& status, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  throw BenchError(std::string(call) + " failed: " + status + " [" + (base ? base + 1 : file) + ":" +
                   std::to_string(line) + "]");
}
inline void check(cudaError_t s, const char* call, const char* file, int line) {
  if (s != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so that the next row can run
    fail(call, cudaGetErrorName(s), file, line);
  }
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(call, cublasGetStatusName(s), file, line);
}
inline void check(cusolverStatus_t s, const char* call, const char* file, int line) {
  if (s != CUSOLVER_STATUS_SUCCESS) fail(call, cusolverStatusName(s), file, line);
}
inline void check(curandStatus_t s, const char* call, const char* file, int line) {
  if (s != CURAND_STATUS_SUCCESS) fail(call, "curandStatus " + std::to_string(int(s)), file, line);
}
#define CHECK(expr) ::tcqr_bench::check((expr), #expr, __FILE__, __LINE__)

/// False when the device is in a sticky error state (every later CUDA call would fail too).
inline bool deviceUsable() {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return true;
  cudaGetLastError();
  e = cudaDeviceSynchronize();
  return e == cudaSuccess;
}

// ---------------------------------------------------------------------------------------------------------------
// Device memory and handles.

/// cudaMalloc'ed array of `count` T (at least one), freed by the destructor. Movable, not copyable.
template <typename T>
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(i64 count) { reset(count); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : m_p(o.m_p) { o.m_p = nullptr; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    std::swap(m_p, o.m_p);
    return *this;
  }
  ~DevBuf() { release(); }
  void reset(i64 count) {
    release();
    void* p = nullptr;
    CHECK(cudaMalloc(&p, sizeof(T) * static_cast<size_t>(std::max<i64>(count, 1))));
    m_p = static_cast<T*>(p);
  }
  void release() {
    if (m_p) cudaFree(m_p);
    m_p = nullptr;
  }
  T* get() const { return m_p; }

 private:
  T* m_p = nullptr;
};

/// One non-blocking stream and the handles bound to it, plus two events for timing. The cuBLAS handle runs in
/// pedantic math mode: it computes the errors (FP64 GEMMs), which must be IEEE FP64 with no emulation.
struct Handles {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  curandGenerator_t rng = nullptr;  // Philox, on `stream`
  cudaEvent_t start = nullptr, stop = nullptr;
  Handles() {
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cublasCreate(&blas));
    CHECK(cublasSetStream(blas, stream));
    CHECK(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));
    CHECK(cusolverDnCreate(&solver));
    CHECK(cusolverDnSetStream(solver, stream));
    CHECK(cusolverDnCreateParams(&params));
    CHECK(curandCreateGenerator(&rng, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    CHECK(curandSetStream(rng, stream));
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
  }
  ~Handles() {
    cudaStreamSynchronize(stream);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    curandDestroyGenerator(rng);
    cusolverDnDestroyParams(params);
    cusolverDnDestroy(solver);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  void sync() { CHECK(cudaStreamSynchronize(stream)); }
};

// ---------------------------------------------------------------------------------------------------------------
// Per-precision vendor entry points (legacy 32-bit cuSOLVER API).

template <typename S>
struct Vendor;

template <>
struct Vendor<float> {
  static constexpr const char* name = "float";
  static constexpr cudaDataType type = CUDA_R_32F;
  static constexpr const char* geqrfName = "cusolverDnSgeqrf";
  static constexpr const char* orgqrName = "cusolverDnSorgqr";
  static cusolverStatus_t geqrfBufferSize(cusolverDnHandle_t h, int m, int n, float* A, int lda, int* lwork) {
    return cusolverDnSgeqrf_bufferSize(h, m, n, A, lda, lwork);
  }
  static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, float* A, int lda, float* tau, float* work,
                                int lwork, int* info) {
    return cusolverDnSgeqrf(h, m, n, A, lda, tau, work, lwork, info);
  }
  static cusolverStatus_t orgqrBufferSize(cusolverDnHandle_t h, int m, int n, int k, const float* A, int lda,
                                          const float* tau, int* lwork) {
    return cusolverDnSorgqr_bufferSize(h, m, n, k, A, lda, tau, lwork);
  }
  static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, float* A, int lda, const float* tau,
                                float* work, int lwork, int* info) {
    return cusolverDnSorgqr(h, m, n, k, A, lda, tau, work, lwork, info);
  }
  /// N(0, 1); cuRAND needs an even count.
  static curandStatus_t normal(curandGenerator_t g, float* p, size_t count) {
    return curandGenerateNormal(g, p, count, 0.0f, 1.0f);
  }
};

template <>
struct Vendor<double> {
  static constexpr const char* name = "double";
  static constexpr cudaDataType type = CUDA_R_64F;
  static constexpr const char* geqrfName = "cusolverDnDgeqrf";
  static constexpr const char* orgqrName = "cusolverDnDorgqr";
  static cusolverStatus_t geqrfBufferSize(cusolverDnHandle_t h, int m, int n, double* A, int lda, int* lwork) {
    return cusolverDnDgeqrf_bufferSize(h, m, n, A, lda, lwork);
  }
  static cusolverStatus_t geqrf(cusolverDnHandle_t h, int m, int n, double* A, int lda, double* tau, double* work,
                                int lwork, int* info) {
    return cusolverDnDgeqrf(h, m, n, A, lda, tau, work, lwork, info);
  }
  static cusolverStatus_t orgqrBufferSize(cusolverDnHandle_t h, int m, int n, int k, const double* A, int lda,
                                          const double* tau, int* lwork) {
    return cusolverDnDorgqr_bufferSize(h, m, n, k, A, lda, tau, lwork);
  }
  static cusolverStatus_t orgqr(cusolverDnHandle_t h, int m, int n, int k, double* A, int lda, const double* tau,
                                double* work, int lwork, int* info) {
    return cusolverDnDorgqr(h, m, n, k, A, lda, tau, work, lwork, info);
  }
  /// N(0, 1); cuRAND needs an even count.
  static curandStatus_t normal(curandGenerator_t g, double* p, size_t count) {
    return curandGenerateNormalDouble(g, p, count, 0.0, 1.0);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// The device and the library versions (throw BenchError when there is no usable device).

/// Properties of the current device (`name` is what the outputs record as the card).
inline cudaDeviceProp currentDeviceProperties() {
  int dev = 0;
  CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  return prop;
}

struct LibraryVersions {
  int runtime = 0, driver = 0, cublas = 0, cusolver = 0;
};

inline LibraryVersions libraryVersions() {
  LibraryVersions v;
  CHECK(cusolverGetVersion(&v.cusolver));
  CHECK(cudaRuntimeGetVersion(&v.runtime));
  CHECK(cudaDriverGetVersion(&v.driver));
  cublasHandle_t b = nullptr;
  CHECK(cublasCreate(&b));
  CHECK(cublasGetVersion(b, &v.cublas));
  cublasDestroy(b);
  return v;
}

// ---------------------------------------------------------------------------------------------------------------
// Timing.

/// Median of `v` (mean of the middle two for an even count); NaN when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

/// `warmup` + `reps` runs of: `prep` (untimed: e.g. restore the input), drain the stream, then `run`. The warm-up
/// runs are not timed (the stream is drained after each); each timed run is bracketed by h.start / h.stop recorded on
/// h.stream, so a time is what the stream spends from the start event to the stop event, host-side launch/enqueue
/// overhead of `run` included. Returns the `reps` times in milliseconds.
template <class Prep, class Run>
std::vector<double> timeOnStream(Handles& h, int warmup, int reps, Prep&& prep, Run&& run) {
  std::vector<double> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    prep();
    CHECK(cudaStreamSynchronize(h.stream));
    if (i < warmup) {
      run();
      CHECK(cudaStreamSynchronize(h.stream));
      continue;
    }
    CHECK(cudaEventRecord(h.start, h.stream));
    run();
    CHECK(cudaEventRecord(h.stop, h.stream));
    CHECK(cudaEventSynchronize(h.stop));
    float t = 0.f;
    CHECK(cudaEventElapsedTime(&t, h.start, h.stop));
    ms.push_back(double(t));
  }
  return ms;
}

/// Median wall-clock time (std::chrono, milliseconds) of `reps` runs of `run` after `warmup` untimed ones; `prep`
/// runs untimed before each (e.g. restoring an operand that `run` overwrites). For host-in, host-out measurements.
template <class Run, class Prep>
double timeHostMs(int warmup, int reps, Run&& run, Prep&& prep) {
  std::vector<double> ms;
  for (int i = 0; i < warmup + reps; ++i) {
    prep();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return median(ms);
}
template <class Run>
double timeHostMs(int warmup, int reps, Run&& run) {
  return timeHostMs(warmup, reps, run, [] {});
}

// ---------------------------------------------------------------------------------------------------------------
// Errors (on the device, in double).

/// ||A||_F, or ||A - I||_F with `minusIdentity`, of the m x n double matrix A (leading dimension lda), accumulated in
/// double on h.stream; dAcc is one double of device scratch. Synchronizes the stream.
inline double frobenius(Handles& h, const double* A, i64 lda, i64 m, i64 n, bool minusIdentity, double* dAcc) {
  CHECK(cudaMemsetAsync(dAcc, 0, sizeof(double), h.stream));
  CHECK(qrbench::accumulateSquares(A, lda, m, n, minusIdentity, dAcc, h.stream));
  double s = 0;
  CHECK(cudaMemcpyAsync(&s, dAcc, sizeof(double), cudaMemcpyDeviceToHost, h.stream));
  CHECK(cudaStreamSynchronize(h.stream));
  return std::sqrt(s);
}

// ---------------------------------------------------------------------------------------------------------------
// Output.

/// `v` printed with the printf format `f` (one double conversion), or `missing` when v is NaN (infinities are
/// printed by `f`).
inline std::string fmtNum(double v, const char* f, const char* missing = "nan") {
  if (std::isnan(v)) return missing;
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// A CSV field: line breaks become spaces; quoted (quotes doubled) when it holds a comma or a quote.
inline std::string csvField(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.find_first_of(",\"") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

/// Today in UTC, YYYY-MM-DD.
inline std::string utcDate() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

/// For a CSV appended to row by row: creates the parent directory of `path` if needed and returns true when the file
/// does not exist yet or is empty (its header is still to be written).
inline bool csvNeedsHeader(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  return !fs::exists(p, ec) || fs::file_size(p, ec) == 0;
}

/// Opens `path` for appending; when it cannot, says so on stderr ("<program>: ... row not saved") and returns false.
inline bool openCsvForAppend(const std::string& path, const char* program, std::ofstream& f) {
  f.open(path, std::ios::app);
  if (!f) {
    std::fprintf(stderr, "%s: cannot open %s for appending; row not saved\n", program, path.c_str());
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Command-line helpers.

/// The non-empty items of a comma-separated list.
inline std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

/// Every precision mode, in the order the programs list them (float modes, then double modes).
inline const std::vector<tcqr::Precision> kAllModes = {
    tcqr::Precision::FP32, tcqr::Precision::TF32x3, tcqr::Precision::FP16x3, tcqr::Precision::TF32,
    tcqr::Precision::FP16, tcqr::Precision::BF16,   tcqr::Precision::FP64,   tcqr::Precision::FP64Emulated};

/// A mode of kAllModes as tcqr::precisionName() spells it, case-insensitive ("Default" is not accepted here).
inline bool parseModeName(std::string s, tcqr::Precision& p) {
  auto upper = [](std::string x) {
    for (char& c : x) c = char(std::toupper(static_cast<unsigned char>(c)));
    return x;
  };
  s = upper(s);
  for (tcqr::Precision q : kAllModes)
    if (upper(tcqr::precisionName(q)) == s) {
      p = q;
      return true;
    }
  return false;
}

}  // namespace tcqr_bench
