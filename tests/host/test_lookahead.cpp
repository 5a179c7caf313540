// test_lookahead.cpp - two variants of factorRecursive (src/Algorithms.hpp) on the Host backend's operations, with
// the detail API:
// - the look-ahead. The CUDA backend runs its lanes on further streams; here lanes whose work runs when it is joined
//   (or at once) check what CI can check without a GPU: the split updates still give a correct factorization, so no
//   join is missing and the main lane never writes a lane's columns; every fork is joined, lanes nest as far as
//   offered, and factorTotalScratch covers the main lane's and every lane's scratch (guard values after it stay
//   untouched);
// - WY blocks (factor() with `blocks`, what both backends use): skipping the merges of T down the recursion's
//   right-hand spine leaves the recursion's columns bit for bit unchanged, and Q applied block by block
//   (applyWYBlocks) equals Q applied with the merged T, in all four applications and for Q_L of any length; the
//   merged T (T12 = -T1 Y1^T Y2 T2 at every node) equals LAPACK's larft T of the whole factorization.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <array>
#include <functional>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>

#include "../../src/HostOps.hpp"
#include "common/ScopedEnv.h"
#include "common/TestMatrices.h"

namespace {

using tcqr::detail::HostOps;
using tcqr::detail::PanelKind;
using tcqr::detail::View;

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

/// HostOps with look-ahead lanes. `deferred`: a lane's work runs when the main lane joins it, the latest a GPU could
/// run it, so a missing join (the main lane reading columns the lane has not updated yet) or a main-lane write to
/// the lane's columns changes the result; otherwise at once, the earliest. Counts forks and joins. With `base` set
/// (factor()'s scratch; regions as factor() lays them out), it also checks that the lanes' scratch is their own: a
/// lane's region is unchanged between its fork and the moment its work runs (nobody else wrote it meanwhile), and the
/// main lane's region is unchanged by a lane's work.
template <typename T>
struct LaneHostOps : HostOps<T> {
  int laneCount = 2;
  bool deferred = true;
  std::array<std::vector<std::function<void()>>, tcqr::detail::kMaxLanes> queued;
  unsigned pending = 0;
  int forks = 0, joins = 0, highestLane = -1;
  std::array<int, tcqr::detail::kMaxLanes> forksOn{}, joinsOn{};
  int extraForks = 0;  ///< forks onto a lane that already had work queued (the eager lane's blocks)
  int eagerLane = -1;  ///< the lane that may take several forks per join (the test sets it)
  int eagerExtraForks() const { return extraForks; }
  bool forkWhilePending = false, badLane = false, laneRegionWritten = false, mainRegionWritten = false;
  T* base = nullptr;
  Eigen::Index mainSize = 0;
  std::array<Eigen::Index, tcqr::detail::kMaxLanes> offset{}, size{};
  std::array<std::vector<T>, tcqr::detail::kMaxLanes> atFork;

  int lanes() const { return laneCount; }
  std::vector<T> region(Eigen::Index off, Eigen::Index n) const {
    return base ? std::vector<T>(base + off, base + off + n) : std::vector<T>();
  }
  /// Runs lane work g, recording whether it wrote the main lane's scratch.
  void runChecked(const std::function<void()>& g) {
    const std::vector<T> before = region(0, mainSize);
    g();
    mainRegionWritten = mainRegionWritten || region(0, mainSize) != before;
  }
  template <class F>
  void runOnLane(int q, F&& f) {
    badLane = badLane || q < 0 || q >= laneCount;
    const bool busy = (pending >> q) & 1u;
    // (the eager lane, TCQR_EAGER, takes several blocks per join: extraForks counts them)
    forkWhilePending = forkWhilePending || (busy && q != eagerLane);
    if (busy) ++extraForks;
    ++forksOn[static_cast<size_t>(q)];
    ++forks;
    highestLane = std::max(highestLane, q);
    HostOps<T> laneOps = *this;
    std::function<void()> g = [f, laneOps]() mutable { f(laneOps); };
    if (deferred) {
      if (!busy)  // (from the first queued work on: nobody else may write the lane's scratch until it runs)
        atFork[static_cast<size_t>(q)] = region(offset[static_cast<size_t>(q)], size[static_cast<size_t>(q)]);
      queued[static_cast<size_t>(q)].push_back(std::move(g));
    } else {
      runChecked(g);
    }
    pending |= 1u << q;
  }
  void joinLane(int q) {
    if (!((pending >> q) & 1u)) return;
    const size_t i = static_cast<size_t>(q);
    if (deferred && region(offset[i], size[i]) != atFork[i]) laneRegionWritten = true;
    for (auto& g : queued[i]) runChecked(g);
    queued[i].clear();
    pending &= ~(1u << q);
    ++joins;
    ++joinsOn[i];
  }
  void joinAllLanes() noexcept {
    for (int q = 0; q < laneCount; ++q) joinLane(q);
  }
};

struct Result {
  Eigen::MatrixXd packed;
  Eigen::VectorXd tau;
};

template <typename T, class Ops>
Result factorWith(Ops& ops, const Mat<T>& A0, Eigen::Index nb, PanelKind panel,
                  std::vector<Eigen::Index>* blocks = nullptr) {
  const Eigen::Index m = A0.rows(), n = A0.cols(), k = std::min(m, n);
  Mat<T> A = A0, Tm(k, k);
  std::vector<T> tau(static_cast<size_t>(k));
  const Eigen::Index need = tcqr::detail::factorTotalScratch(m, n, nb, panel, ops.lanes(), ops.maxMergedCols,
                                                                    ops.eagerSpine);
  const T guard = T(12345.5);
  // As many guard values as the promised scratch, so that even an overrun by a whole region is caught here.
  const Eigen::Index guards = std::max<Eigen::Index>(need, 64);
  std::vector<T> scratch(static_cast<size_t>(need + guards), guard);
  if constexpr (std::is_base_of<LaneHostOps<T>, Ops>::value) {  // where factor() puts each lane's scratch
    ops.base = scratch.data();
    ops.mainSize = tcqr::detail::factorMainScratch(m, n, nb, panel);
    Eigen::Index sizes[tcqr::detail::kMaxLanes], at = ops.mainSize;
    tcqr::detail::laneScratchSizes(m, n, nb, ops.lanes(), sizes, ops.maxMergedCols, ops.eagerSpine);
    for (size_t q = 0; q < static_cast<size_t>(tcqr::detail::kMaxLanes); ++q) {
      ops.offset[q] = at;
      ops.size[q] = sizes[q];
      at += sizes[q];
    }
  }
  tcqr::detail::factor(ops, View<T>(A.data(), m, n, m), tau.data(), View<T>(Tm.data(), k, k, k), nb, panel,
                       scratch.data(), static_cast<T*>(nullptr), nullptr, blocks);
  Eigen::Index touched = 0;
  for (Eigen::Index i = need; i < need + guards; ++i) touched += scratch[static_cast<size_t>(i)] != guard;
  REQUIRE(touched == 0);
  Result r{A.template cast<double>(), Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(tau.data(), k).template cast<double>()};
  return r;
}

}  // namespace

