// qr_bench.cpp - Eigen::TensorCoreHouseholderQR against the vendor baselines.
//
// Device-resident rows ("geqrf"): one random matrix per shape and precision on the device (cuRAND, normal), factored
// by TensorCoreHouseholderQR::computeOnDevice and by cusolverDn<S|D>geqrf, each timed with CUDA events on the same
// stream; errors of both results measured the same way on the GPU with double accumulation.
// End-to-end row ("geqrf_e2e"): a host Eigen::MatrixXf factored by TensorCoreHouseholderQR (host in, host out) and by
// Eigen::HouseholderQR on the CPU, timed with std::chrono; errors measured on the host in double.
//
// Each row runs in one precision mode (--mode; default: the library's default per precision); the cuSOLVER baseline
// of a shape and precision is measured once and repeated in the row of every mode. --sweep runs the sweep
// (m n = 2^28 and 2^30 from m x 32 to square, every mode).
//
// Results go to stdout (a fixed-width table) and are appended to a CSV (bench/results/README.md describes it).
// Run `qr_bench --help` for the options.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#include <cusolverDn.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_common.hpp"
#include "qr_bench_kernels.hpp"

using namespace tcqr_bench;  // CHECK, BenchError, DevBuf, Handles, Vendor, timing, CSV helpers

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Options

struct Shape {
  i64 m, n;
};

const std::vector<Shape> kDefaultShapes = {{8388608, 32},   {2097152, 128}, {524288, 512}, {131072, 2048},
                                           {16384, 16384},  {8192, 8192},   {4096, 4096}};
const std::vector<Shape> kQuickShapes = {{65536, 32},  {16384, 128},  {8192, 512},
                                         {4096, 1024}, {2048, 2048}, {1024, 1024}};
// The sweep: m n = 2^28 and 2^30, from m x 32 to square.
const std::vector<Shape> kSweepShapes = {{8388608, 32},  {2097152, 128}, {524288, 512},  {131072, 2048},
                                         {16384, 16384}, {33554432, 32}, {8388608, 128}, {2097152, 512},
                                         {524288, 2048}, {32768, 32768}};

struct Options {
  std::vector<Shape> shapes = kDefaultShapes;
  bool runFloat = true, runDouble = true;
  // Three warm-up runs: the library replays a factorization from a CUDA graph from its fourth run of one shape on
  // (the third also captures it), so the timed runs are the replays a repeating application gets (--first-calls).
  int reps = 7, warmup = 3;
  Shape e2e{4096, 4096};  // m = 0: no end-to-end row
  int e2eReps = 3, e2eWarmup = 3;
  int firstCalls = 0;  // --first-calls: time the first N factorizations of a fresh object (graph replay)
  int threads = 0;  // 0: all hardware threads
  bool errors = true;
  i64 blockSize = 0;
  tcqr::Panel panel = tcqr::Panel::Auto;
  /// Precision modes of the rows; Precision::Default stands for the library default of each precision. A row of a
  /// precision runs in each listed mode that applies to it (precisionSupported()).
  std::vector<tcqr::Precision> modes = {tcqr::Precision::Default};
  unsigned long long seed = 20251125ULL;
  std::string csv = "bench/results/h100.csv";
  bool writeCsv = true;
  std::string commit = TCQR_BENCH_COMMIT;
};

void usage(const char* argv0) {
  std::printf(
      "usage: %s [options]\n"
      "  --shapes LIST     comma-separated MxN shapes for the device-resident rows, 'default' or 'none'\n"
      "                    (default: 8388608x32,2097152x128,524288x512,131072x2048,16384x16384,8192x8192,4096x4096)\n"
      "  --precision LIST  comma-separated float|double (also s|d|f|single) (default: float,double)\n"
      "  --reps N          timed repetitions per method, median reported (default 7)\n"
      "  --warmup N        untimed warm-up runs per method (default 3: the timed runs replay a CUDA graph)\n"
      "  --first-calls N   also time each of the first N factorizations of a fresh object (row note 'calls ms'):\n"
      "                    two queued directly, the third also captured into a CUDA graph, later ones replay it\n"
      "  --quick           smoke test: shapes 65536x32,16384x128,8192x512,4096x1024,2048x2048,1024x1024 and a\n"
      "                    1024x1024 end-to-end row (explicit --shapes / --e2e take precedence)\n"
      "  --e2e MxN|N|off   size of the end-to-end host-matrix row, float (default 4096x4096)\n"
      "  --e2e-reps N      timed repetitions of the end-to-end row (default 3, after 3 warm-ups)\n"
      "  --threads N       threads of the Eigen CPU baseline (default: all hardware threads; needs OpenMP)\n"
      "  --no-errors       skip the error measurements (columns left NaN)\n"
      "  --block-size NB   TensorCoreHouseholderQR::setBlockSize(NB) (default 0: library default)\n"
      "  --panel P         TensorCoreHouseholderQR::setPanel: auto (default), geqrf or tsqr\n"
      "  --mode LIST       comma-separated precision modes: FP32,TF32x3,FP16x3,TF32,FP16,BF16 (float rows), FP64,\n"
      "                    FP64Emulated (double rows), 'default' (the library default of each precision, resolved\n"
      "                    per shape as tcqr::resolvePrecision does on the GPU; rows name the mode) or 'all'\n"
      "                    (default: default). Each row runs in every listed mode that applies to its precision; a\n"
      "                    precision none applies to is skipped. The cuSOLVER baseline is measured once per shape\n"
      "                    and precision. The end-to-end row runs once per float mode.\n"
      "  --sweep           the issue's sweep: shapes with m n = 2^28 and 2^30 from m x 32 to square\n"
      "                    (8388608x32 ... 16384x16384, 33554432x32 ... 32768x32768), every mode (unless --mode),\n"
      "                    no end-to-end row (unless --e2e) and no error columns (unless --errors); explicit\n"
      "                    --shapes take precedence\n"
      "  --errors          measure the error columns even with --sweep\n"
      "  --seed S          cuRAND / host RNG seed (default 20251125)\n"
      "  --csv PATH        CSV to append to (default bench/results/h100.csv; header written if new)\n"
      "  --no-csv          do not write a CSV\n"
      "  --commit STR      commit recorded in the CSV (default: the commit built from,\n"
      "                    with -dirty if tracked files differed: %s)\n"
      "  --help\n",
      argv0, TCQR_BENCH_COMMIT);
}

