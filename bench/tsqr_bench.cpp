// tsqr_bench.cpp - Eigen::TensorCoreTallSkinnyQR against cuSOLVER on tall-skinny matrices, device-resident.
//
// For each shape and precision, one random matrix (cuRAND, N(0,1)) in GPU memory; in the same process, on one stream:
//   thinq:  ours computeOnDevice(dA, m, n, m, stream, tcqr::ComputeThinQ)
//           vs cusolverDn<S|D>geqrf followed by cusolverDn<S|D>orgqr (timed together);
//   r_only: ours computeOnDevice(dA, m, n, m, stream, tcqr::ComputeR) vs cusolverDn<S|D>geqrf alone.
// Ours includes its device-to-device copy of the input and its NaN/Inf scan; cuSOLVER works in place on a copy of
// the input restored (untimed) before every run; cuSOLVER's workspace is allocated once, outside the timing.
// CUDA events on the stream, warm-up runs, median of the timed runs.
//
// Errors, on the device, in double, over the whole matrices (no subsampling): Q, R and A widened to double,
// ||A - Q R||_F / (||A||_F m eps) and ||I - Q^T Q||_F / (m eps) with FP64 cuBLAS GEMMs and double-accumulated
// norms, eps = machine epsilon of the working precision; for ours from the thin-Q run (deviceThinQ, deviceR), for
// cuSOLVER from geqrf's R and orgqr's Q. For the r_only row: ||R_ours - R_cusolver||_F / ||R_cusolver||_F (both
// follow LAPACK's signs). GB/s of the R-only path: m n sizeof(S) (one read of A) / time. The notes give each row's
// memory floor from a timed device-to-device copy of the matrix (median, same warm-up and runs): the copy's time for
// thinq (read A, write Q), half of it for r_only (read A), and how many times that floor ours took.
//
// Run `tsqr_bench --help` for the options.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <cusolverDn.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#include "bench_common.hpp"
#include "qr_bench_kernels.hpp"

using namespace tcqr_bench;  // CHECK, DevBuf, Handles, Vendor, timeOnStream, frobenius, CSV helpers

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Options

struct Shape {
  bool isDouble = false;
  i64 m = 0, n = 0;
};

struct Options {
  std::vector<Shape> shapes;
  int reps = 7, warmup = 2;
  bool errors = true;
  std::string csv;  // empty: no CSV
  std::string commit = TCQR_BENCH_COMMIT;
  unsigned long long seed = 1234;
};

const char* kDefaultShapes = "f2097152x128,f8388608x32,f1048576x64,d2097152x128,d8388608x32";
const char* kQuickShapes = "f262144x128,f1048576x32,d262144x32";

std::vector<Shape> parseShapes(const std::string& list) {
  std::vector<Shape> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    Shape s;
    if (item[0] != 'f' && item[0] != 'd') throw std::invalid_argument("shape '" + item + "': start with f or d");
    s.isDouble = item[0] == 'd';
    const size_t x = item.find('x');
    if (x == std::string::npos) throw std::invalid_argument("shape '" + item + "': expected [f|d]MxN");
    s.m = std::stoll(item.substr(1, x - 1));
    s.n = std::stoll(item.substr(x + 1));
    if (s.m < s.n || s.n < 1) throw std::invalid_argument("shape '" + item + "': need m >= n >= 1");
    out.push_back(s);
  }
  return out;
}

void usage(const char* argv0) {
  std::printf(
      "usage: %s [options]\n"
      "  --shapes LIST  comma-separated [f|d]MxN (f = float, d = double); default %s\n"
      "  --quick        small shapes (%s), 3 reps, 1 warm-up (smoke test)\n"
      "  --reps N       timed runs per method (median reported; default 7)\n"
      "  --warmup N     untimed runs before them (default 2)\n"
      "  --no-errors    skip the error measurement\n"
      "  --csv FILE     append one row per measurement to FILE (header written if new)\n"
      "  --commit STR   commit recorded in the CSV (default: the commit built from,\n"
      "                 with -dirty if tracked files differed: %s)\n"
      "  --seed N       cuRAND seed (default 1234)\n",
      argv0, kDefaultShapes, kQuickShapes, TCQR_BENCH_COMMIT);
}

