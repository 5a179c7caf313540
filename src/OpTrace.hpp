// OpTrace.hpp - per-operation GPU time of one computation, for finding where the time goes (internal; includes CUDA
// headers). Off unless the environment variable TCQR_TRACE=1 is set; then every top-level call of CudaOps is
// bracketed by a pair of CUDA events on its stream, and after the computation the state prints, to stderr, the GPU
// time per kind of operation, their sum, and the time from the first event to the last. The difference of the last
// two is time the GPU spent between operations (launch latency, host-side work such as cuBLAS's heuristics). Events
// do not serialise the stream; the report synchronises once, after the computation. It also lists the operations
// that held the host for a millisecond or more (the first use of a kernel in a process loads it). A look-ahead lane's
// work is one "side" operation on its own stream, reported apart from the main lane's sum and span; the main lane's
// waits at the joins are operations of the main lane (so they count in its sum, not in the time between). Nsight
// Systems is not available on the machines this was written for, hence a tracer of our own.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "CudaCheck.hpp"

namespace tcqr {
namespace detail {

class OpTrace {
 public:
  OpTrace() = default;
  OpTrace(const OpTrace&) = delete;
  OpTrace& operator=(const OpTrace&) = delete;
  ~OpTrace() {
    for (cudaEvent_t e : m_pool) TCQR_CHECK_NOTHROW(cudaEventDestroy(e));
  }

