// test_panel_kernel_gpu.cpp - the one-kernel Householder panel (kernels/panel_kernels.cu: a whole panel of up to 32
// columns in the registers of one thread-block cluster), which Panel::Auto uses on the CUDA backend for panels of up
// to 24576 (float; 16384 before 2026-11-29) / 12288 (double; 8192 before) rows. Every cluster size (1 to 16 blocks) and every rows-per-thread variant is run
// against Eigen::HouseholderQR (same reflectors up to rounding) and the LAPACK-style ratios, including matrices whose
// columns make the kernel's shortcut for the next column's norm refuse (duplicated and nearly dependent columns).
// Exits 77 (CTest: skipped) without a CUDA device.
#include "common/TestConfig.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "gpu/GpuTestMain.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "common/QRSuites.h"
#include "common/ScopedEnv.h"

using namespace tcqr_test;
using tcqr::Backend;

TCQR_GPU_TEST_MAIN()

namespace {

template <typename Scalar>
Index maxRowsFor(int rowsPerThread) {
  // 16 blocks of 256 threads; 0 = the kernel's own choice, up to 6 rows per thread in float and 3 in double.
  const int r = rowsPerThread > 0 ? rowsPerThread : (std::is_same<Scalar, float>::value ? 6 : 3);
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
                      16385, 20480, 20481, 24576}) {
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

  TEST_CASE_TEMPLATE("one-kernel panel: ill-conditioned and rank-deficient panels", Scalar, float, double) {
    TCQR_RANDOM_SEED();
    using M = Mat<Scalar>;
    const Options o{Backend::Cuda, 0, false, tcqr::Panel::Auto};
    const double kappa = std::is_same<Scalar, float>::value ? 1e6 : 1e12;
    for (Index m : {64, 2000, 8000, 12000, 20000}) {
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
