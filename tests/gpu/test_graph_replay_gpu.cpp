// test_graph_replay_gpu.cpp - graph replay of the factorization (src/FactorGraph.hpp): on the third factorization of
// one key an object also captures its recursion into a CUDA graph, and from the fourth on it replays that graph. Each
// replayed result must equal, bit for bit, what a fresh object (whose first factorization is always queued directly)
// computes from the same matrix: the graph holds the same kernels with the same arguments. The library's counters
// (graphCaptures, graphReplays) show that the capture and the replays happened, so these checks cannot pass by never
// replaying. Covered: every float mode and FP64; the leaf choices changing between calls (a zero column; certain
// against possible identity reflectors), a NaN input in a replayed call, tunables read per factorization
// (TCQR_MAX_MERGED_COLS, TCQR_X3_PAIRED), a precision change that keeps the buffers, more shapes than the object
// keeps graphs for, square matrices with cuSOLVER's panels, a copy of a replayed factorization, computeOnDevice on a
// caller's non-blocking stream (replayed) and blocking stream (never captured), solve() after a replay, the look-ahead
// lanes' streams in the same graph. "Fresh" objects
// free the states that destroyed objects left for later ones (src/StatePool.hpp) first, so that their first calls are
// queued directly; the last cases test that pool: a new object per call taking over its predecessor's state and
// graphs, settings and a destroyed stream not carried over, objects on four threads at once, two devices (skipped on
// one), cudaDeviceReset().
// Exits 77 (CTest: skipped) without a CUDA device.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <Eigen/TensorCoreQR>

#include "../../src/FactorGraph.hpp"
#include "common/ScopedEnv.h"
#include "common/TestMatrices.h"

using namespace tcqr_test;
using tcqr::Backend;
using tcqr::Precision;
using tcqr::detail::graphCaptures;
using tcqr::detail::graphReplays;
using tcqr::detail::greenLaneStreams;

TCQR_GPU_TEST_MAIN()