/// A correct factorization: ||A - Q R|| / (||A|| m eps) and ||Q^T Q - I|| / (m eps) below 30, with Q the product of
/// the reflectors (Eigen's HouseholderSequence over the packed factor and tau), as the library's own suites bound it.
template <typename T>
void checkFactorization(const Mat<T>& A, const Result& r, double eps) {
  const Eigen::Index m = A.rows(), k = std::min(A.rows(), A.cols());
  const Eigen::MatrixXd Q =
      Eigen::HouseholderSequence<Eigen::MatrixXd, Eigen::VectorXd>(r.packed, r.tau) * Eigen::MatrixXd::Identity(m, k);
  const Eigen::MatrixXd R = r.packed.topRows(k).template triangularView<Eigen::Upper>();
  const Eigen::MatrixXd Ad = A.template cast<double>();
  CHECK((Ad - Q * R).norm() / (Ad.norm() * double(m) * eps) < 30);
  CHECK((Q.transpose() * Q - Eigen::MatrixXd::Identity(k, k)).norm() / (double(m) * eps) < 30);
}

TEST_CASE_TEMPLATE("look-ahead lanes: split updates, forks joined, lanes nested, scratch sufficient", T, float,
                   double) {
  TCQR_RANDOM_SEED();
  const double eps = double(Eigen::NumTraits<T>::epsilon());
  struct Case {
    Eigen::Index m, n, nb;
    PanelKind panel;
  };
  for (const Case c : {Case{700, 300, 32, PanelKind::Tsqr}, Case{700, 300, 48, PanelKind::Geqrf},
                       Case{5000, 200, 32, PanelKind::Hybrid}, Case{260, 250, 16, PanelKind::Tsqr},
                       Case{600, 600, 8, PanelKind::Hybrid}, Case{520, 700, 16, PanelKind::Tsqr}}) {
    for (int laneCount : {1, 2, 4}) {
      for (bool deferred : {true, false}) {
        INFO(c.m << " x " << c.n << ", nb " << c.nb << ", panel " << int(c.panel) << ", lanes " << laneCount
                  << (deferred ? ", run at the join" : ", run at the fork"));
        const Mat<T> A = tcqr_test::uniformMatrix<T>(c.m, c.n);
        LaneHostOps<T> ops;
        ops.laneCount = laneCount;
        ops.deferred = deferred;
        const Result r = factorWith<T>(ops, A, c.nb, c.panel);
        CHECK(ops.forks > 0);
        CHECK(ops.forks == ops.joins);
        CHECK(ops.pending == 0u);
        CHECK(!ops.forkWhilePending);
        CHECK(!ops.badLane);
        CHECK(!ops.laneRegionWritten);
        CHECK(!ops.mainRegionWritten);
        // The lanes used are those laneScratchSizes (the column tree walked alone) gives scratch to; 600 x 600 with
        // nb 8 nests three deep.
        Eigen::Index need[tcqr::detail::kMaxLanes];
        tcqr::detail::laneScratchSizes(c.m, c.n, c.nb, laneCount, need);
        int expected = -1;
        for (int q = 0; q < tcqr::detail::kMaxLanes; ++q)
          if (need[q] > 0) expected = q;
        CHECK(ops.highestLane == expected);
        if (c.n == 600) CHECK(ops.highestLane == std::min(laneCount, 3) - 1);
        // A correct factorization (entrywise agreement with the run without lanes is not asked for: the split GEMMs
        // may round differently, and a Householder sign at rounding level may then flip).
        checkFactorization(A, r, eps);
      }
    }
  }
}