bool parseInt64(const std::string& s, i64& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  v = x;
  return true;
}

bool parseShape(const std::string& s, Shape& out) {
  const size_t x = s.find_first_of("xX");
  i64 m = 0, n = 0;
  if (x == std::string::npos) {
    if (!parseInt64(s, m)) return false;
    n = m;
  } else if (!parseInt64(s.substr(0, x), m) || !parseInt64(s.substr(x + 1), n)) {
    return false;
  }
  if (m < 1 || n < 1) return false;
  out = {m, n};
  return true;
}

/// A mode name as tcqr::precisionName() spells it (case-insensitive), or "default".
bool parseMode(const std::string& s, tcqr::Precision& p) {
  std::string u = s;
  for (char& c : u) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (u == "DEFAULT") {
    p = tcqr::Precision::Default;
    return true;
  }
  return parseModeName(s, p);
}

/// The modes of `o` that apply to a precision, in the order given, without a second request for what an earlier one
/// runs on an m x n matrix on `backend` (Default resolved by tcqr::resolvePrecision). Default stays Default: the row
/// then measures what the library does with it (and says so in its notes).
std::vector<tcqr::Precision> modesFor(const Options& o, bool isDouble, tcqr::Backend backend, i64 m, i64 n) {
  std::vector<tcqr::Precision> out, resolved;
  for (tcqr::Precision p : o.modes) {
    if (!tcqr::precisionSupported(p, isDouble)) continue;
    const tcqr::Precision r = tcqr::resolvePrecision(p, isDouble, backend, m, n);
    if (std::find(resolved.begin(), resolved.end(), r) != resolved.end()) continue;
    resolved.push_back(r);
    out.push_back(p);
  }
  return out;
}

/// The row label of a requested mode: the mode it resolves to on the GPU for m x n (corrected after the run by
/// activePrecision(), see notePrecision).
std::string modeLabel(tcqr::Precision requested, bool isDouble, i64 m, i64 n) {
  return tcqr::precisionName(tcqr::resolvePrecision(requested, isDouble, tcqr::Backend::Cuda, m, n));
}

[[noreturn]] void badArg(const std::string& msg) {
  std::fprintf(stderr, "qr_bench: %s (see --help)\n", msg.c_str());
  std::exit(2);
}

Options parseArgs(int argc, char** argv) {
  Options o;
  bool shapesGiven = false, e2eGiven = false, quick = false, sweep = false, modesGiven = false, errorsGiven = false;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) badArg(std::string("missing value after ") + argv[i]);
    return argv[++i];
  };
  auto positive = [&](const std::string& flag, const std::string& v, i64 minimum) {
    i64 x = 0;
    if (!parseInt64(v, x) || x < minimum || x > INT_MAX) badArg("invalid value for " + flag + ": " + v);
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(argv[0]);
      std::exit(0);
    } else if (a == "--shapes") {
      const std::string v = value(i);
      shapesGiven = true;
      o.shapes.clear();
      if (v == "default" || v == "all") {
        o.shapes = kDefaultShapes;
      } else if (v != "none") {
        for (const auto& item : splitList(v)) {
          Shape s{};
          if (!parseShape(item, s)) badArg("invalid shape: " + item);
          o.shapes.push_back(s);
        }
      }
    } else if (a == "--precision") {
      o.runFloat = o.runDouble = false;
      for (const auto& p : splitList(value(i))) {
        if (p == "float" || p == "f" || p == "s" || p == "single" || p == "S") o.runFloat = true;
        else if (p == "double" || p == "d" || p == "D") o.runDouble = true;
        else if (p == "both" || p == "all") o.runFloat = o.runDouble = true;
        else badArg("invalid precision: " + p);
      }
    } else if (a == "--reps") {
      o.reps = int(positive(a, value(i), 1));
    } else if (a == "--warmup") {
      o.warmup = int(positive(a, value(i), 0));
    } else if (a == "--first-calls") {
      o.firstCalls = int(positive(a, value(i), 1));
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--e2e") {
      const std::string v = value(i);
      e2eGiven = true;
      if (v == "off" || v == "none" || v == "0") o.e2e = {0, 0};
      else if (!parseShape(v, o.e2e)) badArg("invalid --e2e size: " + v);
    } else if (a == "--e2e-reps") {
      o.e2eReps = int(positive(a, value(i), 1));
    } else if (a == "--threads") {
      o.threads = int(positive(a, value(i), 1));
    } else if (a == "--no-errors") {
      o.errors = false;
    } else if (a == "--errors") {
      o.errors = true;
      errorsGiven = true;
    } else if (a == "--sweep") {
      sweep = true;
    } else if (a == "--mode" || a == "--modes") {
      modesGiven = true;
      o.modes.clear();
      for (const auto& item : splitList(value(i))) {
        if (item == "all") {
          o.modes.insert(o.modes.end(), kAllModes.begin(), kAllModes.end());
          continue;
        }
        tcqr::Precision p{};
        if (!parseMode(item, p)) badArg("invalid mode: " + item);
        o.modes.push_back(p);
      }
      if (o.modes.empty()) badArg("--mode: empty list");
    } else if (a == "--panel") {
      const std::string v = value(i);
      if (v == "auto") o.panel = tcqr::Panel::Auto;
      else if (v == "geqrf") o.panel = tcqr::Panel::Geqrf;
      else if (v == "tsqr") o.panel = tcqr::Panel::Tsqr;
      else throw std::runtime_error("--panel: expected auto, geqrf or tsqr");
    } else if (a == "--block-size") {
      o.blockSize = positive(a, value(i), 0);
    } else if (a == "--seed") {
      o.seed = static_cast<unsigned long long>(positive(a, value(i), 0));
    } else if (a == "--csv") {
      o.csv = value(i);
      o.writeCsv = true;
    } else if (a == "--no-csv") {
      o.writeCsv = false;
    } else if (a == "--commit") {
      o.commit = value(i);
    } else {
      badArg("unknown option " + a);
    }
  }
  if (quick) {
    if (!shapesGiven) o.shapes = kQuickShapes;
    if (!e2eGiven) o.e2e = {1024, 1024};
  }
  if (sweep) {
    if (!shapesGiven) o.shapes = kSweepShapes;
    if (!modesGiven) o.modes = kAllModes;
    if (!e2eGiven) o.e2e = {0, 0};
    if (!errorsGiven) o.errors = false;
  }
  return o;
}

