// cholqr_panel_study.cpp - a measurement, not a test: how accurate is the recursive QR (Algorithms.hpp factor(), run
// on the Host backend's operations) when every leaf panel is factored by shifted CholeskyQR instead of Householder
// column by column? The question behind it (docs/DESIGN.md, the end of "Precision-mode targets: the measured gap"):
// the GPU's one-kernel panel is a chain of one cluster-wide reduction per column, about 2 us each, and a panel built
// on Gram matrices needs a fixed number of reductions however many columns it has. Whether that is worth building
// depends first on whether its factorizations stay within the accuracy bounds, which this program measures.
//
// The candidate panel, for an m x n leaf (m > n, n <= 32), in the storage precision:
//   1. equilibrate: X = A D^-1 with D the column norms rounded to powers of two (exact scaling);
//   2. shifted CholeskyQR (Fukaya, Kannan, Nakatsukasa, Yamamoto, Yanagisawa 2020): G = X^T X + s I with
//      s = 11 (m n + n (n + 1)) u ||X||_F^2, R1 = chol(G), X = X R1^-1; then `passes - 1` plain CholeskyQR passes
//      (G = X^T X, R = chol(G), X = X R^-1). Q = X, R = R_p ... R1 D;
//   3. ReconstructWY (as the TSQR panel does): the signed LU of the top n x n block of Q gives Y's top (L), tau and T;
//      Y below is -Q2 U^-1, and R's rows get the LU's signs.
// Fallback to the Householder panel (HostOps::householderPanel) where a column is zero or not finite, where a
// Cholesky factorization fails, and for square panels (ReconstructWY cannot give tau = 0). With --check K, also where
// max |Q^T Q - I| of the final Q exceeds K times the unit roundoff (on the GPU: one more Gram reduction).
//
// Usage: cholqr_panel_study [--n N] [--m M] [--passes P] [--check K] [--seed S] [--precision float|double|both]
// Prints, per matrix: the backward error ||A - Q R||_F / ||A||_F and the orthogonality ||I - Q^T Q||_F / n of the
// Householder panels (reference) and of the CholeskyQR panels, the panel count and the fallbacks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Dense>
#include <Eigen/Householder>

#include "../../src/HostOps.hpp"
#include "common/TestMatrices.h"

namespace {

using tcqr::detail::HostOps;
using tcqr::detail::Index;
using tcqr::detail::View;

using tcqr_test::Mat;

struct Settings {
  int passes = 3;      // shifted pass + passes - 1 plain ones
  double check = 0.0;  // > 0: fall back where max |Q^T Q - I| exceeds check times the unit roundoff
};

struct Counts {
  long panels = 0, cholqr = 0, fallbackInput = 0, fallbackChol = 0, fallbackCheck = 0, square = 0;
  double worstOrth = 0.0;  // largest max |Q^T Q - I| of an accepted panel
};

/// HostOps whose householderPanel (the GPU's one-kernel panel slot, usePanelKernel) is the CholeskyQR candidate.
template <typename S>
struct CholQrPanelOps : HostOps<S> {
  Settings settings;
  Counts* counts = nullptr;

  void householderPanel(View<S> A, S* tau, View<S> T) {
    ++counts->panels;
    if (!tryCholQr(A, tau, T)) HostOps<S>::householderPanel(A, tau, T);
  }

