// enqueue_probe.cpp - is a factorization bound by the host's launches or by the GPU? TensorCoreHouseholderQR's
// computeOnDevice() synchronises once, after its input scan, and then only queues work, so the time at which it
// returns is the time the host needed to queue everything (or until the launch queue stopped accepting work), and
// synchronize() returns when the GPU is done. A long tail between the two means that the GPU was behind the host when
// the last operation was queued; a tail of a few microseconds would mean that the GPU was waiting for launches.
//
//   enqueue_probe [--shapes 16384,8192] [--modes TF32,FP64,...] [--reps 4] [--dist normal|uniform]
//
// Device-resident input (N(0,1) as qr_bench's, or uniform on [-1, 1], generated on the host once per shape), one object per mode, the first rep
// (allocation, cuBLAS/cuSOLVER initialisation) reported separately. This is a probe, not a benchmark of speed:
// qr_bench's medians are the published times.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#include "bench_common.hpp"

using namespace tcqr_bench;

namespace {

template <typename S>
void probe(long n, tcqr::Precision mode, int reps, bool uniform) {
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  std::mt19937_64 rng(20261127 + n);
  std::uniform_real_distribution<double> ud(-1.0, 1.0);
  std::normal_distribution<double> nd;
  Mat A(n, n);
  for (long j = 0; j < n; ++j)
    for (long i = 0; i < n; ++i) A(i, j) = S(uniform ? ud(rng) : nd(rng));
  DevBuf<S> d(n * n);
  CHECK(cudaMemcpy(d.get(), A.data(), sizeof(S) * size_t(n) * size_t(n), cudaMemcpyHostToDevice));
  Eigen::TensorCoreHouseholderQR<Mat> qr;
  qr.setPrecision(mode);
  using clk = std::chrono::steady_clock;
  std::vector<double> enq, done;
  for (int rep = 0; rep <= reps; ++rep) {
    CHECK(cudaDeviceSynchronize());
    const auto t0 = clk::now();
    qr.computeOnDevice(d.get(), n, n, n);
    const auto t1 = clk::now();
    qr.synchronize();
    const auto t2 = clk::now();
    const double e = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double f = std::chrono::duration<double, std::milli>(t2 - t0).count();
    if (rep == 0) {
      std::printf("%-7s %-7s %6ld %-7s | first run (allocations): returned %8.2f ms, done %8.2f ms\n",
                  sizeof(S) == 4 ? "float" : "double", tcqr::precisionName(mode), n, uniform ? "uniform" : "normal",
                  e, f);
      continue;
    }
    enq.push_back(e);
    done.push_back(f);
  }
  const double me = median(enq), md = median(done);
  std::printf("%-7s %-7s %6ld %-7s | median of %d: computeOnDevice returned %8.2f ms, done %8.2f ms, tail %7.2f ms "
              "(%4.1f%%)\n",
              sizeof(S) == 4 ? "float" : "double", tcqr::precisionName(mode), n, uniform ? "uniform" : "normal", reps,
              me, md, md - me, 100.0 * (md - me) / md);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) try {
  std::vector<long> sizes{16384, 8192, 4096};
  std::vector<std::string> modes{"FP32", "TF32x3", "TF32", "FP16", "FP64"};
  int reps = 4;
  bool uniform = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--shapes" || a == "--modes" || a == "--reps" || a == "--dist") && i + 1 >= argc) {
      std::fprintf(stderr, "enqueue_probe: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--shapes") {
      sizes.clear();
      for (const std::string& s : splitList(argv[++i])) sizes.push_back(std::stol(s));
    } else if (a == "--modes") {
      modes = splitList(argv[++i]);
    } else if (a == "--reps") {
      reps = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--dist") {
      const std::string v = argv[++i];
      if (v != "normal" && v != "uniform") {
        std::fprintf(stderr, "enqueue_probe: --dist expects normal or uniform\n");
        return 2;
      }
      uniform = v == "uniform";
    } else {
      std::printf("usage: enqueue_probe [--shapes N,N,...] [--modes FP32,TF32x3,FP16x3,TF32,FP16,BF16,FP64,FP64Emulated] [--reps R] "
                  "[--dist normal|uniform]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  std::printf("enqueue_probe on %s, %s, commit %s; square n x n, device-resident input\n",
              currentDeviceProperties().name, utcDate().c_str(), TCQR_BENCH_COMMIT);
  for (long n : sizes)
    for (const std::string& m : modes) {
      tcqr::Precision p = tcqr::Precision::FP32;
      if (!parseModeName(m, p)) {
        std::fprintf(stderr, "enqueue_probe: unknown mode %s\n", m.c_str());
        return 2;
      }
      if (p == tcqr::Precision::FP64 || p == tcqr::Precision::FP64Emulated)
        probe<double>(n, p, reps, uniform);
      else
        probe<float>(n, p, reps, uniform);
    }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "enqueue_probe: %s\n", e.what());
  return 1;
}
