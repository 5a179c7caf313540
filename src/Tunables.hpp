// Tunables.hpp - named tuning constants, in one place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "tcqr/Backend.h"

namespace tcqr {
namespace detail {

/// A non-negative integer from the environment variable `name` (read by the caller once), or `fallback` when it is
/// unset, empty, negative or not a whole number (a measurement switch must not silently turn into 0).
inline Index envIndex(const char* name, Index fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  return (*end == '\0' && x >= 0) ? Index(x) : fallback;
}

/// Whether an (m x n, inner dimension k) product has a result side or inner dimension of at most d: the products the
/// precision modes' size thresholds (x3ProductInFp32, halfNarrowInTf32) keep off their converted operands.
inline bool hasDimAtMost(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, std::ptrdiff_t d) {
  return k <= d || std::min(m, n) <= d;
}

/// Panel width of the recursion on the Host backend (Eigen's own blocked QR uses 48).
constexpr std::ptrdiff_t kHostBlockSize = 32;
/// Panel width of the recursion on the CUDA backend: columns factored by cusolverDnXgeqrf before the recursion
/// switches to GEMMs. Measured on the H100 (2026-11-26, qr_bench --block-size): 64 and 128 within 2%, 256 3-25%
/// slower, 512 up to 3.8x slower (double 8192^2).
constexpr std::ptrdiff_t kCudaBlockSize = 64;
/// FP16x3's low part is fp16((x - hi) 2^11): |x - hi| is at most 2^-11 |x|, so scaled it keeps FP16's full 11 bits
/// down to |x| of about 2^-14, where unscaled it would fall into FP16's subnormals (below 6.1e-5) for every |x| below
/// about 0.1. The two products with a low part are scaled back through alpha (exact: a power of two). Shared by the
/// split kernel's caller (CudaOps) and the Host emulation (HostOps).
constexpr float kFp16x3LoScale = 2048.0f;
/// The error-corrected modes: three tensor-core products per GEMM on split operands (TF32x3: TF32 planes; FP16x3:
/// FP16 planes, the low one scaled by 2^11). They share every tuning below that names TF32x3.
inline bool errorCorrected(Precision mode) { return mode == Precision::TF32x3 || mode == Precision::FP16x3; }
/// The factor (of alpha) of an error-corrected mode's two products with a low part: 2^-11 in FP16x3, 1 in TF32x3.
inline float loProductScale(Precision mode) { return mode == Precision::FP16x3 ? 1.0f / kFp16x3LoScale : 1.0f; }
/// Block structure of the triangular products (Algorithms.hpp trmmLowerAcc): TPDS'25 Algorithm 3's recursion, or one
/// GEMM per block row of the result.
enum class TrmmScheme { Recursive, BlockRows };
/// A scheme and its size: for Recursive, triangles of at most `cutoff` rows are multiplied as full blocks; for
/// BlockRows, `cutoff` is the block-row height. Either way a triangle of at most `cutoff` rows is one full product.
struct TrmmPlan {
  TrmmScheme scheme;
  std::ptrdiff_t cutoff;
};
/// The plan per precision mode. Measured on the H100 (trmm_bench, 2026-11-26, C += L Z, n = 8192 and 16384): in the
/// tensor-core modes block rows of 1024 beat the recursion (cutoff 512) by 1.1-1.4x (16384 FP16: 7.7 against 9.7 ms,
/// TF32 13.6 against 16.8 ms), since C is read and written once instead of once per level; in FP32 and FP64 the two
/// run within 3% and the recursion's shorter sums halve the product's error (9.4e-7 against 1.9e-6 at 16384), so
/// it stays there.
inline TrmmPlan trmmPlan(Precision mode) {
  switch (mode) {
    case Precision::TF32x3:
    case Precision::FP16x3:
    case Precision::TF32:
    case Precision::FP16:
    case Precision::BF16: return {TrmmScheme::BlockRows, 1024};
    default: return {TrmmScheme::Recursive, 512};
  }
}
/// factorRecursive's merge cap (Algorithms.hpp) for an m-row factorization in a precision mode: with WY blocks, a left
/// child wider than this is factored into blocks of at most this many columns, which update its sibling one after
/// another, instead of merging its W (two m x n1 x n2 products per merge). 0: no cap, every left child merges.
/// Measured on the H100 (2026-11-26, qr_bench, medians of 3; the sweep is in
/// bench/results/logs/2026-11-26-h100-merge-cap-sweep.log), against no cap:
/// - FP32 16384^2 225-227 ms at caps 512-1024 against 270 (256: 237); 8192^2 61 against 66; 131072 x 2048 49.1 at
///   256 against 52.4 (512: 50.8, 128: 49.7-49.8); 524288 x 512 18.42-18.47 at 128 against 19.02 (three runs).
/// - FP64 16384^2 228-235 at 512-1024 against 266-271; 131072 x 2048 58.6 at 256 against 61.7 (512: 59.4).
/// - TF32x3 16384^2 270 at 512 against 273 (256: 327); 131072 x 2048 80.8 against 81.6.
/// - TF32 and FP16 16384^2 98-104 at 2048 against 104-108; caps of 512 and below cost up to 1.9x (the merged W's
///   long products are what the tensor cores do fastest).
/// Re-measured with the compact WY form (81f76d4, one run per cap, bench/results/logs/2026-11-27-h100-cap-sweep-81f76d4.log):
/// 16384^2 FP32 237-238 ms at caps 512-1024, 250 at 2048, 290 uncapped; FP64 236-240 at 512-1024, 248 at 2048;
/// TF32x3 223-225 at 1024-2048 against 235 at 512 (hence 1024); TF32 and FP16 within noise from 1024 up.
/// Hence, per mode, a cap where the products are S/DGEMM speed-bound (smaller where the panels are tall, which keeps
/// each block's update GEMM efficient while the merges' cost grows with the row count) and a wide one for the
/// tensor-core modes. Re-measured at 178acab (caps 2048, 1024, 512 alternating, twice;
/// bench/results/logs/2026-11-27-h100-tensor-cap-178acab.log): TF32 16384^2 91.8 ms at 2048 against 87.4-88.9 at
/// 1024 and 88.3-88.5 at 512, 32768^2 359.6-360.2 against 349.0-352.0 (512: 358.6-359.2), hence 1024 for TF32;
/// FP16 and BF16 32768^2 317-318 ms (FP16) at 2048 against 326-330 at 1024 and 375 at 512, 16384^2 equal at 2048
/// and 1024, so they keep 2048; the tall shapes (524288 x 512, 131072 x 2048) within 1% at every cap.
/// FP16x3, with its FP32 threshold at 256 (kFp16x3Fp32MaxDim), at 2048 against 1024 (2026-11-27,
/// bench/results/logs/2026-11-27-h100-x3-thresholds.log): 16384^2 152.3-152.9 ms against 154.3, other shapes
/// within 1%, but the 4096^2 table's backward error 1.18-1.21e-6 against 1.03-1.06e-6 (the merged products are the
/// longest sums), so it keeps 1024.
/// TCQR_MAX_MERGED_COLS=<n> overrides it (for measuring; 0 restores the uncapped recursion).
inline std::ptrdiff_t maxMergedCols(Precision mode, std::ptrdiff_t rows) {
  if (const char* v = std::getenv("TCQR_MAX_MERGED_COLS")) return std::max<std::ptrdiff_t>(0, std::atol(v));
  switch (mode) {
    case Precision::FP16:
    case Precision::BF16: return 2048;
    case Precision::TF32:
    case Precision::TF32x3:
    case Precision::FP16x3: return 1024;
    default: return rows >= 262144 ? 128 : rows >= 65536 ? 256 : 512;  // FP32, FP64, FP64Emulated
  }
}
/// The Host backend's merge cap. Eigen's GEMM runs the narrow block updates as fast as the wide ones, so on the CPU
/// the merges' extra products are pure cost: FP32/FP64 default to no merges above the leaves (a cap of one leaf),
/// which took TensorCoreHouseholderQR's host fallback from 1.3-1.55x Eigen::HouseholderQR's time to 0.97-1.14x
/// (double, 100^2 to 2000^2, 2 cores, 2026-11-27). The emulated tensor-core modes keep the GPU's caps, since they
/// exist to test the GPU's recursion. TCQR_MAX_MERGED_COLS overrides both.
inline std::ptrdiff_t hostMaxMergedCols(Precision mode, std::ptrdiff_t rows) {
  if (std::getenv("TCQR_MAX_MERGED_COLS") || (mode != Precision::FP32 && mode != Precision::FP64))
    return maxMergedCols(mode, rows);
  return kHostBlockSize;
}
/// The error-corrected modes' three tensor-core products pay only where a product is compute-bound enough to repay
/// the split: both operands are read and written again as hi/lo copies (TF32x3: two floats per element, FP16x3: two
/// halves) before three products read them. With a result side or an inner dimension of at most x3Fp32MaxDim a
/// product runs in plain FP32, which is also the more accurate arithmetic. A rough model for an M x M result over K
/// rows: FP16x3's split moves about 12 bytes per operand element and its three FP16 products cost about a fifth of one
/// SGEMM, so the two break even near M = 240; TF32x3's split moves 20 bytes and its products cost about two fifths,
/// which moves the break-even point above 500. Until 2026-11-27 both modes used 64 (chosen from TF32x3's trace at
/// 7ea5539, when products with a side of at most 64 took 2-3x FP32's time). Measured on the H100 (2026-11-27, the
/// threshold read from TCQR_X3_FP32_MAX_DIM, qr_bench medians of 3, one binary per machine start;
/// bench/results/logs/2026-11-27-h100-x3-thresholds.log):
/// - FP16x3, 64 against 256 (FP32 alongside): 524288 x 512 19.60 against 16.96 ms (FP32 16.78), 2097152 x 512 70.80
///   against 59.31 (59.49), 131072 x 2048 42.97 against 40.11 (46.86), 32768 x 8192 112.8 against 110.1 (151.9),
///   16384^2 160.7 against 155.9 (218.3); 128 fell in between everywhere; 512 was slower than 256 on 131072 x 2048
///   (42.5 against 40.3) and 65536 x 1024 (11.24 against 10.99) and level elsewhere. The 4096^2 accuracy table moved
///   from 1.25-1.28e-6 to 1.18-1.21e-6 backward (measured with a merge cap of 2048, see maxMergedCols).
/// - TF32x3, 64 / 256 / 512: 4096^2 26.1-27.5 / 19.8 / 19.2 ms, 8192^2 58.5-59.4 / 53.0 / 51.2, 16384^2
///   196.5-197.4 / 183.0 / 180.7, 32768 x 8192 140.1-140.5 / 128.4 / 126.5, 131072 x 2048 54.4-54.7 / 45.3 / 44.6,
///   524288 x 512 23.3 / 16.9 / (FP32); the 4096^2 table's backward error 1.43-1.79e-6 at 64, 1.26-1.39e-6 at 512.
constexpr std::ptrdiff_t kTf32x3Fp32MaxDim = 512;
constexpr std::ptrdiff_t kFp16x3Fp32MaxDim = 256;
/// The largest side or inner dimension of a product that TF32x3 / FP16x3 run in plain FP32 (kTf32x3Fp32MaxDim,
/// kFp16x3Fp32MaxDim). TCQR_X3_FP32_MAX_DIM=<n> overrides both (for measuring).
inline std::ptrdiff_t x3Fp32MaxDim(Precision mode) {
  static const Index env = envIndex("TCQR_X3_FP32_MAX_DIM", -1);  // (-1: unset)
  if (env >= 0) return env;
  return mode == Precision::FP16x3 ? kFp16x3Fp32MaxDim : kTf32x3Fp32MaxDim;
}
/// Whether TF32x3 or FP16x3 (`mode`) runs an (m x n, inner dimension k) product in plain FP32 (x3Fp32MaxDim).
inline bool x3ProductInFp32(Precision mode, std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k) {
  return hasDimAtMost(m, n, k, x3Fp32MaxDim(mode));
}
/// The arithmetic of the products with a compact WY form's T (Algorithms.hpp: trmmUpperGemm, trmmUpperGemmRight and
/// a merge's X T2; Ops::gemmT): Precision::Default for the storage precision, else an error-corrected mode. T's
/// products are an extra rounding stage that the W form does not have: in FP16, BF16 or TF32 itself they made the
/// 4096^2 factorization 1.3-1.4x less accurate (H100, 32e3e91), so until c518936 they ran in FP32 (FP16 32768^2
/// traced at 1ad2ba3: 38.7 ms of T products with more than 256 result columns, at 22-42 TFLOP/s). In those three
/// modes they now run on tensor cores with the error correction, which keeps them orders below the mode's own error
/// (at FP32-class accuracy until hi*hi ran unchunked there, tProductHiHiChunk):
/// - FP16: FP16x3. Its operands are in FP16's range because the factorization scales A's columns to norms below 1
///   (scalesColumns): |Y^T B| is at most |y| |b| <= sqrt(2) (a reflector's |y|^2 = 2 / tau, tau in [1, 2]). T
///   depends on Y alone. No general bound below FP16's 65504 is known to us (for two reflectors with Eigen's unit
///   leading entry |T_12| <= 2 follows from Cauchy-Schwarz), and it is not checked at run time; measured, max |T_ij|
///   stayed at most 2 (tau's own bound; off-diagonal entries may exceed a matrix's largest tau) on every matrix
///   tried: 2048^2 uniform, normal, kappa 1e6, duplicated and nearly dependent columns, rank n/2, spread column and
///   row norms, shift and Wilkinson-like patterns, and 300000 random small matrices with entries over 2^-40 .. 2^40,
///   zeros and near-copies (tests/studies/t_magnitude_study.cpp, bench/results/logs/2026-11-28-host-t-magnitude-
///   study.log): a margin of 3e4 below 65504. test_lookahead checks |T_ij| <= 4 on the host.
/// - BF16 and TF32: TF32x3, which keeps FP32's range; these modes do not scale A's columns.
/// H100, same binary, alternating with the FP32 products
/// (bench/results/logs/2026-11-28-h100-t-products-x3-whole-c518936.log): FP16 32768^2 314.7-324.9 to 305.1-306.1 ms,
/// FP16 16384^2 88.9 to 84.5-84.8, TF32 88.4-88.6 to 87.1-87.8, the 4096^2 backward errors and orthogonality
/// within 0.3%, the column-relative errors within 2%. (d19d73a, the same in TF32x3 through the 256-block recursion,
/// a split per block, had lost time.)
/// - FP16x3 and TF32x3: themselves, since 2026-11-28 (before, FP32: in FP16x3 the x3 products gained only 0.5-0.9% at
///   16384^2 and raised the 4096^2 backward error by 14-18%). With gemmT's products paired and fused (one tensor-core
///   product of the corrections and hi*hi's first chunk, then the remaining chunks) they gained 3.4%: H200, same
///   binary (6eda8f2) alternating twice with FP32 T products (bench/results/logs/2026-11-28-h200-fused-gemmT-
///   x3-t-products.log): FP16x3 16384^2 125.7-126.2 ms against 130.3-130.7, TF32x3 159.9-161.1 against 162.1-162.9.
///   FP16x3 32768^2 586.3 ms against 597.4 (one run each). The price is accuracy: FP16x3's backward error at 16384^2
///   1.69e-6 against 1.63e-6 (SGEQRF 1.73e-6), at 32768^2 2.41e-6 against 2.36e-6 (SGEQRF 2.31e-6: above it either
///   way), at 4096^2 0.95-1.24e-6 against 0.83-1.05e-6 (the bound 1.9e-6); TF32x3's 2.64e-6 against 2.59e-6 and
///   1.26-1.44e-6 against 1.27-1.38e-6. The x3 split keeps 22 of FP32's 24 bits of each operand, which the FP32
///   products kept whole.
/// Products with a side or inner dimension of at most x3Fp32MaxDim run in FP32 whatever this says
/// (tProductOnTensorCores). TCQR_T_PRODUCTS=storage (all modes in the storage precision) or =x3 (the default) override
/// it, for measurements.
inline Precision tProductMode(Precision mode) {
  static const int env = [] {  // -1: unset or unknown, 0: storage, 1: x3
    const char* v = std::getenv("TCQR_T_PRODUCTS");
    if (v == nullptr) return -1;
    if (std::string(v) == "storage") return 0;
    return std::string(v) == "x3" ? 1 : -1;
  }();
  const bool tensorCores = mode == Precision::FP16 || mode == Precision::BF16 || mode == Precision::TF32 ||
                           errorCorrected(mode);
  if (!tensorCores || env == 0) return Precision::Default;
  return mode == Precision::FP16 || mode == Precision::FP16x3 ? Precision::FP16x3 : Precision::TF32x3;
}
/// The chunk of hi*hi's inner dimension in the T products on tensor cores (CudaOps::gemmT; 0: one product). FP16, BF16
/// and TF32 need their T products well below their own error of about 2^-11, not at FP32's: there hi*hi is one
/// product (its drift over T's order, at most the merge cap of 2048, is at most about 2048 u_32 = 1.2e-4 even if
/// every rounding went the same way). H200, same binary alternating with TCQR_X3_HIHI_CHUNK=256 and 1024 twice
/// (bench/results/logs/2026-11-28-h200-t-products-paired-unchunked.log): FP16 16384^2 77.2 ms against 79.6-80.4 with
/// chunks of 256, BF16 79.4 against 81.6-82.7, TF32 82.0-82.4 against 83.4-84.2, FP16 32768^2 271.2-276.3 against
/// 282.5-284.7; the 4096^2 backward errors the same to three digits (FP16 4.87-5.04e-4, TF32 4.15-5.06e-4, BF16
/// 3.36-3.68e-3), 16384^2 FP16 4.99e-4 and TF32 5.03e-4 either way. (That A/B ran before this function existed, when
/// TCQR_X3_HIHI_CHUNK reached these T products; now TCQR_T_HIHI_CHUNK does, rounded up to 16.) The error-corrected
/// modes' own T products (in the mode since 8f9a384) keep their chunk (-1: the x3 products' own, CudaOps x3HiHiChunk):
/// with 0 or 512 FP16x3 16384^2 took 124.7-125.8 and 124.8-125.0 ms against 125.6-126.7, its 4096^2 backward errors
/// grew by 29-46% and 18-26% (1.38-1.61e-6 and 1.19-1.47e-6 against 0.95-1.24e-6; TF32x3's by 23-31% and 7-10%), the
/// column-spread matrix's column-relative error failed the bound (2.40e-6 and 2.16e-6 against 1.9e-6; 1.79e-6 with
/// 256), and 16384^2 reached 1.78e-6 with 0, above SGEQRF's 1.73e-6 (H200, one process each, alternating twice;
/// bench/results/logs/2026-11-28-h200-x3-t-products-hihi-chunk.log).
inline std::ptrdiff_t tProductHiHiChunk(Precision mode) {
  static const long env = [] {
    const char* v = std::getenv("TCQR_T_HIHI_CHUNK");
    return v ? std::max(0L, (std::atol(v) + 15) / 16 * 16) : -1L;
  }();
  if (env >= 0) return env;
  return errorCorrected(mode) ? -1 : 0;
}
/// Whether a T product (m x n result, inner dimension k) of a factorization in `mode` runs on tensor cores
/// (tProductMode, and outside x3ProductInFp32). trmmUpperGemm then multiplies the whole triangle in one product: at
/// the tensor cores' rate the zeros below T's diagonal cost less than the extra passes of its block recursion.
inline bool tProductOnTensorCores(Precision mode, std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k) {
  const Precision t = tProductMode(mode);
  return t != Precision::Default && !x3ProductInFp32(t, m, n, k);
}
/// Whether a factorization of a matrix with `cols` columns in `mode` scales the columns of A to unit norm first
/// (HPDC'20 §3.5): the modes whose products see FP16 operands. FP16x3 runs every product with a side or inner dimension
/// of at most x3Fp32MaxDim (256) in FP32, and with at most twice that many columns every product of the factorization
/// has one (a split of n <= 512 columns leaves a side of at most 256, and so does R12's update of a wide matrix), so
/// it needs no scaling there. The scaling pass cost FP16x3 4-5% on 128 columns (H100, 8cbd4bd: 2097152 x 128 8.91 ms
/// against TF32x3's 8.58, 8388608 x 128 33.00 against 31.62; `bench/results/logs/2026-11-27-h100-fp16x3-chunks.log`).
/// FP16 keeps it at every width: its triangular products stay in FP16 however narrow (CudaOps::trmmConverted).
inline bool scalesColumns(Precision mode, std::ptrdiff_t cols) {
  return mode == Precision::FP16 || (mode == Precision::FP16x3 && cols > 2 * x3Fp32MaxDim(mode));
}
/// FP16 and BF16 run the products with a side or inner dimension of at most this many as TF32 products on their FP32
/// operands (halfNarrowInTf32). TF32 has FP16's 10-bit mantissa and FP32's exponent range, and needs no converted
/// copies of the operands (two conversion kernels, and a write and a read of each operand, per product), which below
/// this size cost more than the faster FP16/BF16 tensor cores save (as for the error-corrected modes' FP32 thresholds,
/// x3Fp32MaxDim). First 64 (178acab; H100, same binary, alternating,
/// bench/results/logs/2026-11-27-h100-half-narrow-tf32-ab.log: FP16 2097152 x 128 9.14-9.15 to 7.76-7.79 ms,
/// 524288 x 512 16.1-16.4 to 14.4, 131072 x 2048 30.3-30.7 to 28.5, 16384^2 92.3-94.5 to 90.2-90.6, 32768^2 321-326
/// to 318.5; BF16 alike; the 4096^2 accuracy table unchanged for FP16, BF16's orthogonality 5.4e-5 against 5.6e-5).
/// 512 since 2026-11-27 (H100, 26995e2 with the threshold read from the environment, qr_bench medians of 3, one machine
/// start, 64 twice; bench/results/logs/2026-11-27-h100-half-tf32-threshold.log), FP16 at 64 / 256 / 512 (TF32):
/// 524288 x 512 14.33-14.36 / 12.92-13.06 / 13.07 ms (12.68), 2097152 x 512 47.0-47.1 / 41.5-41.6 / 41.5 (40.3),
/// 131072 x 2048 28.4 / 26.7-26.9 / 26.4 (25.8), 524288 x 2048 77.1-77.3 / 70.1-70.2 / 67.9 (66.6), 16384^2
/// 89.9-90.5 / 87.8-89.1 / 88.9 (88.7), 32768^2 316-319 / 311-316 / 313.5 (349.5); BF16 alike. The 4096^2 table:
/// FP16 unchanged (4.29-5.04e-4 backward), BF16 from 3.44-4.02e-3 to 3.36-3.68e-3 and orthogonality 5.4e-5 to 3.2e-5.
/// So a matrix whose products all have a dimension of at most 512 (n up to about 1100) gets TF32's arithmetic in FP16
/// and BF16, except its triangular products (CudaOps::trmmConverted), which stay in the mode.
/// TCQR_HALF_NARROW_MAX_DIM=<n> overrides it, TCQR_HALF_NARROW=mode turns the rule off (both for measurements).
constexpr std::ptrdiff_t kHalfAsTf32MaxDim = 512;
inline std::ptrdiff_t halfAsTf32MaxDim() {
  static const Index d = envIndex("TCQR_HALF_NARROW_MAX_DIM", kHalfAsTf32MaxDim);
  return d;
}
/// Whether FP16 / BF16 (`mode`) run an (m x n, inner dimension k) product as TF32 (kHalfAsTf32MaxDim).
inline bool halfNarrowInTf32(Precision mode, std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k) {
  static const bool on = [] {  // (only "mode" turns it off; any other value, or none, keeps it)
    const char* v = std::getenv("TCQR_HALF_NARROW");
    return v == nullptr || std::string(v) != "mode";
  }();
  return on && (mode == Precision::FP16 || mode == Precision::BF16) && hasDimAtMost(m, n, k, halfAsTf32MaxDim());
}

/// Precision::Default for float on the GPU (resolvePrecision): FP16x3 for matrices with at least
/// kDefaultFp16x3MinDim = 1024 rows and columns and kDefaultFp16x3MinElements = 2^24 entries, FP32 below (and on
/// the Host backend, where FP16x3's products would be emulated). FP16x3 keeps FP32-class accuracy (1.1-2.8x FP32's
/// backward error, 0.9-2.0x cuSOLVER SGEQRF's; the most on tall 2048-column shapes), and these are the shapes where
/// it is also faster.
/// H200 at eca90fe (bench/results/logs/2026-11-28-h200-default-threshold-eca90fe.log; FP32 / FP16x3 medians of 5,
/// replayed from the CUDA graph, then queued directly): 6144^2 30.03 / 25.24 and 30.71 / 25.99 ms, 4096^2 15.61 / 14.35
/// and 16.70 / 14.81, 8192 x 2048 8.43 / 7.78 and 9.19 / 8.27, 32768 x 1024 7.56 / 7.21 and 8.22 / 7.60, 16384 x 1024
/// 4.40 / 4.25 and 4.79 / 4.68; below 2^24 entries FP16x3 lost queued directly (3072^2 11.61 / 12.07, 2048^2 6.75 /
/// 7.22) and gained at most 5% replayed, 1024^2 equal. FP16x3's backward errors there were 1.2-1.5x FP32's and
/// 0.87-1.19x SGEQRF's (4096^2 1.01e-6 against 7.54e-7 and 8.50e-7). From 2^26 until then: on the H100, before the
/// later FP16x3 work (8f9a384, 6eda8f2, 2b35b76), the shapes between 2^24 and 2^26 measured within noise, as below.
/// H100, one process, FP32 / FP16x3 medians
/// (bench/results/logs/2026-11-27-h100-default-candidates-538ea9b.log): 262144 x 1024 27.2 / 25.6 ms, 8192^2 53.8 /
/// 47.2, 20000 x 5000 57.1 / 48.4 (and the sweep: 131072 x 2048 -14%, 524288 x 2048 -21%, 16384^2 -28%, 32768^2
/// -41%; at e77266e, ...-2026-11-28-h100-default-review-e77266e.log: 65536 x 1024 11.14 / 10.84, 1024 x 65536 12.16
/// / 11.77, 4096 x 16384 34.0 / 30.6); below the size it was within -2.1% to +2.3% (noise): 32768 x 1024 8.51 /
/// 8.39, 4096^2 18.8 / 18.4, 3000^2 13.5 / 13.7, 2048^2 8.00 / 8.15, 100000 x 600 7.33 / 7.50, 65536 x 768 8.00 /
/// 8.16.
/// (Up to 512 columns FP16x3 runs every product in FP32 anyway, kFp16x3Fp32MaxDim.)
constexpr std::ptrdiff_t kDefaultFp16x3MinDim = 1024;
constexpr std::ptrdiff_t kDefaultFp16x3MinElements = std::ptrdiff_t(1) << 24;

/// Eager spine updates (Algorithms.hpp factorRecursive, eagerLaneFor): the last look-ahead lane becomes the "eager"
/// lane. On the recursion's spine, each WY block (at most maxMergedCols columns) of a node's left child updates the
/// node's right half on that lane as soon as the block is factored, instead of the whole left child's update after
/// it; the left child's last block updates the right child's left child on the main lane and the rest on the eager
/// lane, which the right child joins before its own update. The other lanes keep their roles.
///
/// On by default for FP16x3 (with a second lane for it, lookaheadLanes), for FP64 below kEagerFp64MaxElements
/// entries (its two lanes: one regular, one eager), and for TF32, FP16 and BF16 (the last item below). H200,
/// qr_bench medians of 5, one process each
/// (bench/results/logs/2026-11-29-h200-eager-spine.log):
/// - FP16x3 at 5dde845, default (one lane) / two lanes without / eager with two: 16384^2 108.0, 108.0 / 108.8, 108.0 /
///   102.4, 102.0 ms; default / eager, one process per mode: 32768^2 539.0 / 497.3, 65536 x 16384 368.7 / 355.7,
///   12288^2 65.8 / 63.0, 8192^2 34.2 / 33.6 (replays, so with lanes).
/// - FP64, without / with (runs 2 and 3): 8192^2 41.4, 41.5, 41.5 / 39.6, 39.6, 39.8 ms, 12288^2 89.7, 90.5, 90.0 /
///   87.7, 87.0, 87.1, 16384 x 8192 70.4, 70.5, 70.8 / 68.1, 68.2, 67.9; but 16384^2 173.1, 174.7 / 176.4, 175.3 and
///   65536 x 8192 243.7 / 246.0: there its panels ran slower beside the two busy lanes (117.9 against 106 us each,
///   TCQR_TRACE). (With the eager lane taking the whole last block, 16384^2 176.0, 176.9 against 175.1, 175.2; with
///   three lanes, two of them regular, 181.4, 183.7.)
/// - TF32, FP16 and BF16 (singleProductTensorMode) too, wherever they have lanes (lookaheadLanes, which has the
///   measurements).
/// TCQR_EAGER=0/1 overrides the default (read when an object sizes its buffers for a shape and mode, which keep it;
/// the CUDA graphs' key holds it).
constexpr std::ptrdiff_t kEagerFp64MaxElements = std::ptrdiff_t(1) << 28;
/// The modes of one tensor-core product per GEMM (TF32, FP16, BF16): one default look-ahead rule for them all.
inline bool singleProductTensorMode(Precision mode) {
  return mode == Precision::TF32 || mode == Precision::FP16 || mode == Precision::BF16;
}
inline bool eagerSpineUpdates(Precision mode, std::ptrdiff_t m, std::ptrdiff_t n) {
  if (const char* v = std::getenv("TCQR_EAGER")) return std::atoi(v) != 0;
  return mode == Precision::FP16x3 || singleProductTensorMode(mode) ||
         (mode == Precision::FP64 && m * n < kEagerFp64MaxElements);
}
/// Look-ahead lanes of the CUDA recursion (factorRecursive) for an m x n factorization in `mode`, and the
/// multiprocessors their GEMMs leave to the main lane's panels. On by default for FP64 from 8192 rows and columns
/// (for FP16x3 from 16384, from 8192 from an object's second factorization of the shape; for TF32, FP16 and BF16
/// from 32768 rows and 16384 columns; below):
/// two lanes (the second the eager lane, eagerSpineUpdates, except in FP64 from 2^28 entries) on a green context of
/// most of the SMs (lookaheadGreenSMs; three quarters when measured here), replayed
/// from graphs, with the
/// one-kernel panels at the greatest stream priority (docs/DESIGN.md "Look-ahead"). H200, qr_bench medians of 7, same
/// build, lanes off / on (bench/results/logs/2026-11-28-h200-lookahead-green.log): FP64 8192^2 46.30 / 43.82 ms,
/// 16384^2 204.77 / 189.38, 65536 x 8192 255.59 / 241.80, 131072 x 2048 48.47 / 47.35, 524288 x 512 21.52 / 21.36,
/// 4096^2 16.65 / 16.45; in float only FP16x3 16384^2 gained (118.57 / 113.55), and TF32 and FP16 lost 1-7% at
/// 4096^2-16384^2, FP16x3 131072 x 2048 9%. The lanes cost memory (each holds scratch and GEMM workspaces like the
/// main lane's): where they do not fit, CudaQRState::allocate factors without them. TCQR_LOOKAHEAD=<lanes> (at most
/// kMaxLanes, 0: none) and TCQR_LOOKAHEAD_RESERVE=<SMs> override the defaults; an explicit count does not fall back.
///
/// Below kLookaheadFp64FirstElements entries the lanes wait for an object's second factorization of the shape in a
/// row (`again`). An object makes its lanes when it needs them, and a destroyed object's state, kept for the next
/// object (StatePool), gives up its lanes and the graphs it captured with them (CudaQRState::recycle), while without
/// lanes it keeps its graphs: code that makes a new object per call then replays the kept graph without lanes, but
/// makes the lanes and runs them directly with. first_call_probe, H200, new object per call, lanes off / on
/// (bench/results/logs/2026-11-28-h200-lanes-new-object-shapes.log): 8192^2 47.6-47.7 / 48.3-49.1 ms, 8192 x 16384
/// 73.6-76.1 / 74.1-76.3, 16384 x 8192 87.2-88.3 / 84.8-85.0, 12288^2 113.2-114.2 / 105.2-107.2, 32768 x 8192
/// 142.4-145.0 / 136.9-137.7; one object, replays: 8192^2 47.3-49.3 / 44.0-44.1.
///
/// FP16x3 (float's default from 2^24 entries) takes one lane from 16384 rows and columns (from the first
/// factorization), where it gained on every shape measured; since 2026-11-29 a second, the eager lane
/// (eagerSpineUpdates), with measurements there. H200, qr_bench medians of 3-5, one process each
/// (bench/results/logs/2026-11-29-h200-fp16x3-lanes.log): at d2d534f, TCQR_LOOKAHEAD=0 / 1: 16384^2 118.9-119.1 /
/// 113.1-113.6 ms (two lanes 113.3-113.7), 32768^2 555.4 / 544.3, 65536 x 16384 386.2 / 369.2, 8192^2 36.6 / 36.1 (not
/// taken: one run each, within noise; 131072 x 2048 lost 9% in the run above); with the default, TCQR_LOOKAHEAD=0 /
/// default: 16384^2 117.7-117.8 / 112.7 (twice), 32768^2 551.1 / 541.1, 65536 x 16384 383.3 / 364.8, 16384 x 32768
/// 213.7 / 207.5. A new object per call (first_call_probe) took 120.4-120.5 / 119.5-120.7 ms: it makes and destroys
/// its lane each time (the destruction 8.5-9.4 ms of that) and runs without graph replay, which costs what the lane
/// gains; a process's first factorization 336 / 395 ms (the green context).
/// Below 16384 (same log, runs 9-10, at e48f243) one object replaying gained with the lane too: 8192^2 36.4 / 35.9-36.0
/// ms, 12288^2 71.5-71.6 / 68.3-68.6, 16384 x 8192 49.6 / 48.8-49.1, 8192 x 16384 52.3 / 52.0; but a new object per
/// call lost: 8192^2 37.8 / 42.4-43.0, 12288^2 73.9 / 75.9-76.7, 16384 x 8192 50.9 / 54.4-55.0. So there the lane
/// pays only from an object's second factorization of the shape in a row (`again`, as FP64 below 2^27 entries): from
/// kLookaheadFp16x3MinDim, and from the first factorization at kLookaheadFp16x3FirstDim.
constexpr std::ptrdiff_t kLookaheadFp64MinDim = 8192;
constexpr std::ptrdiff_t kLookaheadFp64FirstElements = std::ptrdiff_t(1) << 27;
constexpr std::ptrdiff_t kLookaheadFp16x3MinDim = 8192, kLookaheadFp16x3FirstDim = 16384;
/// TF32, FP16 and BF16 (singleProductTensorMode) take two lanes, the second the eager one, with the main lane on the
/// priority stream (mainLanePriority), from 32768 rows and 16384 columns. Until 2026-11-29 they took none: with one
/// plain lane FP16 32768^2 had gained 1-2% only, and 4096^2-16384^2 had lost. The eager lane and the priority stream
/// together changed that. H200, qr_bench medians of 5, one process each, no lanes / two lanes, eager, main priority
/// (bench/results/logs/2026-11-29-h200-eager-single-product-modes.log, runs 3 and 4):
/// - FP16 32768^2 237.9, 238.1, 236.7 / 230.6, 221.6, 226.5 ms, 65536 x 16384 187.5, 185.9, 186.2 / 176.8, 177.4,
///   176.6; BF16 32768^2 245.1, 245.7, 241.9 / 230.5, 234.5, 233.1, 65536 x 16384 186.8, 185.4, 185.7 / 176.5, 174.9,
///   175.2; TF32 32768^2 296.3, 298.5, 294.1 / 280.7, 278.1, 279.6, 65536 x 16384 223.3, 221.9, 221.8 / 203.6, 203.3,
///   202.4.
/// - Not at 16384 rows: 16384^2 FP16 67.2, 67.4 / 67.8, 66.8, BF16 69.5, 69.6 / 69.8, 70.0, TF32 73.0, 73.0 / 71.8,
///   71.6; 16384 x 32768 FP16 92.8 / 92.9, BF16 97.4 / 98.4, TF32 110.7 / 109.2. 8192^2 lost 2-4% (FP16 26.1, 26.0 /
///   27.0, 27.0), 131072 x 2048 1-2%.
/// - FP32 lost at 32768^2 (1205.3 / 1271.6 ms, medians of 3; at 16384^2 198.6 / 191.8) and keeps none.
/// - One lane with the priority stream and without the eager lane gained less (FP16 32768^2 236.3, 65536 x 16384
///   182.4).
/// - first_call_probe, FP16 32768^2, no lanes / lanes: a process's first factorization 557 / 624 ms, a new object per
///   call 278.9-279.9 / 275.7-279.4, an object's destruction 32-39 / 40-45.
constexpr std::ptrdiff_t kLookaheadSingleMinRows = 32768, kLookaheadSingleMinDim = 16384;
inline bool lookaheadLanesFromEnv() { return std::getenv("TCQR_LOOKAHEAD") != nullptr; }
inline int lookaheadLanes(Precision mode, std::ptrdiff_t m, std::ptrdiff_t n, bool again) {
  if (const char* v = std::getenv("TCQR_LOOKAHEAD")) return std::max(0, std::atoi(v));
  if (mode == Precision::FP64 && std::min(m, n) >= kLookaheadFp64MinDim &&
      (again || m * n >= kLookaheadFp64FirstElements))
    return 2;
  if (mode == Precision::FP16x3 && std::min(m, n) >= kLookaheadFp16x3MinDim &&
      (again || std::min(m, n) >= kLookaheadFp16x3FirstDim))
    return eagerSpineUpdates(mode, m, n) ? 2 : 1;  // (the second is the eager lane)
  if (singleProductTensorMode(mode) && m >= kLookaheadSingleMinRows && std::min(m, n) >= kLookaheadSingleMinDim)
    return eagerSpineUpdates(mode, m, n) ? 2 : 1;
  return 0;
}
/// The multiprocessors the lanes' cuBLAS handles leave out of their GEMMs' sizing (cublasSetSmCountTarget, the device's
/// count minus this; CudaContext::fillLanes). -1: half the device's; -2: those outside the lanes' green context (the
/// handles then size their GEMMs for the whole context, 112 SMs by default; half where the lanes have none), FP64's
/// default since 2026-11-29. H200, qr_bench medians of 5, one process each, alternating
/// (bench/results/logs/2026-11-29-h200-lookahead-window.log, runs 2-4), FP64 16384^2 by context / reserve: 96 / 66
/// (the defaults before) 181.5-182.9 ms, 96 / 36 179.7, 112 / 66 179.8, 112 / 36 176.5, 112 / 20 174.5-174.9, 120 / 20
/// 174.7, 120 / 12 177.5, 128 / 4 176.1: what paid was a target of about 112 SMs on a context of 112-120, not a
/// target equal to any context (so with another TCQR_LANES_GREEN, set TCQR_LOOKAHEAD_RESERVE too; measured on the
/// H200 only). 112 / 20 against 96 / 66 on the other FP64 lane shapes: 12288^2 91.0-91.3 against 94.3-94.9, 65536 x
/// 8192 246.9-249.1 against 252.0-256.1, 8192 x 16384 68.2-69.0 against 69.7-69.8, 8192^2 41.3-41.6 against 41.7,
/// 16384 x 8192 70.7-70.8 both. FP16x3 lost with it (16384^2 111.4 against 109.6-109.7 with reserve 66 on the same
/// context; 12288^2 67.7 against 66.8-67.2) and keeps half. (TCQR_LOOKAHEAD_RESERVE takes counts only: -1 and -2 are
/// the defaults' own.)
inline int lookaheadReserveSMs(Precision mode) {
  if (const char* v = std::getenv("TCQR_LOOKAHEAD_RESERVE")) return std::max(0, std::atoi(v));
  return mode == Precision::FP64 ? -2 : -1;
}
/// Multiprocessors of the green context whose streams the lanes use (CudaContext::createLane), so that the lanes'
/// GEMMs leave whole GPU processing clusters to the main lane: the panel kernel is one thread-block cluster of up to
/// 16 blocks, one per SM, which cannot start until one cluster's SMs are all free, and GEMM blocks on every SM kept it
/// waiting (plain streams at the H200 run above: FP64 16384^2 197.9-198.2 ms against 189.4-190.4 on the green
/// context, FP16x3 118.1-120.4 against 113.6-113.7). -1: all but kLookaheadMainSMs of the device's SMs
/// (laneGreenSMs; 112 of 132), 0: no green context, and then no default lanes (CudaQRState::allocate; lanes forced by
/// TCQR_LOOKAHEAD run on plain streams). TCQR_LANES_GREEN=<SMs> overrides it.
inline int lookaheadGreenSMs() {
  if (const char* v = std::getenv("TCQR_LANES_GREEN")) return std::max(0, std::atoi(v));
  return -1;
}
/// The SMs the default green context leaves to the main lane, meant as room for one panel cluster of 16 and the small
/// kernels (measured, not derived: the split promises nothing about where the remaining SMs lie). Until 2026-11-29 the context was three quarters of the device (96 of 132, 36 left); 112 gained in FP64
/// together with the reserve above (-2) and measured the same in FP16x3 with its reserve of half (16384^2 109.6-109.7
/// against 109.2-110.0 ms, 12288^2 66.8-67.2 against 66.6-66.9; same log, run 4); 120 (12 left) was no better in FP64
/// (174.7 ms with reserve 20, 177.5 with 12) and lost in FP16x3 (112.8).
constexpr unsigned kLookaheadMainSMs = 20;
/// The default green context's SMs on a device of `sms` SMs whose split granularity is `align`: all but
/// kLookaheadMainSMs (three quarters on devices of fewer than 2 kLookaheadMainSMs), rounded down to the granularity.
inline unsigned laneGreenSMs(unsigned sms, unsigned align) {
  const unsigned count = sms >= 2 * kLookaheadMainSMs ? sms - kLookaheadMainSMs : sms * 3 / 4;
  return count / std::max(1u, align) * std::max(1u, align);
}
/// Whether a factorization in `mode` with look-ahead lanes queues its main lane on a stream of the device's greatest
/// priority (CudaContext::mainLaneStream), forked from and joined back into the object's stream, so that the block
/// scheduler serves the critical path (panels, the window's GEMMs, the small products) before the lanes' queued GEMM
/// blocks; otherwise only the panel kernels have that priority (CudaOps::panelPriority). On by default for FP16x3,
/// where it gained, and for TF32, FP16 and BF16, whose default lanes gained only with it (lookaheadLanes); FP64
/// measured the same either way (also with the eager lane at 16384^2: 175.9, 175.6 against 175.2, 175.8 ms,
/// bench/results/logs/2026-11-29-h200-eager-single-product-modes.log, run 2). H200, qr_bench medians of 5, one
/// process each, off / on alternating (bench/results/logs/2026-11-29-h200-main-lane-priority-6f2139b.log): FP16x3
/// 16384^2 109.9, 109.2 / 108.0, 108.1 ms; FP64 16384^2 176.0, 175.3 / 175.8, 176.8; FP64 12288^2 90.9, 90.8 /
/// 91.0, 91.2.
/// TCQR_MAIN_PRIORITY=0/1 overrides it (read on every factorization).
inline bool mainLanePriority(Precision mode) {
  if (const char* v = std::getenv("TCQR_MAIN_PRIORITY")) return std::atoi(v) != 0;
  return mode == Precision::FP16x3 || singleProductTensorMode(mode);
}
/// The x3 modes' two correction products (hi*lo and lo*hi) of a whole GEMM as one product with twice the inner
/// dimension (CudaOps convertOperands / convertedProduct), also in every T product on tensor cores (gemmT, tProductMode).
/// Read on every product (tests compare both ways in one process).
/// TCQR_X3_PAIRED=0 keeps them separate (for measurements).
inline bool x3PairedCorrections() {
  const char* v = std::getenv("TCQR_X3_PAIRED");
  return v == nullptr || std::atoi(v) != 0;
}
/// The NN products of the x3 modes' paired layout also hold the first chunk of hi*hi (kX3HiHiChunk) after the two
/// correction terms, so that one product gives all three and only the later chunks pass over C again (CudaOps
/// convertOperands); in gemmT's NN products too, there all of hi*hi in FP16, BF16 and TF32 (tProductHiHiChunk).
/// TCQR_X3_FUSED=0 keeps hi*hi's chunks separate (for measurements). Read on every product, as x3PairedCorrections.
inline bool x3FusedFirstChunk() {
  const char* v = std::getenv("TCQR_X3_FUSED");
  return v == nullptr || std::atoi(v) != 0;
}
/// Panel::Auto on the CUDA backend factors panels of up to kernels::householderPanelMaxRows rows (32768 in float,
/// 16384 in double on the H200; 16 blocks of 256 threads, up to 6 or 3 rows each in registers, and beyond that 6 + 2
/// or 2 + 2 in registers + shared memory; TCQR_PANEL_MAX_SMEM_ROWS=0 leaves out the shared-memory rows, for
/// measurements) with one kernel on a thread-block cluster (Algorithms.hpp usePanelKernel)
/// instead of the TSQR panel. TCQR_PANEL_KERNEL=0 turns that off (for measurements), TCQR_PANEL_ROWS_PER_THREAD=<r>
/// (1-6 in float, 1-3 in double) sets the kernel's least rows per thread in registers (and with it its block count;
/// panels that need shared-memory rows ignore it), and TCQR_PANEL_MAX_ROWS_PER_THREAD=<r> its most (and with it the
/// tallest panel: a cap below 6 / 3 also leaves out the shared-memory rows; read once per process, values below 1
/// ignored; kernels/panel_kernels.cu).
inline bool panelKernelEnabled() {
  const char* v = std::getenv("TCQR_PANEL_KERNEL");
  return v == nullptr || std::atoi(v) != 0;
}
inline int panelKernelRowsPerThread() {
  const char* v = std::getenv("TCQR_PANEL_ROWS_PER_THREAD");
  return v ? std::max(0, std::atoi(v)) : 0;
}
/// The CUDA backend replays a factorization's recursion from a CUDA graph once it has factored the same key (shape,
/// mode, buffers) often enough (FactorGraph, CudaQRState::factorQueued). H200, an experiment build that replayed from
/// the third call, alternating twice with queueing directly (bench/results/logs/2026-11-28-h200-graph-replay.log):
/// FP16x3 16384^2 127.5-127.8 ms queued / 119.3 replayed, FP16 77.3-78.2 / 71.2, FP64 212.0-214.5 / 204.5-204.6,
/// FP16x3 4096^2 16.0-16.1 / 14.4, FP64 4096^2 18.0-18.1 / 16.7, FP16x3 524288 x 512 16.2 / 15.8, FP64 2097152 x 128
/// 12.6 / 12.5. TCQR_GRAPH=0 turns it off, =2 also reports each capture's node count and host times on stderr (read
/// once per process).
inline int graphReplayMode() {
  static const int v = static_cast<int>(envIndex("TCQR_GRAPH", 1));
  return v;
}
inline bool graphReplayEnabled() { return graphReplayMode() != 0; }
inline bool graphReplayReport() { return graphReplayMode() == 2; }
/// C = A^T B with C at most 64 x 64 and an inner dimension of kSmallTnMinInner to kSmallTnMaxInner rows runs as
/// kernels::launchSmallTN (CudaOps::gemm, the products that run in FP32 or FP64: the leaves' Z = Y^T B and the small
/// merges) instead of cuBLAS's strided-batched chunks and the same reduction. H100, same binary, alternating
/// (bench/results/logs/2026-11-28-h100-small-tn-ab.log), without / with it: FP16x3 16384^2 153.8-154.5 / 149.1-149.2
/// ms, FP32 16384^2 215.8-216.2 / 210.6-211.0, FP32 4096^2 18.7-18.8 / 17.5-17.6, FP16x3 4096^2 18.0-18.3 / 17.1,
/// FP64 4096^2 18.8-19.0 / 18.4-18.7, FP64 16384^2 215.6-217.7 / 217.5-218.0 (the traced "result<=64 wide" products
/// of FP16x3 16384^2: 15.6 ms / 10.0 ms). Longer sums lost: with no upper bound 131072 x 2048 FP32 took 47.6-47.7 ms
/// against 46.5-46.6, FP16x3 41.1 against 39.9-40.0, FP64 55.5-55.6 against 53.9, 1048576 x 256 FP32 12.15 against
/// 11.92 (cuBLAS's chunks of 256 rows spread over more of the GPU there), hence the upper bound at the longest sum
/// measured to gain. TCQR_SMALL_TN_MIN_INNER=<k> overrides the lower bound, 0 turns the kernel off (measurements).
/// kSmallTnBlocksPerSM: the kernel's blocks per multiprocessor at most (more rows are summed in more row blocks per
/// block, the next one's loads in flight while one is multiplied); each block writes a p x c partial that a second
/// launch sums. TCQR_SMALL_TN_BLOCKS_PER_SM=<b> overrides it (measurements; the block count sets the summation order,
/// so results differ in their last bits between settings; 1 to 64). At the default and k <= kSmallTnMaxInner every
/// block of the kernel sums one row block on a 132-SM part (at most 512 row blocks of 32-128 rows), so its prefetch of the
/// next row block does not act there; what changed alone is that a row block's loads are all in flight at once. H200,
/// 2026-11-29
/// (bench/results/logs/2026-11-29-h200-fp16x3-lanes.log, runs 2-3): the prefetching kernel against the one before,
/// alone (skinny_gemm_bench smalltn-4, medians of 21): double 16384 x 64 x 64 25.3/24.9 to 23.4/23.0 us, float 16384 x
/// 32 x 32 14.3/13.2 to 12.4/11.8, the other shapes (down to 1024 rows) within about 1 us of 11-15 us, mostly the
/// two launches; cuBLAS took 18-27 us. End to end nothing moved: FP64 16384^2 182.2-183.7 ms against 183.1-183.8,
/// FP16x3 16384^2 118.2-119.0 against 118.7, 4096^2 within 0.1 ms, with 1, 2 or 4 blocks per multiprocessor alike (1
/// was best alone for double 64 x 64: 21.2 us against 25.0).
constexpr std::ptrdiff_t kSmallTnMinInner = 512, kSmallTnMaxInner = 16384, kSmallTnBlocksPerSM = 4;
inline std::ptrdiff_t smallTnMinInner() {
  static const Index v = envIndex("TCQR_SMALL_TN_MIN_INNER", kSmallTnMinInner);
  return v;
}
inline std::ptrdiff_t smallTnBlocksPerSM() {
  static const Index v =
      std::min<Index>(64, std::max<Index>(1, envIndex("TCQR_SMALL_TN_BLOCKS_PER_SM", kSmallTnBlocksPerSM)));
  return v;
}

/// Threads per block of the element-wise kernels.
constexpr int kElementwiseThreads = 256;

}  // namespace detail
}  // namespace tcqr

