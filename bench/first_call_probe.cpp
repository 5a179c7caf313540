// first_call_probe.cpp - what does a program pay for its first factorizations, and for a new object per call?
// qr_bench times warm objects (their timed runs are graph replays); an Eigen program that swaps in
// TensorCoreHouseholderQR often factors once, or builds a new object in every call of a function. This probe times,
// in one process, device-resident (computeOnDevice + synchronize, the input restored untimed before each call):
//   - the CUDA context's creation (cudaFree(0)), reported alone;
//   - object 1: its first `--calls` factorizations, then its destruction;
//   - object 2, made after object 1 is gone: its first calls (it takes over object 1's state, with its buffers and
//     graphs, unless TCQR_POOL=0: tcqr::releaseCachedDeviceMemory);
//   - `--calls` times a new object per call: construction, one factorization, destruction, timed together;
//   - cuSOLVER geqrf: the first call including cusolverDnCreate, bufferSize and the workspace's cudaMalloc, then
//     further calls on the same handle and workspace; and `--calls` times a new handle and workspace per call.
// `--order` says which of the two goes first in the process (the first one also pays for loading what both share,
// such as cuBLAS's kernels). Run one process per configuration. A probe, not a benchmark: qr_bench's medians are
// the published steady-state times.
//
//   first_call_probe --mode FP16x3 --m 4096 [--n 4096] [--calls 3] [--order ours|cusolver]
//   first_call_probe --tall-skinny --mode FP32|FP64 --m 1048576 --n 64   (TensorCoreTallSkinnyQR instead, R and thin
//                                                                          Q; the mode only picks the scalar type)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#include "bench_common.hpp"

using namespace tcqr_bench;