Options parse(int argc, char** argv) {
  Options o;
  std::string shapes = kDefaultShapes;
  bool quick = false, repsSet = false, warmupSet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(argv[0]);
      std::exit(0);
    } else if (a == "--shapes") {
      shapes = value();
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--reps") {
      o.reps = std::stoi(value());
      repsSet = true;
    } else if (a == "--warmup") {
      o.warmup = std::stoi(value());
      warmupSet = true;
    } else if (a == "--no-errors") {
      o.errors = false;
    } else if (a == "--csv") {
      o.csv = value();
    } else if (a == "--commit") {
      o.commit = value();
    } else if (a == "--seed") {
      o.seed = std::stoull(value());
    } else {
      throw std::invalid_argument("unknown option " + a + " (see --help)");
    }
  }
  if (quick) {
    if (shapes == kDefaultShapes) shapes = kQuickShapes;
    if (!repsSet) o.reps = 3;
    if (!warmupSet) o.warmup = 1;
  }
  if (o.reps < 1 || o.warmup < 0) throw std::invalid_argument("--reps must be >= 1 and --warmup >= 0");
  o.shapes = parseShapes(shapes);
  return o;
}

// ---------------------------------------------------------------------------------------------------------------
// Rows, CSV

struct Row {
  std::string op, precision;
  i64 m = 0, n = 0;
  double oursMs = kNaN, baseMs = kNaN;
  std::string baseline;
  double bwd = kNaN, orth = kNaN, baseBwd = kNaN, baseOrth = kNaN, rDiff = kNaN, gbps = kNaN;
  std::string notes;
};

const char* kCsvHeader =
    "card,date,commit,op,precision,m,n,ours_ms,baseline,baseline_ms,speedup,backward_err,orth_err,"
    "baseline_backward_err,baseline_orth_err,r_rel_diff,ours_gbps,notes";

void appendCsv(const Options& o, const std::string& card, const std::string& date, const Row& r) {
  if (o.csv.empty()) return;
  const bool fresh = csvNeedsHeader(o.csv);
  std::ofstream f;
  if (!openCsvForAppend(o.csv, "tsqr_bench", f)) return;
  if (fresh) f << kCsvHeader << "\n";
  f << csvField(card) << ',' << date << ',' << csvField(o.commit) << ',' << r.op << ',' << r.precision << ',' << r.m
    << ',' << r.n << ',' << fmtNum(r.oursMs, "%.4f") << ',' << csvField(r.baseline) << ','
    << fmtNum(r.baseMs, "%.4f") << ',' << fmtNum(r.baseMs / r.oursMs, "%.4f") << ',' << fmtNum(r.bwd, "%.3e") << ','
    << fmtNum(r.orth, "%.3e") << ',' << fmtNum(r.baseBwd, "%.3e") << ',' << fmtNum(r.baseOrth, "%.3e") << ','
    << fmtNum(r.rDiff, "%.3e") << ',' << fmtNum(r.gbps, "%.1f") << ',' << csvField(r.notes) << "\n";
}

