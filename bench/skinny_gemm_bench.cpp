// skinny_gemm_bench.cpp - the recursion's "small result, huge inner dimension" products on tall matrices,
// C (p x c) = A^T B with A (m x p) and B (m x c), m in the millions and p, c <= 64: Z = W^T A2 in applyQtLeft and
// P = Y1^T W2 in the W update (TCQR_TRACE on 2097152 x 128 float, 2026-11-26: six such cuBLAS calls took 5.0 of the
// 15 ms, about 1.3 TB/s against the H100's ~3 TB/s). Measures, in one process on the same data:
//   cublas      cublas<S>gemm (TN), what the library calls where neither of the others applies;
//   splitk-Q    an explicit split of the inner dimension: cublas<S>gemmStridedBatched over chunks of Q rows (each
//               writing its own p x c partial; the remainder rows as one more GEMM), then one cublas<S>gemv summing
//               the partials;
//   smalltn-bps the library's kernels::launchSmallTN (CudaOps::smallTN: results of at most 64 x 64, inner dimension
//               up to kSmallTnMaxInner in a factorization) with at most B blocks per multiprocessor (--small-tn-bps;
//               B in the chunk column).
// GB/s counts one read of A and B. Error: ||C - C_ref||_F / ||C_ref||_F with C_ref from FP64 GEMM on the operands
// widened to double. CUDA events, warm-up runs, median. (The library has used split-K, CudaOps::gemmSplitK, for float
// results of at most 64 x 64 over at least 2^20 rows since these rows were first measured, and launchSmallTN for
// shorter sums.)
//
//   skinny_gemm_bench [--shapes MxPxC,...] [--precision float,double] [--chunks 8192,32768,131072]
//                     [--small-tn-bps 1,2,4] [--reps N] [--warmup N] [--csv FILE] [--commit C]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../src/kernels.hpp"
#include "bench_common.hpp"

using namespace tcqr_bench;

namespace {

struct Shape {
  i64 m, p, c;
};

struct Options {
  std::vector<Shape> shapes = {{2097152, 64, 64}, {2097152, 32, 32}, {524288, 64, 64}, {524288, 32, 32},
                               {131072, 64, 64},  {131072, 32, 32},  {16384, 64, 64},  {16384, 32, 32}};
  bool runFloat = true, runDouble = true;
  std::vector<i64> chunks = {8192, 32768, 131072};
  std::vector<i64> smallTnBlocksPerSM = {1, 2, 4};  // launchSmallTN rows, where p, c <= 64
  int reps = 9, warmup = 2;
  std::string csv, commit = TCQR_BENCH_COMMIT;
};

[[noreturn]] void usage(int code) {
  std::fprintf(stderr,
               "skinny_gemm_bench [--shapes MxPxC,...] [--precision float,double] [--chunks Q,...]\n"
               "                  [--small-tn-bps B,...] [--reps N] [--warmup N] [--csv FILE] [--commit C]\n");
  std::exit(code);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

i64 toInt(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || v <= 0) usage(2);
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
    if (a == "--help" || a == "-h")
      usage(0);
    else if (a == "--shapes") {
      o.shapes.clear();
      for (const auto& item : split(next(), ',')) {
        const auto d = split(item, 'x');
        if (d.size() != 3) usage(2);
        o.shapes.push_back({toInt(d[0]), toInt(d[1]), toInt(d[2])});
      }
    } else if (a == "--precision") {
      o.runFloat = o.runDouble = false;
      for (const auto& p : split(next(), ',')) {
        if (p == "float")
          o.runFloat = true;
        else if (p == "double")
          o.runDouble = true;
        else
          usage(2);
      }
    } else if (a == "--chunks") {
      o.chunks.clear();
      for (const auto& q : split(next(), ',')) o.chunks.push_back(toInt(q));
    } else if (a == "--small-tn-bps") {
      o.smallTnBlocksPerSM.clear();
      for (const auto& b : split(next(), ',')) o.smallTnBlocksPerSM.push_back(toInt(b));
    } else if (a == "--reps")
      o.reps = static_cast<int>(toInt(next()));
    else if (a == "--warmup")
      o.warmup = static_cast<int>(std::strtol(next().c_str(), nullptr, 10));
    else if (a == "--csv")
      o.csv = next();
    else if (a == "--commit")
      o.commit = next();
    else
      usage(2);
  }
  return o;
}

