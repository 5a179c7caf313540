// apply_q_bench.cpp - products with the Q of Eigen::TensorCoreHouseholderQR, end to end from host matrices, against
// cusolverDn<S|D>ormqr with the same reflectors.
//
// For each precision: A (n x n, Eigen::Random) is factored once (qr.compute, default backend and mode); B (n x n,
// Eigen::Random). Timed, std::chrono, median of --reps after --warmup:
//   left:   X = qr.householderQ().transpose() * B      (Q^T B)
//   right:  X = B * qr.householderQ()                  (B Q)
// ours through the public API (host in, host out: the copy of B to the device and of X back are inside the timing),
// as a product returning a new matrix (copied into X with noalias(), or assigned to X, which takes its storage), as
// the product operators ran until 2026-11-28 (a host copy of B, applied in place, for comparison; also with the huge-
// page advice on that copy, tcqr/detail/HostMemory.h), and once in place
// (X.applyOnTheLeft / applyOnTheRight, no allocation);
// the baseline, cusolverDn<S|D>ormqr on the device with our packed factor and tau (copied to the device once, outside
// the timing; its workspace allocated once), also from and to the host: copy B in, ormqr, copy X out, all timed.
// Error: ||X_ours - X_ormqr||_F / ||X_ormqr||_F (the same reflectors applied two ways; both in the storage precision).
// Both copy from and to the pageable Eigen matrices (the driver stages them): since 2026-11-27 the public API hands
// column-major storage to the backend as it is (until then ours went through the object's pinned transfer buffer
// plus a host copy each way). At least one warm-up run: the first product allocates the device workspace.
//
//   apply_q_bench [--n N] [--precision float|double|both] [--reps R] [--warmup W]
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cusolverDn.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#include "bench_common.hpp"

using namespace tcqr_bench;

namespace {

struct Options {
  long n = 8192;
  bool runFloat = true, runDouble = true;
  int reps = 5, warmup = 1;
};

cusolverStatus_t ormqrBufferSize(cusolverDnHandle_t h, cublasSideMode_t side, cublasOperation_t op, int m, int n,
                                 int k, const float* A, int lda, const float* tau, const float* C, int ldc, int* lw) {
  return cusolverDnSormqr_bufferSize(h, side, op, m, n, k, A, lda, tau, C, ldc, lw);
}
cusolverStatus_t ormqrBufferSize(cusolverDnHandle_t h, cublasSideMode_t side, cublasOperation_t op, int m, int n,
                                 int k, const double* A, int lda, const double* tau, const double* C, int ldc,
                                 int* lw) {
  return cusolverDnDormqr_bufferSize(h, side, op, m, n, k, A, lda, tau, C, ldc, lw);
}
cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasSideMode_t side, cublasOperation_t op, int m, int n, int k,
                       const float* A, int lda, const float* tau, float* C, int ldc, float* w, int lw, int* info) {
  return cusolverDnSormqr(h, side, op, m, n, k, A, lda, tau, C, ldc, w, lw, info);
}
cusolverStatus_t ormqr(cusolverDnHandle_t h, cublasSideMode_t side, cublasOperation_t op, int m, int n, int k,
                       const double* A, int lda, const double* tau, double* C, int ldc, double* w, int lw, int* info) {
  return cusolverDnDormqr(h, side, op, m, n, k, A, lda, tau, C, ldc, w, lw, info);
}