void printRow(const Row& r) {
  std::printf("%-7s %-6s %9lld %4lld | %9s ms %9s ms %-28s | %7sx | bwd %9s / %9s | orth %9s / %9s | R diff %9s | %7s GB/s%s%s\n",
              r.op.c_str(), r.precision.c_str(), (long long)r.m, (long long)r.n, fmtNum(r.oursMs, "%.3f").c_str(),
              fmtNum(r.baseMs, "%.3f").c_str(), r.baseline.c_str(), fmtNum(r.baseMs / r.oursMs, "%.2f").c_str(),
              fmtNum(r.bwd, "%.2e").c_str(), fmtNum(r.baseBwd, "%.2e").c_str(), fmtNum(r.orth, "%.2e").c_str(),
              fmtNum(r.baseOrth, "%.2e").c_str(), fmtNum(r.rDiff, "%.2e").c_str(), fmtNum(r.gbps, "%.0f").c_str(),
              r.notes.empty() ? "" : "  ", r.notes.c_str());
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------------------------
// Errors on the device, in double.

/// ||A - Q R||_F / (||A||_F m eps) and ||I - Q^T Q||_F / (m eps) for Q (m x n, ld m) and R (n x n, ld ldr, upper
/// triangle used).
template <typename S>
void qrErrors(Handles& h, const S* dA, const S* dQ, const S* dR, i64 ldr, i64 m, i64 n, double& bwd, double& orth) {
  const double eps = std::numeric_limits<S>::epsilon();
  DevBuf<double> Ad(m * n), Qd(m * n), Rd(n * n), G(n * n), acc(1);
  CHECK(qrbench::convertToDouble(dA, m, Ad.get(), m, m, n, false, h.stream));
  CHECK(qrbench::convertToDouble(dQ, m, Qd.get(), m, m, n, false, h.stream));
  CHECK(qrbench::convertToDouble(dR, ldr, Rd.get(), n, n, n, true, h.stream));
  const double normA = frobenius(h, Ad.get(), m, m, n, false, acc.get());
  const double one = 1, minusOne = -1, zero = 0;
  CHECK(cublasDgemm_64(h.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, &minusOne, Qd.get(), m, Rd.get(), n, &one, Ad.get(),
                       m));  // Ad <- A - Q R
  bwd = frobenius(h, Ad.get(), m, m, n, false, acc.get()) / (normA * double(m) * eps);
  CHECK(cublasDgemm_64(h.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, n, m, &one, Qd.get(), m, Qd.get(), m, &zero, G.get(), n));
  orth = frobenius(h, G.get(), n, n, n, true, acc.get()) / (double(m) * eps);
}

// ---------------------------------------------------------------------------------------------------------------
// One shape: both rows.

template <typename S>
void benchShape(Handles& h, const Options& o, const Shape& sh, const std::string& card, const std::string& date) {
  using V = Vendor<S>;
  const i64 m = sh.m, n = sh.n;
  Row thin, ronly;
  thin.op = "thinq";
  ronly.op = "r_only";
  thin.precision = ronly.precision = V::name;
  thin.m = ronly.m = m;
  thin.n = ronly.n = n;
  thin.baseline = std::string(V::geqrfName) + "+" + V::orgqrName;
  ronly.baseline = V::geqrfName;
  const std::string repNote = "reps=" + std::to_string(o.reps) + " warmup=" + std::to_string(o.warmup);
  thin.notes = ronly.notes = repNote;

  if (m > INT_MAX || n > INT_MAX) {
    thin.notes = ronly.notes = "skipped: cuSOLVER's 32-bit geqrf/orgqr API cannot take this shape";
    printRow(thin);
    printRow(ronly);
    appendCsv(o, card, date, thin);
    appendCsv(o, card, date, ronly);
    return;
  }
  const int mi = int(m), ni = int(n);

  DevBuf<S> dA(m * n), dWork(m * n), dTau(n);
  DevBuf<int> dInfo(1);
  {
    curandGenerator_t gen = nullptr;
    CHECK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_DEFAULT));
    CHECK(curandSetPseudoRandomGeneratorSeed(gen, o.seed));
    CHECK(curandSetStream(gen, h.stream));
    // curandGenerateNormal needs an even count.
    const i64 count = m * n;
    CHECK(V::normal(gen, dA.get(), size_t(count - (count % 2))));
    if (count % 2) CHECK(cudaMemsetAsync(dA.get() + count - 1, 0, sizeof(S), h.stream));
    curandDestroyGenerator(gen);
  }
  int lwGeqrf = 0, lwOrgqr = 0;
  CHECK(V::geqrfBufferSize(h.solver, mi, ni, dWork.get(), mi, &lwGeqrf));
  CHECK(V::orgqrBufferSize(h.solver, mi, ni, ni, dWork.get(), mi, dTau.get(), &lwOrgqr));
  DevBuf<S> dLwork(std::max(lwGeqrf, lwOrgqr));
  const auto restore = [&] {
    CHECK(cudaMemcpyAsync(dWork.get(), dA.get(), sizeof(S) * m * n, cudaMemcpyDeviceToDevice, h.stream));
  };
  const auto geqrf = [&] {
    CHECK(V::geqrf(h.solver, mi, ni, dWork.get(), mi, dTau.get(), dLwork.get(), lwGeqrf, dInfo.get()));
  };
  const auto orgqr = [&] {
    CHECK(V::orgqr(h.solver, mi, ni, ni, dWork.get(), mi, dTau.get(), dLwork.get(), lwOrgqr, dInfo.get()));
  };

  Eigen::TensorCoreTallSkinnyQR<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>> ts;
  ts.setBackend(tcqr::Backend::Cuda);
  const auto ours = [&](unsigned what) { ts.computeOnDevice(dA.get(), m, n, m, h.stream, what); };
  const auto nothing = [] {};
  // Median of o.reps runs after o.warmup untimed ones; prep (untimed) before each run, on the idle stream.
  const auto timed = [&](auto&& prep, auto&& run) { return median(timeOnStream(h, o.warmup, o.reps, prep, run)); };

  // The memory floor (issue 3: achieved bandwidth against the device's copy bandwidth): a device-to-device copy of
  // the m x n matrix reads and writes it once, the least traffic of a thin Q (read A, write Q); R alone needs half.
  const double copyMs = timed(nothing, restore);
  const double copyGBs = 2.0 * double(m) * double(n) * sizeof(S) / (copyMs * 1e-3) / 1e9;
  const auto floorNote = [&](double floorMs, double oursMs) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; copy %.3f ms = %.0f GB/s; floor %.3f ms, ours %.2fx it", copyMs, copyGBs,
                  floorMs, oursMs / floorMs);
    return std::string(buf);
  };

  // Thin Q.
  thin.oursMs = timed(nothing, [&] { ours(tcqr::ComputeThinQ); });
  thin.baseMs = timed(restore, [&] {
    geqrf();
    orgqr();
  });
  if (o.errors) {
    ours(tcqr::ComputeThinQ);
    if (ts.info() != Eigen::Success) thin.notes += "; ours: info() != Success";
    qrErrors<S>(h, dA.get(), ts.deviceThinQ(), ts.deviceR(), n, m, n, thin.bwd, thin.orth);
    restore();
    geqrf();
    DevBuf<S> dRc(n * n);  // cuSOLVER's R, saved before orgqr overwrites the packed factor
    CHECK(cudaMemcpy2DAsync(dRc.get(), sizeof(S) * n, dWork.get(), sizeof(S) * m, sizeof(S) * n, n,
                            cudaMemcpyDeviceToDevice, h.stream));
    orgqr();
    int info = 0;
    CHECK(cudaMemcpyAsync(&info, dInfo.get(), sizeof(int), cudaMemcpyDeviceToHost, h.stream));
    CHECK(cudaStreamSynchronize(h.stream));
    if (info != 0) thin.notes += "; cuSOLVER devInfo=" + std::to_string(info);
    qrErrors<S>(h, dA.get(), dWork.get(), dRc.get(), n, m, n, thin.baseBwd, thin.baseOrth);

    // R only: compare R with cuSOLVER's (both upper triangular, LAPACK signs), on the host (n x n).
    ours(tcqr::ComputeR);
    Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic> Ro = ts.matrixR(), Rc(n, n);
    CHECK(cudaMemcpy(Rc.data(), dRc.get(), sizeof(S) * n * n, cudaMemcpyDeviceToHost));
    const Eigen::MatrixXd rc = Rc.template cast<double>().template triangularView<Eigen::Upper>();
    ronly.rDiff = (Ro.template cast<double>() - rc).norm() / rc.norm();
  }
  thin.notes += floorNote(copyMs, thin.oursMs);
  printRow(thin);
  appendCsv(o, card, date, thin);

  // R only.
  ronly.oursMs = timed(nothing, [&] { ours(tcqr::ComputeR); });
  ronly.baseMs = timed(restore, geqrf);
  ronly.gbps = double(m) * double(n) * sizeof(S) / (ronly.oursMs * 1e-3) / 1e9;
  ronly.notes += floorNote(copyMs / 2, ronly.oursMs);
  printRow(ronly);
  appendCsv(o, card, date, ronly);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tsqr_bench: %s\n", e.what());
    return 2;
  }
  cudaDeviceProp prop{};
  try {
    prop = currentDeviceProperties();
  } catch (const BenchError&) {
    std::fprintf(stderr, "tsqr_bench: no CUDA device\n");
    return 1;
  }
  const std::string card = prop.name, date = utcDate();
  int cusolverVersion = 0;
  cusolverGetVersion(&cusolverVersion);
  std::printf("tsqr_bench: %s, date (UTC) %s, commit %s, cuSOLVER %d\n", card.c_str(), date.c_str(), o.commit.c_str(),
              cusolverVersion);
  std::printf("Device-resident timing: inputs generated in GPU memory, CUDA events on one stream, %d warm-up, median "
              "of %d runs.\n",
              o.warmup, o.reps);
  std::printf("thinq: ours ComputeThinQ vs geqrf+orgqr; r_only: ours ComputeR vs geqrf. Errors on the device in double "
              "over the full matrices:\n  bwd = ||A-QR||_F/(||A||_F m eps), orth = ||I-Q^TQ||_F/(m eps) (ours / "
              "cuSOLVER); R diff = ||R_ours-R_cusolver||/||R_cusolver||; GB/s = m n sizeof(S) / time (R only);\n  copy = "
              "cudaMemcpyAsync of the m x n matrix (GB/s counts its read and write); floor = the copy's time for thinq "
              "(read A, write Q), half of it for r_only (read A).\n");
  std::printf("CSV: %s\n\n", o.csv.empty() ? "(none; --csv FILE)" : o.csv.c_str());

  int failures = 0;
  Handles h;
  for (const Shape& s : o.shapes) {
    try {
      if (s.isDouble)
        benchShape<double>(h, o, s, card, date);
      else
        benchShape<float>(h, o, s, card, date);
    } catch (const std::exception& e) {
      ++failures;
      std::printf("%s %lldx%lld: FAILED: %s\n", s.isDouble ? "double" : "float", (long long)s.m, (long long)s.n,
                  e.what());
      Row r;
      r.op = "thinq";
      r.precision = s.isDouble ? "double" : "float";
      r.m = s.m;
      r.n = s.n;
      r.notes = std::string("failed: ") + e.what();
      appendCsv(o, card, date, r);
      if (!deviceUsable()) {
        std::printf("device in a sticky error state: stopping\n");
        return 1;
      }
    }
  }
  return failures ? 1 : 0;
}