// The eager lane (Ops::eagerSpine; Tunables.hpp eagerSpineUpdates, FP16x3's and some FP64's default): the last
// lane applies each WY block of a spine node's left child to the node's right half as soon as the block is factored
// (the last block: the right child's left child on the main lane, the rest on the eager lane), the other lanes fork
// as before. Run at the join (deferred), every block queued on the eager lane must have run before the right half is
// read, or the result is wrong; run at once, nothing may write the right half meanwhile.
TEST_CASE_TEMPLATE("look-ahead lanes: the eager lane updates the spine's right halves block by block",
                   T, float, double) {
  TCQR_RANDOM_SEED();
  const double eps = double(Eigen::NumTraits<T>::epsilon());
  struct Case {
    Eigen::Index m, n, nb, cap;
    PanelKind panel;
  };
  // (cap < nb: no eager lane, the lanes fork as without it; 48: a cap off the leaf grid)
  for (const Case c : {Case{600, 600, 16, 32, PanelKind::Tsqr}, Case{1100, 700, 32, 64, PanelKind::Geqrf},
                       Case{900, 900, 8, 16, PanelKind::Hybrid}, Case{520, 700, 16, 48, PanelKind::Tsqr},
                       Case{700, 640, 32, 48, PanelKind::Geqrf}, Case{600, 600, 64, 32, PanelKind::Tsqr}}) {
    for (int laneCount : {2, 3}) {
      for (bool deferred : {true, false}) {
        INFO(c.m << " x " << c.n << ", nb " << c.nb << ", cap " << c.cap << ", panel " << int(c.panel) << ", lanes "
                 << laneCount << (deferred ? ", run at the join" : ", run at the fork"));
        const Mat<T> A = tcqr_test::uniformMatrix<T>(c.m, c.n);
        LaneHostOps<T> ops;
        ops.laneCount = laneCount;
        ops.deferred = deferred;
        ops.maxMergedCols = c.cap;
        ops.eagerSpine = true;
        const int eagerLane = tcqr::detail::eagerLaneFor(std::min(c.m, c.n), c.nb, laneCount, c.cap, true);
        CHECK(eagerLane == (c.cap >= c.nb ? laneCount - 1 : -1));
        ops.eagerLane = eagerLane;
        std::vector<Eigen::Index> blocks;
        const Result r = factorWith<T>(ops, A, c.nb, c.panel, &blocks);
        CHECK(ops.forks == ops.joins + ops.eagerExtraForks());
        CHECK(ops.pending == 0u);
        CHECK(!ops.badLane);
        CHECK(!ops.forkWhilePending);
        CHECK(!ops.laneRegionWritten);
        CHECK(!ops.mainRegionWritten);
        if (eagerLane >= 0) {
          // The eager lane took every block of the top node's left child (and more further down the spine).
          Eigen::Index topBlocks = 0;
          const Eigen::Index n1 = tcqr::detail::splitColumns(std::min(c.m, c.n), c.nb);
          for (Eigen::Index b : blocks) topBlocks += b < n1;
          CHECK(ops.forksOn[static_cast<size_t>(eagerLane)] >= topBlocks);
          CHECK(topBlocks > 1);
          // One join of the eager lane per eager spine node (at its last block, or after its left child when its
          // right child is a leaf), and one by the last one's right child: a further join at each nested eager node
          // would make the main lane wait for the last block's whole update there.
          int eagerNodes = 0;
          for (Eigen::Index k = std::min(c.m, c.n); k > c.nb;) {
            const Eigen::Index n1 = tcqr::detail::splitColumns(k, c.nb);
            if (n1 <= c.cap) break;
            ++eagerNodes;
            k -= n1;
          }
          CHECK(eagerNodes >= 2);
          CHECK(ops.joinsOn[static_cast<size_t>(eagerLane)] <= eagerNodes + 1);
        } else {
          CHECK(ops.eagerExtraForks() == 0);
        }
        checkFactorization(A, r, eps);
      }
    }
  }
}

