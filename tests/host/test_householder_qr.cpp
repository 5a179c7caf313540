// test_householder_qr.cpp - TensorCoreHouseholderQR on the Host backend (and on Backend::Auto, which is the Host
// backend without a GPU and for small problems): accuracy against LAPACK-style bounds and against
// Eigen::HouseholderQR, the HouseholderSequence-compatible Q, solve(), determinants, object lifetime, non-finite
// input, and the API contracts (assertions before compute(), size mismatches, Backend::Cuda without a device).
//
// eigen_assert is redefined to throw (common/TestConfig.h) before any Eigen header is included, as Eigen's own test
// suite does (test/main.h), so that the preconditions that Eigen::HouseholderQR asserts can be checked here too.
// clang-format off
#include "common/TestConfig.h"  // first: redefines eigen_assert to throw EigenAssertionFailed
// clang-format on

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <Eigen/Dense>
#include <Eigen/TensorCoreQR>

#include "common/QRSuites.h"
#include "common/ScopedEnv.h"

using tcqr::Backend;
using tcqr_test::EigenAssertionFailed;
using tcqr_test::Mat;

// The shared accuracy suite (tests/common/QRChecks.h), on the Host backend and on Backend::Auto.
TCQR_DEFINE_ACCURACY_SUITE("[Host]", Backend::Host)
TCQR_DEFINE_ACCURACY_SUITE("[Auto]", Backend::Auto)

// The Host backend merges no WY forms above its leaves in FP32/FP64 (Tunables.hpp hostMaxMergedCols), while the CUDA
// backend merges left children of up to 512 columns at these sizes: the same suites with the CUDA backend's cap, so
// that CI keeps running the merges the GPU runs.
TEST_CASE_TEMPLATE("[Host] with the CUDA backend's merge cap (512 columns)", T, float, double) {
  TCQR_RANDOM_SEED();
  const tcqr_test::ScopedEnv cap("TCQR_MAX_MERGED_COLS", "512");
  tcqr_test::shapeSuite<T>(Backend::Host);
  tcqr_test::conditionedSuite<T>(Backend::Host, 300, 200);
  tcqr_test::rankDeficientSuite<T>(Backend::Host);
  tcqr_test::panelSuite<T>(Backend::Host);
  tcqr_test::solveSuite<T>(Backend::Host);
}

TEST_CASE("eigen_assert is active in this test") {
  // Guards the contract tests below: if the redefinition were lost (e.g. an Eigen header included earlier),
  // they would pass vacuously or crash.
  Eigen::MatrixXf a(2, 2);
  CHECK_THROWS_AS((void)a.block(1, 1, 2, 2), EigenAssertionFailed);
}

