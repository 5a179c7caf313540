// FactorGraph.hpp - a factorization's queued work replayed as a CUDA graph (internal; includes CUDA headers).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "CudaCheck.hpp"
#include "Tunables.hpp"

namespace tcqr {
namespace detail {

/// Captures and replays of every FactorGraph of the process, for the tests (which must see that a replay happened);
/// and the look-ahead lanes' streams made on a green context (CudaContext::greenLaneStream) and the green contexts
/// the driver refused (CudaContext::greenLanesReady), likewise.
inline std::atomic<long> g_graphCaptures{0}, g_graphReplays{0}, g_greenLaneStreams{0}, g_greenContextFailures{0};
inline long graphCaptures() noexcept { return g_graphCaptures.load(); }
inline long graphReplays() noexcept { return g_graphReplays.load(); }
inline long greenLaneStreams() noexcept { return g_greenLaneStreams.load(); }
inline long greenContextFailures() noexcept { return g_greenContextFailures.load(); }

/// \internal
/// Replays the recursion of a factorization whose key (shape, mode, the host's leaf choices, every buffer address
/// and tunable the queued work depends on) was seen before from a CUDA graph, instead of queueing its thousands of
/// launches one by one (CudaQRState::factorQueued; docs/DESIGN.md "Graph replay"). The policy, per key:
///   - the first kDirectRuns factorizations: queued directly (ranDirectly counts the key as it stands afterwards:
///     buffers may grow on the way);
///   - the next one: queued directly, and then also captured (capture: recorded, not run) and instantiated;
///   - later ones: launched from the instantiated graph (replay).
/// Why not sooner: the capture and the instantiation cost host time of the order of half a factorization (H200,
/// 16384^2 FP16x3: 28-33 ms to capture 8024 nodes and 22-39 ms to instantiate them, beside a direct run whose
/// queueing alone takes 116 ms of host time for 126 ms on the GPU, so nothing hides it), which about ten replays
/// earn back (119 ms each). Two direct runs of one key are the evidence that an application repeats it; an
/// application that factors one matrix, or two, pays nothing.
/// A capture that fails (an operation that cannot be captured) is dropped and its key is not captured again; the
/// caller then queues the work directly, so a failure costs speed, never a result. Up to kGraphs graphs are kept
/// (an application alternating between a few shapes), the least recently used one is replaced.
/// Each graph carries the host-side results of its capture (`Host`, e.g. the WY block list), which the recursion
/// would otherwise have produced while queueing.
class FactorGraph {
 public:
  using Key = std::vector<std::uintptr_t>;
  using Host = std::vector<std::ptrdiff_t>;
  static constexpr int kGraphs = 4;
  static constexpr int kDirectRuns = 2;

  FactorGraph() { m_entries.reserve(kGraphs); }  // (so that adding an entry cannot throw)
  FactorGraph(const FactorGraph&) = delete;
  FactorGraph& operator=(const FactorGraph&) = delete;
  ~FactorGraph() { clear(); }

  /// Launches the graph of `key` on `stream` and returns its host-side results; null (nothing queued) when there
  /// is no graph of `key`, or when its launch failed (the graph is then dropped and its key not captured again).
  const Host* replay(const Key& key, cudaStream_t stream) {
    Entry* e = find(key);
    if (e == nullptr) return nullptr;
    if (cudaGraphLaunch(e->exec, stream) != cudaSuccess) {
      cudaGetLastError();
      TCQR_CHECK_NOTHROW(cudaGraphExecDestroy(e->exec));
      m_entries.erase(m_entries.begin() + (e - m_entries.data()));
      fail(key);
      return nullptr;
    }
    ++g_graphReplays;
    e->used = ++m_clock;
    return &e->host;
  }
  /// Whether the factorization of `key` just queued directly should also be captured: kDirectRuns of it were
  /// queued directly before, and no capture of it failed.
  bool shouldCapture(const Key& key) const {
    for (const auto& s : m_seen)
      if (s.first == key) return s.second >= kDirectRuns && !contains(m_failed, key);
    return false;
  }
  /// After a factorization of `key` was queued directly (and not captured).
  void ranDirectly(Key key) {
    for (auto& s : m_seen)
      if (s.first == key) {
        ++s.second;
        return;
      }
    if (static_cast<int>(m_seen.size()) >= kGraphs) m_seen.erase(m_seen.begin());
    m_seen.emplace_back(std::move(key), 1);
  }