TEST_CASE("look-ahead lanes: the defaults by mode and shape (Tunables.hpp lookaheadLanes)") {
  using tcqr::Precision;
  using tcqr::detail::lookaheadLanes;
  const tcqr_test::ScopedEnv forced("TCQR_LOOKAHEAD");
  forced.unset();
  // FP64: two lanes from 8192 rows and columns; below 2^27 entries from an object's second factorization of the shape.
  CHECK(lookaheadLanes(Precision::FP64, 8192, 8192, true) == 2);
  CHECK(lookaheadLanes(Precision::FP64, 8192, 8192, false) == 0);
  CHECK(lookaheadLanes(Precision::FP64, 16384, 8192, false) == 2);
  CHECK(lookaheadLanes(Precision::FP64, 131072, 2048, true) == 0);
  // FP16x3: two lanes (the second the eager one) from 16384 rows and columns from the first factorization, from 8192
  // from the second in a row; one without the eager lane (TCQR_EAGER=0).
  const tcqr_test::ScopedEnv eager("TCQR_EAGER");
  eager.unset();
  CHECK(tcqr::detail::eagerSpineUpdates(Precision::FP16x3, 16384, 16384));
  // (FP64: eager below 2^28 entries, with its two lanes, one of them the eager one)
  CHECK(tcqr::detail::eagerSpineUpdates(Precision::FP64, 12288, 12288));
  CHECK(tcqr::detail::eagerSpineUpdates(Precision::FP64, 16384, 8192));
  CHECK(!tcqr::detail::eagerSpineUpdates(Precision::FP64, 16384, 16384));
  CHECK(!tcqr::detail::eagerSpineUpdates(Precision::FP64, 65536, 8192));
  CHECK(!tcqr::detail::eagerSpineUpdates(Precision::TF32x3, 16384, 16384));
  CHECK(!tcqr::detail::eagerSpineUpdates(Precision::FP32, 16384, 16384));
  for (Precision p : {Precision::TF32, Precision::FP16, Precision::BF16})
    CHECK(tcqr::detail::eagerSpineUpdates(p, 8192, 8192));
  CHECK(lookaheadLanes(Precision::FP16x3, 16384, 16384, false) == 2);
  CHECK(lookaheadLanes(Precision::FP16x3, 65536, 16384, false) == 2);
  CHECK(lookaheadLanes(Precision::FP16x3, 16384, 65536, false) == 2);
  CHECK(lookaheadLanes(Precision::FP16x3, 8192, 8192, false) == 0);
  CHECK(lookaheadLanes(Precision::FP16x3, 8192, 8192, true) == 2);
  CHECK(lookaheadLanes(Precision::FP16x3, 16384, 8192, false) == 0);
  CHECK(lookaheadLanes(Precision::FP16x3, 16384, 8192, true) == 2);
  CHECK(lookaheadLanes(Precision::FP16x3, 4096, 4096, true) == 0);
  CHECK(lookaheadLanes(Precision::FP16x3, 131072, 2048, true) == 0);
  eager.set("0");
  CHECK(lookaheadLanes(Precision::FP16x3, 16384, 16384, false) == 1);
  CHECK(lookaheadLanes(Precision::FP16x3, 8192, 8192, true) == 1);
  CHECK(lookaheadLanes(Precision::FP64, 16384, 16384, false) == 2);
  eager.set("1");
  CHECK(tcqr::detail::eagerSpineUpdates(Precision::FP64, 16384, 16384));
  CHECK(lookaheadLanes(Precision::FP64, 16384, 16384, false) == 2);
  eager.unset();
  CHECK(lookaheadLanes(Precision::TF32x3, 32768, 32768, true) == 0);
  CHECK(lookaheadLanes(Precision::FP32, 32768, 32768, true) == 0);
  // TF32, FP16, BF16: two lanes (the second the eager one) from 32768 rows and 16384 columns, from the first
  // factorization; one without the eager lane.
  for (Precision p : {Precision::TF32, Precision::FP16, Precision::BF16}) {
    CAPTURE(int(p));
    CHECK(lookaheadLanes(p, 32768, 32768, false) == 2);
    CHECK(lookaheadLanes(p, 32768, 16384, false) == 2);
    CHECK(lookaheadLanes(p, 32768, 65536, false) == 2);
    CHECK(lookaheadLanes(p, 16384, 32768, true) == 0);
    CHECK(lookaheadLanes(p, 16384, 16384, true) == 0);
    CHECK(lookaheadLanes(p, 262144, 8192, true) == 0);
    CHECK(lookaheadLanes(p, 8192, 8192, true) == 0);
    eager.set("0");
    CHECK(lookaheadLanes(p, 32768, 32768, false) == 1);
    eager.unset();
  }
  forced.set("3");  // an explicit count, anywhere
  CHECK(lookaheadLanes(Precision::FP32, 100, 100, false) == 3);
  forced.set("0");
  CHECK(lookaheadLanes(Precision::FP64, 16384, 16384, true) == 0);
}

TEST_CASE("look-ahead lanes: the green context's SMs and the lanes' GEMM sizing (Tunables.hpp)") {
  using tcqr::Precision;
  using tcqr::detail::laneGreenSMs;
  using tcqr::detail::lookaheadReserveSMs;
  // All but 20 SMs, rounded down to the split's granularity; three quarters on a small device.
  CHECK(laneGreenSMs(132, 8) == 112);
  CHECK(laneGreenSMs(132, 1) == 112);
  CHECK(laneGreenSMs(114, 8) == 88);
  CHECK(laneGreenSMs(30, 2) == 22);
  CHECK(laneGreenSMs(30, 0) == 22);
  // FP64's lanes size their GEMMs for the whole green context (-2), the other modes for half the device (-1).
  const tcqr_test::ScopedEnv reserve("TCQR_LOOKAHEAD_RESERVE");
  reserve.unset();
  CHECK(lookaheadReserveSMs(Precision::FP64) == -2);
  CHECK(lookaheadReserveSMs(Precision::FP16x3) == -1);
  CHECK(lookaheadReserveSMs(Precision::FP32) == -1);
  reserve.set("36");
  CHECK(lookaheadReserveSMs(Precision::FP64) == 36);
  // The main lane on its priority stream: FP16x3, TF32, FP16 and BF16 by default, FP64, FP32 and TF32x3 not;
  // TCQR_MAIN_PRIORITY either way.
  using tcqr::detail::mainLanePriority;
  const tcqr_test::ScopedEnv priority("TCQR_MAIN_PRIORITY");
  priority.unset();
  CHECK(mainLanePriority(Precision::FP16x3));
  CHECK(!mainLanePriority(Precision::FP64));
  CHECK(!mainLanePriority(Precision::TF32x3));
  CHECK(!mainLanePriority(Precision::FP32));
  for (Precision p : {Precision::TF32, Precision::FP16, Precision::BF16}) CHECK(mainLanePriority(p));
  priority.set("1");
  CHECK(mainLanePriority(Precision::FP64));
  priority.set("0");
  CHECK(!mainLanePriority(Precision::FP16x3));
}