TEST_CASE_TEMPLATE("contracts: every accessor asserts before compute()", T, float, double) {
  using M = Mat<T>;
  const M b = M::Ones(4, 1);
  Eigen::TensorCoreHouseholderQR<M> fresh;
  Eigen::TensorCoreHouseholderQR<M> preallocated(4, 3);
  for (auto* qr : {&fresh, &preallocated}) {
    CHECK_THROWS_AS((void)qr->matrixQR(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->hCoeffs(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->householderQ(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->householderSequence(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->solve(b), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->transpose().solve(b), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->info(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->absDeterminant(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->logAbsDeterminant(), EigenAssertionFailed);
    CHECK_THROWS_AS((void)qr->activeBackend(), EigenAssertionFailed);
  }
  // Eigen's HouseholderQR asserts the same way (the drop-in behaviour this mirrors, cf. Eigen's test/qr.cpp).
  Eigen::HouseholderQR<M> eigenQR;
  CHECK_THROWS_AS((void)eigenQR.matrixQR(), EigenAssertionFailed);
  CHECK_THROWS_AS((void)eigenQR.solve(b), EigenAssertionFailed);
  CHECK_THROWS_AS((void)eigenQR.householderQ(), EigenAssertionFailed);
}

TEST_CASE_TEMPLATE("contracts: size mismatches assert", T, float, double) {
  TCQR_RANDOM_SEED();
  using M = Mat<T>;
  const M A = tcqr_test::uniformMatrix<T>(6, 4);
  Eigen::TensorCoreHouseholderQR<M> qr(A, Backend::Host);
  REQUIRE(qr.info() == Eigen::Success);
  CHECK_THROWS_AS((void)qr.solve(M::Ones(5, 1)), EigenAssertionFailed);
  CHECK_THROWS_AS((void)qr.transpose().solve(M::Ones(6, 1)), EigenAssertionFailed);
  CHECK_THROWS_AS((void)qr.absDeterminant(), EigenAssertionFailed);  // not square
  CHECK_THROWS_AS((void)qr.logAbsDeterminant(), EigenAssertionFailed);
  CHECK_THROWS_AS((void)qr.householderQ().setLength(5), EigenAssertionFailed);  // only 4 reflectors
  CHECK_THROWS_AS((void)qr.householderQ().setLength(-1), EigenAssertionFailed);
  CHECK_THROWS_AS((void)M(qr.householderQ() * M::Ones(5, 2)), EigenAssertionFailed);
  CHECK_THROWS_AS((void)M(M::Ones(2, 5) * qr.householderQ()), EigenAssertionFailed);
  M wrong = M::Ones(5, 2);
  CHECK_THROWS_AS(wrong.applyOnTheLeft(qr.householderQ()), EigenAssertionFailed);
  CHECK_THROWS_AS(wrong.applyOnTheRight(qr.householderQ()), EigenAssertionFailed);
  CHECK_THROWS_AS(qr.setBlockSize(-1), EigenAssertionFailed);
  // None of these changed the factorization.
  tcqr_test::checkDecomposition<M>(A, qr, tcqr_test::Options{Backend::Host, 0, true});
}

TEST_CASE_TEMPLATE("Backend::Cuda without a usable device throws tcqr::Error", T, float, double) {
  TCQR_RANDOM_SEED();
  using M = Mat<T>;
  CHECK((tcqr::builtWithCuda() || !tcqr::cudaDeviceAvailable()));
  if (tcqr::cudaDeviceAvailable()) {
    MESSAGE("a CUDA device is present: the no-device error path is not reachable here");
    return;
  }
  const M A = tcqr_test::uniformMatrix<T>(20, 10);
  const tcqr::ErrorSource expected =
      tcqr::builtWithCuda() ? tcqr::ErrorSource::NoDevice : tcqr::ErrorSource::NotBuiltWithCuda;

  CHECK_THROWS_AS(Eigen::TensorCoreHouseholderQR<M>(A, Backend::Cuda), tcqr::Error);
  // No device: nothing was kept for later objects (src/StatePool.hpp), whether or not the build has CUDA.
  CHECK(tcqr::releaseCachedDeviceMemory() == 0);
  Eigen::TensorCoreHouseholderQR<M> qr;
  qr.setBackend(Backend::Cuda);
  CHECK(qr.backend() == Backend::Cuda);
  try {
    qr.compute(A);
    FAIL("compute() on Backend::Cuda did not throw");
  } catch (const tcqr::Error& e) {
    CHECK(e.source() == expected);
    CHECK_FALSE(e.isOutOfMemory());
    CHECK(std::string(e.what()).size() > 0);
  }
  // Backend::Auto resolves to Cuda for computeOnDevice(), which needs a device too.
  Eigen::TensorCoreHouseholderQR<M> onDevice;
  CHECK_THROWS_AS(onDevice.computeOnDevice(A.data(), 20, 10, 20), tcqr::Error);

  // The object that failed is still usable on the Host backend.
  qr.setBackend(Backend::Host).compute(A);
  tcqr_test::checkDecomposition<M>(A, qr, tcqr_test::Options{Backend::Host, 0, true});
}

TEST_CASE_TEMPLATE("computeOnDevice on a Backend::Host object is a usage error", T, float, double) {
  TCQR_RANDOM_SEED();
  using M = Mat<T>;
  const M A = tcqr_test::uniformMatrix<T>(12, 7);
  Eigen::TensorCoreHouseholderQR<M> qr;
  qr.setBackend(Backend::Host);
  try {
    qr.computeOnDevice(A.data(), 12, 7, 12);  // never dereferenced: refused up front
    FAIL("computeOnDevice on Backend::Host did not throw");
  } catch (const tcqr::Error& e) {
    CHECK(e.source() == tcqr::ErrorSource::Usage);
    CHECK_FALSE(e.isOutOfMemory());
  }
  qr.compute(A);
  tcqr_test::checkDecomposition<M>(A, qr, tcqr_test::Options{Backend::Host, 0, true});
}

TEST_CASE("resolveBackend, backend names and the build configuration") {
  const bool dev = tcqr::cudaDeviceAvailable();
  CHECK(tcqr::resolveBackend(Backend::Host, 4096, 4096) == Backend::Host);
  CHECK(tcqr::resolveBackend(Backend::Cuda, 1, 1) == Backend::Cuda);
  // Small problems stay on the host; from autoCudaMinElements() entries on, Auto takes the device if there is one.
  CHECK(tcqr::resolveBackend(Backend::Auto, 10, 10) == Backend::Host);
  CHECK(tcqr::resolveBackend(Backend::Auto, 0, 0) == Backend::Host);
  CHECK(tcqr::resolveBackend(Backend::Auto, 255, 256) == Backend::Host);
  CHECK(tcqr::resolveBackend(Backend::Auto, 256, 256) == (dev ? Backend::Cuda : Backend::Host));
  CHECK(tcqr::resolveBackend(Backend::Auto, 1024, 1024) == (dev ? Backend::Cuda : Backend::Host));
  if (!dev) CHECK(tcqr::resolveBackend(Backend::Auto, 100000, 300) == Backend::Host);
  CHECK(std::string(tcqr::backendName(Backend::Auto)) == "Auto");
  CHECK(std::string(tcqr::backendName(Backend::Host)) == "Host");
  CHECK(std::string(tcqr::backendName(Backend::Cuda)) == "Cuda");
  CHECK(tcqr::builtWithCuda() == bool(TCQR_TEST_BUILT_WITH_CUDA));
  if (!tcqr::builtWithCuda()) CHECK_FALSE(dev);

  Eigen::TensorCoreHouseholderQR<Eigen::MatrixXf> qr;
  CHECK(qr.backend() == Backend::Auto);  // the default
  qr.compute(Eigen::MatrixXf::Identity(256, 256));
  CHECK(qr.activeBackend() == (dev ? Backend::Cuda : Backend::Host));
  CHECK(qr.info() == Eigen::Success);
}

TEST_CASE("tcqr::Error classifies out-of-memory statuses") {
  using tcqr::Error;
  using tcqr::ErrorSource;
  CHECK(Error(ErrorSource::Cuda, 2, "cudaMalloc", "m").isOutOfMemory());      // cudaErrorMemoryAllocation
  CHECK(Error(ErrorSource::Cublas, 3, "cublasCreate", "m").isOutOfMemory());  // CUBLAS_STATUS_ALLOC_FAILED
  CHECK(Error(ErrorSource::Cusolver, 2, "cusolverDn", "m").isOutOfMemory());  // CUSOLVER_STATUS_ALLOC_FAILED
  CHECK_FALSE(Error(ErrorSource::Cuda, 1, "x", "m").isOutOfMemory());
  CHECK_FALSE(Error(ErrorSource::Cublas, 2, "x", "m").isOutOfMemory());
  CHECK_FALSE(Error(ErrorSource::Kernel, 2, "x", "m").isOutOfMemory());
  CHECK_FALSE(Error(ErrorSource::Usage, 2, "x", "m").isOutOfMemory());
  const Error e(ErrorSource::Cusolver, 7, "cusolverDnXgeqrf(...)", "cusolverDnXgeqrf(...) failed");
  CHECK(e.source() == ErrorSource::Cusolver);
  CHECK(e.status() == 7);
  CHECK(e.call() == "cusolverDnXgeqrf(...)");
  CHECK(std::string(e.what()) == "cusolverDnXgeqrf(...) failed");
  const std::runtime_error& base = e;  // catchable as std::runtime_error
  CHECK(std::string(base.what()) == "cusolverDnXgeqrf(...) failed");
}

// Compile-time only: a mismatch fails the build of this test.
TEST_CASE("the types match Eigen's HouseholderQR") {
  using QR = Eigen::TensorCoreHouseholderQR<Eigen::MatrixXf>;
  using Ref = Eigen::HouseholderQR<Eigen::MatrixXf>;
  static_assert(std::is_same<QR::MatrixType, Ref::MatrixType>::value, "MatrixType");
  static_assert(std::is_same<QR::HCoeffsType, Ref::HCoeffsType>::value, "HCoeffsType");
  static_assert(std::is_same<QR::MatrixQType, Ref::MatrixQType>::value, "MatrixQType");
  static_assert(std::is_same<QR::EigenHouseholderSequenceType, Ref::HouseholderSequenceType>::value,
                "householderSequence() is Eigen's HouseholderQR::householderQ() type");
  using QR63 = Eigen::TensorCoreHouseholderQR<Eigen::Matrix<double, 6, 3>>;
  using Ref63 = Eigen::HouseholderQR<Eigen::Matrix<double, 6, 3>>;
  static_assert(std::is_same<QR63::HCoeffsType, Ref63::HCoeffsType>::value, "fixed HCoeffsType");
  static_assert(std::is_same<QR63::MatrixQType, Ref63::MatrixQType>::value, "fixed MatrixQType");
}

// The top of the recursion multiplies with a triangle of order > 512 (FP32/FP64's TRMM cutoff, trmmPlan) only from
// ~1024 columns on; the
// shared suites stop at 1000 x 400. This case runs the recursive TRMM (Algorithms.hpp trmmLowerAcc) in the
// factorization (Q^T applied to the right half) and in Q * B (householderQ() times a matrix).
TEST_CASE_TEMPLATE("the recursive TRMM path: factor and Q * B with k > 512", T, float, double) {
  TCQR_RANDOM_SEED();
  const Eigen::Index m = 1100, n = 1060;
  const Mat<T> A = tcqr_test::conditionedMatrix<T>(m, n, tcqr_test::Spectrum::Geometric, 1e3);
  Eigen::TensorCoreHouseholderQR<Mat<T>> qr;
  qr.setBackend(Backend::Host).compute(A);
  const Mat<T> Q = qr.householderQ() * Mat<T>::Identity(m, m);
  const Mat<T> R = qr.matrixQR().template triangularView<Eigen::Upper>();
  CHECK(tcqr_test::backwardRatio<T>(A, Q, R) < tcqr_test::kRatioBound);
  CHECK(tcqr_test::orthogonalityRatio<T>(Q) < tcqr_test::kRatioBound);
  // Q * B against the product with Eigen's HouseholderSequence of the same reflectors.
  const Mat<T> B = tcqr_test::uniformMatrix<T>(m, 7);
  const Mat<T> ours = qr.householderQ() * B;
  const Mat<T> ref = Eigen::HouseholderSequence<Mat<T>, Eigen::Matrix<T, Eigen::Dynamic, 1>>(
                         qr.matrixQR(), qr.hCoeffs()) * B;
  CHECK(tcqr_test::relativeDifference(ours, ref) < 50 * m * tcqr_test::epsOf<T>());
}

#if defined(__linux__)
#include <sys/mman.h>

namespace {
/// The transparent huge page size, 0 where the kernel has none (as src/Common.cpp reads it).
std::uintptr_t hugePageBytes() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  unsigned long long v = 0;
  return (f >> v) ? static_cast<std::uintptr_t>(v) : 0;
}
/// The VmFlags line of the mapping that holds address a (/proc/self/smaps), empty if none was found.
std::string vmFlagsAt(const void* a) {
  std::ifstream f("/proc/self/smaps");
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long long lo = 0, hi = 0;
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2) {
      inside = x >= lo && x < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line + " ";
  }
  return "";
}
/// Whether the library's advice can take effect here: transparent huge pages exist, TCQR_HUGEPAGE_RESULTS is not 0,
/// and madvise(MADV_HUGEPAGE) succeeds on a mapping of our own (a sandbox may refuse it).
bool adviceOn() {
  const char* v = std::getenv("TCQR_HUGEPAGE_RESULTS");
  const std::uintptr_t huge = hugePageBytes();
  if (huge == 0 || (v && std::atoi(v) == 0)) return false;
  void* m = mmap(nullptr, 2 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const std::uintptr_t a = (reinterpret_cast<std::uintptr_t>(m) + huge - 1) & ~(huge - 1);
  const bool ok = a + huge <= reinterpret_cast<std::uintptr_t>(m) + 2 * huge
                      ? madvise(reinterpret_cast<void*>(a), huge, MADV_HUGEPAGE) == 0
                      : false;
  munmap(m, 2 * huge);
  return ok;
}
}  // namespace
#endif

// Results of at least 32 MiB that the headers allocate themselves get the huge-page advice (tcqr/detail/HostMemory.h)
// before their first write; the shared suites' results are far smaller. On Linux with transparent huge pages the
// mapping of a product's result must carry the flag (VmFlags "hg"), and a direct call must set it on the whole huge
// pages inside the range only, not on the page where unaligned storage starts. Values must not change.
TEST_CASE_TEMPLATE("results of 32 MiB and more get the huge-page advice", T, float, double) {
  TCQR_RANDOM_SEED();
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const Eigen::Index m = 1100, n = 300, wide = 8000;  // m x wide: 35 MB in float
  const Mat<T> A = tcqr_test::uniformMatrix<T>(m, n), B = tcqr_test::uniformMatrix<T>(m, 1200);
  Eigen::TensorCoreHouseholderQR<Mat<T>> qr;
  qr.setBackend(Backend::Host).compute(A);
  const Eigen::HouseholderSequence<Mat<T>, Vec> seq(qr.matrixQR(), qr.hCoeffs());
  const double tol = 50 * m * tcqr_test::epsOf<T>();
  // Products with the first 8 reflectors (cheap) into results of m x wide and wide x m.
  const Mat<T> Bw = tcqr_test::uniformMatrix<T>(m, wide);
  auto seq8 = seq;
  seq8.setLength(8);
  const Mat<T> X = qr.householderQ().setLength(8).transpose() * Bw;
  CHECK(tcqr_test::relativeDifference(X, Mat<T>(seq8.transpose() * Bw)) < tol);
  const Mat<T> Y = Bw.transpose() * qr.householderQ().setLength(8);
  CHECK(tcqr_test::relativeDifference(Y, Mat<T>(Bw.transpose() * seq8)) < tol);
  // Smaller results (no advice): Q, a product, solve() into a new plain matrix against Eigen's HouseholderQR.
  const Mat<T> Q = qr.householderQ();
  CHECK(tcqr_test::relativeDifference(Q, Mat<T>(seq)) < tol);
  const Mat<T> Z = qr.householderQ().transpose() * B;
  CHECK(tcqr_test::relativeDifference(Z, Mat<T>(seq.transpose() * B)) < tol);
  const Mat<T> A2 = tcqr_test::conditionedMatrix<T>(m, 1000, tcqr_test::Spectrum::Geometric, 1e2);
  Eigen::TensorCoreHouseholderQR<Mat<T>> qr2;
  qr2.setBackend(Backend::Host).compute(A2);
  const Mat<T> x = qr2.solve(B);
  const Mat<T> xRef = Eigen::HouseholderQR<Mat<T>>(A2).solve(B);
  CHECK(tcqr_test::relativeDifference(x, xRef) < 1e4 * m * tcqr_test::epsOf<T>());

  const std::size_t bytes = 2 * tcqr::detail::kHugePageAdviceMinBytes;
  std::unique_ptr<unsigned char[]> raw(new unsigned char[bytes + 8]);
  unsigned char* p = raw.get() + 3;
  tcqr::detail::adviseFreshHostMemory(p, bytes);
  tcqr::detail::adviseFreshHostMemory(nullptr, bytes);
  tcqr::detail::adviseFreshHostMemory(p, 100);
#if defined(__linux__)
  if (adviceOn() && bytes >= 2 * hugePageBytes()) {
    const std::uintptr_t huge = hugePageBytes();
    const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) & ~(huge - 1);
    const std::string inside = vmFlagsAt(reinterpret_cast<const void*>(begin)), start = vmFlagsAt(p);
    INFO("inside: " << inside << "; start: " << start);
    CHECK(inside.find(" hg ") != std::string::npos);
    CHECK(start.find(" hg ") == std::string::npos);
    const T* xp = X.data();
    const std::uintptr_t xBegin = (reinterpret_cast<std::uintptr_t>(xp) + huge - 1) & ~(huge - 1);
    CHECK(vmFlagsAt(reinterpret_cast<const void*>(xBegin)).find(" hg ") != std::string::npos);
  } else {
    MESSAGE("no transparent huge pages here (or TCQR_HUGEPAGE_RESULTS=0): the mapping flags are not checked");
  }
#endif
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 7 + 1);
  bool same = true;
  for (std::size_t i = 0; i < bytes; ++i) same = same && p[i] == static_cast<unsigned char>(i * 7 + 1);
  CHECK(same);
}

// A product with Q whose operand solves with the same decomposition: the operand has to be evaluated before the
// product takes the object's transfer buffer, which solve() uses as well (a version that evaluated it straight into
// that buffer read freed memory once solve() grew it; AddressSanitizer showed it, a plain build may not). Fresh
// objects, so that solve() is the first to need the larger buffer.
TEST_CASE_TEMPLATE("Q products whose operand solves with the same decomposition", T, float, double) {
  TCQR_RANDOM_SEED();
  using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  for (auto mn : {std::pair<Eigen::Index, Eigen::Index>{200, 50}, std::pair<Eigen::Index, Eigen::Index>{60, 150}}) {
    const Eigen::Index m = mn.first, n = mn.second;
    INFO(m << " x " << n);
    const Mat<T> A = tcqr_test::uniformMatrix<T>(m, n), B = tcqr_test::uniformMatrix<T>(m, 40);
    Eigen::TensorCoreHouseholderQR<Mat<T>> ref;
    ref.setBackend(Backend::Host).compute(A);
    const Eigen::HouseholderSequence<Mat<T>, Vec> seq(ref.matrixQR(), ref.hCoeffs());
    const Mat<T> operand = (A * ref.solve(B)).col(0);
    const Mat<T> expect = seq.transpose() * operand;

    Eigen::TensorCoreHouseholderQR<Mat<T>> qr;
    qr.setBackend(Backend::Host).compute(A);
    const Mat<T> left = qr.householderQ().transpose() * (A * qr.solve(B)).col(0);
    CHECK(tcqr_test::relativeDifference(left, expect) < 50 * m * tcqr_test::epsOf<T>());

    Eigen::TensorCoreHouseholderQR<Mat<T>> qr2;
    qr2.setBackend(Backend::Host).compute(A);
    const Mat<T> right = (A * qr2.solve(B)).col(0).transpose() * qr2.householderQ();
    CHECK(tcqr_test::relativeDifference(right, Mat<T>(operand.transpose() * seq)) < 50 * m * tcqr_test::epsOf<T>());
  }
}
