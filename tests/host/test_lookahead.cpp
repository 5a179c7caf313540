// test_lookahead.cpp - factorRecursive's look-ahead (src/Algorithms.hpp) on the Host backend's operations. The CUDA
// backend runs it on a second stream when TCQR_LOOKAHEAD=1; here a side lane that executes at once checks what CI can
// check without a GPU: the split update still gives a correct factorization, every fork is joined by the next leaf,
// and the scratch that factorScratchSize promises is enough for the leaf and the side lane's update together (guard
// values after it stay untouched).
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <vector>

#include <Eigen/Dense>

#include "../../src/HostOps.hpp"
#include "common/TestMatrices.h"

namespace {

using tcqr::detail::HostOps;
using tcqr::detail::PanelKind;
using tcqr::detail::View;

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

/// HostOps with a side lane that runs its work immediately, counting forks and joins.
template <typename T>
struct SideLaneHostOps : HostOps<T> {
  int forks = 0, joins = 0;
  bool pending = false, forkWhilePending = false;
  bool sideLaneAvailable() const { return true; }
  HostOps<T> sideLane() const { return *this; }
  void forkSide() {
    forkWhilePending = forkWhilePending || pending;
    ++forks;
  }
  void sideDone() { pending = true; }
  void joinSide() {
    if (!pending) return;
    pending = false;
    ++joins;
  }
};

struct Result {
  Eigen::MatrixXd packed;
  Eigen::VectorXd tau;
};

template <typename T, class Ops>
Result factorWith(Ops& ops, const Mat<T>& A0, Eigen::Index nb, PanelKind panel) {
  const Eigen::Index m = A0.rows(), n = A0.cols(), k = std::min(m, n);
  Mat<T> A = A0, W(m, k);
  std::vector<T> tau(static_cast<size_t>(k));
  const Eigen::Index need = tcqr::detail::factorTotalScratch(m, n, nb, panel);
  const T guard = T(12345.5);
  // As many guard values as the promised scratch, so that even an overrun by a whole region is caught here.
  const Eigen::Index guards = std::max<Eigen::Index>(need, 64);
  std::vector<T> scratch(static_cast<size_t>(need + guards), guard);
  tcqr::detail::factor(ops, View<T>(A.data(), m, n, m), tau.data(), View<T>(W.data(), m, k, m), nb, panel,
                       scratch.data());
  Eigen::Index touched = 0;
  for (Eigen::Index i = need; i < need + guards; ++i) touched += scratch[static_cast<size_t>(i)] != guard;
  REQUIRE(touched == 0);
  Result r{A.template cast<double>(), Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(tau.data(), k).template cast<double>()};
  return r;
}

}  // namespace

TEST_CASE_TEMPLATE("look-ahead: split update, forks joined, scratch sufficient", T, float, double) {
  TCQR_RANDOM_SEED();
  const double eps = double(Eigen::NumTraits<T>::epsilon());
  struct Case {
    Eigen::Index m, n, nb;
    PanelKind panel;
  };
  for (const Case c : {Case{700, 300, 32, PanelKind::Tsqr}, Case{700, 300, 48, PanelKind::Geqrf},
                       Case{5000, 200, 32, PanelKind::Hybrid}, Case{260, 250, 16, PanelKind::Tsqr}}) {
    INFO(c.m << " x " << c.n << ", nb " << c.nb << ", panel " << int(c.panel));
    const Mat<T> A = tcqr_test::uniformMatrix<T>(c.m, c.n);
    SideLaneHostOps<T> side;
    const Result withSide = factorWith<T>(side, A, c.nb, c.panel);
    CHECK(side.forks > 0);
    CHECK(side.forks == side.joins);
    CHECK(!side.pending);
    CHECK(!side.forkWhilePending);
    // A correct factorization: ||A - Q R|| / (||A|| m eps) with Q the product of the reflectors (Eigen's
    // HouseholderSequence over the packed factor and tau), as the library's own suites bound it. (Entrywise agreement
    // with the run without a side lane is not asked for: the split GEMMs may round differently, and a Householder
    // sign at rounding level may then flip.)
    const Eigen::MatrixXd Q = Eigen::HouseholderSequence<Eigen::MatrixXd, Eigen::VectorXd>(withSide.packed, withSide.tau) *
                              Eigen::MatrixXd::Identity(c.m, c.n);
    const Eigen::MatrixXd R = withSide.packed.topRows(c.n).template triangularView<Eigen::Upper>();
    const Eigen::MatrixXd Ad = A.template cast<double>();
    CHECK((Ad - Q * R).norm() / (Ad.norm() * double(c.m) * eps) < 30);
    CHECK((Q.transpose() * Q - Eigen::MatrixXd::Identity(c.n, c.n)).norm() / (double(c.m) * eps) < 30);
  }
}