TEST_CASE("look-ahead lanes: scratch of each lane from the column tree") {
  using tcqr::detail::kMaxLanes;
  Eigen::Index need[kMaxLanes];
  // 16384 columns, nb 32: lane 0's largest update is the top node's, 8192 reflectors on the 4096 columns of its
  // right child's right half; lane 1 first forks inside the top right child's left child (4096 columns).
  tcqr::detail::laneScratchSizes(16384, 16384, 32, 2, need);
  CHECK(need[0] == tcqr::detail::applyScratchSize(8192, 4096));
  CHECK(need[1] == tcqr::detail::applyScratchSize(2048, 1024));
  CHECK(need[2] == 0);
  CHECK(need[3] == 0);
  tcqr::detail::laneScratchSizes(16384, 16384, 32, 0, need);
  for (Eigen::Index x : need) CHECK(x == 0);
  tcqr::detail::laneScratchSizes(100, 64, 32, 4, need);  // two leaves: the right child is a leaf, nothing to fork
  for (Eigen::Index x : need) CHECK(x == 0);
  CHECK(tcqr::detail::factorTotalScratch(4096, 4096, 32, PanelKind::Tsqr, 3) ==
        tcqr::detail::factorTotalScratch(4096, 4096, 32, PanelKind::Tsqr) + [] {
          Eigen::Index n3[kMaxLanes], sum = 0;
          tcqr::detail::laneScratchSizes(4096, 4096, 32, 3, n3);
          for (Eigen::Index x : n3) sum += x;
          return sum;
        }());
}

namespace {

/// Q_L B (or its variants) with Q_L = H_0 ... H_{L-1} of the packed factor and tau, in double (Eigen's
/// HouseholderSequence): the reference for applyWYBlocks.
Eigen::MatrixXd referenceApply(const Eigen::MatrixXd& packed, const Eigen::VectorXd& tau, Eigen::Index length,
                               const Eigen::MatrixXd& B, bool onLeft, bool transpose) {
  Eigen::HouseholderSequence<Eigen::MatrixXd, Eigen::VectorXd> h(packed, tau);
  h.setLength(length);
  const Eigen::Index m = packed.rows();
  const Eigen::MatrixXd Q = h * Eigen::MatrixXd::Identity(m, m);
  if (onLeft) return transpose ? Eigen::MatrixXd(Q.transpose() * B) : Eigen::MatrixXd(Q * B);
  return transpose ? Eigen::MatrixXd(B * Q.transpose()) : Eigen::MatrixXd(B * Q);
}

/// LAPACK's larft in double: T (k x k) with H_0 ... H_{k-1} = I - Y T Y^T for the packed factor's Y and tau.
Eigen::MatrixXd referenceT(const Eigen::MatrixXd& packed, const Eigen::VectorXd& tau) {
  const Eigen::Index k = tau.size();
  Eigen::MatrixXd Y = packed.leftCols(k).triangularView<Eigen::StrictlyLower>();
  Y.topRows(k).diagonal().setOnes();
  const Eigen::MatrixXd S = Y.transpose() * Y;
  Eigen::MatrixXd T = Eigen::MatrixXd::Zero(k, k);
  for (Eigen::Index i = 0; i < k; ++i) {
    T(i, i) = tau(i);
    if (i > 0) {
      const Eigen::VectorXd v = T.topLeftCorner(i, i).triangularView<Eigen::Upper>() * S.col(i).head(i);
      T.col(i).head(i) = -tau(i) * v;
    }
  }
  return T;
}

}  // namespace

