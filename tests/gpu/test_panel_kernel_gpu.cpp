// test_panel_kernel_gpu.cpp - the one-kernel Householder panel (kernels/panel_kernels.cu: a whole panel of up to 32
// columns in the registers, and beyond them the shared memory, of one thread-block cluster), which Panel::Auto uses on
// the CUDA backend for panels of up to 32768 (float; 24576 in registers alone) / 16384 (double; 12288) rows. Every
// cluster size (1 to 16 blocks) and every rows-per-thread variant in registers, and the variants with rows in shared
// memory (on 13-16 blocks), are run
// against Eigen::HouseholderQR (same reflectors up to rounding) and the LAPACK-style ratios, including matrices whose
// columns make the kernel's shortcut for the next column's norm refuse (duplicated and nearly dependent columns), and
// the kernel's T against larft's recurrence over the reflectors and coefficients it returned.
// Exits 77 (CTest: skipped) without a CUDA device.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "common/QRSuites.h"
#include "common/ScopedEnv.h"
#include "../../src/kernels.hpp"  // (the kernel itself, for its T)

using namespace tcqr_test;
using tcqr::Backend;

TCQR_GPU_TEST_MAIN()

namespace {

/// The tallest panel a test runs with TCQR_PANEL_ROWS_PER_THREAD=rowsPerThread: 16 blocks of 256 threads with that
/// many rows each in registers (taller ones run with more rows per thread, which a later variant covers), or, for 0
/// (the kernel's own choice) and the most rows in registers (6 in float, 3 in double), the kernel's limit with rows in
/// shared memory (8 rows per thread in float, 4 in double: 6 + 2 and 2 + 2 in registers + shared memory).
template <typename Scalar>
Index maxRowsFor(int rowsPerThread) {
  const bool single = std::is_same<Scalar, float>::value;
  const int most = single ? 6 : 3;
  const int r = rowsPerThread > 0 && rowsPerThread < most ? rowsPerThread : most + (single ? 2 : 1);
  return Index(16) * 256 * r;
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE_TEMPLATE("one-kernel panel: every cluster size and rows per thread match Eigen", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Options o{Backend::Cuda, 0, false, tcqr::Panel::Auto};
    const std::vector<int> variants = std::is_same<Scalar, float>::value ? std::vector<int>{0, 1, 2, 3, 4, 5, 6}
                                                                         : std::vector<int>{0, 1, 2, 3};
    for (int rpt : variants) {
      const ScopedEnv env("TCQR_PANEL_ROWS_PER_THREAD", std::to_string(rpt));
      for (Index m : {32, 33, 100, 255, 256, 257, 1000, 2048, 3001, 4096, 4097, 6000, 8192, 10000, 12288, 12289, 16384,
                      16385, 20480, 20481, 24576, 24577, 28672, 28673, 32768}) {
        if (m > maxRowsFor<Scalar>(rpt)) continue;
        for (Index n : {1, 7, 32}) {
          if (n > m) continue;
          INFO("rows per thread " << rpt << ", " << m << " x " << n);
          const M A = conditionedMatrix<Scalar>(m, n, Spectrum::Arithmetic, 10.0);
          const TCQR<M> qr = factorAndCheck<M>(A, Options{Backend::Cuda, 0, m <= 300, o.panel});
          checkAgainstEigen<M>(A, qr, 10.0);
        }
      }
    }
  }

  // T is what the factorization's later products use. The first version of the rows in shared memory (2026-11-29)
  // left them out of T's sums for the columns left of the current one: the cases above failed in double (ratios of
  // 1e9-1e10, Q off by about 1e-2) but passed in float, whose bounds of 30 m eps come to 0.06 at m = 32768. Here T
  // must match larft's recurrence over the returned reflectors and tau, evaluated in double.
  TEST_CASE_TEMPLATE("one-kernel panel: T matches larft of the returned reflectors", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Index most = tcqr::kernels::householderPanelMaxRows<Scalar>();
    if (most == 0) {
      MESSAGE("no thread-block cluster of the panel kernel fits this device (before sm_90): nothing to check");
      return;
    }
    for (int rpt : {0, std::is_same<Scalar, float>::value ? 6 : 3}) {
      for (Index m : {32, 300, 4096, 10000, 12288, 12289, 16384, 20480, 24576, 24577, 28672, 28673, 32768}) {
        if (m > most) continue;
        for (Index n : {7, 32}) {
          INFO("rows per thread at least " << rpt << ", " << m << " x " << n);
          const M A = conditionedMatrix<Scalar>(m, n, Spectrum::Arithmetic, 10.0);
          DeviceArray<Scalar> dA{std::size_t(m * n)}, dTau{std::size_t(n)}, dT{std::size_t(n * n)};
          REQUIRE((dA.p && dTau.p && dT.p));
          REQUIRE(cudaMemcpy(dA.p, A.data(), sizeof(Scalar) * std::size_t(m * n), cudaMemcpyHostToDevice) ==
                  cudaSuccess);
          tcqr::kernels::launchHouseholderPanel<Scalar>(dA.p, m, m, n, dTau.p, dT.p, n, nullptr, rpt);
          REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
          M QR(m, n), T(n, n);
          Eigen::Matrix<Scalar, Eigen::Dynamic, 1> tau(n);
          REQUIRE(cudaMemcpy(QR.data(), dA.p, sizeof(Scalar) * std::size_t(m * n), cudaMemcpyDeviceToHost) ==
                  cudaSuccess);
          REQUIRE(cudaMemcpy(tau.data(), dTau.p, sizeof(Scalar) * std::size_t(n), cudaMemcpyDeviceToHost) ==
                  cudaSuccess);
          REQUIRE(cudaMemcpy(T.data(), dT.p, sizeof(Scalar) * std::size_t(n * n), cudaMemcpyDeviceToHost) ==
                  cudaSuccess);
          Mat<double> V = Mat<double>::Zero(m, n);
          for (Index j = 0; j < n; ++j) {
            V(j, j) = 1.0;
            V.col(j).tail(m - j - 1) = QR.col(j).tail(m - j - 1).template cast<double>();
          }
          Mat<double> ref = Mat<double>::Zero(n, n);
          for (Index j = 0; j < n; ++j) {
            ref(j, j) = double(tau(j));
            if (j == 0) continue;
            const Eigen::VectorXd z = V.leftCols(j).transpose() * V.col(j);
            const Eigen::VectorXd w = ref.topLeftCorner(j, j).template triangularView<Eigen::Upper>() * z;
            ref.col(j).head(j) = -double(tau(j)) * w;
          }
          // The diagonal is tau either way. Above it are the sums of m products (entries of about 1 / sqrt(m), each
          // rounded to about sqrt(m) eps of them at worst; with TCQR_TEST_VERBOSE=1 the ratio below came to
          // 0.005-0.26 in this test's 80 cases on the H200); leaving out one of the rows per thread would miss an
          // eighth to a quarter of every sum.
          const Mat<double> diff = T.template cast<double>() - ref;
          CHECK(diff.diagonal().isZero(0.0));
          if (n > 1)
            CHECK(report("|T - larft| above the diagonal / its norm / (sqrt(m) eps)",
                         Mat<double>(diff.template triangularView<Eigen::StrictlyUpper>()).norm() /
                             Mat<double>(ref.template triangularView<Eigen::StrictlyUpper>()).norm() /
                             (std::sqrt(double(m)) * epsOf<Scalar>())) <= 10.0);
        }
      }
    }
  }

  TEST_CASE_TEMPLATE("one-kernel panel: ill-conditioned and rank-deficient panels", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Options o{Backend::Cuda, 0, false, tcqr::Panel::Auto};
    const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
    for (Index m : {64, 2000, 8000, 12000, 16000, 20000, 30000}) {
      for (Spectrum sp : {Spectrum::Geometric, Spectrum::Clustered, Spectrum::Arithmetic}) {
        INFO(m << " x 32, " << doctest::String(spectrumName(sp)) << " spectrum, kappa " << kappa);
        factorAndCheck<M>(conditionedMatrix<Scalar>(m, 32, sp, kappa), o);
      }
      // Duplicated columns: the second copy's tail vanishes after the first's reflector, which the next-column
      // shortcut must refuse (its difference would be rounding noise) and recompute.
      INFO(m << " x 32, duplicated columns");
      const TCQR<M> qd = factorAndCheck<M>(withDuplicatedColumns<Scalar>(m, 32), o);
      CHECK(qd.matrixQR().allFinite());
      CHECK(qd.hCoeffs().allFinite());
      // A column that is almost all in one row, below and above the diagonal.
      M B = uniformMatrix<Scalar>(m, 32);
      B.col(5).setZero();
      B(5, 5) = Scalar(3);
      B(6, 5) = Scalar(1e-3);
      B.col(9) *= Scalar(1e-3);
      B(9, 9) = Scalar(100);
      INFO(m << " x 32, columns concentrated in one row");
      const TCQR<M> qb = factorAndCheck<M>(B, o);
      checkAgainstEigen<M>(B, qb, 1e5);
    }
  }

  TEST_CASE_TEMPLATE("one-kernel panel: square matrices through the recursion, solve", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Options o{Backend::Cuda, 0, false, tcqr::Panel::Auto};
    for (Index n : {33, 300, 1000, 2048}) {
      INFO(n << " x " << n);
      const M A = conditionedMatrix<Scalar>(n, n, Spectrum::Arithmetic, 10.0);
      const TCQR<M> qr = factorAndCheck<M>(A, o);
      checkAgainstEigen<M>(A, qr, 10.0);
      checkSolve<M>(A, qr, 10.0);
    }
    {
      INFO("3000 x 700 (panels of 3000 down to 2300 rows)");
      const M A = conditionedMatrix<Scalar>(3000, 700, Spectrum::Geometric, 1e3);
      const TCQR<M> qr = factorAndCheck<M>(A, o);
      checkAgainstEigen<M>(A, qr, 1e3);
    }
  }

  TEST_CASE_TEMPLATE("one-kernel panel off (TCQR_PANEL_KERNEL=0) and on agree", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const M A = conditionedMatrix<Scalar>(5000, 96, Spectrum::Arithmetic, 10.0);
    const Options o{Backend::Cuda, 0, false, tcqr::Panel::Auto};
    const TCQR<M> on = factor<M>(A, o);
    M offQR;
    {
      const ScopedEnv env("TCQR_PANEL_KERNEL", "0");
      const TCQR<M> off = factorAndCheck<M>(A, o);
      offQR = off.matrixQR();
    }
    const double tol = 10.0 * double(A.rows()) * epsOf<Scalar>();
    CHECK(relativeDifference(on.matrixQR(), offQR) <= tol);
    // Two different panel algorithms (this one and TSQR + ReconstructWY) do not round alike: equal bits would mean
    // the kernel did not run.
    CHECK(on.matrixQR() != offQR);
  }
}