namespace tcqr {
namespace detail {

/// TSQR tile (TPDS'25 §V.A.2): rows of one tile, factored by one thread block. 256 as in the paper.
constexpr std::ptrdiff_t kTsqrTileRows = 256;
/// Widest panel the TSQR tile kernel factors (one warp-width of columns).
constexpr std::ptrdiff_t kTsqrMaxCols = 32;
/// Scratch (in scalars) of the single-column reflector (CudaOps::columnReflector: per-block partial sums and x(0)).
constexpr std::ptrdiff_t kColumnReflectorScratch = 264;
/// Panel::Auto on the CUDA backend: panels with at least this many rows use TSQR, shorter ones cuSOLVER geqrf (a
/// panel with as many rows as columns always goes to geqrf, see tsqrApplicable, and so does a panel holding a column
/// whose reflector must be the identity, see identityReflectorColumns). With the one-warp LU (2026-11-26, H100,
/// TCQR_TRACE) a TSQR panel is faster than cuSOLVER's at every height (about 80 us at 256 rows against 153 us), and
/// TSQR at every panel measured 16384^2 FP64 359 against 415 ms, 4096^2 FP32 27.0 against 31.6 ms; hence 0. (It was
/// 4096 while a zero column inside a TSQR panel got a reflection instead of Eigen's tau = 0.)
constexpr std::ptrdiff_t kTsqrAutoMinRows = 0;

}  // namespace detail
}  // namespace tcqr