template <typename S>
struct Blas;
template <>
struct Blas<float> {
  static cublasStatus_t gemm(cublasHandle_t h, i64 p, i64 c, i64 k, const float* A, i64 lda, const float* B, i64 ldb,
                             float* C, i64 ldc) {
    const float one = 1, zero = 0;
    return cublasSgemm_64(h, CUBLAS_OP_T, CUBLAS_OP_N, p, c, k, &one, A, lda, B, ldb, &zero, C, ldc);
  }
  static cublasStatus_t gemmBatched(cublasHandle_t h, i64 p, i64 c, i64 k, const float* A, i64 lda, i64 sa,
                                    const float* B, i64 ldb, i64 sb, float* C, i64 ldc, i64 sc, i64 batch) {
    const float one = 1, zero = 0;
    return cublasSgemmStridedBatched_64(h, CUBLAS_OP_T, CUBLAS_OP_N, p, c, k, &one, A, lda, sa, B, ldb, sb, &zero, C,
                                        ldc, sc, batch);
  }
  static cublasStatus_t gemv(cublasHandle_t h, i64 rows, i64 cols, const float* P, const float* ones, float* y) {
    const float one = 1, zero = 0;
    return cublasSgemv_64(h, CUBLAS_OP_N, rows, cols, &one, P, rows, ones, 1, &zero, y, 1);
  }
};
template <>
struct Blas<double> {
  static cublasStatus_t gemm(cublasHandle_t h, i64 p, i64 c, i64 k, const double* A, i64 lda, const double* B, i64 ldb,
                             double* C, i64 ldc) {
    const double one = 1, zero = 0;
    return cublasDgemm_64(h, CUBLAS_OP_T, CUBLAS_OP_N, p, c, k, &one, A, lda, B, ldb, &zero, C, ldc);
  }
  static cublasStatus_t gemmBatched(cublasHandle_t h, i64 p, i64 c, i64 k, const double* A, i64 lda, i64 sa,
                                    const double* B, i64 ldb, i64 sb, double* C, i64 ldc, i64 sc, i64 batch) {
    const double one = 1, zero = 0;
    return cublasDgemmStridedBatched_64(h, CUBLAS_OP_T, CUBLAS_OP_N, p, c, k, &one, A, lda, sa, B, ldb, sb, &zero, C,
                                        ldc, sc, batch);
  }
  static cublasStatus_t gemv(cublasHandle_t h, i64 rows, i64 cols, const double* P, const double* ones, double* y) {
    const double one = 1, zero = 0;
    return cublasDgemv_64(h, CUBLAS_OP_N, rows, cols, &one, P, rows, ones, 1, &zero, y, 1);
  }
};

/// ||X - Ref||_F / ||Ref||_F, X (p x c, S) widened to double in `work`.
template <typename S>
double relErr(Handles& h, const S* X, const double* ref, i64 p, i64 c, double* work, double* acc) {
  CHECK(qrbench::convertToDouble<S>(X, p, work, p, p, c, false, h.stream));
  const double one = 1, minusOne = -1;
  CHECK(cublasDgeam(h.blas, CUBLAS_OP_N, CUBLAS_OP_N, int(p), int(c), &one, work, int(p), &minusOne, ref, int(p), work,
                    int(p)));
  return frobenius(h, work, p, p, c, false, acc) / frobenius(h, ref, p, p, c, false, acc);
}

struct Row {
  std::string method;
  i64 chunk = 0;
  double ms = kNaN, err = kNaN;
};