  /// Captures what queue() queues on `stream` and instantiates it as the graph of `key`, with the host-side results
  /// host() returns afterwards. Nothing captured runs now (work queued on `stream` before is not part of the graph
  /// and runs on). Nothing else may be queued on `stream` meanwhile; the capture mode is thread-local, so other
  /// threads are not affected. Returns false where the capture or the instantiation failed (the key is then not
  /// captured again); queue()'s host-side effects are the caller's to undo.
  /// nodePriority: the graph keeps each kernel node's launch priority (cudaGraphInstantiateFlagUseNodePriority;
  /// captured from the launch attribute or the stream's priority) instead of running every node at the launch
  /// stream's: for the panels that run beside the look-ahead lanes' GEMMs (CudaOps::panelPriority).
  template <class Queue, class HostResults>
  bool capture(const Key& key, cudaStream_t stream, bool nodePriority, Queue&& queue, HostResults&& host) {
    const auto t0 = std::chrono::steady_clock::now();
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      fail(key);
      return false;
    }
    cudaGraph_t graph = nullptr;
    try {
      queue();
    } catch (...) {
      // An operation that cannot be captured (or any other failure) invalidates the capture; the direct run that
      // follows reports a genuine error itself.
      if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      fail(key);
      return false;
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t s = cudaStreamEndCapture(stream, &graph);
    const auto t1 = std::chrono::steady_clock::now();
    size_t nodes = 0;
    if (s == cudaSuccess) cudaGraphGetNodes(graph, nullptr, &nodes);
    if (s == cudaSuccess)
      s = cudaGraphInstantiate(&exec, graph, nodePriority ? cudaGraphInstantiateFlagUseNodePriority : 0);
    const auto t2 = std::chrono::steady_clock::now();
    if (graphReplayReport())  // TCQR_GRAPH=2
      std::fprintf(stderr, "tcqr graph: captured %zu nodes in %.2f ms, instantiated in %.2f ms\n", nodes,
                   std::chrono::duration<double, std::milli>(t1 - t0).count(),
                   std::chrono::duration<double, std::milli>(t2 - t1).count());
    if (graph) cudaGraphDestroy(graph);
    if (s != cudaSuccess) {
      cudaGetLastError();
      fail(key);
      return false;
    }
    Host results;
    try {
      results = host();
    } catch (...) {
      TCQR_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
      throw;
    }
    Entry* slot = nullptr;
    if (static_cast<int>(m_entries.size()) < kGraphs) {
      m_entries.emplace_back();
      slot = &m_entries.back();
    } else {
      slot = &*std::min_element(m_entries.begin(), m_entries.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
      TCQR_CHECK_NOTHROW(cudaGraphExecDestroy(slot->exec));
    }
    slot->key = key;
    slot->exec = exec;
    slot->host = std::move(results);
    slot->used = ++m_clock;
    ++g_graphCaptures;
    return true;
  }
  /// Forgets every graph and key.
  void clear() noexcept {
    for (Entry& e : m_entries) TCQR_CHECK_NOTHROW(cudaGraphExecDestroy(e.exec));
    m_entries.clear();
    m_seen.clear();
    m_failed.clear();
  }

 private:
  struct Entry {
    Key key;
    cudaGraphExec_t exec = nullptr;
    Host host;
    std::uint64_t used = 0;
  };
  Entry* find(const Key& key) {
    for (Entry& e : m_entries)
      if (e.key == key) return &e;
    return nullptr;
  }
  static bool contains(const std::vector<Key>& keys, const Key& key) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  }
  void fail(const Key& key) {
    if (contains(m_failed, key)) return;
    if (static_cast<int>(m_failed.size()) >= kGraphs) m_failed.erase(m_failed.begin());
    m_failed.push_back(key);
  }

  std::vector<Entry> m_entries;
  std::vector<std::pair<Key, int>> m_seen;  // the last kGraphs keys queued directly, and how often
  std::vector<Key> m_failed;                // the last kGraphs keys whose capture failed
  std::uint64_t m_clock = 0;
};

}  // namespace detail
}  // namespace tcqr
