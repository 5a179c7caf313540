// Backend.h - choice of execution backend, and queries about the CUDA runtime, without CUDA headers.
#ifndef TCQR_BACKEND_H
#define TCQR_BACKEND_H

#include <cstddef>
#include <cstdint>

// cudaStream_t is `struct CUstream_st*`; declaring the struct keeps CUDA headers out of user code while
// letting users pass their own streams with no cast.
struct CUstream_st;

namespace tcqr {

using Index = std::ptrdiff_t;

/// \brief Where a decomposition runs.
///
/// - Auto: the CUDA backend when a usable CUDA device is present and the problem has at least
///   autoCudaMinElements() entries, otherwise the Host backend. Both give the same results up to rounding.
/// - Host: Eigen on the CPU (the same recursive algorithm; what CPU-only CI tests).
/// - Cuda: cuBLAS/cuSOLVER and this library's kernels. Throws tcqr::Error when no usable device exists or
///   the library was built without CUDA.
enum class Backend { Auto, Host, Cuda };

/// \brief The panel factorization at the leaves of the recursive QR.
///
/// - Auto: the backend's measured default (see docs/DESIGN.md, "Panels"): on the GPU (sm_90 and later), panels of up to
///   32768 rows (float) or 16384 rows (double) on the H200 are factored in one kernel on a thread-block cluster, column by column
///   with Eigen's reflectors, and taller ones by Tsqr; on older GPUs Tsqr wherever it applies; on the host, Geqrf.
///   (Environment: TCQR_PANEL_KERNEL=0 leaves out the one-kernel panel, and so does the opt-in look-ahead.)
/// - Geqrf: Householder QR of the panel (cuSOLVER geqrf on the GPU, Eigen's reflectors on the host), then T from Y^T Y.
///   On very tall panels cuSOLVER may store a reflection (tau != 0) for an exact zero column where Eigen stores 0.
/// - Tsqr: tall-skinny QR tree with 256-row tiles, explicit Q, and ReconstructWY (panels of at most 32 columns;
///   wider requests fall back to Geqrf, and so do square panels). A panel holding a column whose reflector may have
///   to be the identity (a zero column, or any column with zeros below its diagonal) is split around it and that
///   column gets Eigen's reflector, so hCoeffs() has Eigen's tau = 0 there (Auto does the same).
enum class Panel { Auto, Geqrf, Tsqr };

/// \brief Arithmetic of the matrix products inside a factorization (the GEMMs of the recursion: the trailing updates
/// and the products Y1^T Y2 that merge the compact WY forms). Panels (geqrf, TSQR) and the small products with T always
/// run in the storage precision, and so do products with Q after the factorization (solve(), householderQ()). Those
/// products use T (H_0...H_{k-1} = I - Y T Y^T), whose merges ran in the mode: their Q is orthogonal to the mode's
/// precision, while householderSequence() (Eigen's product of the reflectors) is orthogonal to the storage precision
/// in every mode.
///
/// float:
/// - FP32: cuBLAS SGEMM, no tensor cores.
/// - TF32x3: each operand is split into a TF32 high part and a TF32 low part, and three tensor-core products are
///   summed (hi*hi + hi*lo + lo*hi); FP32 accuracy at tensor-core speed. Products with a side or inner dimension of
///   at most 512 run in plain FP32 (there the split costs more than the tensor cores save).
/// - FP16x3: the same three products on FP16 tensor cores: hi = fp16(x), lo = fp16((x - hi) 2^11) (the low part
///   scaled so that it keeps FP16's full precision down to |x| of about 2^-14, where unscaled it would be an FP16
///   subnormal below about 0.1; its products are scaled back), with FP16's column scaling against overflow for
///   matrices of more than 512 columns. Products with a side or inner dimension of at most 256 run in plain FP32, so
///   with at most 512 columns every product does. Entries far below their column's
///   norm keep an absolute accuracy of about 2^-36 of it rather than FP32's relative one: normwise that is below FP32's
///   rounding. FP16 tensor cores run about twice as fast as TF32 ones, and on the H100 this mode was also the more
///   accurate of the two error-corrected modes (README.md).
/// - TF32: one TF32 tensor-core product (10-bit mantissa operands, FP32 accumulation).
/// - FP16, BF16: operands converted to half precision, FP32 accumulation. With FP16 the columns of A are first scaled
///   by powers of two to unit norm (exact; R is scaled back), so no intermediate overflows (HPDC'20 §3.5).
/// double:
/// - FP64: cuBLAS DGEMM.
/// - FP64Emulated: cuBLAS's fixed-point (Ozaki) FP64 emulation on integer tensor cores
///   (CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT). Slower than native FP64 on Hopper; meant for GPUs with weak FP64.
/// On the GPU the products that run over all rows of the matrix (W^T A and Y^T W in the recursion, the first product
/// of solve() and of householderQ()) are summed in chunks of at least 256 rows, partial products added in double, in
/// FP32, FP64, TF32x3 and FP16x3: one GEMM's running sum over thousands of rows was the largest error of the
/// factorization.
/// Default (resolvePrecision): FP64 for double. For float, FP16x3 on the GPU for matrices with at least 1024 rows
/// and columns and 2^24 entries (4096^2, 16384 x 1024, ...), FP32 for smaller ones and on the Host backend: FP16x3
/// keeps FP32-class accuracy (1.1-2.8x FP32's backward error, 0.87-2.0x cuSOLVER SGEQRF's) and is faster than FP32
/// only on those shapes (H200: 4096^2 1.09-1.13x, 16384^2 1.7x; below them level or slower). If the GPU has too little
/// memory for FP16x3's operand workspace (two halves per entry of the largest product's operands, about twice the
/// matrix), Default falls back to FP32. TensorCoreHouseholderQR::activePrecision() tells which mode a factorization
/// ran in. The Host backend emulates each mode's rounding (operands rounded to TF32/FP16/BF16 before an FP32
/// product), so every mode can be tested without a GPU.
/// Measured accuracy and speed of each mode: README.md.
enum class Precision { Default, FP32, TF32x3, TF32, FP16, BF16, FP64, FP64Emulated, FP16x3 };

/// Human-readable name ("FP32", "TF32x3", ...).
const char* precisionName(Precision p) noexcept;

/// True when mode `p` applies to a matrix of `isDouble ? double : float`; Default applies to both.
bool precisionSupported(Precision p, bool isDouble) noexcept;

/// The mode Precision::Default stands for in a factorization of a rows x cols matrix of `isDouble ? double : float`
/// on `backend` (Auto: the backend resolveBackend chooses); other values are returned unchanged. The CUDA backend
/// may still fall back from FP16x3 to FP32 when the device's memory is short (see Precision).
Precision resolvePrecision(Precision p, bool isDouble, Backend backend, Index rows, Index cols) noexcept;

/// Human-readable name ("Auto", "Host", "Cuda").
const char* backendName(Backend b) noexcept;

/// True when the library was compiled with CUDA support.
bool builtWithCuda() noexcept;

/// True when the library was built with CUDA and at least one CUDA device can be used.
/// The answer is computed once per process.
bool cudaDeviceAvailable() noexcept;

/// Frees what destroyed objects left for later ones and returns the bytes of device memory it held. On the CUDA
/// backend a TensorCoreHouseholderQR's or TensorCoreTallSkinnyQR's device buffers, cuBLAS/cuSOLVER handles, stream
/// and captured CUDA graphs outlive the object: the next object of the same class and scalar type on the same device
/// (or a copy) takes them over instead of creating and allocating them again, and replays the graphs its predecessor
/// recorded. So code that makes a new object per factorization runs about as fast as code that reuses one (the pinned
/// host buffer that inputs not stored column-major pass through is not kept; nor are the streams, handles and green
/// context of large double factorizations' look-ahead lanes, which would make cudaDeviceReset() fail, nor the graphs
/// recorded with them; their workspaces are kept). At most 4 such states and 1/8 of the
/// device's memory (counting the library's buffers; cuBLAS's own allocations come on top) are kept per device;
/// TCQR_POOL=0 keeps none. When one of the library's own device allocations finds the device out of memory, it
/// frees that device's kept states and tries once more (freeing synchronizes the device, so this can happen in any
/// thread's compute()); the rest of the program's allocations do not, so call this to give the memory back, e.g.
/// before handing the GPU to another library. States kept across cudaDeviceReset() are dropped, never used: their
/// memory went with the context. Thread-safe; 0 in a build without CUDA.
std::size_t releaseCachedDeviceMemory() noexcept;

/// Below this number of matrix entries Backend::Auto stays on the host: a kernel launch and a PCIe round trip
/// cost more than Eigen's whole factorization there.
constexpr Index autoCudaMinElements() noexcept { return Index(256) * 256; }

/// Resolves Auto for a problem of the given size; Host and Cuda are returned unchanged.
Backend resolveBackend(Backend requested, Index rows, Index cols) noexcept;

}  // namespace tcqr

#endif  // TCQR_BACKEND_H
