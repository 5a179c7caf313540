// FactorGraph.hpp - a factorization's queued work replayed as a CUDA graph (internal; includes CUDA headers).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "CudaCheck.hpp"

namespace tcqr {
namespace detail {

/// Captures and replays of every FactorGraph of the process, for the tests (which must see that a replay happened).
inline std::atomic<long> g_graphCaptures{0}, g_graphReplays{0};
inline long graphCaptures() noexcept { return g_graphCaptures.load(); }
inline long graphReplays() noexcept { return g_graphReplays.load(); }

/// \internal
/// Replays the recursion of a factorization whose key (shape, mode, the host's leaf choices, every buffer address
/// and tunable the queued work depends on) was seen before from a CUDA graph, instead of queueing its thousands of
/// launches one by one (CudaQRState::runFactor; docs/DESIGN.md "Graph replay"). The policy, per key:
///   - first factorization: queued directly (ranDirectly records the key as it stands afterwards: buffers may grow
///     on the way);
///   - second: queued directly again, and then also captured (capture: recorded, not run) and instantiated while the
///     GPU runs the direct work, so that the capture's host time hides behind it where the factorization is long
///     enough;
///   - later ones: launched from the instantiated graph (replay).
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

  FactorGraph() = default;
  FactorGraph(const FactorGraph&) = delete;
  FactorGraph& operator=(const FactorGraph&) = delete;
  ~FactorGraph() { clear(); }

  /// Launches the graph of `key` on `stream` and returns its host-side results; null (nothing queued) when there
  /// is no graph of `key`.
  const Host* replay(const Key& key, cudaStream_t stream) {
    Entry* e = find(key);
    if (e == nullptr) return nullptr;
    TCQR_CHECK(cudaGraphLaunch(e->exec, stream));
    ++g_graphReplays;
    e->used = ++m_clock;
    return &e->host;
  }
  /// Whether the next factorization of `key` should be captured: it was queued directly before, and no capture of
  /// it failed.
  bool shouldCapture(const Key& key) const {
    return std::find(m_seen.begin(), m_seen.end(), key) != m_seen.end() &&
           std::find(m_failed.begin(), m_failed.end(), key) == m_failed.end();
  }
  /// After a factorization of `key` was queued directly.
  void ranDirectly(Key key) { remember(m_seen, std::move(key)); }

  /// Captures what queue() queues on `stream` and instantiates it as the graph of `key`, with the host-side results
  /// host() returns afterwards. Nothing captured runs now (work queued on `stream` before is not part of the graph
  /// and runs on). Nothing else may be queued on `stream` meanwhile; the capture mode is thread-local, so other
  /// threads are not affected. Returns false where the capture or the instantiation failed (the key is then not
  /// captured again); queue()'s host-side effects are the caller's to undo.
  template <class Queue, class HostResults>
  bool capture(const Key& key, cudaStream_t stream, Queue&& queue, HostResults&& host) {
    TCQR_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      queue();
    } catch (...) {
      // An operation that cannot be captured (or any other failure) invalidates the capture; the direct run that
      // follows reports a genuine error itself.
      if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      remember(m_failed, key);
      return false;
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t s = cudaStreamEndCapture(stream, &graph);
    if (s == cudaSuccess) s = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (s != cudaSuccess) {
      cudaGetLastError();
      remember(m_failed, key);
      return false;
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
    slot->host = host();
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
  /// Graphs held (for tests).
  int size() const noexcept { return static_cast<int>(m_entries.size()); }

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
  static void remember(std::vector<Key>& keys, Key key) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) return;
    if (static_cast<int>(keys.size()) >= kGraphs) keys.erase(keys.begin());
    keys.push_back(std::move(key));
  }

  std::vector<Entry> m_entries;
  std::vector<Key> m_seen, m_failed;  // the last kGraphs keys queued directly, and whose capture failed
  std::uint64_t m_clock = 0;
};

}  // namespace detail
}  // namespace tcqr
