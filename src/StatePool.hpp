// StatePool.hpp - the CUDA states of destroyed objects, kept for the next object (internal; includes CUDA headers).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

// CUresult and CUcontext only: the two driver calls are fetched through the runtime (no libcuda link).
#include <cuda.h>
#include <cuda_runtime.h>

#include "CudaCheck.hpp"
#include "Tunables.hpp"
#include "tcqr/Backend.h"
#include "tcqr/Error.h"

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
/// replays the graphs its predecessor captured (docs/DESIGN.md "Destroyed objects' states"). This is what an Eigen
/// program that builds a new decomposition object in every call (`A.householderQr().solve(b)` style) needs to run at
/// the speed of a reused object.
///
/// Bounded per device: at most kMaxIdle states and 1/kBudgetShare of the device's memory (by the buffers a state
/// counts, StatePool's `bytes`; cuBLAS's and cuSOLVER's internal allocations and the graphs come on top); a state
/// larger than that is destroyed as before, and the oldest idle states make room for a newer one. release() (the public
/// tcqr::releaseCachedDeviceMemory()) destroys them, and the library's own device allocations (orRelease) free the
/// device's idle states and try once more when the device is out of memory. The pool itself is never destroyed (a
/// static destructor would run after the CUDA runtime shut down); the driver reclaims what it holds when the process
/// exits. A state is tagged with the id of the context it was made in (CudaContext::contextId): one whose context is
/// gone (cudaDeviceReset) is dropped, neither used nor freed. Thread-safe; a state is used by one object at a time.
class StatePool {
 public:
  static constexpr std::size_t kMaxIdle = 4;
  static constexpr std::size_t kBudgetShare = 8;

  static StatePool& instance() {
    static StatePool* pool = new StatePool();  // leaked on purpose (see above)
    return *pool;
  }

  /// Whether `context` is the current context of `device` (switching to it for the question). A state made in
  /// another context must not be used or freed: its context was destroyed.
  static bool contextIsCurrent(int device, unsigned long long context) noexcept {
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    if (prev != device && cudaSetDevice(device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    const bool same = context != 0 && currentContextId() == context;
    if (prev != device) cudaSetDevice(prev);
    return same;
  }

  /// Whether a state of `bytes` on `device` would be kept (so that its owner does not prepare one for nothing).
  bool accepts(int device, std::size_t bytes) noexcept {
    return statePoolEnabled() && bytes <= deviceMemory(device) / kBudgetShare;
  }

  /// The most recently kept idle state of type T made on `device` in its current context, or null.
  template <class T>
  T* take(int device) {
    if (!statePoolEnabled()) return nullptr;
    const unsigned long long context = currentContextId();  // (the caller's current device is `device`)
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

  /// A state of type T for a new owner on the current device: the most recently kept one (take), else a new one. A
  /// new state's construction is retried once after the device's idle states are freed (orRelease with anyError).
  /// Without a usable device nothing is taken or retried: T's constructor reports the missing device.
  template <class T>
  static std::unique_ptr<T> takeOrMake() {
    if (!cudaDeviceAvailable()) return std::unique_ptr<T>(new T());
    int device = 0;
    TCQR_CHECK(cudaGetDevice(&device));
    if (T* s = instance().take<T>(device)) return std::unique_ptr<T>(s);
    return std::unique_ptr<T>(orRelease([] { return new T(); }, true));
  }

  /// Keeps `state` (made on `device` in `context`, holding `bytes` of device memory, ready for a new owner) if the
  /// bounds allow, else destroys it; may destroy older idle states of the device to make room.
  template <class T>
  void give(T* state, int device, unsigned long long context, std::size_t bytes) noexcept {
    if (context == 0 || !accepts(device, bytes)) {
      delete state;
      return;
    }
    const std::size_t budget = deviceMemory(device) / kBudgetShare;
    std::vector<Entry> evicted;
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

  /// The device memory the idle states of `device` hold (what release(device) would free; CudaQRState::skipsMissed).
  std::size_t idleBytes(int device) noexcept {
    std::lock_guard<std::mutex> lock(m_mutex);
    std::size_t bytes = 0;
    for (const Entry& e : m_idle)
      if (e.device == device) bytes += e.bytes;
    return bytes;
  }

  /// Destroys the idle states of `device` (negative: of every device); returns the bytes of device memory they held.
  std::size_t release(int device = -1) noexcept {
    std::vector<Entry> mine;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      if (device < 0) {
        mine.swap(m_idle);
      } else {
        try {
          for (size_t i = 0; i < m_idle.size();) {
            if (m_idle[i].device != device) {
              ++i;
              continue;
            }
            mine.push_back(m_idle[i]);
            m_idle.erase(m_idle.begin() + static_cast<std::ptrdiff_t>(i));
          }
        } catch (...) {  // (out of host memory: what was moved is freed below)
        }
      }
    }
    std::size_t bytes = 0;
    for (const Entry& e : mine) bytes += destroyEntry(e);
    return bytes;
  }

  /// f(), and once more after freeing the current device's idle states if it threw an out-of-memory tcqr::Error:
  /// memory kept for later objects must not make a device allocation of the library fail. `anyError`: after any
  /// tcqr::Error (for creating handles: cusolverDnCreate reports a device out of memory as
  /// CUSOLVER_STATUS_INTERNAL_ERROR, seen on the H200 with cuSOLVER of CUDA 13.0).
  template <class F>
  static auto orRelease(F&& f, bool anyError = false) -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      int device = 0;
      if (!(anyError || e.isOutOfMemory()) || cudaGetDevice(&device) != cudaSuccess || instance().release(device) == 0)
        throw;
    }
    return f();
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
  /// Destroys e's state if its context is still its device's; returns the bytes freed. (A state of a destroyed
  /// context is dropped: its handles and memory went with the context.)
  static std::size_t destroyEntry(const Entry& e) noexcept {
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (prev != e.device && cudaSetDevice(e.device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    std::size_t freed = 0;
    if (e.context != 0 && currentContextId() == e.context) {  // (destroyed with its own device current)
      e.destroy(e.object);
      freed = e.bytes;
    }
    if (prev != e.device) cudaSetDevice(prev);
    return freed;
  }
  /// Total memory of `device` in bytes (queried once per device; 0 when unknown, which keeps nothing).
  std::size_t deviceMemory(int device) noexcept {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      for (const auto& d : m_memory)
        if (d.first == device) return d.second;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    std::lock_guard<std::mutex> lock(m_mutex);
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

/// The end of a pooled state's owner (PooledCudaQRState, PooledCudaTallSkinnyState): the state goes to StatePool,
/// recycled (T::recycle), where the pool takes it; it is dropped where its context is gone (cudaDeviceReset took its
/// handles and memory along); otherwise it stays in `s`, whose owner then destroys it as before.
template <class T>
void giveToPool(std::unique_ptr<T>& s) noexcept {
  if (!s) return;
  const int device = s->device();
  const unsigned long long context = s->contextId();
  if (context != 0 && !StatePool::contextIsCurrent(device, context)) {
    (void)s.release();
    return;
  }
  StatePool& pool = StatePool::instance();
  // (recycle() frees no device memory that deviceBytes() counts: a CUDA state's look-ahead lanes go, but their
  // workspaces stay for the next object's lanes.)
  const std::size_t bytes = s->deviceBytes();
  if (context == 0 || !pool.accepts(device, bytes) || !s->recycle()) return;
  pool.give(s.release(), device, context, bytes);
}

}  // namespace detail
}  // namespace tcqr
