// GpuTestMain.h - the main() of every GPU test program (tests/gpu/test_*.cpp, after DOCTEST_CONFIG_IMPLEMENT and
// doctest.h): exits 77 (CTest: SKIP_RETURN_CODE, reported as skipped) when no CUDA device is usable, otherwise names
// the device, so that every log says which card ran it, and runs doctest with the command line.
#ifndef TCQR_TESTS_GPU_GPUTESTMAIN_H
#define TCQR_TESTS_GPU_GPUTESTMAIN_H

#include <cstdio>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <tcqr/Backend.h>

namespace tcqr_test {

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
  context.applyCommandLine(argc, argv);
  return context.run();
}

}  // namespace tcqr_test

#define TCQR_GPU_TEST_MAIN() \
  int main(int argc, char** argv) { return ::tcqr_test::runGpuTests(argc, argv); }

#endif  // TCQR_TESTS_GPU_GPUTESTMAIN_H
