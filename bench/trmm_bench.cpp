// trmm_bench.cpp - the library's triangular product (src/Algorithms.hpp trmmLowerAcc: TPDS'25 Algorithm 3's recursion
// or one GEMM per block row, per mode as trmmPlan chooses, or as --scheme/--cutoff force) against a full GEMM of the
// same shape in the same precision mode, and against cublas<S|D>trmm (which has no tensor-core path).
//
// C += L Z with L n x n lower triangular (explicit zeros above the diagonal) and Z n x n, device-resident: the
// operands are generated on the device once, each method is warmed up and timed with CUDA events, the median is
// reported. The conversion of operands to the mode's format is inside the timed region (it is part of every product
// the library runs). Error: ||C - C_ref||_F / ||C_ref||_F with C_ref the FP64 product of the same operands (cuBLAS
// DGEMM). This program links the library's internal headers on purpose: TRMM is not a public entry point.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <Eigen/Dense>

#include "../src/CudaOps.hpp"
#include "bench_common.hpp"

using namespace tcqr_bench;  // CHECK (throws BenchError), median, utcDate, currentDeviceProperties

namespace {

using tcqr::Precision;
using tcqr::detail::Index;
using tcqr::detail::Op;
using tcqr::detail::View;

/// Median time of `reps` runs of f after `warmup` untimed ones, each run bracketed by events on `s`. Deliberately not
/// bench_common's timeOnStream: here the stream is not drained before a timed run (f zeroes C on the stream, inside
/// the timed region) and the warm-up runs are not waited for, which is how the rows in h100-trmm.csv were measured.
template <class F>
double timeMs(cudaStream_t s, int warmup, int reps, F&& f) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a, s));
    f();
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(b));
  return median(t);
}

template <typename S>
struct Trmm;
template <>
struct Trmm<float> {
  static const char* name() { return "float"; }
  static cublasStatus_t call(cublasHandle_t h, Index n, const float* L, float* Z, float* C) {
    const float one = 1;
    return cublasStrmm_64(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, n, &one, L,
                          n, Z, n, C, n);
  }
};
template <>
struct Trmm<double> {
  static const char* name() { return "double"; }
  static cublasStatus_t call(cublasHandle_t h, Index n, const double* L, double* Z, double* C) {
    const double one = 1;
    return cublasDtrmm_64(h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, n, n, &one,
                          L, n, Z, n, C, n);
  }
};

const char* schemeName(tcqr::detail::TrmmScheme s) {
  return s == tcqr::detail::TrmmScheme::BlockRows ? "rows" : "recursive";
}

struct Options {
  std::vector<Index> sizes{4096, 8192, 16384};
  int reps = 7, warmup = 2;
  bool planGiven = false;  // --scheme/--cutoff given: that plan for every mode; else each mode's trmmPlan
  Index cutoff = 512;
  tcqr::detail::TrmmScheme scheme = tcqr::detail::TrmmScheme::Recursive;
  std::string csv = "bench/results/h100-trmm.csv";
  std::string commit = TCQR_BENCH_COMMIT;
};

/// The operands of one size, in double on the host, and their FP64 product (cuBLAS DGEMM on the device).
struct Problem {
  Index n;
  Eigen::MatrixXd L, Z, ref;
  double refNorm;
};

Problem makeProblem(Index n, cublasHandle_t blas) {
  Problem p{n, Eigen::MatrixXd::Zero(n, n), Eigen::MatrixXd(n, n), Eigen::MatrixXd(n, n), 0};
  std::mt19937_64 rng(20261126 + n);
  std::normal_distribution<double> nd;
  for (Index j = 0; j < n; ++j)
    for (Index i = j; i < n; ++i) p.L(i, j) = nd(rng) / std::sqrt(double(n));
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i < n; ++i) p.Z(i, j) = nd(rng);
  const size_t bytes = sizeof(double) * n * n;
  double *dL, *dZ, *dR;
  CHECK(cudaMalloc(&dL, bytes));
  CHECK(cudaMalloc(&dZ, bytes));
  CHECK(cudaMalloc(&dR, bytes));
  CHECK(cudaMemcpy(dL, p.L.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dZ, p.Z.data(), bytes, cudaMemcpyHostToDevice));
  const double one = 1, zero = 0;
  CHECK(cublasDgemm_64(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, dL, n, dZ, n, &zero, dR, n));
  CHECK(cudaDeviceSynchronize());  // the handle's stream is non-blocking: cudaMemcpy would not wait for it
  CHECK(cudaMemcpy(p.ref.data(), dR, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dL));
  CHECK(cudaFree(dZ));
  CHECK(cudaFree(dR));
  p.refNorm = p.ref.norm();
  return p;
}

