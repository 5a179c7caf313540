// StatePool.hpp - the CUDA states of destroyed objects, kept for the next object (internal; includes CUDA headers).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include <cuda.h>  // CUresult and CUcontext only: the two driver calls are fetched through the runtime (no libcuda link)
#include <cuda_runtime.h>

#include "Tunables.hpp"

namespace tcqr {
namespace detail {

/// The unique id (cuCtxGetId) of the CUDA context current on the calling thread, making the current device's primary
/// context current first if none is; 0 when it cannot be told. A pooled state belongs to the context it was made in:
/// after cudaDeviceReset() that context is gone, and so are the handles, streams and memory of the state.
inline unsigned long long currentContextId() noexcept {
  using GetCurrent = CUresult (*)(CUcontext*);
  using GetId = CUresult (*)(CUcontext, unsigned long long*);
  struct Fns {
    GetCurrent current = nullptr;
    GetId id = nullptr;
  };
  static const Fns fns = [] {
    Fns f;
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      f.current = reinterpret_cast<GetCurrent>(p);
    p = nullptr;
    q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetId", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      f.id = reinterpret_cast<GetId>(p);
    cudaGetLastError();  // (only these queries' own errors)
    return f;
  }();
  if (fns.current == nullptr || fns.id == nullptr) return 0;
  CUcontext c = nullptr;
  if (fns.current(&c) != CUDA_SUCCESS) return 0;
  if (c == nullptr) {  // no runtime call on this thread yet: bind the current device's primary context
    if (cudaFree(nullptr) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (fns.current(&c) != CUDA_SUCCESS || c == nullptr) return 0;
  }
  unsigned long long id = 0;
  return fns.id(c, &id) == CUDA_SUCCESS ? id : 0;
}

/// Whether destroyed objects' states are kept (TCQR_POOL=0: no; read once per process).
inline bool statePoolEnabled() {
  static const bool on = envIndex("TCQR_POOL", 1) != 0;
  return on;
}

/// \internal
/// Destroyed objects' CUDA states (handles, streams, device buffers, captured graphs), kept so that the next object
/// of the same kind on the same device starts from them instead of creating and allocating everything again, and
/// replays the graphs its predecessor captured (docs/DESIGN.md "Objects share their predecessors' states"). This is
/// what an Eigen program that builds a new decomposition object in every call (`A.householderQr().solve(b)` style)
/// needs to run at the speed of a reused object.
///
/// Bounded per device: at most kMaxIdle states and 1/kBudgetShare of the device's memory; a state larger than that
/// is destroyed as before, and the oldest idle states make room for a newer one. release() (the public
/// tcqr::releaseCachedDeviceMemory()) destroys them all, and the states' own allocations call it and try once more
/// when the device is out of memory. The pool itself is never destroyed (a static destructor would run after the CUDA
/// runtime shut down); the driver reclaims what it holds when the process exits. Thread-safe; a state is used by one
/// object at a time.
class StatePool {
 public:
  static constexpr std::size_t kMaxIdle = 4;
  static constexpr std::size_t kBudgetShare = 8;

  static StatePool& instance() {
    static StatePool* pool = new StatePool();  // leaked on purpose (see above)
    return *pool;
  }

  /// The most recently kept idle state of type T made on `device` in the current context, or null.
  template <class T>
  T* take(int device) {
    if (!statePoolEnabled()) return nullptr;
    const unsigned long long context = currentContextId();
    if (context == 0) return nullptr;
    std::lock_guard<std::mutex> lock(m_mutex);
    for (size_t i = m_idle.size(); i-- > 0;) {
      Entry& e = m_idle[i];
      if (e.device != device) continue;
      if (e.context != context) {  // its context was destroyed (cudaDeviceReset): nothing of it can be used or freed
        m_idle.erase(m_idle.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (e.type != typeTag<T>()) continue;
      T* state = static_cast<T*>(e.object);
      m_idle.erase(m_idle.begin() + static_cast<std::ptrdiff_t>(i));
      return state;
    }
    return nullptr;
  }

  /// Keeps `state` (made on `device`, holding `bytes` of device memory, ready for a new owner) if the bounds allow,
  /// else destroys it; may destroy older idle states of the device to make room.
  template <class T>
  void give(T* state, int device, std::size_t bytes) noexcept {
    const unsigned long long context = statePoolEnabled() ? currentContextId() : 0;
    const std::size_t budget = context != 0 ? deviceMemory(device) / kBudgetShare : 0;
    std::vector<Entry> evicted;
    if (context == 0 || bytes > budget) {
      delete state;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      try {
        std::size_t held = 0, count = 0;
        for (const Entry& e : m_idle)
          if (e.device == device) held += e.bytes, ++count;
        for (size_t i = 0; i < m_idle.size() && (count >= kMaxIdle || held + bytes > budget);) {
          if (m_idle[i].device != device) {
            ++i;
            continue;
          }
          held -= m_idle[i].bytes;
          --count;
          evicted.push_back(m_idle[i]);
          m_idle.erase(m_idle.begin() + static_cast<std::ptrdiff_t>(i));
        }
        m_idle.push_back(Entry{typeTag<T>(), device, context, bytes, state, &destroyAs<T>});
        state = nullptr;
      } catch (...) {  // (a vector that could not grow: the state is destroyed instead)
      }
    }
    delete state;
    for (const Entry& e : evicted) destroyEntry(e);
  }

  /// Destroys every idle state (of every device); returns the bytes of device memory they held.
  std::size_t release() noexcept {
    std::vector<Entry> all;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      all.swap(m_idle);
    }
    std::size_t bytes = 0;
    for (const Entry& e : all) bytes += destroyEntry(e);
    return bytes;
  }

 private:
  struct Entry {
    const void* type;
    int device;
    unsigned long long context;
    std::size_t bytes;
    void* object;
    void (*destroy)(void*);
  };
  template <class T>
  static const void* typeTag() {
    static const char tag = 0;
    return &tag;
  }
  template <class T>
  static void destroyAs(void* p) {
    delete static_cast<T*>(p);
  }
  /// Destroys e's state if its context is still the device's; returns the bytes freed. (A state of a destroyed
  /// context is dropped: its handles and memory went with the context.)
  static std::size_t destroyEntry(const Entry& e) noexcept {
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    if (prev != e.device && cudaSetDevice(e.device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    std::size_t freed = 0;
    if (currentContextId() == e.context) {
      e.destroy(e.object);
      freed = e.bytes;
    }
    if (prev >= 0 && prev != e.device) cudaSetDevice(prev);
    return freed;
  }
  /// Total memory of `device` in bytes (queried once per device; 0 when unknown, which keeps nothing).
  std::size_t deviceMemory(int device) noexcept {
    std::lock_guard<std::mutex> lock(m_mutex);
    for (const auto& d : m_memory)
      if (d.first == device) return d.second;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    try {
      m_memory.emplace_back(device, prop.totalGlobalMem);
    } catch (...) {
    }
    return prop.totalGlobalMem;
  }

  std::mutex m_mutex;
  std::vector<Entry> m_idle;  // oldest first
  std::vector<std::pair<int, std::size_t>> m_memory;
};

}  // namespace detail
}  // namespace tcqr