template <typename S>
void run(const Options& o) {
  using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;
  const int n = static_cast<int>(o.n);
  const char* prec = sizeof(S) == 4 ? "float" : "double";
  const Mat A = Mat::Random(n, n), B = Mat::Random(n, n);
  Eigen::TensorCoreHouseholderQR<Mat> qr(A);
  const Mat packed = qr.matrixQR();
  const Eigen::Matrix<S, Eigen::Dynamic, 1> tau = qr.hCoeffs();

  Handles h;
  DevBuf<S> dA(i64(n) * n), dTau(n), dC(i64(n) * n);
  DevBuf<int> dInfo(1);
  CHECK(cudaMemcpy(dA.get(), packed.data(), sizeof(S) * n * n, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dTau.get(), tau.data(), sizeof(S) * n, cudaMemcpyHostToDevice));
  Mat X(n, n), Xref(n, n);
  for (const bool onLeft : {true, false}) {
    const cublasSideMode_t side = onLeft ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT;
    const cublasOperation_t op = onLeft ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lwork = 0;
    CHECK(ormqrBufferSize(h.solver, side, op, n, n, n, dA.get(), n, dTau.get(), dC.get(), n, &lwork));
    DevBuf<S> work(lwork);
    const double base = timeHostMs(o.warmup, o.reps, [&] {
      CHECK(cudaMemcpyAsync(dC.get(), B.data(), sizeof(S) * n * n, cudaMemcpyHostToDevice, h.stream));
      CHECK(ormqr(h.solver, side, op, n, n, n, dA.get(), n, dTau.get(), dC.get(), n, work.get(), lwork, dInfo.get()));
      CHECK(cudaMemcpyAsync(Xref.data(), dC.get(), sizeof(S) * n * n, cudaMemcpyDeviceToHost, h.stream));
      CHECK(cudaStreamSynchronize(h.stream));
    });
    int info = 0;
    CHECK(cudaMemcpy(&info, dInfo.get(), sizeof(int), cudaMemcpyDeviceToHost));
    if (info != 0) throw std::runtime_error("ormqr: info = " + std::to_string(info));
    auto row = [&](double ms, const char* form) {
      const double err = double((X - Xref).norm() / Xref.norm());
      std::printf("applyq  %-6s %6d %6d %-5s | ours %9.2f ms | cusolverDn%cormqr %9.2f ms | %6.2fx | rel diff %.2e%s\n",
                  prec, n, n, onLeft ? "Q^T B" : "B Q", ms, sizeof(S) == 4 ? 'S' : 'D', base, base / ms, err, form);
    };
    // The product into X as written, X.noalias() = ... (Eigen copies the returned matrix into X's storage).
    const double ours = timeHostMs(o.warmup, o.reps, [&] {
      if (onLeft) X.noalias() = qr.householderQ().transpose() * B;
      else X.noalias() = B * qr.householderQ();
    });
    row(ours, "");
    // The product assigned, X = ... (the returned matrix's storage moves into X; X's old storage is freed and the next
    // product allocates anew, inside the timing).
    const double moved = timeHostMs(o.warmup, o.reps, [&] {
      if (onLeft) X = qr.householderQ().transpose() * B;
      else X = B * qr.householderQ();
    });
    row(moved, " (assigned)");
    // What the product operators did until 2026-11-28: a new matrix holding a host copy of B, Q applied to it in place
    // (device copies from and to it), moved into X.
    const double copyInPlace = timeHostMs(o.warmup, o.reps, [&] {
      Mat R = B;
      if (onLeft) R.applyOnTheLeft(qr.householderQ().transpose());
      else R.applyOnTheRight(qr.householderQ());
      X = std::move(R);
    });
    row(copyInPlace, " (copy + in place)");
    // The same with the huge-page advice the headers now give a new result, before the host copy writes it: what the
    // old path would take with that advice alone.
    const double copyInPlaceAdvised = timeHostMs(o.warmup, o.reps, [&] {
      Mat R(n, n);
      tcqr::detail::adviseFreshHostMemory(R.data(), sizeof(S) * std::size_t(R.size()));
      R = B;
      if (onLeft) R.applyOnTheLeft(qr.householderQ().transpose());
      else R.applyOnTheRight(qr.householderQ());
      X = std::move(R);
    });
    row(copyInPlaceAdvised, " (advised copy + in place)");
    // In place (B.applyOnTheLeft / applyOnTheRight): no result matrix is allocated, as ormqr's output above is not.
    // The copy of B into the operand is untimed.
    const double inPlace = timeHostMs(
        o.warmup, o.reps,
        [&] {
          if (onLeft) X.applyOnTheLeft(qr.householderQ().transpose());
          else X.applyOnTheRight(qr.householderQ());
        },
        [&] { X = B; });
    row(inPlace, " (in place)");
    std::fflush(stdout);
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--n") o.n = std::stol(value());
    else if (a == "--reps") o.reps = std::stoi(value());
    else if (a == "--warmup") o.warmup = std::stoi(value());
    else if (a == "--precision") {
      const std::string p = value();
      o.runFloat = p == "float" || p == "both";
      o.runDouble = p == "double" || p == "both";
      if (!o.runFloat && !o.runDouble) throw std::invalid_argument("--precision: float, double or both");
    } else {
      throw std::invalid_argument("unknown argument " + a);
    }
  }
  if (o.n < 1 || o.reps < 1 || o.warmup < 1) throw std::invalid_argument("--n, --reps and --warmup must be >= 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (!deviceUsable()) {
      std::printf("apply_q_bench: no usable CUDA device\n");
      return 77;
    }
    const cudaDeviceProp p = currentDeviceProperties();
    std::printf("apply_q_bench: %s, date (UTC) %s, commit %s; end to end from host matrices, median of %d after %d\n",
                p.name, utcDate().c_str(), TCQR_BENCH_COMMIT, o.reps, o.warmup);
    if (o.runFloat) run<float>(o);
    if (o.runDouble) run<double>(o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "apply_q_bench: %s\n", e.what());
    return 1;
  }
}
