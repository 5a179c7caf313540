// QRChecks.h - definitions of the checks and suites declared in QRSuites.h. Included only by the QRSuites_*.cpp
// files, which instantiate them explicitly for float and double (the test executables link the result).
//
// Bounds. Every LAPACK-style ratio (TestMatrices.h) must stay <= kRatioBound = 30. Comparisons with a second,
// independent factorization (Eigen's HouseholderQR, or the other backend) allow for the conditioning of the problem:
// relative differences must stay below kAgreementFactor * kappa * max(m, n) * eps, where kappa is the condition
// number the test matrix was built with. Set TCQR_TEST_VERBOSE=1 to print every measured ratio.
#ifndef TCQR_TESTS_QRCHECKS_H
#define TCQR_TESTS_QRCHECKS_H

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "QRSuites.h"

namespace tcqr_test {

// ---- the factorization itself ------------------------------------------------------------------------------------

/// Checks an existing decomposition of A: sizes, info(), the backend used, Householder coefficients, and the
/// backward-error and orthogonality ratios of the full Q (`MatrixQType Q = qr.householderQ();`) and of the thin Q
/// (`qr.householderQ() * Identity(m, k)`), and that Eigen's HouseholderSequence over matrixQR()/hCoeffs() is the
/// same Q.
template <typename MatrixType>
void checkDecomposition(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, const Options& o) {
  using Scalar = typename MatrixType::Scalar;
  using QRType = TCQR<MatrixType>;
  const Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  const double eps = epsOf<Scalar>();
  INFO("A is " << m << " x " << n << ", backend " << doctest::String(tcqr::backendName(o.backend)) << ", block size "
               << o.blockSize);

  REQUIRE(qr.rows() == m);
  REQUIRE(qr.cols() == n);
  CHECK(qr.info() == Eigen::Success);
  CHECK(qr.activeBackend() == tcqr::resolveBackend(o.backend, m, n));
  const MatrixType& packed = qr.matrixQR();
  REQUIRE(packed.rows() == m);
  REQUIRE(packed.cols() == n);
  const typename QRType::HCoeffsType& tau = qr.hCoeffs();
  REQUIRE(tau.size() == k);
  REQUIRE(packed.allFinite());
  REQUIRE(tau.allFinite());
  // A real Householder reflector I - tau v v^T with v(0) = 1 and Eigen's sign choice has tau = 0 or 1 <= tau <= 2.
  for (Index i = 0; i < k; ++i) {
    INFO("tau(" << i << ") = " << tau(i));
    CHECK((tau(i) == Scalar(0) || (tau(i) >= Scalar(1) - Scalar(4 * eps) && tau(i) <= Scalar(2) + Scalar(4 * eps))));
  }

  const Mat<Scalar> R = packed.template triangularView<Eigen::Upper>();
  // Eigen's own HouseholderSequence over the packed factors: the same Q, applied reflector by reflector (blocked).
  const Eigen::HouseholderSequence<MatrixType, typename QRType::HCoeffsType> seq(qr.matrixQR(), qr.hCoeffs());
  REQUIRE(seq.rows() == m);
  REQUIRE(seq.cols() == m);

  if (o.fullQ) {
    const typename QRType::MatrixQType Q = qr.householderQ();
    REQUIRE(Q.rows() == m);
    REQUIRE(Q.cols() == m);
    CHECK(report("orthogonality(full Q)", orthogonalityRatio<Scalar>(Q)) <= kRatioBound);
    CHECK(report("backward(full Q, R)", backwardRatio<Scalar>(A, Q, R)) <= kRatioBound);
    // The same reflectors applied two ways (WY on the backend, by Eigen on the host): rounding-level difference.
    const Mat<Scalar> seqQ = seq;
    if (m > 0)
      CHECK(report("|Q - HouseholderSequence| / (max(m,n) eps)",
                   (toDouble(Q) - toDouble(seqQ)).norm() / (double(std::max(m, n)) * eps)) <= kRatioBound);
  }

  const Mat<Scalar> Qthin = qr.householderQ() * Mat<Scalar>::Identity(m, k);
  REQUIRE(Qthin.rows() == m);
  REQUIRE(Qthin.cols() == k);
  CHECK(report("orthogonality(thin Q)", orthogonalityRatio<Scalar>(Qthin)) <= kRatioBound);
  CHECK(report("backward(thin Q, R)", backwardRatio<Scalar>(A, Qthin, R.topRows(k))) <= kRatioBound);
  if (m > 0) {
    const Mat<Scalar> seqThin = seq * Mat<Scalar>::Identity(m, k);
    CHECK(report("|Qthin - HouseholderSequence| / (max(m,n) eps)",
                 (toDouble(Qthin) - toDouble(seqThin)).norm() / (double(std::max(m, n)) * eps)) <= kRatioBound);
  }
}

/// Factors A with the options and checks the result (checkDecomposition). Returns the decomposition.
template <typename MatrixType>
TCQR<MatrixType> factorAndCheck(const Mat<typename MatrixType::Scalar>& A, const Options& o) {
  TCQR<MatrixType> qr = factor<MatrixType>(MatrixType(A), o);
  checkDecomposition<MatrixType>(A, qr, o);
  return qr;
}

/// Compares matrixQR(), hCoeffs() and Q with Eigen's HouseholderQR of the same matrix (condition number kappa).
/// Both follow Eigen's sign convention, so the factors agree entry by entry up to rounding.
template <typename MatrixType>
void checkAgainstEigen(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, double kappa) {
  using Scalar = typename MatrixType::Scalar;
  const Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  if (k == 0) return;
  INFO("comparison with Eigen::HouseholderQR, A is " << m << " x " << n << ", kappa " << kappa);
  const Eigen::HouseholderQR<MatrixType> ref{MatrixType(A)};
  const double tol = kAgreementFactor * kappa * double(std::max(m, n)) * epsOf<Scalar>();
  // Householder's sign choice beta = -sign(alpha) ||x|| is ill-determined where the pre-reflection diagonal alpha is
  // at rounding level; there Eigen's tau = 1 + |alpha| / ||x|| is 1 to within rounding, and two correct
  // implementations may pick opposite signs, after which their factors legitimately differ (only the accuracy ratios
  // checked elsewhere stay meaningful). Compare entry by entry only up to the first such column.
  // |tau - 1| = |alpha| / ||x||; "rounding level" is taken as 1000 eps, far below a random column's typical
  // 1 / sqrt(m).
  const double ambiguous = 1000.0 * epsOf<Scalar>();
  Index kc = k;
  for (Index i = 0; i < k; ++i)
    if (m > i + 1 && std::abs(double(ref.hCoeffs()(i)) - 1.0) <= ambiguous) {
      kc = i;
      MESSAGE("Householder sign ill-determined at column " << i << " (Eigen tau = " << double(ref.hCoeffs()(i))
                                                            << "): comparing the first " << i << " columns only");
      break;
    }
  const Eigen::MatrixXd mine = toDouble(qr.matrixQR()).leftCols(kc), theirs = toDouble(ref.matrixQR()).leftCols(kc);
  const Eigen::MatrixXd dR = (mine - theirs).topRows(kc).triangularView<Eigen::Upper>();
  const Eigen::MatrixXd dY = (mine - theirs).triangularView<Eigen::StrictlyLower>();
  const double yNorm = Eigen::MatrixXd(theirs.triangularView<Eigen::StrictlyLower>()).norm();
  CHECK(report("R vs Eigen / tol", dR.norm() / std::max(1e-300, toDouble(A).norm()) / tol) <= 1.0);
  CHECK(report("Householder vectors vs Eigen / tol", dY.norm() / std::max(1.0, yNorm) / tol) <= 1.0);
  CHECK(report("hCoeffs vs Eigen / tol",
               relativeDifference(qr.hCoeffs().head(kc), ref.hCoeffs().head(kc)) / tol) <= 1.0);
  // Same sign convention: the diagonals of R agree in sign.
  for (Index i = 0; i < kc; ++i) {
    INFO("R(" << i << "," << i << "): " << mine(i, i) << " vs Eigen " << theirs(i, i) << ", tau "
              << double(qr.hCoeffs()(i)) << " vs Eigen " << double(ref.hCoeffs()(i)));
    CHECK((mine(i, i) < 0) == (theirs(i, i) < 0));
  }
  if (kc < k) return;
  // Q applied to a block of vectors, against Eigen's householderQ().
  const Mat<Scalar> B = uniformMatrix<Scalar>(m, 3);
  const Mat<Scalar> QB = qr.householderQ() * B, QtB = qr.householderQ().transpose() * B;
  const Mat<Scalar> refQB = ref.householderQ() * B, refQtB = ref.householderQ().transpose() * B;
  CHECK(report("Q*B vs Eigen / tol", relativeDifference(QB, refQB) / tol) <= 1.0);
  CHECK(report("Q^T*B vs Eigen / tol", relativeDifference(QtB, refQtB) / tol) <= 1.0);
}

// ---- Q as an operator --------------------------------------------------------------------------------------------

/// Products with Q, Q^T, Q^*, from the left and the right, setLength(), applyOnTheLeft/Right, compared with Eigen's
/// own HouseholderSequence over the same factors (householderSequence()): only rounding may differ, so the
/// difference relative to the operand, divided by max(m, n) eps, must stay <= kRatioBound.
template <typename MatrixType>
void checkQOperator(const TCQR<MatrixType>& qr, bool fullQ) {
  using Scalar = typename MatrixType::Scalar;
  const Index m = qr.rows(), n = qr.cols(), k = std::min(m, n);
  const double scale = double(std::max<Index>(std::max(m, n), 1)) * epsOf<Scalar>();
  INFO("Q operator, A is " << m << " x " << n);
  const auto seq = qr.householderSequence();
  const Mat<Scalar> B = uniformMatrix<Scalar>(m, 3), C = uniformMatrix<Scalar>(2, m);
  auto ratio = [&](const Mat<Scalar>& x, const Mat<Scalar>& y, const Mat<Scalar>& operand) {
    if (x.size() == 0) return 0.0;
    return (toDouble(x) - toDouble(y)).norm() / (std::max(toDouble(operand).norm(), 1e-300) * scale);
  };

  CHECK(qr.householderQ().rows() == m);
  CHECK(qr.householderQ().cols() == m);
  CHECK(qr.householderQ().length() == k);

  Mat<Scalar> x = qr.householderQ() * B;
  CHECK(report("Q*B", ratio(x, seq * B, B)) <= kRatioBound);
  x = qr.householderQ().transpose() * B;
  CHECK(report("Q^T*B", ratio(x, seq.transpose() * B, B)) <= kRatioBound);
  x = qr.householderQ().adjoint() * B;
  CHECK(report("Q^*B", ratio(x, seq.adjoint() * B, B)) <= kRatioBound);
  x = qr.householderQ().inverse() * B;
  CHECK(report("Q^-1*B", ratio(x, seq.transpose() * B, B)) <= kRatioBound);
  x = C * qr.householderQ();
  CHECK(report("C*Q", ratio(x, C * seq, C)) <= kRatioBound);
  x = C * qr.householderQ().transpose();
  CHECK(report("C*Q^T", ratio(x, C * seq.transpose(), C)) <= kRatioBound);
  // Round trip: Q^T (Q B) = B.
  const Mat<Scalar> QB = qr.householderQ() * B;
  x = qr.householderQ().transpose() * QB;
  CHECK(report("Q^T Q B", ratio(x, B, B)) <= kRatioBound);

  for (Index len : {Index(0), k / 2, k}) {
    INFO("setLength(" << len << ")");
    auto seqLen = seq;
    seqLen.setLength(len);
    x = qr.householderQ().setLength(len) * B;
    CHECK(report("Q_len*B", ratio(x, seqLen * B, B)) <= kRatioBound);
    x = qr.householderQ().setLength(len).transpose() * B;
    CHECK(report("Q_len^T*B", ratio(x, seqLen.transpose() * B, B)) <= kRatioBound);
    if (fullQ) {
      const Mat<Scalar> Qlen = qr.householderQ().setLength(len);
      const Mat<Scalar> refQlen = seqLen;
      CHECK(report("Q_len", ratio(Qlen, refQlen, Mat<Scalar>::Identity(m, m))) <= kRatioBound);
    }
  }

  Mat<Scalar> B2 = B;
  B2.applyOnTheLeft(qr.householderQ().adjoint());
  CHECK(report("applyOnTheLeft(Q^*)", ratio(B2, seq.adjoint() * B, B)) <= kRatioBound);
  B2 = B;
  B2.applyOnTheLeft(qr.householderQ());
  CHECK(report("applyOnTheLeft(Q)", ratio(B2, seq * B, B)) <= kRatioBound);
  Mat<Scalar> C2 = C;
  C2.applyOnTheRight(qr.householderQ());
  CHECK(report("applyOnTheRight(Q)", ratio(C2, C * seq, C)) <= kRatioBound);
  C2 = C;
  C2.applyOnTheRight(qr.householderQ().transpose());
  CHECK(report("applyOnTheRight(Q^T)", ratio(C2, C * seq.transpose(), C)) <= kRatioBound);

  // In place on other kinds of storage. Column-major views are handed to the backend as they are (a block of a larger
  // matrix: outer stride > rows; a Map with an outer stride; a vector), everything else goes through the transfer
  // buffer (row-major storage, a row vector): the view changes and nothing around it does.
  {
    Mat<Scalar> big = uniformMatrix<Scalar>(m + 5, 7);
    const Mat<Scalar> before = big;
    const Mat<Scalar> op = before.block(2, 1, m, 3);
    big.block(2, 1, m, 3).applyOnTheLeft(qr.householderQ().transpose());
    CHECK(report("block.applyOnTheLeft(Q^T)", ratio(big.block(2, 1, m, 3), seq.transpose() * op, op)) <= kRatioBound);
    Mat<Scalar> outside = big;
    outside.block(2, 1, m, 3) = before.block(2, 1, m, 3);
    CHECK(outside == before);
  }
  {
    Mat<Scalar> big = uniformMatrix<Scalar>(4, m + 3);
    const Mat<Scalar> before = big;
    const Mat<Scalar> op = before.block(1, 2, 2, m);
    big.block(1, 2, 2, m).applyOnTheRight(qr.householderQ());
    CHECK(report("block.applyOnTheRight(Q)", ratio(big.block(1, 2, 2, m), op * seq, op)) <= kRatioBound);
    Mat<Scalar> outside = big;
    outside.block(1, 2, 2, m) = before.block(1, 2, 2, m);
    CHECK(outside == before);
  }
  {
    const Scalar pad = Scalar(7);
    std::vector<Scalar> storage(static_cast<size_t>((m + 3) * 3), pad);
    Eigen::Map<Mat<Scalar>, 0, Eigen::OuterStride<>> map(storage.data(), m, 3, Eigen::OuterStride<>(m + 3));
    map = B;
    map.applyOnTheLeft(qr.householderQ());
    CHECK(report("Map<OuterStride>.applyOnTheLeft(Q)", ratio(map, seq * B, B)) <= kRatioBound);
    bool padIntact = true;
    for (Index j = 0; j < 3; ++j)
      for (Index i = m; i < m + 3; ++i) padIntact = padIntact && storage[static_cast<size_t>(i + j * (m + 3))] == pad;
    CHECK(padIntact);
  }
  {
    Eigen::Matrix<Scalar, Eigen::Dynamic, 1> v = B.col(1);
    v.applyOnTheLeft(qr.householderQ());
    CHECK(report("vector.applyOnTheLeft(Q)", ratio(v, seq * B.col(1), B.col(1))) <= kRatioBound);
    Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rm = B;
    rm.applyOnTheLeft(qr.householderQ().transpose());
    CHECK(report("row-major.applyOnTheLeft(Q^T)", ratio(rm, seq.transpose() * B, B)) <= kRatioBound);
    Eigen::Matrix<Scalar, 1, Eigen::Dynamic> row = C.row(0);
    row.applyOnTheRight(qr.householderQ());
    const Mat<Scalar> c0 = C.row(0);  // (Eigen's row-vector block times a HouseholderSequence does not compile)
    CHECK(report("row vector.applyOnTheRight(Q)", ratio(row, c0 * seq, c0)) <= kRatioBound);
    // One row of a column-major matrix: handed over as it is, with ld > 1.
    Mat<Scalar> wide = uniformMatrix<Scalar>(3, m + 2);
    const Mat<Scalar> wideBefore = wide, r1 = wide.block(1, 2, 1, m);
    wide.block(1, 2, 1, m).applyOnTheRight(qr.householderQ());
    CHECK(report("one-row block.applyOnTheRight(Q)", ratio(wide.block(1, 2, 1, m), r1 * seq, r1)) <= kRatioBound);
    Mat<Scalar> wideOutside = wide;
    wideOutside.block(1, 2, 1, m) = wideBefore.block(1, 2, 1, m);
    CHECK(wideOutside == wideBefore);
    // Eigen flags an IndexedView (every other column) as direct access but it has no data(): the buffer is used.
    Mat<Scalar> every = uniformMatrix<Scalar>(m, 6);
    const Mat<Scalar> evenCols = every(Eigen::all, Eigen::seqN(0, 3, 2));
    every(Eigen::all, Eigen::seqN(0, 3, 2)).applyOnTheLeft(qr.householderQ());
    CHECK(report("IndexedView.applyOnTheLeft(Q)", ratio(every(Eigen::all, Eigen::seqN(0, 3, 2)), seq * evenCols,
                                                        evenCols)) <= kRatioBound);
  }

  // Products into a new matrix from other kinds of operands. Column-major storage is read where it lies (a block of a
  // larger matrix, a Map with an outer stride, a column), anything else is evaluated first (row-major storage, an
  // expression); a row-vector result is row-major and goes through the transfer buffer. The operand is not modified.
  {
    const Mat<Scalar> big = uniformMatrix<Scalar>(m + 5, 7), bigBefore = big;
    const Mat<Scalar> op = big.block(2, 1, m, 3);
    x = qr.householderQ().transpose() * big.block(2, 1, m, 3);
    CHECK(report("Q^T*block", ratio(x, seq.transpose() * op, op)) <= kRatioBound);
    CHECK(big == bigBefore);
    const Mat<Scalar> wide = uniformMatrix<Scalar>(4, m + 3);
    const Mat<Scalar> opr = wide.block(1, 2, 2, m);
    x = wide.block(1, 2, 2, m) * qr.householderQ();
    CHECK(report("block*Q", ratio(x, opr * seq, opr)) <= kRatioBound);
    std::vector<Scalar> storage(static_cast<size_t>((m + 3) * 3), Scalar(7));
    Eigen::Map<Mat<Scalar>, 0, Eigen::OuterStride<>> map(storage.data(), m, 3, Eigen::OuterStride<>(m + 3));
    map = B;
    const Eigen::Map<const Mat<Scalar>, 0, Eigen::OuterStride<>> cmap(storage.data(), m, 3,
                                                                     Eigen::OuterStride<>(m + 3));
    x = qr.householderQ() * cmap;
    CHECK(report("Q*Map<OuterStride>", ratio(x, seq * B, B)) <= kRatioBound);
    const Eigen::Matrix<Scalar, Eigen::Dynamic, 1> v = qr.householderQ().transpose() * B.col(2);
    CHECK(report("Q^T*column", ratio(v, seq.transpose() * B.col(2), B.col(2))) <= kRatioBound);
    const Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rm = B;
    x = qr.householderQ() * rm;
    CHECK(report("Q*row-major", ratio(x, seq * B, B)) <= kRatioBound);
    const Mat<Scalar> twoB = B + B, twoC = C + C;
    x = qr.householderQ().transpose() * (B + B);
    CHECK(report("Q^T*expression", ratio(x, seq.transpose() * twoB, twoB)) <= kRatioBound);
    x = (C + C) * qr.householderQ().transpose();
    CHECK(report("expression*Q^T", ratio(x, twoC * seq.transpose(), twoC)) <= kRatioBound);
    const Eigen::Matrix<Scalar, 1, Eigen::Dynamic> r = C.row(1) * qr.householderQ();
    const Mat<Scalar> c1 = C.row(1);
    CHECK(report("row*Q", ratio(r, c1 * seq, c1)) <= kRatioBound);
  }

  if (fullQ) {
    const Mat<Scalar> Qt = qr.householderQ().transpose();
    const Mat<Scalar> Q = qr.householderQ();
    CHECK(report("Q^T evaluated vs transpose of Q", ratio(Qt, Q.transpose(), Mat<Scalar>::Identity(m, m))) <=
          kRatioBound);
  }
}

// ---- solving -----------------------------------------------------------------------------------------------------

/// solve(), transpose().solve() and adjoint().solve() for one and several right-hand sides.
/// A must have full rank; kappa bounds the condition number of A and of its leading min(m, n) columns.
/// The solutions are compared with Eigen's HouseholderQR, which solves with the same formulas.
template <typename MatrixType>
void checkSolve(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, double kappa) {
  using Scalar = typename MatrixType::Scalar;
  const Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  INFO("solve, A is " << m << " x " << n << ", kappa " << kappa);
  const Eigen::HouseholderQR<MatrixType> ref{MatrixType(A)};
  // Least-squares solutions are sensitive to kappa^2 (the residual term); the other cases to kappa.
  const double tolLS = kAgreementFactor * kappa * kappa * double(std::max<Index>(std::max(m, n), 1)) * epsOf<Scalar>();
  const double tol = kAgreementFactor * kappa * double(std::max<Index>(std::max(m, n), 1)) * epsOf<Scalar>();

  for (Index nrhs : {Index(1), Index(3)}) {
    INFO(nrhs << " right-hand side(s)");
    const Mat<Scalar> b = uniformMatrix<Scalar>(m, nrhs);
    const Mat<Scalar> x = qr.solve(b);
    REQUIRE(x.rows() == n);
    REQUIRE(x.cols() == nrhs);
    CHECK(x.allFinite());
    const Mat<Scalar> xRef = ref.solve(b);
    if (m >= n) {
      CHECK(report("normal equations", normalEquationsRatio<Scalar>(A, x, b)) <= kRatioBound);
      if (m == n) CHECK(report("residual (square)", residualRatio<Scalar>(A, x, b)) <= kRatioBound);
      CHECK(report("solve vs Eigen / tol", relativeDifference(x, xRef) / (m == n ? tol : tolLS)) <= 1.0);
    } else {
      // Wide: the basic solution (zero beyond the first m entries), which solves A x = b.
      CHECK(report("residual (wide)", residualRatio<Scalar>(A, x, b)) <= kRatioBound);
      CHECK(x.bottomRows(n - k).isZero(0));
      CHECK(report("solve vs Eigen / tol", relativeDifference(x, xRef) / tol) <= 1.0);
    }
    if (nrhs > 1) {
      // Column j of a multi-rhs solve equals the single-rhs solve of column j (up to rounding: the products may sum
      // in another order). Both are backward stable, so they differ by at most the forward error bound, which for
      // least squares carries the residual term (Higham, Accuracy and Stability of Numerical Algorithms, 20.1):
      // relative eps kappa (1 + kappa ||r|| / (||A|| ||x||)). Without it a small x of a large residual (5 x 1, kappa
      // 20, |x| << ||b||: seed 9843442414592118333 on the H100) failed by rounding alone.
      for (Index j = 0; j < nrhs; ++j) {
        const Mat<Scalar> xj = qr.solve(b.col(j));
        double colTol = tol;
        if (m > n) {
          const double r = (toDouble(b.col(j)) - toDouble(A) * toDouble(xj)).norm();
          const double xa = toDouble(A).norm() * toDouble(xj).norm();
          colTol = xa > 0 ? tol * (1.0 + kappa * r / xa) : std::numeric_limits<double>::infinity();
        }
        CHECK(report("column of multi-rhs solve", relativeDifference(x.col(j), xj) / colTol) <= 1.0);
      }
    }

    // A^T y = c (minimum-norm solution when A is tall; Eigen's formula, which uses the first m equations, when
    // A is wide).
    const Mat<Scalar> c = uniformMatrix<Scalar>(n, nrhs);
    const Mat<Scalar> y = qr.transpose().solve(c);
    const Mat<Scalar> ya = qr.adjoint().solve(c);
    REQUIRE(y.rows() == m);
    REQUIRE(y.cols() == nrhs);
    const Mat<Scalar> yRef = ref.transpose().solve(c);
    CHECK(report("transpose().solve vs Eigen / tol", relativeDifference(y, yRef) / tol) <= 1.0);
    CHECK(ya == y);  // the same computation for real scalars
    if (m >= n) {
      const Mat<Scalar> At = A.transpose();
      CHECK(report("residual of A^T y - c", residualRatio<Scalar>(At, y, c)) <= kRatioBound);
    }
  }
}

/// absDeterminant() and logAbsDeterminant() of a square A against Eigen's.
template <typename MatrixType>
void checkDeterminant(const Mat<typename MatrixType::Scalar>& A, const TCQR<MatrixType>& qr, double kappa) {
  using Scalar = typename MatrixType::Scalar;
  const Index n = A.rows();
  REQUIRE(A.cols() == n);
  const Eigen::HouseholderQR<MatrixType> ref{MatrixType(A)};
  const double tol = kAgreementFactor * kappa * double(std::max<Index>(n, 1)) * epsOf<Scalar>();
  const double mine = double(qr.absDeterminant()), theirs = double(ref.absDeterminant());
  INFO("absDeterminant " << mine << " vs Eigen " << theirs);
  REQUIRE(std::isfinite(theirs));
  REQUIRE(theirs > 0.0);
  CHECK(mine >= 0.0);
  CHECK(report("absDeterminant vs Eigen / tol", std::abs(mine - theirs) / theirs / tol) <= 1.0);
  const double logMine = double(qr.logAbsDeterminant()), logTheirs = double(ref.logAbsDeterminant());
  INFO("logAbsDeterminant " << logMine << " vs Eigen " << logTheirs);
  CHECK(report("logAbsDeterminant vs Eigen / tol", std::abs(logMine - logTheirs) / tol) <= 1.0);
}

// ---- suites ------------------------------------------------------------------------------------------------------

struct Shape {
  Index m, n, blockSize;
};

/// The shapes every backend is checked on: empty, vectors, tall, square, wide, odd sizes, and a 64 x 64 matrix
/// with panel width 8 (three levels of recursion) next to the default panel width.
inline std::vector<Shape> standardShapes() {
  return {{0, 0, 0},    {0, 5, 0},     {5, 0, 0},    {1, 1, 0},      {1, 9, 0},     {9, 1, 0},
          {300, 80, 0}, {120, 120, 0}, {80, 300, 0}, {257, 129, 0},  {1000, 37, 0}, {129, 257, 0},
          {33, 33, 0},  {64, 64, 8},   {64, 64, 0},  {200, 100, 16}, {1000, 400, 0}};
}

/// Well-conditioned random matrix of the shape (kappa = 10, arithmetic spectrum), factored and fully checked,
/// including the comparison with Eigen and the Q operator.
template <typename Scalar>
void shapeSuite(Backend backend) {
  using M = Mat<Scalar>;
  constexpr double kappa = 10.0;
  for (const Shape& s : standardShapes()) {
    INFO("shape " << s.m << " x " << s.n << ", block size " << s.blockSize);
    const Options o{backend, s.blockSize, true};
    const M A = conditionedMatrix<Scalar>(s.m, s.n, Spectrum::Arithmetic, kappa);
    const TCQR<M> qr = factorAndCheck<M>(A, o);
    checkAgainstEigen<M>(A, qr, kappa);
    checkQOperator<M>(qr, true);
  }
}

/// Ill-conditioned inputs: Householder QR is backward stable whatever the condition number, so the ratios hold
/// for kappa = 1e6 in float and 1e12 in double, for every spectrum shape.
template <typename Scalar>
void conditionedSuite(Backend backend, Index m, Index n) {
  using M = Mat<Scalar>;
  const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
  for (Spectrum sp : {Spectrum::Arithmetic, Spectrum::Geometric, Spectrum::Clustered}) {
    INFO(doctest::String(spectrumName(sp)) << " spectrum, kappa " << kappa);
    const M A = conditionedMatrix<Scalar>(m, n, sp, kappa);
    factorAndCheck<M>(A, Options{backend, 0, true});
    factorAndCheck<M>(A, Options{backend, 8, true});  // deeper recursion
  }
}

/// Inputs where Householder QR meets an exactly zero tail: Eigen stores tau = 0 (the identity) for those columns,
/// which a TSQR panel cannot reproduce, so the factorization must route their panels to geqrf (Algorithms.hpp,
/// identityReflectorColumns). Checks tau == 0 exactly wherever Eigen's is, and agreement with Eigen everywhere.
template <typename Scalar>
void identityReflectorSuite(Backend backend) {
  using M = Mat<Scalar>;
  const Index m = 600, n = 64;
  auto wellConditionedUpper = [](Index k) {  // I + small strictly upper part: kappa about 2
    M U = M::Identity(k, k);
    U.template triangularView<Eigen::StrictlyUpper>() = Scalar(0.3 / double(k)) * uniformMatrix<Scalar>(k, k);
    return U;
  };
  struct Case {
    const char* name;
    M A;
  };
  std::vector<Case> cases;
  cases.push_back({"zero columns", withZeroColumns<Scalar>(m, n, {0, 5, 31, 32, 40, 63})});
  cases.push_back({"one zero column, in the second leaf only", withZeroColumns<Scalar>(m, n, {40})});
  {
    // Column j = e_p(j) for a random permutation p of the first n rows: Householder swaps rows, and a column whose
    // 1 already sits at or above the diagonal once the earlier swaps are done gets tau = 0 (the last one always).
    std::vector<Index> p(static_cast<size_t>(n));
    for (Index j = 0; j < n; ++j) p[static_cast<size_t>(j)] = j;
    for (Index j = n - 1; j > 0; --j) {
      const Index r = static_cast<Index>(std::abs(uniformMatrixD(1, 1)(0, 0)) * double(j + 1)) % (j + 1);
      std::swap(p[static_cast<size_t>(j)], p[static_cast<size_t>(r)]);
    }
    M A = M::Zero(m, n);
    for (Index j = 0; j < n; ++j) A(p[static_cast<size_t>(j)], j) = Scalar(1);
    cases.push_back({"permutation-like columns", A});
  }
  {
    // Column 0 = e_5 and column 1 = e_1, the rest dense: H_0 exchanges rows 0 and 5 and leaves column 1 alone, whose
    // tail is then zero (tau_1 = 0) although A(2 : m, 0 : 1) is not zero.
    M A = uniformMatrix<Scalar>(m, n);
    A.leftCols(2).setZero();
    A(5, 0) = Scalar(1);
    A(1, 1) = Scalar(1);
    cases.push_back({"sparse leading columns e_5, e_1", A});
  }
  {
    M A = M::Zero(m, n);
    A.topRows(n) = wellConditionedUpper(n);
    cases.push_back({"upper triangular [U; 0]", A});
  }
  cases.push_back({"identity", M::Identity(m, n)});
  {
    const Index b = 20;  // [B C; 0 D]: tau_{b-1} = 0, the rest ordinary
    M A = uniformMatrix<Scalar>(m, n);
    A.topLeftCorner(b, b) = conditionedMatrix<Scalar>(b, b, Spectrum::Arithmetic, 10.0);
    A.bottomLeftCorner(m - b, b).setZero();
    cases.push_back({"block upper triangular [B C; 0 D]", A});
  }
  {
    const Index b = 10;  // [B C; 0 0]: tau_j = 0 from column b - 1 on
    M A = M::Zero(m, n);
    A.topRows(b) = uniformMatrix<Scalar>(b, n);
    A.topLeftCorner(b, b) = conditionedMatrix<Scalar>(b, b, Spectrum::Arithmetic, 10.0);
    cases.push_back({"[B C; 0 0]", A});
  }
  for (const Case& c : cases) {
    for (tcqr::Panel panel : {tcqr::Panel::Auto, tcqr::Panel::Tsqr}) {
      INFO(c.name << ", panel " << (panel == tcqr::Panel::Tsqr ? "Tsqr" : "Auto"));
      const TCQR<M> qr = factorAndCheck<M>(c.A, Options{backend, 32, true, panel});
      const Eigen::HouseholderQR<M> ref{M(c.A)};
      Index identities = 0;
      for (Index j = 0; j < n; ++j) {
        if (ref.hCoeffs()(j) != Scalar(0)) continue;
        ++identities;
        INFO("column " << j << " (Eigen tau = 0)");
        CHECK(qr.hCoeffs()(j) == Scalar(0));  // (R(j, j) then keeps the updated entry's sign: checkAgainstEigen)
      }
      CHECK(identities > 0);  // (the case exercises what it is meant to)
      checkAgainstEigen<M>(c.A, qr, 100.0);
    }
  }
  {
    // Block size 48: the leaves are 48, 48 and 4 columns wide, and only the last can be a TSQR panel.
    const M A = withZeroColumns<Scalar>(m, 100, {98});
    for (tcqr::Panel panel : {tcqr::Panel::Auto, tcqr::Panel::Tsqr}) {
      INFO("block size 48, zero column 98, panel " << (panel == tcqr::Panel::Tsqr ? "Tsqr" : "Auto"));
      const TCQR<M> qr = factorAndCheck<M>(A, Options{backend, 48, true, panel});
      CHECK(qr.hCoeffs()(98) == Scalar(0));
      checkAgainstEigen<M>(A, qr, 100.0);
    }
  }
}

/// Rank-deficient inputs: exact zero columns (tau = 0 for them, no NaN) and duplicated columns.
template <typename Scalar>
void rankDeficientSuite(Backend backend) {
  using M = Mat<Scalar>;
  const Options o{backend, 16, true};
  for (tcqr::Panel panel : {tcqr::Panel::Auto, tcqr::Panel::Tsqr}) {
    INFO("zero columns, panel " << (panel == tcqr::Panel::Tsqr ? "Tsqr" : "Auto"));
    const Index m = 150, n = 70;
    const std::vector<Index> zeros = {0, 17, 31, 32, 69};  // first, inside a panel, panel boundary, last
    const M A = withZeroColumns<Scalar>(m, n, zeros);
    const TCQR<M> qr = factorAndCheck<M>(A, Options{backend, panel == tcqr::Panel::Tsqr ? 32 : 16, true, panel});
    for (Index j : zeros) {
      INFO("zero column " << j);
      CHECK(qr.hCoeffs()(j) == Scalar(0));
      CHECK(qr.matrixQR().col(j).isZero(0));  // R(:, j) = Q^T 0 = 0 and the (trivial) reflector is stored as 0
    }
  }
  identityReflectorSuite<Scalar>(backend);
  {
    INFO("all-zero matrix");
    const M A = M::Zero(40, 25);
    const TCQR<M> qr = factorAndCheck<M>(A, o);
    CHECK(qr.hCoeffs().isZero(0));
    CHECK(qr.matrixQR().isZero(0));
  }
  for (auto mn :
       {std::pair<Index, Index>{200, 90}, std::pair<Index, Index>{90, 90}, std::pair<Index, Index>{60, 140}}) {
    INFO("duplicated columns, " << mn.first << " x " << mn.second);
    factorAndCheck<M>(withDuplicatedColumns<Scalar>(mn.first, mn.second), o);
  }
  {
    INFO("rank 5 (U diag(s) V^T with 5 singular values)");
    Eigen::VectorXd s = Eigen::VectorXd::LinSpaced(5, 1.0, 0.5);
    factorAndCheck<M>(withSingularValues<Scalar>(100, 60, s), o);
  }
}

/// A test matrix whose leading min(m, n) columns are well conditioned (kappa 10) whatever the shape: what the
/// wide solve (basic solution) and the transposed solve of wide matrices depend on.
template <typename Scalar>
Mat<Scalar> solvableMatrix(Index m, Index n) {
  const Index k = std::min(m, n);
  Mat<Scalar> A(m, n);
  A.leftCols(k) = conditionedMatrix<Scalar>(m, k, Spectrum::Arithmetic, 10.0);
  A.rightCols(n - k) = Scalar(0.5) * uniformMatrix<Scalar>(m, n - k);
  return A;
}

/// Every shape runs with Panel::Geqrf and Panel::Tsqr (TSQR applies to panels of at most 32 columns with more rows
/// than columns; other panels fall back to geqrf), with panel widths that make the recursion end in TSQR panels
/// of one or several 256-row tiles.
template <typename Scalar>
void panelSuite(Backend backend) {
  using M = Mat<Scalar>;
  struct Case {
    Index m, n, blockSize;
  };
  for (const Case& c : {Case{2048, 32, 0}, Case{1000, 37, 0}, Case{600, 128, 32}, Case{513, 96, 16}, Case{300, 300, 32},
                        Case{257, 129, 8}, Case{120, 250, 32}, Case{40, 32, 32}, Case{31, 31, 0}, Case{300, 1, 0}}) {
    INFO("panel suite, " << c.m << " x " << c.n << ", block size " << c.blockSize);
    const M A = conditionedMatrix<Scalar>(c.m, c.n, Spectrum::Arithmetic, 10.0);
    // On the CUDA backend Panel::Auto factors these panels with the one-kernel Householder panel (Algorithms.hpp
    // usePanelKernel); on the host it is Geqrf's, already run.
    std::vector<tcqr::Panel> panels{tcqr::Panel::Geqrf, tcqr::Panel::Tsqr};
    if (backend == Backend::Cuda) panels.push_back(tcqr::Panel::Auto);
    for (tcqr::Panel panel : panels) {
      INFO("panel " << (panel == tcqr::Panel::Tsqr ? "Tsqr" : panel == tcqr::Panel::Geqrf ? "Geqrf" : "Auto"));
      // (the full m x m Q only for moderate m: Q^T Q of a 2048 x 2048 Q would dominate the host test's time)
      const TCQR<M> qr = factorAndCheck<M>(A, Options{backend, c.blockSize, c.m <= 600, panel});
      checkAgainstEigen<M>(A, qr, 10.0);
    }
  }
  const Options tsqr{backend, 32, true, tcqr::Panel::Tsqr};
  {
    const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
    for (Spectrum sp : {Spectrum::Geometric, Spectrum::Clustered}) {
      INFO("TSQR panels, " << doctest::String(spectrumName(sp)) << " spectrum, kappa " << kappa);
      factorAndCheck<M>(conditionedMatrix<Scalar>(700, 64, sp, kappa), tsqr);
    }
  }
  {
    INFO("TSQR panels, duplicated and zero columns");
    factorAndCheck<M>(withDuplicatedColumns<Scalar>(700, 64), tsqr);
    factorAndCheck<M>(withZeroColumns<Scalar>(600, 40, {0, 5, 39}), tsqr);
  }
  {
    INFO("TSQR panels: solve");
    const M S = solvableMatrix<Scalar>(900, 70);
    checkSolve<M>(S, factor<M>(S, tsqr), 20.0);
  }
  // A factorization that is one TSQR panel (n <= 32 < m) keeps T instead of W (applyYT): every product with Q, solve
  // and copies go through T; a later compute() of a shape that needs W, and back, must switch forms.
  for (auto mn : {std::pair<Index, Index>{700, 32}, std::pair<Index, Index>{300, 17}, std::pair<Index, Index>{33, 32}}) {
    INFO("one TSQR panel (T instead of W), " << mn.first << " x " << mn.second);
    const M S = solvableMatrix<Scalar>(mn.first, mn.second);
    TCQR<M> qr = factorAndCheck<M>(S, tsqr);
    checkAgainstEigen<M>(S, qr, 20.0);
    checkQOperator<M>(qr, true);
    checkSolve<M>(S, qr, 20.0);
    const TCQR<M> copy(qr);
    const M Wide = conditionedMatrix<Scalar>(300, 80, Spectrum::Arithmetic, 10.0);
    qr.compute(Wide);  // 80 columns: recursion with W; the copy keeps its T
    checkDecomposition<M>(Wide, qr, tsqr);
    checkQOperator<M>(qr, false);
    checkQOperator<M>(copy, false);
    checkSolve<M>(S, copy, 20.0);
    qr.compute(S);
    checkSolve<M>(S, qr, 20.0);
  }
  {
    INFO("one-panel shape with a zero column: the general path with W, and its copy");
    const M Z = withZeroColumns<Scalar>(600, 20, {3});
    const TCQR<M> qr = factorAndCheck<M>(Z, tsqr);
    const TCQR<M> copy(qr);
    checkQOperator<M>(copy, true);
  }
}

/// solve() on square, tall and wide matrices; determinants on square ones.
template <typename Scalar>
void solveSuite(Backend backend) {
  using M = Mat<Scalar>;
  const double kappa = 20.0;  // bounds the condition numbers of solvableMatrix() and of its leading columns
  for (auto mn : {std::pair<Index, Index>{100, 100}, std::pair<Index, Index>{333, 77}, std::pair<Index, Index>{77, 333},
                  std::pair<Index, Index>{1000, 37}, std::pair<Index, Index>{1, 1}, std::pair<Index, Index>{5, 1},
                  std::pair<Index, Index>{1, 5}}) {
    for (Index nb : {Index(0), Index(8)}) {
      const Options o{backend, nb, false};
      const M A = solvableMatrix<Scalar>(mn.first, mn.second);
      const TCQR<M> qr = factor<M>(A, o);
      REQUIRE(qr.info() == Eigen::Success);
      checkSolve<M>(A, qr, kappa);
    }
  }
  {
    INFO("empty right-hand side / empty matrix");
    const M A = solvableMatrix<Scalar>(20, 10);
    const TCQR<M> qr = factor<M>(A, Options{backend, 0, false});
    const M x = qr.solve(M(20, 0));
    CHECK(x.rows() == 10);
    CHECK(x.cols() == 0);
    const TCQR<M> qr0 = factor<M>(M(0, 4), Options{backend, 0, false});
    const M x0 = qr0.solve(M(0, 2));
    CHECK(x0.rows() == 4);
    CHECK(x0.cols() == 2);
    CHECK(x0.isZero(0));
  }
  for (Index n : {Index(1), Index(33), Index(64)}) {
    INFO("determinant, n = " << n);
    M A = conditionedMatrix<Scalar>(n, n, Spectrum::Arithmetic, 10.0);
    // Scale so that |det A| = 1 (the product of the singular values would underflow in float otherwise).
    const double logDet = Eigen::HouseholderQR<Eigen::MatrixXd>(toDouble(A)).logAbsDeterminant();
    A *= Scalar(std::exp(-logDet / double(n)));
    const TCQR<M> qr = factor<M>(A, Options{backend, 8, false});
    checkDeterminant<M>(A, qr, 10.0);
  }
}

/// Fixed-size, row-major, Map and expression inputs. The fixed-size and row-major types are those of the brief's
/// examples (Matrix4f and row-major MatrixXf for float, Matrix<double, 6, 3> for double): each distinct matrix type
/// instantiates the whole front end and the checks again, which is what makes this suite slow to compile.
template <typename Scalar>
void matrixTypeSuite(Backend backend) {
  using M = Mat<Scalar>;
  const Options o{backend, 0, true};
  if constexpr (std::is_same<Scalar, float>::value) {
    {
      INFO("fixed size 4 x 4");
      typedef Eigen::Matrix4f M4;
      const M A = conditionedMatrix<Scalar>(4, 4, Spectrum::Arithmetic, 10.0);
      const TCQR<M4> qr(M4(A), backend);
      checkDecomposition<M4>(A, qr, o);
      checkAgainstEigen<M4>(A, qr, 10.0);
      checkDeterminant<M4>(A, qr, 10.0);
      const M4 Q = qr.householderQ();  // fixed-size destination
      CHECK(orthogonalityRatio<Scalar>(Q) <= kRatioBound);
      const M4 B = uniformMatrix<Scalar>(4, 4);
      const auto seq = qr.householderSequence();
      const M4 QB = qr.householderQ() * B, BQt = B * qr.householderQ().transpose();
      const M4 refQB = seq * B, refBQt = B * seq.transpose();
      CHECK(relativeDifference(QB, refQB) <= kRatioBound * 4 * epsOf<Scalar>());
      CHECK(relativeDifference(BQt, refBQt) <= kRatioBound * 4 * epsOf<Scalar>());
      const Eigen::Vector4f b = uniformMatrix<Scalar>(4, 1);
      const Eigen::Vector4f x = qr.solve(b);
      CHECK(residualRatio<Scalar>(A, x, b) <= kRatioBound);
    }
    {
      INFO("row-major dynamic");
      typedef Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> MR;
      for (auto mn : {std::pair<Index, Index>{150, 60}, std::pair<Index, Index>{60, 150}}) {
        INFO(mn.first << " x " << mn.second);
        const M A = conditionedMatrix<Scalar>(mn.first, mn.second, Spectrum::Arithmetic, 10.0);
        const TCQR<MR> qr = factorAndCheck<MR>(A, o);
        checkAgainstEigen<MR>(A, qr, 10.0);
        const M S = solvableMatrix<Scalar>(mn.first, mn.second);
        checkSolve<MR>(S, factor<MR>(MR(S), o), 20.0);
        // Same input values as a column-major factorization: the same result.
        const TCQR<M> qrc = factor<M>(A, o);
        CHECK(relativeDifference(qr.matrixQR(), qrc.matrixQR()) <= double(mn.first) * epsOf<Scalar>());
      }
    }
  } else {
    INFO("fixed size 6 x 3");
    typedef Eigen::Matrix<Scalar, 6, 3> M63;
    const M A = conditionedMatrix<Scalar>(6, 3, Spectrum::Arithmetic, 10.0);
    const TCQR<M63> qr(M63(A), backend);
    checkDecomposition<M63>(A, qr, o);
    checkAgainstEigen<M63>(A, qr, 10.0);
    checkSolve<M63>(A, qr, 10.0);
    const M63 Qthin = qr.householderQ() * M63::Identity();  // fixed-size identity: the thin-Q idiom
    const M R = qr.matrixQR().template triangularView<Eigen::Upper>();
    CHECK(backwardRatio<Scalar>(A, Qthin, R.topRows(3)) <= kRatioBound);
    CHECK(orthogonalityRatio<Scalar>(Qthin) <= kRatioBound);
    const Eigen::Matrix<Scalar, 3, 1> tau = qr.hCoeffs();
    CHECK(tau.allFinite());
  }
  {
    INFO("Map and expression inputs");
    const Index m = 90, n = 40;
    const M A = conditionedMatrix<Scalar>(m, n, Spectrum::Arithmetic, 10.0);
    const M B = uniformMatrix<Scalar>(m, n);
    const double tight = double(m) * epsOf<Scalar>();
    std::vector<Scalar> storage(static_cast<size_t>(m * n));
    Eigen::Map<M>(storage.data(), m, n) = A;
    const Eigen::Map<M> mapped(storage.data(), m, n);

    const TCQR<M> viaMap(mapped, backend);
    checkDecomposition<M>(A, viaMap, o);
    const M sum = A * Scalar(2) + B;
    const TCQR<M> viaExpr(A * Scalar(2) + B, backend);
    checkDecomposition<M>(sum, viaExpr, o);
    CHECK(relativeDifference(viaExpr.matrixQR(), factor<M>(sum, o).matrixQR()) <= tight);

    // A block of a larger matrix (outer stride > rows; handed to the backend as it is) whose surroundings are NaN:
    // reading them would show in info() and the factors. The block is overwritten once compute() has returned, as
    // the contract allows (that a missing synchronization would show here is not guaranteed).
    M big = uniformMatrix<Scalar>(m + 7, n + 5);
    {
      M padded = M::Constant(m + 7, n + 5, std::numeric_limits<Scalar>::quiet_NaN());
      padded.block(3, 2, m, n) = big.block(3, 2, m, n);
      const M blockCopy = big.block(3, 2, m, n);
      TCQR<M> viaBlock;
      viaBlock.setBackend(backend).compute(padded.block(3, 2, m, n));
      padded.block(3, 2, m, n).setConstant(Scalar(-1));
      CHECK(viaBlock.info() == Eigen::Success);
      checkDecomposition<M>(blockCopy, viaBlock, o);
      CHECK(relativeDifference(viaBlock.matrixQR(), factor<M>(blockCopy, o).matrixQR()) <= tight);
    }

    const TCQR<M> viaTranspose(A.transpose(), backend);
    checkDecomposition<M>(A.transpose(), viaTranspose, o);
    CHECK(relativeDifference(viaTranspose.matrixQR(), factor<M>(M(A.transpose()), o).matrixQR()) <= tight);

    // solve() and transpose().solve() reading a block and writing into a block (both with outer stride > rows,
    // handed to the backend as they are), NaN around both: the same solutions as with plain matrices, and nothing
    // outside the destination block written.
    {
      const TCQR<M> qr = factor<M>(A, o);
      const Scalar nan = std::numeric_limits<Scalar>::quiet_NaN();
      const M b = uniformMatrix<Scalar>(m, 3), c = uniformMatrix<Scalar>(n, 2);
      M rhs = M::Constant(m + 4, 5, nan), out = M::Constant(n + 6, 4, nan);
      rhs.block(2, 1, m, 3) = b;
      out.block(3, 1, n, 3) = qr.solve(rhs.block(2, 1, m, 3));
      const M x = qr.solve(b);
      CHECK(relativeDifference(M(out.block(3, 1, n, 3)), x) <= tight);
      M outside = out;
      outside.block(3, 1, n, 3).setConstant(nan);
      CHECK(outside.array().isNaN().all());
      M rhsT = M::Constant(n + 3, 4, nan), outT = M::Constant(m + 2, 3, nan);
      rhsT.block(1, 2, n, 2) = c;
      outT.block(2, 0, m, 2) = qr.transpose().solve(rhsT.block(1, 2, n, 2));
      const M y = qr.transpose().solve(c);
      CHECK(relativeDifference(M(outT.block(2, 0, m, 2)), y) <= tight);
      CHECK(outT.topRows(2).array().isNaN().all());
      CHECK(outT.col(2).array().isNaN().all());
      // In place: the right-hand side is also the destination (a square A, so that Eigen's Solve assignment does not
      // resize the destination, which is the operand, first).
      const M S = conditionedMatrix<Scalar>(n, n, Spectrum::Arithmetic, 10.0);
      const TCQR<M> qrS = factor<M>(S, o);
      Eigen::Matrix<Scalar, Eigen::Dynamic, 1> v = c.col(0);
      v = qrS.solve(v);
      CHECK(relativeDifference(M(v), M(qrS.solve(c.col(0)))) <= tight);
    }

    // An IndexedView (every other column) and a unaryViewExpr as inputs: Eigen flags both as direct access, but
    // they are not storage the backend could read as it is.
    {
      const M wide = uniformMatrix<Scalar>(m, 2 * n);
      const TCQR<M> viaIndexed(wide(Eigen::all, Eigen::seqN(0, n, 2)), backend);
      const M picked = wide(Eigen::all, Eigen::seqN(0, n, 2));
      checkDecomposition<M>(picked, viaIndexed, o);
      CHECK(relativeDifference(viaIndexed.matrixQR(), factor<M>(picked, o).matrixQR()) <= tight);
      struct Twice {
        Scalar operator()(const Scalar& x) const { return Scalar(2) * x; }
      };
      const TCQR<M> viaView(A.unaryViewExpr(Twice()), backend);
      CHECK(relativeDifference(viaView.matrixQR(), factor<M>(M(Scalar(2) * A), o).matrixQR()) <= tight);
      const M b2 = uniformMatrix<Scalar>(m, 4);
      const M x2 = viaIndexed.solve(b2(Eigen::all, Eigen::seqN(0, 2, 2)));
      CHECK(relativeDifference(x2, M(viaIndexed.solve(M(b2(Eigen::all, Eigen::seqN(0, 2, 2)))))) <= tight);
    }

    // A strided Map (outer stride > rows) as input.
    const Eigen::Map<const M, 0, Eigen::OuterStride<>> strided(big.data(), m, n, Eigen::OuterStride<>(m + 7));
    const TCQR<M> viaStrided(strided, backend);
    checkDecomposition<M>(M(strided), viaStrided, o);
  }
}

/// One object through several compute() calls of different shapes, copies, assignment and moves.
template <typename Scalar>
void lifetimeSuite(Backend backend) {
  using M = Mat<Scalar>;
  const Options o{backend, 0, true};
  const M A = conditionedMatrix<Scalar>(70, 30, Spectrum::Arithmetic, 10.0);
  const M B = conditionedMatrix<Scalar>(25, 60, Spectrum::Geometric, 100.0);
  const M C = conditionedMatrix<Scalar>(64, 64, Spectrum::Arithmetic, 10.0);
  {
    INFO("compute() repeatedly with different shapes on one object");
    TCQR<M> qr;
    qr.setBackend(backend);
    qr.compute(A);
    checkDecomposition<M>(A, qr, o);
    qr.compute(B);
    checkDecomposition<M>(B, qr, o);
    qr.compute(M(0, 0));
    CHECK(qr.rows() == 0);
    CHECK(qr.matrixQR().size() == 0);
    qr.compute(C);
    checkDecomposition<M>(C, qr, o);
    qr.compute(A);  // back to a smaller problem: the cached host copies must be refreshed
    checkDecomposition<M>(A, qr, o);
  }
  {
    INFO("preallocating constructor");
    TCQR<M> qr(70, 30);
    qr.setBackend(backend).compute(A);
    checkDecomposition<M>(A, qr, o);
  }
  {
    INFO("copy construction and copy assignment give independent objects");
    TCQR<M> original = factor<M>(A, o);
    const M packedA = original.matrixQR();  // fetches the host copy before copying (cached state is copied too)
    TCQR<M> copy(original);
    TCQR<M> fresh = factor<M>(C, o);
    TCQR<M> copyNoCache = fresh;  // copy made before matrixQR() was ever read
    TCQR<M> assigned;
    assigned = original;
    original.compute(B);  // must not affect the copies
    fresh.compute(A);
    checkDecomposition<M>(B, original, o);
    checkDecomposition<M>(A, copy, o);
    checkDecomposition<M>(A, assigned, o);
    checkDecomposition<M>(C, copyNoCache, o);
    checkDecomposition<M>(A, fresh, o);
    CHECK(copy.matrixQR() == packedA);
    CHECK(assigned.matrixQR() == packedA);
    // Assigning over an object that holds a factorization of another shape.
    copy = fresh;
    fresh.compute(C);
    checkDecomposition<M>(A, copy, o);
    checkDecomposition<M>(C, fresh, o);
    // Self-assignment is harmless.
    TCQR<M>& alias = copy;
    copy = alias;
    checkDecomposition<M>(A, copy, o);
  }
  {
    INFO("move construction and move assignment");
    TCQR<M> source = factor<M>(A, o);
    TCQR<M> moved(std::move(source));
    checkDecomposition<M>(A, moved, o);
    TCQR<M> target = factor<M>(C, o);
    target = std::move(moved);
    checkDecomposition<M>(A, target, o);
    target.compute(B);
    checkDecomposition<M>(B, target, o);
  }
}

/// NaN and infinity in the input are reported through info(), without crash or exception.
template <typename Scalar>
void nonFiniteSuite(Backend backend) {
  using M = Mat<Scalar>;
  const Scalar bad[] = {std::numeric_limits<Scalar>::quiet_NaN(), std::numeric_limits<Scalar>::infinity(),
                        -std::numeric_limits<Scalar>::infinity()};
  for (Scalar v : bad) {
    for (auto mn : {std::pair<Index, Index>{60, 40}, std::pair<Index, Index>{40, 60}, std::pair<Index, Index>{1, 1}}) {
      INFO("value " << v << " in a " << mn.first << " x " << mn.second << " matrix");
      M A = uniformMatrix<Scalar>(mn.first, mn.second);
      A(uniformIndex(0, mn.first - 1), uniformIndex(0, mn.second - 1)) = v;
      TCQR<M> qr;
      qr.setBackend(backend).setBlockSize(8);
      CHECK_NOTHROW(qr.compute(A));
      CHECK(qr.info() == Eigen::NumericalIssue);
      // Results are unspecified but every accessor still works.
      CHECK_NOTHROW((void)qr.matrixQR());
      CHECK_NOTHROW((void)qr.hCoeffs());
      CHECK_NOTHROW((void)M(qr.solve(M::Ones(mn.first, 1))));
      // The same object recovers with a finite matrix.
      const M F = uniformMatrix<Scalar>(mn.first, mn.second);
      qr.compute(F);
      CHECK(qr.info() == Eigen::Success);
      checkDecomposition<M>(F, qr, Options{backend, 8, true});
    }
  }
  {
    INFO("NaN in the last entry (the scan must cover the whole matrix)");
    M A = uniformMatrix<Scalar>(257, 129);
    A(256, 128) = std::numeric_limits<Scalar>::quiet_NaN();
    const TCQR<M> qr = factor<M>(A, Options{backend, 0, false});
    CHECK(qr.info() == Eigen::NumericalIssue);
  }
}

}  // namespace tcqr_test

#endif  // TCQR_TESTS_QRCHECKS_H