TEST_CASE_TEMPLATE("WY blocks: same factorization without the spine's merges, Q applied block by block", T, float,
                   double) {
  TCQR_RANDOM_SEED();
  const double eps = double(Eigen::NumTraits<T>::epsilon());
  struct Case {
    Eigen::Index m, n, nb;
    PanelKind panel;
  };
  for (const Case c : {Case{300, 200, 32, PanelKind::Tsqr}, Case{257, 129, 16, PanelKind::Geqrf},
                       Case{120, 250, 32, PanelKind::Hybrid}, Case{400, 400, 48, PanelKind::Geqrf},
                       Case{90, 30, 32, PanelKind::Tsqr}}) {
    INFO(c.m << " x " << c.n << ", nb " << c.nb << ", panel " << int(c.panel));
    const Eigen::Index m = c.m, n = c.n, k = std::min(m, n);
    const Mat<T> A0 = tcqr_test::uniformMatrix<T>(m, n);
    Mat<T> Am = A0, Ab = A0, Tm = Mat<T>::Zero(k, k), Tb = Mat<T>::Zero(k, k);
    std::vector<T> taum(static_cast<size_t>(k)), taub(static_cast<size_t>(k));
    std::vector<T> scratch(static_cast<size_t>(tcqr::detail::factorTotalScratch(m, n, c.nb, c.panel)));
    std::vector<Eigen::Index> blocks = {7, 7};  // factor() must clear what was there
    HostOps<T> ops;
    tcqr::detail::factor(ops, View<T>(Am.data(), m, n, m), taum.data(), View<T>(Tm.data(), k, k, k), c.nb, c.panel,
                         scratch.data());
    tcqr::detail::factor(ops, View<T>(Ab.data(), m, n, m), taub.data(), View<T>(Tb.data(), k, k, k), c.nb, c.panel,
                         scratch.data(), static_cast<T*>(nullptr), nullptr, &blocks);
    // The recursion's columns are identical; for a wide matrix the last n - k columns are Q^T A(:, k:n), applied
    // with the merged T or block by block, which rounds differently.
    CHECK((Am.leftCols(k).array() == Ab.leftCols(k).array()).all());
    if (n > k)
      CHECK((Am.rightCols(n - k) - Ab.rightCols(n - k)).template cast<double>().norm() /
                (A0.template cast<double>().norm() * double(m) * eps) < 30);
    CHECK(taum == taub);
    REQUIRE(!blocks.empty());
    CHECK(blocks.front() == 0);
    for (size_t i = 1; i < blocks.size(); ++i) CHECK(blocks[i] > blocks[i - 1]);
    CHECK(blocks.back() < k);
    // One block per level of the spine: more than one as soon as the recursion splits.
    if (k > c.nb) CHECK(blocks.size() > 1);
    MESSAGE("blocks: " << blocks.size());

    const Eigen::MatrixXd packed = Ab.template cast<double>();
    const Eigen::VectorXd tau = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(taub.data(), k).template cast<double>();
    {  // the merged T against larft's; T's entries are O(1) (|tau| <= 2, Y's entries at most 1 in magnitude)
      const Eigen::MatrixXd Tref = referenceT(packed, tau);
      CHECK((Tm.template cast<double>() - Tref).norm() / (Tref.norm() * double(m) * eps) < 30);
      CHECK(Tm.template cast<double>().template triangularView<Eigen::StrictlyLower>().toDenseMatrix().isZero(0));
      // FP16 mode multiplies with T in FP16 (Tunables.hpp tProductMode), which needs |T_ij| far below 65504; measured
      // at most 2 on every matrix tried (tests/studies/t_magnitude_study.cpp), checked here with room to spare.
      CHECK(double(Tm.cwiseAbs().maxCoeff()) <= 4.0);
      // Every block's T is the leading block of the merged one's at its position: the same reflectors.
      for (size_t i = 0; i < blocks.size(); ++i) {
        const Eigen::Index b0 = blocks[i], b1 = i + 1 < blocks.size() ? blocks[i + 1] : k;
        const Eigen::MatrixXd Tblock = Tb.template cast<double>().block(b0, b0, b1 - b0, b1 - b0);
        const Eigen::MatrixXd TblockRef = referenceT(packed.rightCols(n - b0).bottomRows(m - b0).leftCols(b1 - b0),
                                                     tau.segment(b0, b1 - b0));
        CHECK((Tblock - TblockRef).norm() / (TblockRef.norm() * double(m) * eps) < 30);
      }
    }
    for (const Eigen::Index length : {k, k / 2 + 3, Eigen::Index(1)}) {
      if (length > k) continue;
      for (int variant = 0; variant < 4; ++variant) {
        const bool onLeft = variant < 2, transpose = variant % 2 == 1;
        INFO("length " << length << ", onLeft " << onLeft << ", transpose " << transpose);
        const Eigen::Index r = 5;  // vectors
        const Mat<T> B0 = onLeft ? tcqr_test::uniformMatrix<T>(m, r) : tcqr_test::uniformMatrix<T>(r, m);
        Mat<T> Bm = B0, Bb = B0;
        std::vector<T> work(static_cast<size_t>(tcqr::detail::applyScratchSize(length, r)));
        tcqr::detail::applyWYBlocks(ops, View<T>(Am.data(), m, length, m), View<T>(Tm.data(), k, k, k),
                                    View<T>(Bm.data(), Bm.rows(), Bm.cols(), Bm.rows()), onLeft, transpose,
                                    work.data(), nullptr);
        tcqr::detail::applyWYBlocks(ops, View<T>(Ab.data(), m, length, m), View<T>(Tb.data(), k, k, k),
                                    View<T>(Bb.data(), Bb.rows(), Bb.cols(), Bb.rows()), onLeft, transpose,
                                    work.data(), &blocks);
        const Eigen::MatrixXd ref = referenceApply(packed, tau, length, B0.template cast<double>(), onLeft, transpose);
        const double scale = ref.norm() * double(m) * eps;
        CHECK((Bb.template cast<double>() - ref).norm() / scale < 30);
        CHECK((Bm.template cast<double>() - ref).norm() / scale < 30);
      }
    }
  }
}

