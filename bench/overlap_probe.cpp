// overlap_probe.cpp - can a chain of TSQR panels run beside a large cuBLAS GEMM on the H100, and what decides it?
// A question for the recursion's look-ahead (docs/DESIGN.md, "Look-ahead"): the panels of a square factorization are
// latency-bound chains of small kernels (TCQR_TRACE: about 83 of 240 ms at 16384^2 FP64), and hiding them needs them
// to run while the trailing update's GEMMs hold the GPU. Measured in one process on the same data:
//   gemm      G products C (k x c) = A^T B, A (m x k), B (m x c), as the update's Y^T A2, on their own stream;
//   panels    P factorizations of an m x 32 device matrix (TensorCoreHouseholderQR::computeOnDevice: one TSQR
//             panel, ReconstructWY included), on another stream;
//   both      the two queued together (GEMMs first), for stream priorities equal or panels high, and with the GEMM's
//             handle limited to fewer SMs (cublasSetSmCountTarget), which leaves SMs for the panels' blocks.
// Each line reports medians of wall-clock times (host, both streams drained) and the overlap gained:
// (gemm + panels - both) / min(gemm, panels), 1 when the shorter one is hidden entirely, 0 when nothing overlaps.
//
//   overlap_probe [--precision float|double] [--gemm fp64|fp32|tf32] [--m M] [--k K] [--c C] [--gemms G]
//                 [--panels P] [--reserve 0,16,32] [--reps N]
#include <Eigen/TensorCoreQR>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"

using namespace tcqr_bench;

namespace {

struct Options {
  bool dbl = true;
  std::string gemm = "fp64";
  i64 m = 16384, k = 4096, c = 4096;
  int gemms = 2, panels = 64, reps = 5;
  std::vector<int> reserve = {0, 16, 32};
};

[[noreturn]] void usage(int code) {
  std::fprintf(stderr,
               "overlap_probe [--precision float|double] [--gemm fp64|fp32|tf32] [--m M] [--k K] [--c C] [--gemms G]\n"
               "              [--panels P] [--reserve 0,16,32] [--reps N]\n");
  std::exit(code);
}

i64 toInt(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v < 0) usage(2);
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") usage(0);
    else if (a == "--precision") {
      const std::string p = next();
      if (p != "float" && p != "double") usage(2);
      o.dbl = p == "double";
    } else if (a == "--gemm") {
      o.gemm = next();
      if (o.gemm != "fp64" && o.gemm != "fp32" && o.gemm != "tf32") usage(2);
    } else if (a == "--m") o.m = toInt(next());
    else if (a == "--k") o.k = toInt(next());
    else if (a == "--c") o.c = toInt(next());
    else if (a == "--gemms") o.gemms = int(toInt(next()));
    else if (a == "--panels") o.panels = int(toInt(next()));
    else if (a == "--reps") o.reps = int(toInt(next()));
    else if (a == "--reserve") {
      o.reserve.clear();
      for (const std::string& s : splitList(next())) o.reserve.push_back(int(toInt(s)));
    } else usage(2);
  }
  if ((o.gemm == "fp64") != o.dbl) {
    std::fprintf(stderr, "--gemm fp64 goes with --precision double, fp32/tf32 with float\n");
    usage(2);
  }
  return o;
}

double nowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename S>
int run(const Options& o) {
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  Handles h;
  const cudaDeviceProp prop = currentDeviceProperties();
  int least = 0, greatest = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));

  DevBuf<S> A(o.m * o.k), B(o.m * o.c), C(o.k * o.c), P(o.m * 32);
  CHECK(Vendor<S>::normal(h.rng, A.get(), size_t(o.m * o.k + (o.m * o.k) % 2)));
  CHECK(Vendor<S>::normal(h.rng, B.get(), size_t(o.m * o.c + (o.m * o.c) % 2)));
  CHECK(Vendor<S>::normal(h.rng, P.get(), size_t(o.m * 32)));
  h.sync();

  cudaStream_t gs = nullptr, psEqual = nullptr, psHigh = nullptr;
  CHECK(cudaStreamCreateWithPriority(&gs, cudaStreamNonBlocking, least));
  CHECK(cudaStreamCreateWithPriority(&psEqual, cudaStreamNonBlocking, least));
  CHECK(cudaStreamCreateWithPriority(&psHigh, cudaStreamNonBlocking, greatest));
  cublasHandle_t gb = nullptr;
  CHECK(cublasCreate(&gb));
  CHECK(cublasSetStream(gb, gs));
  if (o.gemm == "tf32") CHECK(cublasSetMathMode(gb, CUBLAS_TF32_TENSOR_OP_MATH));

  auto gemms = [&] {
    const S one = 1, zero = 0;
    for (int g = 0; g < o.gemms; ++g) {
      if constexpr (std::is_same_v<S, double>)
        CHECK(cublasDgemm(gb, CUBLAS_OP_T, CUBLAS_OP_N, int(o.k), int(o.c), int(o.m), &one, A.get(), int(o.m),
                          B.get(), int(o.m), &zero, C.get(), int(o.k)));
      else
        CHECK(cublasSgemm(gb, CUBLAS_OP_T, CUBLAS_OP_N, int(o.k), int(o.c), int(o.m), &one, A.get(), int(o.m),
                          B.get(), int(o.m), &zero, C.get(), int(o.k)));
    }
  };
  // (Destroyed before the streams below: it keeps the last stream it was given and waits for it when destroyed.)
  auto qrOwner = std::make_unique<Eigen::TensorCoreHouseholderQR<Mat>>();
  auto& qr = *qrOwner;
  auto panels = [&](cudaStream_t s) {
    for (int p = 0; p < o.panels; ++p) qr.computeOnDevice(P.get(), o.m, 32, o.m, s);
  };
  auto drain = [&] {
    CHECK(cudaStreamSynchronize(gs));
    CHECK(cudaStreamSynchronize(psEqual));
    CHECK(cudaStreamSynchronize(psHigh));
  };
  auto timed = [&](auto&& f) {
    std::vector<double> ms;
    for (int r = 0; r < o.reps + 1; ++r) {
      drain();
      const double t0 = nowMs();
      f();
      drain();
      if (r > 0) ms.push_back(nowMs() - t0);
    }
    return median(ms);
  };

  std::printf("# overlap_probe on %s (%d SMs), stream priorities %d (least) .. %d (greatest)\n", prop.name,
              prop.multiProcessorCount, least, greatest);
  std::printf("# %s panels %lld x 32 x %d; %s GEMM C (%lld x %lld) = A^T B over %lld rows, x %d\n",
              Vendor<S>::name, (long long)o.m, o.panels, o.gemm.c_str(), (long long)o.k, (long long)o.c,
              (long long)o.m, o.gemms);
  std::printf("%-8s %-10s %10s %10s %10s %8s %12s\n", "reserve", "priority", "gemm_ms", "panels_ms", "both_ms",
              "overlap", "gemm_TFLOP/s");
  const double panelMs = timed([&] { panels(psEqual); });
  for (int reserve : o.reserve) {
    CHECK(cublasSetSmCountTarget(gb, reserve > 0 ? prop.multiProcessorCount - reserve : 0));
    const double gemmMs = timed(gemms);
    const double flops = 2.0 * double(o.k) * double(o.c) * double(o.m) * o.gemms;
    for (int high = 0; high < 2; ++high) {
      cudaStream_t ps = high ? psHigh : psEqual;
      const double both = timed([&] {
        gemms();
        panels(ps);
      });
      const double overlap = (gemmMs + panelMs - both) / std::min(gemmMs, panelMs);
      std::printf("%-8d %-10s %10.2f %10.2f %10.2f %8.2f %12.1f\n", reserve, high ? "panels-hi" : "equal", gemmMs,
                  panelMs, both, overlap, flops / gemmMs * 1e-9);
    }
  }
  std::fflush(stdout);
  qrOwner.reset();
  CHECK(cublasSetSmCountTarget(gb, 0));
  cublasDestroy(gb);
  cudaStreamDestroy(gs);
  cudaStreamDestroy(psEqual);
  cudaStreamDestroy(psHigh);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    if (!deviceUsable()) {
      std::fprintf(stderr, "overlap_probe: no usable CUDA device\n");
      return 77;
    }
    return o.dbl ? run<double>(o) : run<float>(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap_probe: %s\n", e.what());
    return 1;
  }
}