namespace {

template <typename M>
using QR = Eigen::TensorCoreHouseholderQR<M>;

/// A new object with a new state: destroyed objects' states (kept for later objects, with their graphs) are freed
/// first, so that the object's first factorizations are queued directly.
template <typename M>
QR<M> newObject() {
  tcqr::releaseCachedDeviceMemory();
  return QR<M>();
}

/// The factorization of A by a fresh object: queued directly, never from a graph.
template <typename M>
QR<M> fresh(const M& A, Precision p, tcqr::Panel panel = tcqr::Panel::Auto) {
  QR<M> qr = newObject<M>();
  qr.setBackend(Backend::Cuda).setPrecision(p);
  qr.setPanel(panel);
  qr.compute(A);
  return qr;
}

/// qr (which factored A) equals a fresh object's factorization of A bit for bit, and its info().
template <typename M>
void checkSameAsFresh(const QR<M>& qr, const M& A, Precision p, tcqr::Panel panel = tcqr::Panel::Auto) {
  const QR<M> ref = fresh(A, p, panel);
  REQUIRE(qr.info() == ref.info());
  CHECK(qr.activePrecision() == ref.activePrecision());
  if (ref.info() != Eigen::Success) return;
  CHECK((qr.matrixQR().array() == ref.matrixQR().array()).all());
  CHECK((qr.hCoeffs().array() == ref.hCoeffs().array()).all());
}

template <typename Scalar>
std::vector<Precision> modesOf() {
  if (std::is_same<Scalar, double>::value) return {Precision::FP64};
  return {Precision::Default, Precision::FP32, Precision::TF32x3, Precision::FP16x3, Precision::TF32, Precision::FP16,
          Precision::BF16};
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE_TEMPLATE("graph replay: repeated factorizations of one shape equal a fresh object's", Scalar, float,
                     double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    for (Precision p : modesOf<Scalar>()) {
      INFO("mode " << tcqr::precisionName(p));
      QR<M> qr = newObject<M>();
      qr.setBackend(Backend::Cuda).setPrecision(p);
      const long captures = graphCaptures(), replays = graphReplays();
      for (int call = 0; call < 5; ++call) {
        INFO("call " << call);
        const M A = conditionedMatrix<Scalar>(700, 520, Spectrum::Geometric, 1e3);
        qr.compute(A);
        checkSameAsFresh(qr, A, p);
        // Calls 0 and 1 queue directly, call 2 also captures, calls 3 and 4 replay.
        CHECK(graphCaptures() - captures == (call >= 2 ? 1 : 0));
        CHECK(graphReplays() - replays == (call >= 3 ? call - 2 : 0));
      }
      // solve() after a replay: as a fresh object's.
      const M A = uniformMatrix<Scalar>(700, 520);
      const M B = uniformMatrix<Scalar>(700, 3);
      qr.compute(A);
      const M X = qr.solve(B);
      const M Xref = fresh(A, p).solve(B);
      CHECK((X.array() == Xref.array()).all());
    }
  }

  // The look-ahead lanes (on by default for FP64 from 8192^2; forced here with TCQR_LOOKAHEAD=2): their work on the
  // lanes' streams is captured with the main lane's into one graph (a fork and join per look-ahead), replayed bit for
  // bit. On sm_90 and later the lanes' streams belong to a green context (CudaContext::greenLaneStream), and the
  // panels' launch priority goes into the graph (cudaGraphInstantiateFlagUseNodePriority).
  TEST_CASE_TEMPLATE("graph replay: with look-ahead lanes", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const ScopedEnv lanes("TCQR_LOOKAHEAD", "2");
    const Precision p = std::is_same<Scalar, double>::value ? Precision::FP64 : Precision::FP16x3;
    const long green = greenLaneStreams(), refused = tcqr::detail::greenContextFailures();
    QR<M> qr = newObject<M>();
    qr.setBackend(Backend::Cuda).setPrecision(p);
    const long captures = graphCaptures(), replays = graphReplays();
    for (int call = 0; call < 5; ++call) {
      INFO("call " << call);
      const M A = conditionedMatrix<Scalar>(1500, 1300, Spectrum::Geometric, 1e3);
      qr.compute(A);
      checkSameAsFresh(qr, A, p);
      CHECK(graphCaptures() - captures == (call >= 2 ? 1 : 0));
      CHECK(graphReplays() - replays == (call >= 3 ? call - 2 : 0));
    }
    int device = 0, major = 0;
    REQUIRE(cudaGetDevice(&device) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
    // (Unless switched off or refused: a device partitioned by MPS or MIG might refuse the split, and the lanes then
    // run on plain streams.)
    if (major >= 9 && std::getenv("TCQR_LANES_GREEN") == nullptr) {
      if (tcqr::detail::greenContextFailures() > refused)
        MESSAGE("the driver refused the lanes' green context: they ran on plain streams");
      else
        CHECK(greenLaneStreams() > green);
    }
  }

  TEST_CASE_TEMPLATE("graph replay: what changes the recursion between calls is not replayed", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Precision p = Precision::Default;
    QR<M> qr = newObject<M>();
    qr.setBackend(Backend::Cuda);
    const Eigen::Index m = 640, n = 600;
    for (int call = 0; call < 3; ++call) qr.compute(uniformMatrix<Scalar>(m, n));  // the third one captured
    long replays = graphReplays();

    // A zero column changes the leaves the host chooses: a new key, queued directly.
    const M Z = withZeroColumns<Scalar>(m, n, {37, 300});
    qr.compute(Z);
    checkSameAsFresh(qr, Z, p);
    CHECK(graphReplays() == replays);

    // A NaN in a replayed call: reported as for a fresh object, and the next call is right again.
    M bad = uniformMatrix<Scalar>(m, n);
    bad(5, 400) = std::numeric_limits<Scalar>::quiet_NaN();
    qr.compute(bad);
    CHECK(graphReplays() == replays + 1);
    CHECK(qr.info() == Eigen::NumericalIssue);
    const M A = uniformMatrix<Scalar>(m, n);
    qr.compute(A);
    CHECK(graphReplays() == replays + 2);
    checkSameAsFresh(qr, A, p);
    replays = graphReplays();

    // A tunable read on every factorization (the merge cap): the graph of the other cap is not used.
    {
      const ScopedEnv cap("TCQR_MAX_MERGED_COLS", "64");
      for (int call = 0; call < 4; ++call) {
        const M C = uniformMatrix<Scalar>(m, n);
        qr.compute(C);
        // (a fresh object under the same cap)
        checkSameAsFresh(qr, C, p);
      }
      CHECK(graphReplays() == replays + 1);  // calls 0-2 direct (2 also captured), 3 replayed
    }
    const M D = uniformMatrix<Scalar>(m, n);
    qr.compute(D);  // the default cap's graph again
    CHECK(graphReplays() == replays + 2);
    checkSameAsFresh(qr, D, p);

    // A precision change that keeps every buffer (FP16 to BF16: the same converted sizes): the mode is in the key.
    if (std::is_same<Scalar, float>::value) {
      qr.setPrecision(Precision::FP16);
      for (int call = 0; call < 4; ++call) {
        const M E = uniformMatrix<Scalar>(m, n);
        qr.compute(E);
        checkSameAsFresh(qr, E, Precision::FP16);
      }
      const long before = graphReplays();
      CHECK(before == replays + 3);  // the FP16 key's fourth call
      qr.setPrecision(Precision::BF16);
      const M E = uniformMatrix<Scalar>(m, n);
      qr.compute(E);
      CHECK(graphReplays() == before);
      checkSameAsFresh(qr, E, Precision::BF16);

      // A per-call tunable of the x3 modes (TCQR_X3_PAIRED, read on every product).
      qr.setPrecision(Precision::FP16x3);
      for (int call = 0; call < 4; ++call) qr.compute(uniformMatrix<Scalar>(m, n));
      const long x3 = graphReplays();
      CHECK(x3 == before + 1);
      const ScopedEnv paired("TCQR_X3_PAIRED", "0");
      const M F = uniformMatrix<Scalar>(m, n);
      qr.compute(F);
      CHECK(graphReplays() == x3);
      checkSameAsFresh(qr, F, Precision::FP16x3);
    }
  }

  TEST_CASE_TEMPLATE("graph replay: identity-reflector columns, certain and possible, are told apart", Scalar, float,
                     double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Eigen::Index m = 640, n = 600;
    const Precision p = Precision::Default;
    // A: columns 0 and 1 are zero below row 1, so column 1 certainly gets the identity (nothing is computed for it).
    // B: column 0 is dense and column 1 zero below row 1: column 1 may get the identity (a one-column leaf of its
    // own, since reflector 0 fills its tail in). Both flag column 1, with different flags and different work.
    auto makeA = [&] {
      M A = uniformMatrix<Scalar>(m, n);
      A.block(2, 0, m - 2, 2).setZero();
      return A;
    };
    auto makeB = [&] {
      M B = uniformMatrix<Scalar>(m, n);
      B.block(2, 1, m - 2, 1).setZero();
      return B;
    };
    for (tcqr::Panel panel : {tcqr::Panel::Auto, tcqr::Panel::Tsqr}) {
      INFO("panel " << int(panel));
      QR<M> qr = newObject<M>();
      qr.setBackend(Backend::Cuda);
      qr.setPanel(panel);
      const long replays = graphReplays();
      for (int call = 0; call < 5; ++call) {
        const M A = makeA();
        qr.compute(A);
        checkSameAsFresh(qr, A, p, panel);
      }
      CHECK(graphReplays() == replays + 2);
      for (int call = 0; call < 5; ++call) {  // B's own key: two direct runs, a capture, two replays
        const M B = makeB();
        qr.compute(B);
        checkSameAsFresh(qr, B, p, panel);
      }
      CHECK(graphReplays() == replays + 4);
      const M A = makeA();
      qr.compute(A);  // A's graph again
      CHECK(graphReplays() == replays + 5);
      checkSameAsFresh(qr, A, p, panel);
    }
  }

  TEST_CASE_TEMPLATE("graph replay: square matrices, cuSOLVER panels, copies", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Precision p = Precision::Default;
    for (tcqr::Panel panel : {tcqr::Panel::Auto, tcqr::Panel::Geqrf}) {
      INFO("panel " << int(panel));
      QR<M> qr = newObject<M>();
      qr.setBackend(Backend::Cuda);
      qr.setPanel(panel);
      const long replays = graphReplays();
      for (int call = 0; call < 6; ++call) {
        const M A = conditionedMatrix<Scalar>(576, 576, Spectrum::Arithmetic, 1e2);
        qr.compute(A);
        checkSameAsFresh(qr, A, p, panel);
      }
      CHECK(graphReplays() == replays + 3);
      // A copy of a replayed factorization, and the original replaying on.
      const M A = uniformMatrix<Scalar>(576, 576);
      qr.compute(A);
      const QR<M> copy = qr;
      const M B = uniformMatrix<Scalar>(576, 2);
      CHECK((copy.matrixQR().array() == qr.matrixQR().array()).all());
      CHECK((copy.solve(B).array() == fresh(A, p, panel).solve(B).array()).all());
      const M C = uniformMatrix<Scalar>(576, 576);
      qr.compute(C);
      CHECK(graphReplays() == replays + 5);
      checkSameAsFresh(qr, C, p, panel);
    }
  }

  TEST_CASE_TEMPLATE("graph replay: more shapes than graphs kept, in turn", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    QR<M> qr = newObject<M>();
    qr.setBackend(Backend::Cuda);
    // The largest first, so that the buffers do not grow (which drops every graph) after the first round.
    const std::vector<std::pair<Eigen::Index, Eigen::Index>> shapes = {
        {900, 400}, {800, 300}, {700, 200}, {600, 100}, {500, 90}, {400, 80}};
    static_assert(tcqr::detail::FactorGraph::kGraphs < 6, "more shapes than graphs");
    const long replays = graphReplays();
    for (int round = 0; round < 4; ++round) {
      for (const auto& s : shapes) {
        INFO("round " << round << ", " << s.first << " x " << s.second);
        const M A = uniformMatrix<Scalar>(s.first, s.second);
        qr.compute(A);
        checkSameAsFresh(qr, A, Precision::Default);
      }
    }
    // Six keys in turn: the object counts the last four keys it queued directly, so none comes back in time to be
    // captured; nothing is replayed, and every result above matched a fresh object's.
    CHECK(graphReplays() == replays);
    // Two shapes in turn fit: both are captured in the third round and replay in the fourth and fifth.
    for (int round = 0; round < 5; ++round) {
      for (int i = 0; i < 2; ++i) {
        const M A = uniformMatrix<Scalar>(shapes[i].first, shapes[i].second);
        qr.compute(A);
        checkSameAsFresh(qr, A, Precision::Default);
      }
    }
    CHECK(graphReplays() - replays == 4);
  }

  TEST_CASE_TEMPLATE("graph replay: computeOnDevice on a caller's stream", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Eigen::Index m = 1500, n = 700;
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    DeviceArray<Scalar> dA(size_t(m * n));
    REQUIRE(dA.p != nullptr);
    {
      QR<M> qr = newObject<M>();
      qr.setBackend(Backend::Cuda);
      const long replays = graphReplays();
      for (int call = 0; call < 5; ++call) {
        const M A = uniformMatrix<Scalar>(m, n);
        REQUIRE(cudaMemcpyAsync(dA.p, A.data(), sizeof(Scalar) * m * n, cudaMemcpyHostToDevice, s) == cudaSuccess);
        qr.computeOnDevice(dA.p, m, n, m, s);
        REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
        checkSameAsFresh(qr, A, Precision::Default);
      }
      CHECK(graphReplays() - replays == 2);
    }
    cudaStreamDestroy(s);
    // A blocking stream is never captured (while it is, any use of the legacy stream by any thread would fail).
    REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
    {
      QR<M> qr = newObject<M>();
      qr.setBackend(Backend::Cuda);
      const long captures = graphCaptures(), replays = graphReplays();
      for (int call = 0; call < 5; ++call) {
        const M A = uniformMatrix<Scalar>(m, n);
        REQUIRE(cudaMemcpyAsync(dA.p, A.data(), sizeof(Scalar) * m * n, cudaMemcpyHostToDevice, s) == cudaSuccess);
        qr.computeOnDevice(dA.p, m, n, m, s);
        REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
        checkSameAsFresh(qr, A, Precision::Default);
      }
      CHECK(graphCaptures() == captures);
      CHECK(graphReplays() == replays);
    }
    cudaStreamDestroy(s);
  }

  // ---- Destroyed objects' states kept for later objects (src/StatePool.hpp) ----

  TEST_CASE_TEMPLATE("state pool: a new object per call takes over its predecessor's state and graphs", Scalar, float,
                     double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    tcqr::releaseCachedDeviceMemory();
    const long captures = graphCaptures(), replays = graphReplays();
    const Scalar* storage = nullptr;
    for (int call = 0; call < 6; ++call) {
      INFO("call " << call);
      const M A = conditionedMatrix<Scalar>(700, 520, Spectrum::Geometric, 1e3);
      {
        QR<M> qr(A, Backend::Cuda);  // the Eigen idiom: a new object for every matrix
        if (call == 0)
          storage = qr.deviceMatrixQR();
        else
          CHECK(qr.deviceMatrixQR() == storage);  // the same device buffers: the state was taken over
        // (the fresh object's state is freed before it is made, and goes to the pool before this object's does, so
        // the next object takes this one's)
        checkSameAsFresh(qr, A, Precision::Default);
      }
      // As one object reused: calls 0 and 1 queued directly, call 2 also captured, calls 3 to 5 replayed.
      CHECK(graphCaptures() - captures == (call >= 2 ? 1 : 0));
      CHECK(graphReplays() - replays == (call >= 3 ? call - 2 : 0));
    }
    CHECK(tcqr::releaseCachedDeviceMemory() > 0);
    CHECK(tcqr::releaseCachedDeviceMemory() == 0);
  }

  TEST_CASE_TEMPLATE("state pool: a taken-over state keeps none of its predecessor's settings or its stream", Scalar,
                     float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Eigen::Index m = 900, n = 400;
    tcqr::releaseCachedDeviceMemory();
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    DeviceArray<Scalar> dA(size_t(m * n));
    REQUIRE(dA.p != nullptr);
    const M A = uniformMatrix<Scalar>(m, n);
    REQUIRE(cudaMemcpy(dA.p, A.data(), sizeof(Scalar) * m * n, cudaMemcpyHostToDevice) == cudaSuccess);
    const Scalar* storage = nullptr;
    {
      QR<M> qr;
      const bool isDouble = std::is_same<Scalar, double>::value;
      qr.setBackend(Backend::Cuda).setPrecision(isDouble ? Precision::FP64 : Precision::FP16);
      qr.setBlockSize(64).setPanel(tcqr::Panel::Geqrf);
      qr.computeOnDevice(dA.p, m, n, m, s);
      qr.synchronize();
      REQUIRE(qr.info() == Eigen::Success);
      storage = qr.deviceMatrixQR();
    }
    REQUIRE(cudaStreamDestroy(s) == cudaSuccess);  // the kept state must not use it again
    const M B = uniformMatrix<Scalar>(m, n);
    QR<M> qr;
    qr.setBackend(Backend::Cuda).compute(B);
    CHECK(qr.deviceMatrixQR() == storage);  // taken over
    CHECK(qr.precision() == Precision::Default);
    // Default mode, block size and panel: bit for bit a fresh object's factorization (and its active mode).
    checkSameAsFresh(qr, B, Precision::Default);
    const M X = uniformMatrix<Scalar>(m, 2);
    CHECK((qr.solve(X).array() == fresh(B, Precision::Default).solve(X).array()).all());
  }

  TEST_CASE("state pool: objects made and destroyed on several threads at once") {
    TCQR_RANDOM_SEED();
    using M = Mat<float>;
    constexpr int kThreads = 4, kCalls = 6;
    // Two shapes, so that states move between shapes too (the bits do not depend on what a state factored before:
    // the householder suite's "whatever the object factored before").
    std::vector<M> inputs, expected;
    for (int t = 0; t < kThreads; ++t) {
      inputs.push_back(uniformMatrix<float>(t % 2 ? 640 : 900, t % 2 ? 600 : 300));
      expected.push_back(fresh(inputs.back(), Precision::Default).matrixQR());
    }
    tcqr::releaseCachedDeviceMemory();
    std::vector<int> wrong(kThreads, 0);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          for (int c = 0; c < kCalls; ++c) {
            const QR<M> qr(inputs[size_t(t)], Backend::Cuda);
            if (qr.info() != Eigen::Success || !(qr.matrixQR().array() == expected[size_t(t)].array()).all())
              ++wrong[size_t(t)];
          }
        } catch (const std::exception& e) {
          errors[size_t(t)] = e.what();
        }
      });
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      INFO("thread " << t << ": " << errors[size_t(t)]);
      CHECK(errors[size_t(t)].empty());
      CHECK(wrong[size_t(t)] == 0);
    }
  }

  // A state belongs to the device (and context) it was made on, whichever device is current when its object is
  // destroyed; release() frees every device's states. With fewer than two devices GpuTestMain.h filters it out
  // (doctest counts it as skipped); the check below covers a run that names it anyway.
  TEST_CASE("state pool: two devices, an object destroyed while the other device is current") {
    int devices = 0;
    REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
    if (devices < 2) {
      MESSAGE("skipped: needs two CUDA devices");
      return;
    }
    TCQR_RANDOM_SEED();
    using M = Mat<float>;
    const M A = uniformMatrix<float>(700, 300);
    const auto deviceOf = [](const void* p) {
      cudaPointerAttributes a{};
      return cudaPointerGetAttributes(&a, p) == cudaSuccess ? a.device : -1;
    };
    tcqr::releaseCachedDeviceMemory();
    REQUIRE(cudaSetDevice(1) == cudaSuccess);
    std::unique_ptr<QR<M>> onOne(new QR<M>(A, Backend::Cuda));
    REQUIRE(onOne->info() == Eigen::Success);
    const float* storage = onOne->deviceMatrixQR();
    CHECK(deviceOf(storage) == 1);
    const M R1 = onOne->matrixQR();
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    onOne.reset();  // kept as device 1's state
    {
      const QR<M> onZero(A, Backend::Cuda);  // does not take it
      REQUIRE(onZero.info() == Eigen::Success);
      CHECK(onZero.deviceMatrixQR() != storage);
      CHECK(deviceOf(onZero.deviceMatrixQR()) == 0);
      CHECK(relativeDifference(onZero.matrixQR(), R1) <= 1e-4);
    }
    REQUIRE(cudaSetDevice(1) == cudaSuccess);
    {
      const QR<M> again(A, Backend::Cuda);  // takes it
      REQUIRE(again.info() == Eigen::Success);
      CHECK(again.deviceMatrixQR() == storage);
      CHECK((again.matrixQR().array() == R1.array()).all());
    }
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    CHECK(tcqr::releaseCachedDeviceMemory() > 0);  // both devices' states, freed from device 0
    int current = -1;
    CHECK(cudaGetDevice(&current) == cudaSuccess);
    CHECK(current == 0);
    CHECK(cudaGetLastError() == cudaSuccess);
  }

  // Last in this file: cudaDeviceReset() destroys the context, and with it the kept states' handles, streams and
  // memory. The next object must not take one of them (StatePool checks the context's id) and must work.
  TEST_CASE("state pool: after cudaDeviceReset() a new object starts afresh") {
    TCQR_RANDOM_SEED();
    using M = Mat<float>;
    const M A = uniformMatrix<float>(700, 300);
    M before;
    {
      const QR<M> qr(A, Backend::Cuda);
      REQUIRE(qr.info() == Eigen::Success);
      before = qr.matrixQR();
    }  // its state is kept
    {
      // A state kept after factoring with look-ahead lanes has given up their green context, which would make
      // cudaDeviceReset() fail (cudaErrorNotPermitted) while it exists.
      const ScopedEnv lanes("TCQR_LOOKAHEAD", "2");
      const QR<M> qr(A, Backend::Cuda);
      REQUIRE(qr.info() == Eigen::Success);
    }
    REQUIRE(cudaDeviceReset() == cudaSuccess);
    const QR<M> qr(A, Backend::Cuda);
    REQUIRE(qr.info() == Eigen::Success);
    CHECK((qr.matrixQR().array() == before.array()).all());
    CHECK(tcqr::releaseCachedDeviceMemory() == 0);  // the dropped state was not freed (its context was gone)
    CHECK(cudaGetLastError() == cudaSuccess);
  }
}
