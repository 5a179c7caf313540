// host_memory_probe.cpp - what the first write to fresh host memory costs, by memset and by a device-to-host copy,
// with 4 KiB pages and with the library's huge-page advice (tcqr::detail::adviseFreshHostMemory: madvise
// MADV_HUGEPAGE; TCQR_HUGEPAGE_RESULTS=0 makes the "yes" rows the same as the "no" ones), against a copy into memory
// already written. The question behind that advice: a householderQ() product returns a new matrix, and its first
// write is the device-to-host copy. A probe, not a benchmark of the library.
//
//   host_memory_probe [--mib 256] [--reps 3]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <cuda_runtime.h>

#include <tcqr/detail/HostMemory.h>

namespace {

double nowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::string firstLine(const char* path) {
  char buf[256] = {0};
  if (FILE* f = std::fopen(path, "r")) {
    if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long mib = 256;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--mib") mib = std::atol(argv[i + 1]);
    else if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[i + 1]);
  }
  const std::size_t n = std::size_t(mib) << 20;
  std::printf("host_memory_probe: %ld MiB; transparent huge pages: enabled %s, defrag %s\n", mib,
              firstLine("/sys/kernel/mm/transparent_hugepage/enabled").c_str(),
              firstLine("/sys/kernel/mm/transparent_hugepage/defrag").c_str());
  void* d = nullptr;
  check(cudaMalloc(&d, n), "cudaMalloc");
  check(cudaMemset(d, 1, n), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  // Written with nonzero bytes: malloc + memset(0) may be compiled into calloc, which leaves fresh pages unwritten.
  auto* warm = static_cast<unsigned char*>(std::malloc(n));
  std::memset(warm, 1, n);
  for (int rep = 0; rep < reps; ++rep) {
    for (int advise = 0; advise < 2; ++advise) {
      auto* p = static_cast<unsigned char*>(std::malloc(n));
      const double t0 = nowMs();
      if (advise) tcqr::detail::adviseFreshHostMemory(p, n);
      std::memset(p, 1, n);
      const double t1 = nowMs();
      volatile unsigned char sink = p[n / 2];  // keeps the memset
      (void)sink;
      std::free(p);
      auto* q = static_cast<unsigned char*>(std::malloc(n));
      const double t2 = nowMs();
      if (advise) tcqr::detail::adviseFreshHostMemory(q, n);
      check(cudaMemcpy(q, d, n, cudaMemcpyDeviceToHost), "cudaMemcpy (fresh)");
      const double t3 = nowMs();
      std::free(q);
      const double t4 = nowMs();
      check(cudaMemcpy(warm, d, n, cudaMemcpyDeviceToHost), "cudaMemcpy (written)");
      const double t5 = nowMs();
      std::printf("rep %d, huge-page advice %s: memset fresh %7.1f ms | D2H fresh %7.1f ms | free %5.1f ms | "
                  "D2H written %6.1f ms\n",
                  rep, advise ? "yes" : "no ", t1 - t0, t3 - t2, t4 - t3, t5 - t4);
    }
  }
  std::free(warm);
  check(cudaFree(d), "cudaFree");
  return 0;
}
