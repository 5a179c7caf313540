// least_squares.cpp - fitting a polynomial by least squares through solve(), the way Eigen code does it, with the
// decomposition on the GPU when one is present.
#include <cmath>
#include <cstdio>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

int main() {
  // Samples of y = 1 - 2 t + 0.5 t^3 with a little noise, fitted with a cubic in t on [-1, 1].
  const Eigen::Index samples = 200000, degree = 3;
  Eigen::VectorXd t = Eigen::VectorXd::LinSpaced(samples, -1.0, 1.0);
  Eigen::VectorXd noise = 1e-3 * Eigen::VectorXd::Random(samples);
  Eigen::VectorXd y = (1.0 - 2.0 * t.array() + 0.5 * t.array().cube()).matrix() + noise;

  Eigen::MatrixXd V(samples, degree + 1);  // Vandermonde matrix
  for (Eigen::Index j = 0; j <= degree; ++j) V.col(j) = t.array().pow(double(j)).matrix();

  Eigen::TensorCoreHouseholderQR<Eigen::MatrixXd> qr(V);
  if (qr.info() != Eigen::Success) {
    std::fprintf(stderr, "factorization failed\n");
    return 1;
  }
  Eigen::VectorXd c = qr.solve(y);

  std::printf("backend: %s\n", tcqr::backendName(qr.activeBackend()));
  std::printf("fitted coefficients: % .5f % .5f % .5f % .5f (true: 1 -2 0 0.5)\n", c(0), c(1), c(2), c(3));
  const double residual = (V.transpose() * (V * c - y)).norm() / (V.norm() * (V * c - y).norm() + V.norm() * y.norm());
  std::printf("normal-equation residual ||V^T (V c - y)|| / (||V|| (||r|| + ||y||)) = %.2e\n", residual);
  const bool ok = std::abs(c(0) - 1) < 1e-2 && std::abs(c(1) + 2) < 1e-2 && std::abs(c(2)) < 1e-2 &&
                  std::abs(c(3) - 0.5) < 1e-2;
  return ok ? 0 : 1;
}