template <typename S>
void runShape(Handles& h, const Options& o, const Shape& s, const std::string& card, std::ofstream* csv) {
  const i64 m = s.m, p = s.p, c = s.c;
  DevBuf<S> A(m * p + 1), B(m * c + 1), C(p * c);  // + 1: cuRAND fills an even count
  CHECK(Vendor<S>::normal(h.rng, A.get(), size_t((m * p + 1) / 2 * 2)));
  CHECK(Vendor<S>::normal(h.rng, B.get(), size_t((m * c + 1) / 2 * 2)));
  // FP64 reference.
  DevBuf<double> Ad(m * p), Bd(m * c), Cref(p * c), work(p * c), acc(1);
  CHECK(qrbench::convertToDouble<S>(A.get(), m, Ad.get(), m, m, p, false, h.stream));
  CHECK(qrbench::convertToDouble<S>(B.get(), m, Bd.get(), m, m, c, false, h.stream));
  CHECK(Blas<double>::gemm(h.blas, p, c, m, Ad.get(), m, Bd.get(), m, Cref.get(), p));
  h.sync();
  Ad.release();
  Bd.release();

  // The timed products run on a handle in cuBLAS's default math mode, as the library's (h.blas is pedantic: it
  // computes the FP64 reference).
  cublasHandle_t blas = nullptr;
  CHECK(cublasCreate(&blas));
  const std::unique_ptr<cublasContext, cublasStatus_t (*)(cublasHandle_t)> owner(blas, cublasDestroy);
  CHECK(cublasSetStream(blas, h.stream));
  CHECK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
  std::vector<Row> rows;
  {
    Row r{"cublas", 0};
    r.ms = median(timeOnStream(
        h, o.warmup, o.reps, [] {}, [&] { CHECK(Blas<S>::gemm(blas, p, c, m, A.get(), m, B.get(), m, C.get(), p)); }));
    r.err = relErr<S>(h, C.get(), Cref.get(), p, c, work.get(), acc.get());
    rows.push_back(r);
  }
  for (i64 q : o.chunks) {
    if (q >= m) continue;
    const i64 batch = m / q, rest = m - batch * q, slots = batch + (rest > 0 ? 1 : 0);
    DevBuf<S> partial(p * c * slots), ones(slots);
    {
      std::vector<S> h1(static_cast<size_t>(slots), S(1));
      CHECK(cudaMemcpy(ones.get(), h1.data(), sizeof(S) * h1.size(), cudaMemcpyHostToDevice));
    }
    auto run = [&] {
      CHECK(Blas<S>::gemmBatched(blas, p, c, q, A.get(), m, q, B.get(), m, q, partial.get(), p, p * c, batch));
      if (rest > 0)
        CHECK(Blas<S>::gemm(blas, p, c, rest, A.get() + batch * q, m, B.get() + batch * q, m,
                            partial.get() + batch * p * c, p));
      CHECK(Blas<S>::gemv(blas, p * c, slots, partial.get(), ones.get(), C.get()));
    };
    Row r{"splitk", q};
    r.ms = median(timeOnStream(
        h, o.warmup, o.reps, [] {}, run));
    r.err = relErr<S>(h, C.get(), Cref.get(), p, c, work.get(), acc.get());
    rows.push_back(r);
  }
  if (p <= 64 && c <= 64) {
    int dev = 0, sms = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    for (i64 bps : o.smallTnBlocksPerSM) {
      const i64 maxBlocks = bps * sms;
      const i64 blocks = tcqr::kernels::smallTnBlocks(m, p, c, sizeof(S), maxBlocks);
      DevBuf<S> partial(blocks * p * c);
      Row r{"smalltn-bps", bps};  // (the CSV's chunk column: blocks per multiprocessor)
      r.ms = median(timeOnStream(
          h, o.warmup, o.reps, [] {},
          [&] {
            tcqr::kernels::launchSmallTN<S>(A.get(), m, B.get(), m, m, p, c, S(1), S(0), C.get(), p, partial.get(),
                                            static_cast<int>(maxBlocks), h.stream);
          }));
      r.err = relErr<S>(h, C.get(), Cref.get(), p, c, work.get(), acc.get());
      rows.push_back(r);
    }
  }
  const double bytes = double(m) * double(p + c) * sizeof(S);
  for (const Row& r : rows) {
    const double gbps = bytes / (r.ms * 1e-3) / 1e9, speedup = rows[0].ms / r.ms;
    std::printf("%-6s %9lld %3lld %3lld | %-11s %7lld | %9.4f ms %8.1f GB/s | err %9.3e | %5.2fx vs cublas\n",
                Vendor<S>::name, (long long)m, (long long)p, (long long)c, r.method.c_str(), (long long)r.chunk, r.ms,
                gbps, r.err, speedup);
    if (csv)
      *csv << csvField(card) << ',' << utcDate() << ',' << csvField(o.commit) << ',' << Vendor<S>::name << ',' << m
           << ',' << p << ',' << c << ',' << r.method << ',' << r.chunk << ',' << fmtNum(r.ms, "%.4f") << ','
           << fmtNum(gbps, "%.1f") << ',' << fmtNum(r.err, "%.3e") << ',' << fmtNum(speedup, "%.4f")
           << ",reps=" << o.reps << " warmup=" << o.warmup << " median\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    const cudaDeviceProp prop = currentDeviceProperties();
    Handles h;
    std::ofstream csvFile;
    std::ofstream* csv = nullptr;
    if (!o.csv.empty()) {
      const bool fresh = !std::ifstream(o.csv).good();
      csvFile.open(o.csv, std::ios::app);
      if (!csvFile) throw BenchError("cannot open " + o.csv);
      if (fresh) csvFile << "card,date,commit,precision,m,p,c,method,chunk,ms,gbps,rel_err,speedup_vs_cublas,notes\n";
      csv = &csvFile;
    }
    std::printf("skinny_gemm_bench: %s, commit %s; C (p x c) = A^T B, A m x p, B m x c, device-resident\n", prop.name,
                o.commit.c_str());
    for (const Shape& s : o.shapes) {
      if (o.runFloat) runShape<float>(h, o, s, prop.name, csv);
      if (o.runDouble) runShape<double>(h, o, s, prop.name, csv);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "skinny_gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