// ---------------------------------------------------------------------------------------------------------------
// Results

struct Row {
  std::string op, precision;
  std::string mode;  ///< tcqr::precisionName() of the mode ours ran in
  i64 m = 0, n = 0;
  std::string baseline;
  double oursMs = kNaN, baseMs = kNaN;
  double oursTf = kNaN, baseTf = kNaN, speedup = kNaN;
  double bwd = kNaN, orth = kNaN, baseBwd = kNaN, baseOrth = kNaN;
  std::string notes;
  void note(const std::string& s) { notes += (notes.empty() ? "" : "; ") + s; }
};

/// Relabels a row with the mode ours actually ran in when it differs from the label modeLabel gave (Default's FP32
/// fallback when device memory is short), and notes both.
void notePrecision(Row& r, tcqr::Precision ran) {
  if (r.mode == tcqr::precisionName(ran)) return;
  r.note("resolved to " + r.mode + ", ran in " + tcqr::precisionName(ran));
  r.mode = tcqr::precisionName(ran);
}

/// Householder QR flop count (LAPACK geqrf, real): 2mn^2 - 2n^3/3 for m >= n, 2nm^2 - 2m^3/3 otherwise.
double qrFlops(i64 m, i64 n) {
  const double a = double(std::max(m, n)), b = double(std::min(m, n));
  return 2.0 * a * b * b - 2.0 * b * b * b / 3.0;
}
double tflops(i64 m, i64 n, double ms) { return std::isfinite(ms) && ms > 0 ? qrFlops(m, n) / (ms * 1e-3) / 1e12 : kNaN; }

/// Like fmtNum, but infinities are missing values too.
std::string fmt(double v, const char* f, const char* nanText) { return std::isfinite(v) ? fmtNum(v, f) : nanText; }

const char* kTableHeader =
    "op         prec   mode                m      n |"
    "  ours ms  ours TF/s | baseline                               base ms  base TF/s "
    "| speedup | bwd ours  bwd base | orth ours orth base";

std::string tableLine(const Row& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-10s %-6s %-12s %8lld %6lld | %8s %10s | %-36s %8s %10s | %7s | %-9s %-9s| %-9s %s", r.op.c_str(),
                r.precision.c_str(), r.mode.c_str(), (long long)r.m, (long long)r.n, fmt(r.oursMs, "%.2f", "-").c_str(),
                fmt(r.oursTf, "%.3f", "-").c_str(), r.baseline.c_str(), fmt(r.baseMs, "%.2f", "-").c_str(),
                fmt(r.baseTf, "%.3f", "-").c_str(), fmt(r.speedup, "%.2fx", "-").c_str(),
                fmt(r.bwd, "%.2e", "-").c_str(), fmt(r.baseBwd, "%.2e", "-").c_str(), fmt(r.orth, "%.2e", "-").c_str(),
                fmt(r.baseOrth, "%.2e", "-").c_str());
  return buf;
}

// The `mode` column came last, after `notes`, so that rows written before it existed keep their positions: a file
// with the old header gets the new header line on the next append (its old rows are left as they are, one field
// short, which CSV readers fill with an empty value; see bench/results/README.md for what an empty mode means).
const char* kCsvHeaderV1 =
    "card,date,commit,op,precision,m,n,batch,ours_ms,baseline,baseline_ms,speedup,backward_err,orth_err,"
    "baseline_backward_err,baseline_orth_err,ours_tflops,baseline_tflops,notes";
const std::string kCsvHeader = std::string(kCsvHeaderV1) + ",mode";