TEST_CASE_TEMPLATE("merge cap: left children wider than maxMergedCols stay blocks and update block by block", T, float,
                   double) {
  TCQR_RANDOM_SEED();
  const double eps = double(Eigen::NumTraits<T>::epsilon());
  struct Case {
    Eigen::Index m, n, nb, cap;
    PanelKind panel;
    bool sideLane;   // with look-ahead lanes (two, run at the join)
    Eigen::Index zeroColumn;  // -1: none; else a zero column (a leaf split around an identity reflector)
  };
  for (const Case c : {Case{700, 512, 32, 64, PanelKind::Tsqr, false, -1}, Case{700, 512, 32, 128, PanelKind::Tsqr, true, -1},
                       Case{400, 400, 16, 40, PanelKind::Geqrf, false, -1}, Case{600, 300, 32, 32, PanelKind::Hybrid, true, 77},
                       Case{300, 450, 32, 64, PanelKind::Tsqr, false, 130}, Case{520, 260, 16, 8, PanelKind::Tsqr, false, -1}}) {
    INFO(c.m << " x " << c.n << ", nb " << c.nb << ", cap " << c.cap << ", panel " << int(c.panel) << ", side lane "
              << c.sideLane << ", zero column " << c.zeroColumn);
    const Eigen::Index m = c.m, n = c.n, k = std::min(m, n);
    Mat<T> A0 = tcqr_test::uniformMatrix<T>(m, n);
    if (c.zeroColumn >= 0) A0.col(c.zeroColumn).setZero();
    std::vector<char> identity;
    if (c.zeroColumn >= 0) identity = tcqr::detail::hostIdentityReflectorColumns(View<T>(A0.data(), m, n, m));
    Mat<T> A = A0, Tm = Mat<T>::Zero(k, k);
    std::vector<T> tau(static_cast<size_t>(k));
    const Eigen::Index need = tcqr::detail::factorTotalScratch(m, n, c.nb, c.panel, c.sideLane ? 2 : 0);
    const T guard = T(12345.5);
    std::vector<T> scratch(static_cast<size_t>(2 * need + 64), guard);
    std::vector<Eigen::Index> blocks, uncapped;
    LaneHostOps<T> side;
    HostOps<T> plain;
    side.maxMergedCols = plain.maxMergedCols = c.cap;
    if (c.sideLane)
      tcqr::detail::factor(side, View<T>(A.data(), m, n, m), tau.data(), View<T>(Tm.data(), k, k, k), c.nb, c.panel,
                           scratch.data(), static_cast<T*>(nullptr), identity.empty() ? nullptr : identity.data(),
                           &blocks);
    else
      tcqr::detail::factor(plain, View<T>(A.data(), m, n, m), tau.data(), View<T>(Tm.data(), k, k, k), c.nb, c.panel,
                           scratch.data(), static_cast<T*>(nullptr), identity.empty() ? nullptr : identity.data(),
                           &blocks);
    Eigen::Index touched = 0;
    for (Eigen::Index i = need; i < Eigen::Index(scratch.size()); ++i) touched += scratch[static_cast<size_t>(i)] != guard;
    CHECK(touched == 0);
    if (c.sideLane) {
      CHECK(side.forks > 0);
      CHECK(side.forks == side.joins);
    }
    {  // the same matrix without a cap, for the block count
      Mat<T> A2 = A0, T2 = Mat<T>::Zero(k, k);
      std::vector<T> tau2(static_cast<size_t>(k));
      HostOps<T> uncappedOps;
      tcqr::detail::factor(uncappedOps, View<T>(A2.data(), m, n, m), tau2.data(), View<T>(T2.data(), k, k, k), c.nb,
                           c.panel, scratch.data(), static_cast<T*>(nullptr),
                           identity.empty() ? nullptr : identity.data(), &uncapped);
    }
    REQUIRE(!blocks.empty());
    CHECK(blocks.front() == 0);
    for (size_t i = 1; i < blocks.size(); ++i) CHECK(blocks[i] > blocks[i - 1]);
    CHECK(blocks.back() < k);
    // Every block is a merged node (at most the cap) or a leaf (at most nb); without the cap the first block (the top
    // left child) is wider, so the cap changed the recursion.
    auto widest = [k](const std::vector<Eigen::Index>& b) {
      Eigen::Index w = 0;
      for (size_t i = 0; i < b.size(); ++i) w = std::max(w, (i + 1 < b.size() ? b[i + 1] : k) - b[i]);
      return w;
    };
    CHECK(widest(blocks) <= std::max(c.cap, c.nb));
    CHECK(widest(uncapped) > std::max(c.cap, c.nb));
    MESSAGE("blocks: " << blocks.size() << " (uncapped " << uncapped.size() << ")");
    if (c.zeroColumn >= 0 && c.zeroColumn < k) CHECK(tau[static_cast<size_t>(c.zeroColumn)] == T(0));

    // A correct factorization (Q from the reflectors, in double), and Q applied block by block with T.
    const Eigen::MatrixXd packed = A.template cast<double>();
    const Eigen::VectorXd tauD = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(tau.data(), k).template cast<double>();
    const Eigen::MatrixXd Q = Eigen::HouseholderSequence<Eigen::MatrixXd, Eigen::VectorXd>(packed, tauD) *
                              Eigen::MatrixXd::Identity(m, k);
    const Eigen::MatrixXd R = packed.topRows(k).template triangularView<Eigen::Upper>();
    const Eigen::MatrixXd Ad = A0.template cast<double>();
    CHECK((Ad.leftCols(k) - Q * R.leftCols(k)).norm() / (Ad.norm() * double(m) * eps) < 30);
    if (n > k) CHECK((Ad - Q * R).norm() / (Ad.norm() * double(m) * eps) < 30);
    CHECK((Q.transpose() * Q - Eigen::MatrixXd::Identity(k, k)).norm() / (double(m) * eps) < 30);
    for (int variant = 0; variant < 4; ++variant) {
      const bool onLeft = variant < 2, transpose = variant % 2 == 1;
      INFO("onLeft " << onLeft << ", transpose " << transpose);
      const Eigen::Index r = 5;
      const Mat<T> B0 = onLeft ? tcqr_test::uniformMatrix<T>(m, r) : tcqr_test::uniformMatrix<T>(r, m);
      Mat<T> B = B0;
      std::vector<T> work(static_cast<size_t>(tcqr::detail::applyScratchSize(k, r)));
      tcqr::detail::applyWYBlocks(plain, View<T>(A.data(), m, k, m), View<T>(Tm.data(), k, k, k),
                                  View<T>(B.data(), B.rows(), B.cols(), B.rows()), onLeft, transpose, work.data(),
                                  &blocks);
      const Eigen::MatrixXd ref = referenceApply(packed, tauD, k, B0.template cast<double>(), onLeft, transpose);
      CHECK((B.template cast<double>() - ref).norm() / (ref.norm() * double(m) * eps) < 30);
    }
  }
}