  bool tryCholQr(View<S> A, S* tau, View<S> T) {
    const Index m = A.rows, n = A.cols;
    if (m <= n) {
      ++counts->square;
      return false;
    }
    auto a = tcqr::detail::map(A);
    Mat<S> X = a;
    Eigen::Matrix<S, Eigen::Dynamic, 1> d(n);
    for (Index j = 0; j < n; ++j) {
      const S nrm = X.col(j).norm();
      if (!(nrm > S(0)) || !std::isfinite(nrm)) {
        ++counts->fallbackInput;
        return false;
      }
      d(j) = std::ldexp(S(1), std::ilogb(nrm));
      X.col(j) /= d(j);
    }
    const S u = Eigen::NumTraits<S>::epsilon() / 2;
    Mat<S> R = d.asDiagonal();
    for (int p = 0; p < settings.passes; ++p) {
      Mat<S> G = X.transpose() * X;
      if (p == 0) {
        const S shift = S(11) * S(double(m) * double(n) + double(n) * double(n + 1)) * u * G.trace();
        G.diagonal().array() += shift;
      }
      Eigen::LLT<Mat<S>> llt(G);
      if (llt.info() != Eigen::Success || !llt.matrixLLT().allFinite()) {
        ++counts->fallbackChol;
        return false;
      }
      const Mat<S> Rp = llt.matrixU();
      Rp.template triangularView<Eigen::Upper>().template solveInPlace<Eigen::OnTheRight>(X);
      R = (Rp * R).eval();
    }
    const double orth = (X.transpose() * X - Mat<S>::Identity(n, n)).template cast<double>().cwiseAbs().maxCoeff();
    if (settings.check > 0 && !(orth <= settings.check * double(u))) {
      ++counts->fallbackCheck;
      return false;
    }
    counts->worstOrth = std::max(counts->worstOrth, orth);
    ++counts->cholqr;
    // ReconstructWY: the signed LU of Q's top block (HostOps::signedLU also writes T), Y2 = -Q2 U^-1.
    Mat<S> LU = X.topRows(n);
    std::vector<S> s(static_cast<size_t>(n));
    this->signedLU(View<S>(LU.data(), n, n, n), s.data(), T);
    Mat<S> Y2 = X.bottomRows(m - n);
    LU.template triangularView<Eigen::Upper>().template solveInPlace<Eigen::OnTheRight>(Y2);
    a.bottomRows(m - n) = -Y2;
    for (Index j = 0; j < n; ++j) {
      for (Index i = 0; i < n; ++i) a(i, j) = i > j ? LU(i, j) : s[size_t(i)] * R(i, j);
      tau[j] = LU(j, j) * s[size_t(j)];
    }
    return true;
  }
};

struct Errors {
  double backward = 0, orth = 0;
};

/// factor() with `ops` on a copy of A (the Host backend's recursion with the GPU's block size and panel choice), then
/// the errors of Q (Householder sequence of the packed factor, thin) and R, in double.
template <typename S, class Ops>
Errors factorAndMeasure(Ops& ops, const Mat<S>& A0) {
  const Index m = A0.rows(), n = A0.cols(), k = std::min(m, n);
  Mat<S> A = A0;
  std::vector<S> tau(static_cast<size_t>(k)), T(static_cast<size_t>(k * k));
  const Index nb = tcqr::detail::kTsqrMaxCols;  // (CudaBackend::nb() with the default panel: 32-column leaves)
  const auto panel = tcqr::detail::PanelKind::Hybrid;
  std::vector<S> scratch(static_cast<size_t>(tcqr::detail::factorTotalScratch(m, n, nb, panel)));
  const std::vector<char> identity = tcqr::detail::hostIdentityReflectorColumns(View<S>(A.data(), m, n, m));
  ops.maxMergedCols = tcqr::detail::maxMergedCols(tcqr::Precision::Default, m);  // (the GPU's FP32/FP64 caps)
  ops.panelKernelRows = m;
  tcqr::detail::factor(ops, View<S>(A.data(), m, n, m), tau.data(), View<S>(T.data(), k, k, k), nb, panel,
                       scratch.data(), static_cast<S*>(nullptr), identity.empty() ? nullptr : identity.data());
  // (A vector, not a Map: HouseholderSequence keeps a reference to its coefficients' type.)
  const Eigen::Matrix<S, Eigen::Dynamic, 1> tv = Eigen::Map<const Eigen::Matrix<S, Eigen::Dynamic, 1>>(tau.data(), k);
  const Eigen::HouseholderSequence<Mat<S>, Eigen::Matrix<S, Eigen::Dynamic, 1>> H(A, tv);
  Mat<S> Q = Mat<S>::Identity(m, k);
  Q.applyOnTheLeft(H);
  const Eigen::MatrixXd Qd = Q.template cast<double>();
  const Mat<S> R = A.topRows(k).template triangularView<Eigen::Upper>();
  const Eigen::MatrixXd Rd = R.template cast<double>();
  const Eigen::MatrixXd Ad = A0.template cast<double>();
  Errors e;
  e.backward = (Ad - Qd * Rd).norm() / Ad.norm();
  e.orth = (Eigen::MatrixXd::Identity(k, k) - Qd.transpose() * Qd).norm() / double(k);
  return e;
}

template <typename S>
void study(const char* type, const char* name, const Mat<S>& A, const Settings& settings) {
  HostOps<S> ref;
  const Errors r = factorAndMeasure<S>(ref, A);
  Counts c;
  CholQrPanelOps<S> ops;
  ops.settings = settings;
  ops.counts = &c;
  const Errors q = factorAndMeasure<S>(ops, A);
  std::printf("%-6s %-26s %6ld x %-6ld | Householder bwd %.2e orth %.2e | CholQR bwd %.2e orth %.2e (%.2fx, %.2fx) | "
              "panels %ld: cholqr %ld, fallback input %ld, cholesky %ld, check %ld, square %ld; worst panel orth "
              "%.1e\n",
              type, name, long(A.rows()), long(A.cols()), r.backward, r.orth, q.backward, q.orth,
              q.backward / r.backward, q.orth / r.orth, c.panels, c.cholqr, c.fallbackInput, c.fallbackChol,
              c.fallbackCheck, c.square, c.worstOrth);
  std::fflush(stdout);
}

/// Uniform random columns in pairs inside every panel: column j (odd) = column j - 1 + rel times a fresh uniform
/// column (rel = 0: an exact duplicate). The Gram matrix of a panel is then (nearly) singular: what the fallback is
/// for.
template <typename S>
Mat<S> pairedColumns(Index m, Index n, double rel) {
  Eigen::MatrixXd a = tcqr_test::uniformMatrixD(m, n);
  for (Index j = 1; j < n; j += 2) a.col(j) = a.col(j - 1) + rel * tcqr_test::uniformMatrixD(m, 1);
  return a.cast<S>();
}

template <typename S>
void runAll(Index m, Index n, const std::vector<double>& kappas, const Settings& settings) {
  const char* type = std::is_same<S, float>::value ? "float" : "double";
  using tcqr_test::Spectrum;
  study<S>(type, "uniform", tcqr_test::uniformMatrix<S>(m, n), settings);
  study<S>(type, "normal", Mat<S>(tcqr_test::gaussianMatrix(m, n).cast<S>()), settings);
  for (double kappa : kappas) {
    for (Spectrum kind : {Spectrum::Arithmetic, Spectrum::Geometric, Spectrum::Clustered}) {
      const std::string name =
          std::string(tcqr_test::spectrumName(kind)) + " 1e" + std::to_string(std::lround(std::log10(kappa)));
      study<S>(type, name.c_str(), tcqr_test::conditionedMatrix<S>(m, n, kind, kappa), settings);
    }
  }
  study<S>(type, "spread 1e-6..1e6", tcqr_test::spreadColumnsMatrix<S>(m, n), settings);
  study<S>(type, "duplicated columns", tcqr_test::withDuplicatedColumns<S>(m, n), settings);
  study<S>(type, "zero columns", tcqr_test::withZeroColumns<S>(m, n, {0, n / 3, n / 2, n - 1}), settings);
  study<S>(type, "paired columns, exact", pairedColumns<S>(m, n, 0.0), settings);
  for (double rel : std::is_same<S, float>::value ? std::vector<double>{1e-3, 1e-5} : std::vector<double>{1e-4, 1e-8})
  {
    char name[64];
    std::snprintf(name, sizeof name, "paired columns, %g", rel);
    study<S>(type, name, pairedColumns<S>(m, n, rel), settings);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Index n = 1024, m = -1;
  Settings settings;
  std::uint64_t seed = tcqr_test::reseed();  // (fresh unless --seed or TCQR_TEST_SEED)
  std::string precision = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--n") n = std::atol(next());
    else if (a == "--m") m = std::atol(next());
    else if (a == "--passes") settings.passes = std::atoi(next());
    else if (a == "--check") settings.check = std::atof(next());
    else if (a == "--precision") precision = next();
    else if (a == "--seed") tcqr_test::engine().seed(seed = std::strtoull(next(), nullptr, 10));
    else {
      std::fprintf(stderr,
                   "usage: %s [--n N] [--m M] [--passes P] [--check K] [--seed S] [--precision float|double|both]\n",
                   argv[0]);
      return 2;
    }
  }
  if (m < 0) m = n;
  std::printf("cholqr_panel_study: %ld x %ld, shifted CholeskyQR with %d passes, check %g u, seed %llu; Host backend "
              "recursion (block size %ld, merge caps of FP32/FP64)\n",
              long(m), long(n), settings.passes, settings.check, static_cast<unsigned long long>(seed),
              long(tcqr::detail::kTsqrMaxCols));
  if (precision != "double") runAll<float>(m, n, {1e4}, settings);
  if (precision != "float") runAll<double>(m, n, {1e4, 1e8, 1e12}, settings);
  return 0;
}