template <typename S>
void run(const Options& o, const Problem& prob, Precision mode, cublasHandle_t blas, cudaStream_t stream,
         const std::string& card, const std::string& date) {
  using MatS = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const Index n = prob.n;
  // The operands rounded to S once: the reference is the exact product of what the device sees, to FP64 rounding,
  // up to that rounding of the double-precision operands (below FP32's unit roundoff relative to the result).
  const MatS L = prob.L.template cast<S>(), Z = prob.Z.template cast<S>();
  const size_t bytes = sizeof(S) * n * n;
  S *dL, *dZ, *dC;
  CHECK(cudaMalloc(&dL, bytes));
  CHECK(cudaMalloc(&dZ, bytes));
  CHECK(cudaMalloc(&dC, bytes));
  CHECK(cudaMemcpy(dL, L.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dZ, Z.data(), bytes, cudaMemcpyHostToDevice));

  tcqr::detail::ConversionWork conv;
  conv.buffer.reserve(tcqr::detail::conversionBytes(mode, n, n));
  tcqr::detail::CudaOps<S> ops{blas, nullptr, nullptr, stream, nullptr, nullptr, nullptr, mode, &conv};
  View<S> vL(dL, n, n, n), vZ(dZ, n, n, n), vC(dC, n, n, n);

  auto error = [&]() {
    MatS C(n, n);
    CHECK(cudaMemcpy(C.data(), dC, bytes, cudaMemcpyDeviceToHost));
    return (C.template cast<double>() - prob.ref).norm() / prob.refNorm;
  };

  const double flops = double(n) * n * n;  // TRMM: n^3 multiply-adds / 2 * 2
  auto zeroC = [&] { CHECK(cudaMemsetAsync(dC, 0, bytes, stream)); };

  const tcqr::detail::TrmmPlan plan =
      o.planGiven ? tcqr::detail::TrmmPlan{o.scheme, o.cutoff} : tcqr::detail::trmmPlan(mode);
  const double tTrmm = timeMs(stream, o.warmup, o.reps, [&] {
    zeroC();
    tcqr::detail::trmmLowerAcc(ops, Op::N, S(1), vL, vZ, vC, plan);
  });
  const double eTrmm = error();
  const double tGemm = timeMs(stream, o.warmup, o.reps, [&] {
    zeroC();
    ops.gemm(Op::N, Op::N, S(1), vL, vZ, S(1), vC);
  });
  const double eGemm = error();
  const double tVendor = timeMs(stream, o.warmup, o.reps, [&] {
    zeroC();
    CHECK(Trmm<S>::call(blas, n, dL, dZ, dC));
  });
  const double eVendor = error();

  std::printf("%-6s %-8s %6lld | %s TRMM %9.3f ms %7.1f TF/s err %.2e | GEMM %9.3f ms err %.2e | x%.2f | "
              "cublas trmm %9.3f ms err %.2e | x%.2f\n",
              Trmm<S>::name(), tcqr::precisionName(mode), (long long)n, schemeName(plan.scheme), tTrmm, flops / tTrmm * 1e-9, eTrmm, tGemm,
              eGemm, tGemm / tTrmm, tVendor, eVendor, tVendor / tTrmm);
  std::fflush(stdout);
  if (!o.csv.empty()) {
    std::ifstream probe(o.csv);
    const bool fresh = !probe.good() || probe.peek() == std::ifstream::traits_type::eof();
    probe.close();
    std::ofstream f(o.csv, std::ios::app);
    if (fresh)
      f << "card,date,commit,precision,mode,n,cutoff,trmm_ms,trmm_tflops,trmm_err,gemm_ms,gemm_err,speedup_vs_gemm,"
           "cublas_trmm_ms,cublas_trmm_err,speedup_vs_cublas_trmm,scheme\n";
    f << card << ',' << date << ',' << o.commit << ',' << Trmm<S>::name() << ','
      << tcqr::precisionName(mode) << ',' << n << ',' << plan.cutoff << ',' << tTrmm << ',' << flops / tTrmm * 1e-9
      << ',' << eTrmm << ',' << tGemm << ',' << eGemm << ',' << tGemm / tTrmm << ',' << tVendor << ',' << eVendor
      << ',' << tVendor / tTrmm << ',' << schemeName(plan.scheme) << '\n';
  }
  CHECK(cudaFree(dL));
  CHECK(cudaFree(dZ));
  CHECK(cudaFree(dC));
}

}  // namespace