  static bool enabled() {
    const char* v = std::getenv("TCQR_TRACE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }

  /// Starts an operation. Nested calls (an op implemented through other ops) are attributed to the outermost one.
  /// `flops`: the operation's nominal floating-point operations (0: not a product), for a rate per kind. `side`: the
  /// operation runs beside the main lane (a look-ahead lane's work, on its own stream): reported on its own, outside
  /// the main lane's sum and span.
  void begin(const char* label, cudaStream_t s, double flops = 0, bool side = false) {
    if (m_depth++ > 0) return;
    m_label = label;
    m_flops = flops;
    m_side = side;
    m_start = record(s);
    m_hostStart = Clock::now();  // (after the event: creating one, while the pool grows, is not the operation's)
  }
  void end(cudaStream_t s) {
    if (--m_depth > 0) return;
    const double hostMs = std::chrono::duration<double, std::milli>(Clock::now() - m_hostStart).count();
    m_records.push_back({m_label, m_start, record(s), m_flops, hostMs, m_side});
  }

  /// Waits for the recorded events, prints the summary headed by `title` to stderr, and starts over.
  void report(const char* title) {
    if (m_records.empty()) return;
    TCQR_CHECK(cudaEventSynchronize(m_records.back().stop));
    // A lane's last operation is normally covered by the main lane's join after it, but not where only
    // joinAllLanes (untraced) joined it.
    for (const Record& r : m_records)
      if (r.side) TCQR_CHECK(cudaEventSynchronize(r.stop));
    struct Sum {
      int count = 0;
      double ms = 0;
      double flops = 0;
    };
    std::map<std::string, Sum> sums, sides;
    double total = 0;
    size_t mainCalls = 0;
    const Record* first = nullptr;
    const Record* last = nullptr;
    for (const Record& r : m_records) {
      float ms = 0;
      TCQR_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
      Sum& s = (r.side ? sides : sums)[r.label];
      ++s.count;
      s.ms += ms;
      s.flops += r.flops;
      if (r.side) continue;
      total += ms;
      ++mainCalls;
      if (!first) first = &r;
      last = &r;
    }
    float span = 0;
    if (first) TCQR_CHECK(cudaEventElapsedTime(&span, first->start, last->stop));
    std::vector<std::pair<std::string, Sum>> rows(sums.begin(), sums.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    std::fprintf(stderr,
                 "tcqr trace: %s: first to last event %.3f ms, operations %.3f ms (%zu calls), between %.3f ms\n",
                 title, span, total, mainCalls, span - total);
    auto printRow = [](const std::string& label, const Sum& sum) {
      std::fprintf(stderr, "tcqr trace:   %-32s %6d calls %10.3f ms %8.2f us/call", label.c_str(), sum.count, sum.ms,
                   1000.0 * sum.ms / sum.count);
      // The rate of the nominal flops (a triangular product counts its triangle, a chunked one its plain product).
      if (sum.flops > 0 && sum.ms > 0)
        std::fprintf(stderr, " %9.3f Tflop %7.1f TFLOP/s", sum.flops * 1e-12, sum.flops / sum.ms * 1e-9);
      std::fprintf(stderr, "\n");
    };
    for (const auto& r : rows) printRow(r.first, r.second);
    if (!sides.empty())  // the lanes' rows last, in lane order
      std::fprintf(stderr, "tcqr trace:   beside the main lane (not in its sum; one call = one fork's work):\n");
    for (const auto& r : sides) printRow(r.first, r.second);
    // The operations that held the host longest (queueing one should take microseconds; the first use of a kernel
    // in a process loads it, which shows here: a process's first factorizations).
    std::vector<size_t> slow;
    for (size_t i = 0; i < m_records.size(); ++i)  // (not a lane's work: its host time is queueing its GEMMs)
      if (!m_records[i].side && m_records[i].hostMs >= kSlowHostMs) slow.push_back(i);
    std::sort(slow.begin(), slow.end(), [&](size_t a, size_t b) { return m_records[a].hostMs > m_records[b].hostMs; });
    double slowSum = 0;
    for (size_t i : slow) slowSum += m_records[i].hostMs;
    if (!slow.empty())
      std::fprintf(stderr, "tcqr trace: %zu operations held the host >= %.1f ms each, %.3f ms in all; the longest:\n",
                   slow.size(), kSlowHostMs, slowSum);
    for (size_t j = 0; j < slow.size() && j < kSlowListed; ++j) {
      const Record& r = m_records[slow[j]];
      std::fprintf(stderr, "tcqr trace:   #%-5zu %-32s host %8.3f ms, %9.0f flop\n", slow[j], r.label, r.hostMs,
                   r.flops);
    }
    m_records.clear();
    m_used = 0;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr double kSlowHostMs = 1.0;
  static constexpr size_t kSlowListed = 12;
  struct Record {
    const char* label;
    cudaEvent_t start, stop;
    double flops;
    double hostMs;  ///< host time from begin to end (queueing, and whatever the calls inside waited for)
    bool side;      ///< beside the main lane (begin's `side`)
  };
  cudaEvent_t record(cudaStream_t s) {
    if (m_used == m_pool.size()) {
      cudaEvent_t e = nullptr;
      TCQR_CHECK(cudaEventCreate(&e));
      m_pool.push_back(e);
    }
    cudaEvent_t e = m_pool[m_used++];
    TCQR_CHECK(cudaEventRecord(e, s));
    return e;
  }

  std::vector<cudaEvent_t> m_pool;
  size_t m_used = 0;
  std::vector<Record> m_records;
  int m_depth = 0;
  const char* m_label = "";
  double m_flops = 0;
  bool m_side = false;
  Clock::time_point m_hostStart;
  cudaEvent_t m_start = nullptr;
};

/// Brackets one operation when `trace` is non-null.
class OpTraceScope {
 public:
  OpTraceScope(OpTrace* trace, const char* label, cudaStream_t s, double flops = 0, bool side = false)
      : m_trace(trace), m_stream(s) {
    if (m_trace) m_trace->begin(label, s, flops, side);
  }
  ~OpTraceScope() {
    if (!m_trace) return;
    try {
      m_trace->end(m_stream);
    } catch (...) {  // a diagnostic must not turn an error in flight into std::terminate
    }
  }
  OpTraceScope(const OpTraceScope&) = delete;
  OpTraceScope& operator=(const OpTraceScope&) = delete;

 private:
  OpTrace* m_trace;
  cudaStream_t m_stream;
};

}  // namespace detail
}  // namespace tcqr