/// Replaces the first line of `path` by the current header when it is the header without the mode column.
void upgradeCsvHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string first;
  std::getline(in, first);
  if (!first.empty() && first.back() == '\r') first.pop_back();
  if (first != kCsvHeaderV1) return;
  std::stringstream rest;
  rest << in.rdbuf();
  in.close();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out << kCsvHeader << "\n" << rest.str();
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
  std::printf("CSV %s: header upgraded with the mode column (old rows unchanged)\n", path.c_str());
}

class CsvWriter {
 public:
  CsvWriter(const Options& o, std::string card, std::string date)
      : m_path(o.csv), m_enabled(o.writeCsv), m_card(std::move(card)), m_date(std::move(date)), m_commit(o.commit) {}
  void append(const Row& r) {
    if (!m_enabled) return;
    const bool fresh = csvNeedsHeader(m_path);
    if (!fresh && !m_checkedHeader) {
      try {
        upgradeCsvHeader(m_path);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "qr_bench: %s; row not saved\n", e.what());
        return;
      }
    }
    m_checkedHeader = true;
    std::ofstream f;
    if (!openCsvForAppend(m_path, "qr_bench", f)) return;
    if (fresh) f << kCsvHeader << "\n";
    f << csvField(m_card) << ',' << m_date << ',' << csvField(m_commit) << ',' << r.op << ',' << r.precision << ','
      << r.m << ',' << r.n << ",1," << fmt(r.oursMs, "%.4f", "nan") << ',' << csvField(r.baseline) << ','
      << fmt(r.baseMs, "%.4f", "nan") << ',' << fmt(r.speedup, "%.4f", "nan") << ',' << fmt(r.bwd, "%.3e", "nan")
      << ',' << fmt(r.orth, "%.3e", "nan") << ',' << fmt(r.baseBwd, "%.3e", "nan") << ','
      << fmt(r.baseOrth, "%.3e", "nan") << ',' << fmt(r.oursTf, "%.4f", "nan") << ','
      << fmt(r.baseTf, "%.4f", "nan") << ',' << csvField(r.notes) << ',' << r.mode << "\n";
    f.flush();
  }

 private:
  std::string m_path;
  bool m_enabled;
  std::string m_card, m_date, m_commit;
  bool m_checkedHeader = false;
};

bool fitsInt(i64 v) { return v >= 0 && v <= INT_MAX; }

// ---------------------------------------------------------------------------------------------------------------
// Errors on the device. Both factorizations are measured the same way: thin Q formed by cusolverDn<S|D>orgqr from a
// copy of the packed factor and tau (working precision), R = upper triangle of the packed factor; then A, Q and R are
// widened to double and ||A - QR||_F / ||A||_F and ||I - Q^T Q||_F / k (k = min(m, n)) are computed with FP64 cuBLAS
// GEMMs and double-accumulated norms.

struct ErrPair {
  double bwd = kNaN, orth = kNaN;
};

template <typename S>
ErrPair deviceErrors(Handles& h, const S* dA, const S* dPacked, const S* dTauIn, i64 m, i64 n, std::string& why) {
  using V = Vendor<S>;
  const i64 k = std::min(m, n);
  if (!fitsInt(m) || !fitsInt(k)) {
    why = "errors skipped: cusolverDn" + std::string(std::is_same<S, float>::value ? "S" : "D") +
          "orgqr (int32 API; cuSOLVER has no 64-bit orgqr) cannot take m=" + std::to_string(m);
    return {};
  }
  // Thin Q (m x k) from a copy of the first k columns of the packed factor and of tau.
  DevBuf<S> Q(m * k), tau(k);
  CHECK(cudaMemcpyAsync(Q.get(), dPacked, sizeof(S) * m * k, cudaMemcpyDeviceToDevice, h.stream));
  CHECK(cudaMemcpyAsync(tau.get(), dTauIn, sizeof(S) * k, cudaMemcpyDeviceToDevice, h.stream));
  int lwork = 0;
  const cusolverStatus_t st =
      V::orgqrBufferSize(h.solver, int(m), int(k), int(k), Q.get(), int(m), tau.get(), &lwork);
  if (st != CUSOLVER_STATUS_SUCCESS) {
    why = std::string("errors skipped: orgqr_bufferSize failed (") + cusolverStatusName(st) + ", int32 workspace size)";
    return {};
  }
  {
    DevBuf<S> work(lwork);
    DevBuf<int> info(1);
    CHECK(V::orgqr(h.solver, int(m), int(k), int(k), Q.get(), int(m), tau.get(), work.get(), lwork, info.get()));
    int hInfo = 0;
    CHECK(cudaMemcpyAsync(&hInfo, info.get(), sizeof(int), cudaMemcpyDeviceToHost, h.stream));
    CHECK(cudaStreamSynchronize(h.stream));
    if (hInfo != 0) throw BenchError("orgqr returned info = " + std::to_string(hInfo));
  }
  tau.release();

  DevBuf<double> acc(1);
  DevBuf<double> Qd(m * k);
  CHECK(qrbench::convertToDouble(Q.get(), m, Qd.get(), m, m, k, false, h.stream));
  Q.release();
  DevBuf<double> Rd(k * n);  // k x n upper trapezoid, ld = k
  CHECK(qrbench::convertToDouble(dPacked, m, Rd.get(), k, k, n, true, h.stream));

  ErrPair e;
  {
    DevBuf<double> Ad(m * n);
    CHECK(qrbench::convertToDouble(dA, m, Ad.get(), m, m, n, false, h.stream));
    const double normA = frobenius(h, Ad.get(), m, m, n, false, acc.get());
    const double minusOne = -1.0, one = 1.0;
    CHECK(cublasDgemm_64(h.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &minusOne, Qd.get(), m, Rd.get(), k, &one,
                         Ad.get(), m));  // Ad <- A - Q R
    e.bwd = frobenius(h, Ad.get(), m, m, n, false, acc.get()) / normA;
  }
  Rd.release();
  {
    DevBuf<double> G(k * k);
    const double one = 1.0, zero = 0.0;
    CHECK(cublasDgemm_64(h.blas, CUBLAS_OP_T, CUBLAS_OP_N, k, k, m, &one, Qd.get(), m, Qd.get(), m, &zero, G.get(),
                         k));  // G <- Q^T Q
    e.orth = frobenius(h, G.get(), k, k, k, true, acc.get()) / double(k);
  }
  return e;
}