/// HostOps that count the one-kernel panels (usePanelKernel's branch of factorRecursive) and their heights.
template <typename T>
struct PanelCountingOps : HostOps<T> {
  int panels = 0;
  Eigen::Index tallest = 0;
  void householderPanel(View<T> A, T* tau, View<T> Tm) {
    ++panels;
    tallest = std::max(tallest, A.rows);
    HostOps<T>::householderPanel(A, tau, Tm);
  }
};

TEST_CASE_TEMPLATE("one-kernel panels: Auto's leaves up to panelKernelRows, the same factorization as Geqrf's", T,
                   float, double) {
  TCQR_RANDOM_SEED();
  const Eigen::Index m = 700, n = 200, k = 200, nb = 32;
  const Mat<T> A0 = tcqr_test::uniformMatrix<T>(m, n);
  auto run = [&](PanelKind panel, PanelCountingOps<T>& ops, Mat<T>& A, std::vector<T>& tau, Mat<T>& Tm) {
    A = A0;
    Tm = Mat<T>::Zero(k, k);
    tau.assign(static_cast<size_t>(k), T(0));
    std::vector<T> scratch(static_cast<size_t>(tcqr::detail::factorTotalScratch(m, n, nb, panel)));
    tcqr::detail::factor(ops, View<T>(A.data(), m, n, m), tau.data(), View<T>(Tm.data(), k, k, k), nb, panel,
                         scratch.data());
  };
  Mat<T> Ag, Tg, Ah, Th;
  std::vector<T> taug, tauh;
  PanelCountingOps<T> geqrf, hybrid;
  run(PanelKind::Geqrf, geqrf, Ag, taug, Tg);
  CHECK(geqrf.panels == 0);
  // Leaves of at most 600 rows: the recursion's 7 leaves start at rows 0, 32, ..., 192 (heights 700 down to 508),
  // so the last three (572, 540 and 508 rows).
  hybrid.panelKernelRows = 600;
  run(PanelKind::Hybrid, hybrid, Ah, tauh, Th);
  CHECK(hybrid.panels == 3);
  CHECK(hybrid.tallest == 572);
  // Every leaf through the panel kernel: the operations of geqrfPanel + formPanelT, so the same bits.
  PanelCountingOps<T> all;
  all.panelKernelRows = m;
  Mat<T> Aa, Ta;
  std::vector<T> taua;
  run(PanelKind::Hybrid, all, Aa, taua, Ta);
  CHECK(all.panels == 7);
  CHECK(all.tallest == m);
  CHECK((Aa.array() == Ag.array()).all());
  CHECK(taua == taug);
  CHECK((Ta.array() == Tg.array()).all());
  // Panel kinds other than Hybrid (Panel::Auto) never take the branch.
  PanelCountingOps<T> tsqr;
  tsqr.panelKernelRows = m;
  Mat<T> At, Tt;
  std::vector<T> taut;
  run(PanelKind::Tsqr, tsqr, At, taut, Tt);
  CHECK(tsqr.panels == 0);
}
