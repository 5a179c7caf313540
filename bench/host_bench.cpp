// host_bench.cpp - the CPU fallback: Eigen::TensorCoreHouseholderQR on the Host backend (what Backend::Auto runs
// without a GPU and below autoCudaMinElements) against Eigen::HouseholderQR on the same matrix, in one process.
// Medians of host wall time for compute() (ours includes copying the input, as Eigen's does), and for compute() plus
// a least-squares solve() of one right-hand side (ours forms the compact WY form's T only when Q is first used where
// the matrix is one panel, so compute() alone would hide that cost); the backward error ||A - QR||_F / ||A||_F of
// each result (Q applied as Eigen's HouseholderSequence, in double) is printed beside them.
// Not linked with OpenMP: Eigen runs single-threaded on both sides.
//
//   host_bench [--reps N] [--warmup N] [--md FILE] [--commit STR]
#include <Eigen/QR>
#include <Eigen/TensorCoreQR>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

template <typename S>
double backwardError(const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>& A,
                     const Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>& qr,
                     const Eigen::Matrix<S, Eigen::Dynamic, 1>& tau) {
  const Eigen::MatrixXd a = A.template cast<double>();
  const Eigen::MatrixXd packed = qr.template cast<double>();
  const Eigen::VectorXd t = tau.template cast<double>();
  Eigen::MatrixXd r = Eigen::MatrixXd::Zero(a.rows(), a.cols());
  const Eigen::Index k = std::min(a.rows(), a.cols());
  r.topRows(k) = packed.topRows(k).template triangularView<Eigen::Upper>();
  r.applyOnTheLeft(Eigen::HouseholderSequence<Eigen::MatrixXd, Eigen::VectorXd>(packed, t));
  return (a - r).norm() / a.norm();
}

struct Row {
  std::string prec;
  int m, n;
  double eigenMs, oursMs, eigenSolveMs, oursSolveMs, eigenErr, oursErr;
};

template <typename S>
Row run(int m, int n, int warmup, int reps) {
  using M = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  std::srand(20261127u + unsigned(m) * 31u + unsigned(n));
  const M A = M::Random(m, n);
  Eigen::HouseholderQR<M> e(m, n);
  Eigen::TensorCoreHouseholderQR<M> t(m, n);
  t.setBackend(tcqr::Backend::Host);
  // Small problems repeat inside one timing so that the clock's resolution does not matter.
  const int inner = std::max(1, int(2e6 / (double(m) * n * n + 1.0)));
  const double eMs = tcqr_bench::timeHostMs(warmup, reps, [&] {
                       for (int i = 0; i < inner; ++i) e.compute(A);
                     }) / inner;
  const double tMs = tcqr_bench::timeHostMs(warmup, reps, [&] {
                       for (int i = 0; i < inner; ++i) {
                         t.compute(A);
                         t.synchronize();
                       }
                     }) / inner;
  using V = Eigen::Matrix<S, Eigen::Dynamic, 1>;
  const V b = V::Random(m);
  V xe(n), xt(n);
  const double eSolveMs = tcqr_bench::timeHostMs(warmup, reps, [&] {
                            for (int i = 0; i < inner; ++i) xe = e.compute(A).solve(b);
                          }) / inner;
  const double tSolveMs = tcqr_bench::timeHostMs(warmup, reps, [&] {
                            for (int i = 0; i < inner; ++i) xt = t.compute(A).solve(b);
                          }) / inner;
  return {sizeof(S) == 4 ? "float" : "double", m, n, eMs, tMs, eSolveMs, tSolveMs,
          backwardError<S>(A, e.matrixQR(), e.hCoeffs()), backwardError<S>(A, t.matrixQR(), t.hCoeffs())};
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7, warmup = 2;
  std::string md, commit = TCQR_BENCH_COMMIT;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--md" && i + 1 < argc) md = argv[++i];
    else if (a == "--commit" && i + 1 < argc) commit = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--warmup N] [--md FILE] [--commit STR]\n", argv[0]);
      return 2;
    }
  }
  const int shapes[][2] = {{10, 10},    {100, 100},  {255, 255},  {1000, 1000}, {2000, 2000},
                           {1000, 10},  {5000, 100}, {20000, 300}, {100000, 64}};
  std::vector<Row> rows;
  for (const auto& s : shapes) {
    rows.push_back(run<float>(s[0], s[1], warmup, reps));
    rows.push_back(run<double>(s[0], s[1], warmup, reps));
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::string table =
      "| precision | m x n | Eigen::HouseholderQR ms | ours (Host) ms | ours / Eigen | Eigen compute + solve ms | "
      "ours compute + solve ms | ours / Eigen | backward (Eigen) | backward (ours) |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const Row& r : rows) {
    char line[320];
    std::snprintf(line, sizeof line, "| %s | %d x %d | %.4g | %.4g | %.2f | %.4g | %.4g | %.2f | %.2e | %.2e |\n",
                  r.prec.c_str(), r.m, r.n, r.eigenMs, r.oursMs, r.oursMs / r.eigenMs, r.eigenSolveMs, r.oursSolveMs,
                  r.oursSolveMs / r.eigenSolveMs, r.eigenErr, r.oursErr);
    table += line;
  }
  std::printf("host_bench: %s, commit %s, median of %d after %d warm-up, Eigen %d.%d.%d, %d Eigen threads\n%s", date,
              commit.c_str(), reps, warmup, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
              Eigen::nbThreads(), table.c_str());
  if (!md.empty()) {
    if (FILE* f = std::fopen(md.c_str(), "w")) {
      std::fprintf(f,
                   "# CPU fallback against Eigen::HouseholderQR\n\nWritten by `bench/host_bench` on %s, commit %s "
                   "(median of %d after %d warm-up, Eigen %d.%d.%d, %d Eigen threads; CPU in the commit message). "
                   "Nothing in this file is edited by hand.\n\n%s",
                   date, commit.c_str(), reps, warmup, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
                   Eigen::nbThreads(), table.c_str());
      std::fclose(f);
    }
  }
  return 0;
}