std::string describe(const std::exception& e) { return e.what(); }

// ---------------------------------------------------------------------------------------------------------------
// One device-resident row.

/// The cuSOLVER baseline of one shape and precision: measured in the row of the first mode, repeated in the others.
struct Baseline {
  bool measured = false;
  std::string name, notes;
  double ms = kNaN, tf = kNaN, bwd = kNaN, orth = kNaN;
};

template <typename S>
Row deviceRow(Handles& h, const Options& o, Shape shape, tcqr::Precision mode, int cusolverVersion, Baseline& base) {
  using V = Vendor<S>;
  const i64 m = shape.m, n = shape.n, k = std::min(m, n), count = m * n;
  Row r;
  r.op = "geqrf";
  r.precision = V::name;
  r.mode = modeLabel(mode, std::is_same<S, double>::value, m, n);
  if (mode == tcqr::Precision::Default) r.note("default");
  r.m = m;
  r.n = n;
  r.baseline = V::geqrfName;
  r.note("reps=" + std::to_string(o.reps) + " warmup=" + std::to_string(o.warmup) + " median");
  {
    // Whether the timed runs replay a CUDA graph (the library's fourth and later factorizations of one key).
    const char* g = std::getenv("TCQR_GRAPH");
    if (o.warmup >= 3 && !(g && std::string(g) == "0")) r.note("graph replay");
  }
  if (o.blockSize > 0) r.note("nb=" + std::to_string(o.blockSize));
  if (o.panel != tcqr::Panel::Auto) r.note(o.panel == tcqr::Panel::Tsqr ? "panel=tsqr" : "panel=geqrf");
  if (const char* la = std::getenv("TCQR_LOOKAHEAD"))  // the library's switch of the recursion's look-ahead
    r.note(std::string("lookahead=") + (std::string(la) == "0" ? "off" : std::string(la) == "1" ? "on" : la));
  if (const char* g = std::getenv("TCQR_LANES_GREEN")) r.note(std::string("lanes_green=") + g);

  // The same input for both methods: pristine A0 (never handed to a factorization) and a work copy.
  DevBuf<S> A0(count + (count & 1)), work(count);  // cuRAND normal generators need an even count
  CHECK(curandSetPseudoRandomGeneratorSeed(h.rng, o.seed));
  CHECK(curandSetGeneratorOffset(h.rng, 0));
  CHECK(V::normal(h.rng, A0.get(), size_t(count + (count & 1))));
  auto restore = [&] {
    CHECK(cudaMemcpyAsync(work.get(), A0.get(), sizeof(S) * count, cudaMemcpyDeviceToDevice, h.stream));
  };

  // ---- ours: computeOnDevice(work) copies `work` into the object's storage (D2D) inside the timed region.
  try {
    Eigen::TensorCoreHouseholderQR<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>> qr;
    qr.setBackend(tcqr::Backend::Cuda).setPrecision(mode);
    if (o.blockSize > 0) qr.setBlockSize(o.blockSize);
    qr.setPanel(o.panel);
    if (o.firstCalls > 0) {
      // A fresh object's first calls, each timed alone (the graph's capture and instantiation are in the third).
      Eigen::TensorCoreHouseholderQR<Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>> cold;
      cold.setBackend(tcqr::Backend::Cuda).setPrecision(mode);
      if (o.blockSize > 0) cold.setBlockSize(o.blockSize);
      cold.setPanel(o.panel);
      std::string calls;
      for (int c = 0; c < o.firstCalls; ++c) {
        const std::vector<double> tc =
            timeOnStream(h, 0, 1, restore, [&] { cold.computeOnDevice(work.get(), m, n, m, h.stream); });
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.2f", c ? "/" : "", tc[0]);
        calls += buf;
      }
      r.note("calls ms " + calls);
      std::printf("first calls %s %s %lld x %lld: %s ms\n", sizeof(S) == 4 ? "float" : "double", r.mode.c_str(),
                  static_cast<long long>(m), static_cast<long long>(n), calls.c_str());
    }
    const std::vector<double> t = timeOnStream(h, o.warmup, o.reps, restore,
                                               [&] { qr.computeOnDevice(work.get(), m, n, m, h.stream); });
    r.oursMs = median(t);
    r.oursTf = tflops(m, n, r.oursMs);
    if (qr.info() != Eigen::Success) r.note("ours: info() != Success");
    notePrecision(r, qr.activePrecision());
    if (o.errors) {
      try {
        std::string why;
        const ErrPair e = deviceErrors<S>(h, A0.get(), qr.deviceMatrixQR(), qr.deviceHCoeffs(), m, n, why);
        r.bwd = e.bwd;
        r.orth = e.orth;
        if (!why.empty()) r.note("ours " + why);
      } catch (const std::exception& e) {
        r.note("ours errors failed: " + describe(e));
      }
    }
    qr.synchronize();
  } catch (const tcqr::Error& e) {
    r.note(std::string("ours failed (tcqr::Error") + (e.isOutOfMemory() ? ", out of memory" : "") +
           "): " + e.what());
  } catch (const std::exception& e) {
    r.note("ours failed: " + describe(e));
  }
  if (!deviceUsable()) throw BenchError("device in a sticky error state after ours: " + r.notes);

  // ---- baseline: cuSOLVER geqrf in place on a fresh copy (the copy is not timed). Legacy 32-bit API when its
  // int workspace size can be queried, else the 64-bit cusolverDnXgeqrf.
  if (base.measured) {
    r.note("baseline measured once for all modes");
  } else {
    base.measured = true;
    base.name = V::geqrfName;
    try {
      DevBuf<S> tau(k);
      DevBuf<int> info(1);
      bool legacy = fitsInt(m) && fitsInt(n);
      int lwork = 0;
      if (legacy) {
        legacy = V::geqrfBufferSize(h.solver, int(m), int(n), work.get(), int(m), &lwork) == CUSOLVER_STATUS_SUCCESS;
      }
      std::vector<double> t;
      if (legacy) {
        DevBuf<S> ws(lwork);
        t = timeOnStream(h, o.warmup, o.reps, restore, [&] {
          CHECK(V::geqrf(h.solver, int(m), int(n), work.get(), int(m), tau.get(), ws.get(), lwork, info.get()));
        });
      } else {
        base.name = "cusolverDnXgeqrf";
        size_t dBytes = 0, hBytes = 0;
        CHECK(cusolverDnXgeqrf_bufferSize(h.solver, h.params, m, n, V::type, work.get(), m, V::type, tau.get(),
                                          V::type, &dBytes, &hBytes));
        DevBuf<char> dws(static_cast<i64>(dBytes));
        std::vector<char> hws(std::max<size_t>(hBytes, 1));
        t = timeOnStream(h, o.warmup, o.reps, restore, [&] {
          CHECK(cusolverDnXgeqrf(h.solver, h.params, m, n, V::type, work.get(), m, V::type, tau.get(), V::type,
                                 dws.get(), dBytes, hws.data(), hBytes, info.get()));
        });
      }
      int hInfo = 0;
      CHECK(cudaMemcpy(&hInfo, info.get(), sizeof(int), cudaMemcpyDeviceToHost));
      if (hInfo != 0) base.notes += "baseline info=" + std::to_string(hInfo) + "; ";
      base.ms = median(t);
      base.tf = tflops(m, n, base.ms);
      base.notes += "cusolver=" + std::to_string(cusolverVersion);
      if (o.errors) {
        try {
          std::string why;
          const ErrPair e = deviceErrors<S>(h, A0.get(), work.get(), tau.get(), m, n, why);
          base.bwd = e.bwd;
          base.orth = e.orth;
          if (!why.empty()) base.notes += "; baseline " + why;
        } catch (const std::exception& e) {
          base.notes += "; baseline errors failed: " + describe(e);
        }
      }
    } catch (const std::exception& e) {
      base.notes += (base.notes.empty() ? "" : "; ") + std::string("baseline failed: ") + describe(e);
    }
  }
  r.baseline = base.name;
  r.baseMs = base.ms;
  r.baseTf = base.tf;
  r.baseBwd = base.bwd;
  r.baseOrth = base.orth;
  if (!base.notes.empty()) r.note(base.notes);
  if (std::isfinite(r.oursMs) && std::isfinite(r.baseMs)) r.speedup = r.baseMs / r.oursMs;
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// End-to-end row (host matrix in, host results out).

/// Errors in double on the host: thin Q from Eigen's HouseholderSequence over the (widened) packed factor.
ErrPair hostErrors(const Eigen::MatrixXf& A, const Eigen::MatrixXf& packed, const Eigen::VectorXf& tau) {
  const Eigen::Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  const Eigen::MatrixXd Ad = A.cast<double>(), QRd = packed.cast<double>();
  const Eigen::VectorXd taud = tau.cast<double>();
  Eigen::HouseholderSequence<Eigen::MatrixXd, Eigen::VectorXd> hs(QRd, taud);
  hs.setLength(k);
  const Eigen::MatrixXd Q = hs * Eigen::MatrixXd::Identity(m, k);
  const Eigen::MatrixXd R = QRd.topRows(k).triangularView<Eigen::Upper>();
  ErrPair e;
  e.bwd = (Ad - Q * R).norm() / Ad.norm();
  e.orth = (Eigen::MatrixXd::Identity(k, k) - Q.transpose() * Q).norm() / double(k);
  return e;
}

Row e2eRow(const Options& o, int threads, tcqr::Precision mode, Baseline& base) {
  const Eigen::Index m = o.e2e.m, n = o.e2e.n;
  Row r;
  r.op = "geqrf_e2e";
  r.precision = "float";
  r.mode = modeLabel(mode, false, m, n);
  if (mode == tcqr::Precision::Default) r.note("default");
  r.m = m;
  r.n = n;
  r.baseline = "Eigen::HouseholderQR(cpu," + std::to_string(threads) + " threads)";
  r.note("median of " + std::to_string(o.e2eReps) + " after " + std::to_string(o.e2eWarmup) +
         " warm-up; errors on host in double");
  if (o.blockSize > 0) r.note("nb=" + std::to_string(o.blockSize));
  if (o.panel != tcqr::Panel::Auto) r.note(o.panel == tcqr::Panel::Tsqr ? "panel=tsqr" : "panel=geqrf");
  if (const char* la = std::getenv("TCQR_LOOKAHEAD"))  // the library's switch of the recursion's look-ahead
    r.note(std::string("lookahead=") + (std::string(la) == "0" ? "off" : std::string(la) == "1" ? "on" : la));
  if (const char* g = std::getenv("TCQR_LANES_GREEN")) r.note(std::string("lanes_green=") + g);

  Eigen::MatrixXf A(m, n);
  {
    std::mt19937_64 gen(o.seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index i = 0; i < m; ++i) A(i, j) = dist(gen);
  }

  try {
    Eigen::TensorCoreHouseholderQR<Eigen::MatrixXf> qr;
    qr.setBackend(tcqr::Backend::Cuda).setPrecision(mode);
    if (o.blockSize > 0) qr.setBlockSize(o.blockSize);
    qr.setPanel(o.panel);
    r.oursMs = timeHostMs(o.e2eWarmup, o.e2eReps, [&] {
      qr.compute(A);
      qr.matrixQR();  // packed factor, device -> host (waits for the factorization)
      qr.hCoeffs();   // tau, device -> host
    });
    r.oursTf = tflops(m, n, r.oursMs);
    if (qr.info() != Eigen::Success) r.note("ours: info() != Success");
    notePrecision(r, qr.activePrecision());
    if (o.errors) {
      const ErrPair e = hostErrors(A, qr.matrixQR(), qr.hCoeffs());
      r.bwd = e.bwd;
      r.orth = e.orth;
    }
  } catch (const std::exception& e) {
    r.note("ours failed: " + describe(e));
  }
  if (!deviceUsable()) throw BenchError("device in a sticky error state after the end-to-end row: " + r.notes);

  if (base.measured) {
    r.note("baseline measured once for all modes");
  } else {
    base.measured = true;
    try {
      Eigen::HouseholderQR<Eigen::MatrixXf> qr(m, n);
      base.ms = timeHostMs(o.e2eWarmup, o.e2eReps, [&] { qr.compute(A); });
      base.tf = tflops(m, n, base.ms);
      if (o.errors) {
        const ErrPair e = hostErrors(A, qr.matrixQR(), qr.hCoeffs());
        base.bwd = e.bwd;
        base.orth = e.orth;
      }
    } catch (const std::exception& e) {
      base.notes = "baseline failed: " + describe(e);
    }
  }
  r.baseMs = base.ms;
  r.baseTf = base.tf;
  r.baseBwd = base.bwd;
  r.baseOrth = base.orth;
  if (!base.notes.empty()) r.note(base.notes);
  if (std::isfinite(r.oursMs) && std::isfinite(r.baseMs)) r.speedup = r.baseMs / r.oursMs;
  return r;
}

void printLegend(const Options& o, int threads) {
  std::printf(
      "Legend:\n"
      "  geqrf      device-resident: A (m x n, column-major, ld = m) already in GPU memory, cuRAND N(0,1), the same\n"
      "             matrix for both methods. Times are the median of %d CUDA-event-timed runs after %d warm-up runs,\n"
      "             on one stream that is idle when the start event is recorded.\n"
      "             ours = TensorCoreHouseholderQR::computeOnDevice(dA, m, n, m, stream) (one object reused); its\n"
      "                    internal device-to-device copy of the input and its input scan ARE inside the timing.\n"
      "             baseline = cusolverDn<S|D>geqrf in place on a fresh copy of A; restoring the copy is NOT timed,\n"
      "                    the workspace is queried and allocated once, outside the timing.\n"
      "  geqrf_e2e  end-to-end from a host Eigen::MatrixXf: ours = compute() + matrixQR() + hCoeffs() (host in,\n"
      "             host out, transfers included); baseline = Eigen::HouseholderQR::compute() on the CPU with %d\n"
      "             thread(s). std::chrono, median of %d after %d warm-up.\n"
      "  mode       tcqr::Precision of ours' products (setPrecision); the baseline always runs in the storage\n"
      "             precision and is measured once per shape and precision, then repeated in each mode's row.\n"
      "  TF/s       (2mn^2 - 2n^3/3) / time (m >= n), the LAPACK geqrf count, same for both methods and every mode.\n"
      "  speedup    baseline ms / ours ms (> 1: ours faster).\n"
      "  bwd        ||A - QR||_F / ||A||_F;  orth  ||I - Q^T Q||_F / n  (thin Q, n = min(m, n)).\n"
      "             geqrf: Q from cusolverDn<S|D>orgqr on a copy of each packed factor and tau (working precision),\n"
      "             R = its upper triangle; products and norms in FP64 on the GPU.\n"
      "             geqrf_e2e: Q from Eigen's HouseholderSequence; everything in double on the host.\n",
      o.reps, o.warmup, threads, o.e2eReps, o.e2eWarmup);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parseArgs(argc, argv);

  int threads = 1;
#ifdef _OPENMP
  threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  Eigen::setNbThreads(threads);
  threads = Eigen::nbThreads();
  const char* threadNote = "OpenMP";
#else
  const char* threadNote = "built without OpenMP: Eigen runs single-threaded";
  if (o.threads > 1) std::fprintf(stderr, "qr_bench: --threads ignored (built without OpenMP)\n");
#endif

  std::string card = "unknown";
  int cusolverVersion = 0;
  try {
    const cudaDeviceProp prop = currentDeviceProperties();
    card = prop.name;
    const LibraryVersions v = libraryVersions();
    cusolverVersion = v.cusolver;
    size_t freeB = 0, totalB = 0;
    CHECK(cudaMemGetInfo(&freeB, &totalB));
    std::printf("qr_bench: %s (SMs %d, %.1f GiB, %.1f GiB free)  CUDA runtime %d driver %d  cuBLAS %d  cuSOLVER %d\n",
                card.c_str(), prop.multiProcessorCount, totalB / 1073741824.0, freeB / 1073741824.0, v.runtime,
                v.driver, v.cublas, v.cusolver);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qr_bench: no usable CUDA device: %s\n", e.what());
    return 1;
  }
  const std::string date = utcDate();
  std::printf("date (UTC) %s  commit %s  Eigen %d.%d.%d (SIMD: %s)  CPU threads for Eigen: %d (%s)  seed %llu\n",
              date.c_str(), o.commit.c_str(), EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
              Eigen::SimdInstructionSetsInUse(), threads, threadNote, o.seed);
  std::printf("CSV: %s\n", o.writeCsv ? o.csv.c_str() : "(disabled)");
  {
    auto lower = [](std::string x) {
      for (char& c : x) c = char(std::tolower(static_cast<unsigned char>(c)));
      return x;
    };
    const std::string file = lower(std::filesystem::path(o.csv).filename().string()), dev = lower(card);
    for (const char* tag : {"h100", "h200", "a100", "b200", "l40"})
      if (o.writeCsv && file.find(tag) != std::string::npos && dev.find(tag) == std::string::npos)
        std::printf("WARNING: this device is '%s' but the CSV is named after %s; rows record the real card.\n",
                    card.c_str(), tag);
  }
  printLegend(o, threads);
  std::printf("\n%s\n", kTableHeader);
  std::fflush(stdout);

  for (int p = 0; p < 2; ++p)
    if ((p == 0 ? o.runFloat : o.runDouble) && modesFor(o, p == 1, tcqr::Backend::Cuda, 1, 1).empty())
      std::printf("note: no listed mode applies to %s: its rows are skipped\n", p == 0 ? "float" : "double");
  {
    std::string list;
    for (tcqr::Precision m : o.modes) list += (list.empty() ? "" : ",") + std::string(tcqr::precisionName(m));
    std::printf("modes: %s (Default = the library default, tcqr::resolvePrecision: FP64 for double; for float FP16x3\n"
                "       from 1024 rows and columns and 2^24 entries, FP32 below; rows name the mode that ran)\n",
                list.c_str());
  }
  CsvWriter csv(o, card, date);
  std::vector<Row> rows;
  int failed = 0;
  auto emit = [&](const Row& r) {
    rows.push_back(r);
    csv.append(r);
    std::printf("%s\n", tableLine(r).c_str());
    if (!r.notes.empty() && r.notes.find("failed") != std::string::npos) {
      std::printf("    note: %s\n", r.notes.c_str());
      ++failed;
    }
    std::fflush(stdout);
  };

  bool fatal = false;
  {
    std::unique_ptr<Handles> h;
    try {
      h.reset(new Handles());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "qr_bench: setup failed: %s\n", e.what());
      return 1;
    }
    for (const Shape& s : o.shapes) {
      if (fatal) break;
      for (int p = 0; p < 2 && !fatal; ++p) {
        if ((p == 0 && !o.runFloat) || (p == 1 && !o.runDouble)) continue;
        Baseline base;
        for (tcqr::Precision mode : modesFor(o, p == 1, tcqr::Backend::Cuda, s.m, s.n)) {
          if (fatal) break;
          try {
            emit(p == 0 ? deviceRow<float>(*h, o, s, mode, cusolverVersion, base)
                        : deviceRow<double>(*h, o, s, mode, cusolverVersion, base));
          } catch (const std::exception& e) {
            Row r;
            r.op = "geqrf";
            r.precision = p == 0 ? "float" : "double";
            r.mode = modeLabel(mode, p == 1, s.m, s.n);
            r.m = s.m;
            r.n = s.n;
            r.baseline = p == 0 ? "cusolverDnSgeqrf" : "cusolverDnDgeqrf";
            r.note(std::string("row failed: ") + e.what());
            emit(r);
            if (!deviceUsable()) {
              std::fprintf(stderr, "qr_bench: the device is in a sticky error state; stopping\n");
              fatal = true;
            }
          }
        }
      }
    }
  }

  if (!fatal && o.e2e.m > 0) {
    Baseline cpu;
    for (tcqr::Precision mode : modesFor(o, false, tcqr::Backend::Cuda, o.e2e.m, o.e2e.n)) {
      try {
        emit(e2eRow(o, threads, mode, cpu));
      } catch (const std::exception& e) {
        Row r;
        r.op = "geqrf_e2e";
        r.precision = "float";
        r.mode = modeLabel(mode, false, o.e2e.m, o.e2e.n);
        r.m = o.e2e.m;
        r.n = o.e2e.n;
        r.baseline = "Eigen::HouseholderQR(cpu," + std::to_string(threads) + " threads)";
        r.note(std::string("row failed: ") + e.what());
        emit(r);
      }
    }
  }

  std::printf("\n=== qr_bench summary (%s, %s) ===\n%s\n", card.c_str(), date.c_str(), kTableHeader);
  for (const Row& r : rows) std::printf("%s\n", tableLine(r).c_str());
  std::printf("=== end of summary: %zu rows, %d with failures%s ===\n", rows.size(), failed,
              fatal ? ", stopped early (sticky device error)" : "");
  return (failed > 0 || fatal) ? 1 : 0;
}