namespace {

using clk = std::chrono::steady_clock;

double msSince(clk::time_point t0) { return std::chrono::duration<double, std::milli>(clk::now() - t0).count(); }

std::string joinMs(const std::vector<double>& t) {
  std::string s;
  char buf[32];
  for (size_t i = 0; i < t.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.2f", i ? " / " : "", t[i]);
    s += buf;
  }
  return s;
}

template <typename S>
void run(tcqr::Precision mode, long m, long n, int calls, bool oursFirst, bool tallSkinny) {
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  using QR = Eigen::TensorCoreHouseholderQR<Mat>;
  using V = Vendor<S>;
  const long count = m * n;
  DevBuf<S> A0(count + (count & 1)), work(count);
  {
    curandGenerator_t g = nullptr;
    CHECK(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    CHECK(curandSetPseudoRandomGeneratorSeed(g, 20261128));
    CHECK(V::normal(g, A0.get(), size_t(count + (count & 1))));
    CHECK(curandDestroyGenerator(g));
  }
  CHECK(cudaDeviceSynchronize());
  const auto restore = [&] {
    CHECK(cudaMemcpy(work.get(), A0.get(), sizeof(S) * size_t(count), cudaMemcpyDeviceToDevice));
    CHECK(cudaDeviceSynchronize());
  };
  const char* type = sizeof(S) == 4 ? "float" : "double";
  const char* modeName = tcqr::precisionName(mode);

  const auto ours = [&] {
    for (int obj = 1; obj <= 2; ++obj) {
      std::vector<double> t;
      double destroyMs = 0;
      {
        auto qr = std::make_unique<QR>();
        qr->setBackend(tcqr::Backend::Cuda).setPrecision(mode);
        for (int c = 0; c < calls; ++c) {
          restore();
          const auto t0 = clk::now();
          qr->computeOnDevice(work.get(), m, n, m);
          qr->synchronize();
          t.push_back(msSince(t0));
          if (qr->info() != Eigen::Success) std::printf("  (ours: info() != Success)\n");
        }
        const auto t0 = clk::now();
        qr.reset();
        destroyMs = msSince(t0);
      }
      std::printf("%s %s %ld x %ld | ours, object %d: calls %s ms; destruction %.2f ms\n", type, modeName, m, n, obj,
                  joinMs(t).c_str(), destroyMs);
    }
    std::vector<double> t;
    for (int c = 0; c < calls; ++c) {
      restore();
      const auto t0 = clk::now();
      {
        QR qr;
        qr.setBackend(tcqr::Backend::Cuda).setPrecision(mode);
        qr.computeOnDevice(work.get(), m, n, m);
        qr.synchronize();
      }
      t.push_back(msSince(t0));
    }
    std::printf("%s %s %ld x %ld | ours, a new object per call (construct, factor, destroy): %s ms\n", type, modeName,
                m, n, joinMs(t).c_str());
  };

  // cuSOLVER geqrf through the 32-bit API (int workspace size), as qr_bench's baseline at these sizes.
  const auto vendor = [&] {
    if (m > 2147483647L || n > 2147483647L) {
      std::printf("%s %ld x %ld | cuSOLVER: skipped (dimensions above int)\n", type, m, n);
      return;
    }
    const auto oneHandle = [&](int repeat, std::vector<double>& t) {
      restore();
      auto t0 = clk::now();
      cusolverDnHandle_t h = nullptr;
      CHECK(cusolverDnCreate(&h));
      int lwork = 0;
      CHECK(V::geqrfBufferSize(h, int(m), int(n), work.get(), int(m), &lwork));
      S* ws = nullptr;
      S* tau = nullptr;
      int* info = nullptr;
      CHECK(cudaMalloc(&ws, sizeof(S) * size_t(std::max(lwork, 1))));
      CHECK(cudaMalloc(&tau, sizeof(S) * size_t(std::min(m, n))));
      CHECK(cudaMalloc(&info, sizeof(int)));
      for (int c = 0; c < repeat; ++c) {
        if (c > 0) {
          restore();
          t0 = clk::now();
        }
        CHECK(V::geqrf(h, int(m), int(n), work.get(), int(m), tau, ws, lwork, info));
        CHECK(cudaDeviceSynchronize());
        if (c + 1 < repeat) t.push_back(msSince(t0));
      }
      CHECK(cudaFree(ws));
      CHECK(cudaFree(tau));
      CHECK(cudaFree(info));
      CHECK(cusolverDnDestroy(h));
      t.push_back(msSince(t0));  // the last call includes the frees and the handle's destruction
    };
    std::vector<double> t;
    oneHandle(calls, t);
    std::printf("%s %ld x %ld | %s: first call (with handle, bufferSize, workspace) and later calls: %s ms "
                "(the last with the frees and cusolverDnDestroy)\n",
                type, m, n, V::geqrfName, joinMs(t).c_str());
    std::vector<double> u;
    for (int c = 0; c < calls; ++c) oneHandle(1, u);
    std::printf("%s %ld x %ld | %s, a new handle and workspace per call: %s ms\n", type, m, n, V::geqrfName,
                joinMs(u).c_str());
  };

  if (tallSkinny) {  // TensorCoreTallSkinnyQR, R and the thin Q (no cuSOLVER line: tsqr_bench compares those)
    using TS = Eigen::TensorCoreTallSkinnyQR<Mat>;
    const unsigned what = tcqr::ComputeThinQ;
    for (int obj = 1; obj <= 2; ++obj) {
      std::vector<double> t;
      TS ts;
      for (int c = 0; c < calls; ++c) {
        restore();
        const auto t0 = clk::now();
        ts.computeOnDevice(work.get(), m, n, m, nullptr, what);
        ts.synchronize();
        t.push_back(msSince(t0));
      }
      std::printf("%s %ld x %ld | TensorCoreTallSkinnyQR (R, thin Q), object %d: calls %s ms\n", type, m, n, obj,
                  joinMs(t).c_str());
    }
    std::vector<double> t;
    for (int c = 0; c < calls; ++c) {
      restore();
      const auto t0 = clk::now();
      {
        TS ts;
        ts.computeOnDevice(work.get(), m, n, m, nullptr, what);
        ts.synchronize();
      }
      t.push_back(msSince(t0));
    }
    std::printf("%s %ld x %ld | TensorCoreTallSkinnyQR (R, thin Q), a new object per call: %s ms\n", type, m, n,
                joinMs(t).c_str());
  } else if (oursFirst) {
    ours();
    vendor();
  } else {
    vendor();
    ours();
  }
  std::printf("%s %s %ld x %ld | releaseCachedDeviceMemory() freed %.1f MiB\n", type, modeName, m, n,
              double(tcqr::releaseCachedDeviceMemory()) / (1 << 20));
}

}  // namespace

int main(int argc, char** argv) try {
  std::string modeArg = "FP16x3";
  long m = 4096, n = -1;
  int calls = 3;
  bool oursFirst = true, tallSkinny = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--mode" && hasValue) {
      modeArg = argv[++i];
    } else if (a == "--m" && hasValue) {
      m = std::stol(argv[++i]);
    } else if (a == "--n" && hasValue) {
      n = std::stol(argv[++i]);
    } else if (a == "--calls" && hasValue) {
      calls = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--tall-skinny") {
      tallSkinny = true;
    } else if (a == "--order" && hasValue) {
      const std::string v = argv[++i];
      if (v != "ours" && v != "cusolver") {
        std::fprintf(stderr, "first_call_probe: --order expects ours or cusolver\n");
        return 2;
      }
      oursFirst = v == "ours";
    } else {
      std::printf("usage: first_call_probe [--mode FP16x3|FP32|TF32x3|TF32|FP16|BF16|FP64|FP64Emulated] [--m M] "
                  "[--n N] [--calls C] [--order ours|cusolver] [--tall-skinny]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (n < 0) n = m;
  if (m <= 0 || n <= 0) {
    std::fprintf(stderr, "first_call_probe: m and n must be positive\n");
    return 2;
  }
  tcqr::Precision p = tcqr::Precision::FP32;
  if (!parseModeName(modeArg, p)) {
    std::fprintf(stderr, "first_call_probe: unknown mode %s\n", modeArg.c_str());
    return 2;
  }
  const auto t0 = clk::now();
  CHECK(cudaFree(nullptr));
  const double ctxMs = msSince(t0);
  const char* lazy = std::getenv("CUDA_MODULE_LOADING");
  std::printf("first_call_probe on %s, %s, commit %s; CUDA context %.2f ms; CUDA_MODULE_LOADING=%s; %s first\n",
              currentDeviceProperties().name, utcDate().c_str(), TCQR_BENCH_COMMIT, ctxMs, lazy ? lazy : "(unset)",
              oursFirst ? "ours" : "cuSOLVER");
  if (p == tcqr::Precision::FP64 || p == tcqr::Precision::FP64Emulated)
    run<double>(p, m, n, calls, oursFirst, tallSkinny);
  else
    run<float>(p, m, n, calls, oursFirst, tallSkinny);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "first_call_probe: %s\n", e.what());
  return 1;
}
