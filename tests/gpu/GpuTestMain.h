// GpuTestMain.h - the main() of every GPU test program (tests/gpu/test_*.cpp, after DOCTEST_CONFIG_IMPLEMENT and
// doctest.h), and the device helpers they share (DeviceArray, freeDeviceMemory). main() exits 77 (CTest:
// SKIP_RETURN_CODE, reported as skipped) when no CUDA device is usable, otherwise names the device, so that every log
// says which card ran it, and runs doctest with the command line. Test cases whose names contain "two devices" are
// filtered out on a machine with fewer than two devices, so that doctest's summary counts them as skipped.
#ifndef TCQR_TESTS_GPU_GPUTESTMAIN_H
#define TCQR_TESTS_GPU_GPUTESTMAIN_H

#include <cstddef>
#include <cstdio>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <tcqr/Backend.h>

namespace tcqr_test {

/// Owning device allocation, freed on scope exit (also when a REQUIRE throws); p is null when cudaMalloc failed.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  explicit DeviceArray(size_t count) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(T)) != cudaSuccess) {
      cudaGetLastError();
      p = nullptr;
    }
  }
  ~DeviceArray() {
    if (p) cudaFree(p);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

/// Free device memory in bytes (cudaMemGetInfo).
inline size_t freeDeviceMemory() {
  size_t freeBytes = 0, totalBytes = 0;
  cudaMemGetInfo(&freeBytes, &totalBytes);
  return freeBytes;
}

inline int runGpuTests(int argc, char** argv) {
  if (!tcqr::cudaDeviceAvailable()) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  int dev = 0;
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
    std::printf("CUDA device %d: %s, %.1f GiB\n", dev, prop.name, double(prop.totalGlobalMem) / (1 << 30));
  doctest::Context context;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    cudaGetLastError();
    context.addFilter("test-case-exclude", "*two devices*");
  }
  context.applyCommandLine(argc, argv);
  return context.run();
}

}  // namespace tcqr_test

#define TCQR_GPU_TEST_MAIN() \
  int main(int argc, char** argv) { return ::tcqr_test::runGpuTests(argc, argv); }

#endif  // TCQR_TESTS_GPU_GPUTESTMAIN_H
