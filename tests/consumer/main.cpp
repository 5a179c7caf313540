// main.cpp - a downstream program using the installed tcqr through <Eigen/TensorCoreQR>. Factors a small matrix
// (Backend::Auto: the Host backend for a problem this small, with or without a GPU), checks the factorization and a
// least-squares solve against Eigen::HouseholderQR, and returns non-zero on any mismatch.
#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>
#include <cstdio>

int main() {
  const Eigen::Index m = 40, n = 12;
  Eigen::MatrixXd A(m, n);
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < m; ++i) A(i, j) = 1.0 / double(i + j + 1) + (i == j ? 1.0 : 0.0);
  const Eigen::VectorXd b = Eigen::VectorXd::LinSpaced(m, -1.0, 1.0);

  Eigen::TensorCoreHouseholderQR<Eigen::MatrixXd> qr(A);
  if (qr.info() != Eigen::Success) {
    std::fprintf(stderr, "info() != Success\n");
    return 1;
  }
  const Eigen::MatrixXd Q = qr.householderQ() * Eigen::MatrixXd::Identity(m, n);
  const Eigen::MatrixXd R = qr.matrixQR().topRows(n).triangularView<Eigen::Upper>();
  const double backward = (A - Q * R).norm() / A.norm();
  const double orthogonality = (Eigen::MatrixXd::Identity(n, n) - Q.transpose() * Q).norm();

  const Eigen::VectorXd x = qr.solve(b);
  const Eigen::VectorXd xRef = Eigen::HouseholderQR<Eigen::MatrixXd>(A).solve(b);
  const double solveDiff = (x - xRef).norm() / xRef.norm();

  std::printf(
      "tcqr %s backend (built with CUDA: %s): ||A - QR||/||A|| = %.2e, ||I - Q^T Q|| = %.2e, "
      "solve vs Eigen = %.2e\n",
      tcqr::backendName(qr.activeBackend()), tcqr::builtWithCuda() ? "yes" : "no", backward, orthogonality, solveDiff);
  const double tol = 1e-12;
  return (backward < tol && orthogonality < tol && solveDiff < tol) ? 0 : 1;
}
