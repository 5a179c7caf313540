// swap.cpp - the same program with Eigen::HouseholderQR and with Eigen::TensorCoreHouseholderQR: the only change
// is the type name (and the include). Prints both results, their agreement, and both times.
//
//   ./example_swap [rows] [cols]      (default 4096 x 1024, float)
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

using Clock = std::chrono::steady_clock;

template <typename QR>
static double factorAndSolve(const Eigen::MatrixXf& A, const Eigen::VectorXf& b, Eigen::VectorXf& x,
                             Eigen::MatrixXf& Qthin) {
  const auto t0 = Clock::now();
  QR qr(A);                                                         // factor
  x = qr.solve(b);                                                  // least-squares solve
  Qthin = qr.householderQ() * Eigen::MatrixXf::Identity(A.rows(), A.cols());  // thin Q
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int main(int argc, char** argv) {
  const Eigen::Index m = argc > 1 ? std::atol(argv[1]) : 4096;
  const Eigen::Index n = argc > 2 ? std::atol(argv[2]) : 1024;
  if (m < 1 || n < 1) {
    std::fprintf(stderr, "usage: %s [rows >= 1] [cols >= 1]\n", argv[0]);
    return 2;
  }
  std::srand(42);
  const Eigen::MatrixXf A = Eigen::MatrixXf::Random(m, n);
  const Eigen::VectorXf b = Eigen::VectorXf::Random(m);

  std::printf("A: %ld x %ld float; tcqr CUDA device available: %s\n", long(m), long(n),
              tcqr::cudaDeviceAvailable() ? "yes" : "no (Host backend)");

  Eigen::VectorXf xEigen, xTc;
  Eigen::MatrixXf qEigen, qTc;
  // Warm-up of the GPU path (CUDA context and library handles) so that the timing below is the steady state.
  if (tcqr::cudaDeviceAvailable()) factorAndSolve<Eigen::TensorCoreHouseholderQR<Eigen::MatrixXf>>(A, b, xTc, qTc);

  const double tEigen = factorAndSolve<Eigen::HouseholderQR<Eigen::MatrixXf>>(A, b, xEigen, qEigen);
  const double tTc = factorAndSolve<Eigen::TensorCoreHouseholderQR<Eigen::MatrixXf>>(A, b, xTc, qTc);

  const double resEigen = (A.transpose() * (A * xEigen - b)).norm() / (A.norm() * A.norm() * xEigen.norm());
  const double resTc = (A.transpose() * (A * xTc - b)).norm() / (A.norm() * A.norm() * xTc.norm());
  std::printf("%-32s %10.2f ms   x[0..2] = % .6f % .6f % .6f   normal-eq residual %.2e\n",
              "Eigen::HouseholderQR", tEigen, xEigen(0), xEigen(std::min<Eigen::Index>(1, n - 1)),
              xEigen(std::min<Eigen::Index>(2, n - 1)), resEigen);
  std::printf("%-32s %10.2f ms   x[0..2] = % .6f % .6f % .6f   normal-eq residual %.2e\n",
              "Eigen::TensorCoreHouseholderQR", tTc, xTc(0), xTc(std::min<Eigen::Index>(1, n - 1)),
              xTc(std::min<Eigen::Index>(2, n - 1)), resTc);
  std::printf("relative difference of x: %.2e   of thin Q: %.2e   speedup: %.1fx (factor + solve + thin Q, "
              "host matrices in and out)\n",
              (xTc - xEigen).norm() / xEigen.norm(), (qTc - qEigen).norm() / qEigen.norm(), tEigen / tTc);
  return (xTc - xEigen).norm() <= 1e-2f * xEigen.norm() ? 0 : 1;
}