// A failed CHECK throws BenchError: the function-try-block below reports it and exits with status 1.
int main(int argc, char** argv) try {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "trmm_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      std::string v = next();
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        o.sizes.push_back(std::stoll(v.substr(p, q - p)));
        p = q + 1;
      }
    } else if (a == "--reps") {
      o.reps = std::stoi(next());
    } else if (a == "--warmup") {
      o.warmup = std::stoi(next());
    } else if (a == "--cutoff") {
      o.cutoff = std::stoll(next());
      o.planGiven = true;
    } else if (a == "--scheme") {
      const std::string v = next();
      if (v == "recursive") {
        o.scheme = tcqr::detail::TrmmScheme::Recursive;
      } else if (v == "rows") {
        o.scheme = tcqr::detail::TrmmScheme::BlockRows;
      } else if (v == "auto") {
        o.planGiven = false;
        continue;
      } else {
        std::fprintf(stderr, "trmm_bench: --scheme expects auto, recursive or rows\n");
        return 2;
      }
      o.planGiven = true;
    } else if (a == "--csv") {
      o.csv = next();
    } else if (a == "--commit") {
      o.commit = next();
    } else if (a == "--no-csv") {
      o.csv.clear();
    } else {
      std::printf("usage: trmm_bench [--sizes N,N,...] [--reps R] [--warmup W] [--cutoff C] [--scheme auto|recursive|rows] [--csv FILE|--no-csv] [--commit STR]\n"
                  "  --scheme: the block structure of the triangular product (auto, the default: each mode's trmmPlan, as the\n"
                  "  library runs it); --cutoff: the largest diagonal block multiplied in full (recursive) or the\n"
                  "  block-row height (rows); either option sets the plan for every mode (cutoff default 512)\n");
      return a == "--help" ? 0 : 2;
    }
  }
  std::string card = currentDeviceProperties().name;
  for (char& c : card)
    if (c == ',') c = ' ';
  const std::string date = utcDate();
  std::printf("trmm_bench on %s, %s, commit %s; device-resident, C += L Z with L lower triangular n x n; median of "
              "%d after %d warm-ups; %s\n",
              card.c_str(), date.c_str(), o.commit.c_str(), o.reps, o.warmup,
              o.planGiven ? (std::string("scheme ") + schemeName(o.scheme) + ", cutoff " + std::to_string(o.cutoff)).c_str()
                          : "each mode's trmmPlan");
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas;
  CHECK(cublasCreate(&blas));
  CHECK(cublasSetStream(blas, stream));
  for (Index n : o.sizes) {
    const Problem prob = makeProblem(n, blas);
    for (Precision p :
         {Precision::FP32, Precision::TF32x3, Precision::FP16x3, Precision::TF32, Precision::FP16, Precision::BF16})
      run<float>(o, prob, p, blas, stream, card, date);
    run<double>(o, prob, Precision::FP64, blas, stream, card, date);
  }
  CHECK(cublasDestroy(blas));
  CHECK(cudaStreamDestroy(stream));
  return 0;
} catch (const BenchError& e) {
  std::fprintf(stderr, "trmm_bench: %s\n", e.what());
  return 1;
}
