// HostMemory.h - huge-page advice for the host results the public headers write whole.
#ifndef TCQR_DETAIL_HOSTMEMORY_H
#define TCQR_DETAIL_HOSTMEMORY_H

#include <cstddef>

namespace tcqr {
namespace detail {

/// Results at least this large get the advice: glibc's malloc normally maps an allocation of 32 MiB or more on its own
/// (its dynamic mmap threshold stops there on 64-bit systems), so the advised range is the matrix's own mapping and
/// the advice ends with it. Smaller ones often come from the heap, where it would stay on memory that later
/// allocations reuse.
constexpr std::size_t kHugePageAdviceMinBytes = std::size_t(32) << 20;

/// Asks the OS to back host memory that is about to be written whole with huge pages, which pays where nothing has
/// written it yet. Linux: madvise(MADV_HUGEPAGE) on the whole transparent huge pages (2 MiB on x86-64) inside
/// [p, p + bytes), for at least kHugePageAdviceMinBytes; elsewhere, below that, without transparent huge pages, or with
/// TCQR_HUGEPAGE_RESULTS=0: nothing. A hint: errors are ignored and no value changes. Where the allocator serves the
/// matrix from memory it reuses (another allocator, or glibc from a large freed heap block), the advice outlives the
/// matrix there: later allocations in that range get huge pages too.
///
/// Why: on the H100 machine (transparent huge pages "madvise") a device-to-host copy into a fresh 256 MiB matrix took
/// 200-238 ms with 4 KiB pages against 84-105 ms with the advice, and 21-30 ms into memory written before
/// (bench/host_memory_probe.cpp; bench/results/logs/2026-11-28-h100-apply-q-hugepage-dc3458e.log and
/// -advised-4404411.log): the page faults of a fresh result cost more than the transfer. The public headers call it
/// on the results they write whole (householderQ() products and Q, solve() into a plain matrix, the packed factor's
/// host copy, the tall-skinny Q, R and T) right after sizing them, never on storage they only update
/// (applyOnTheLeft/Right) or read.
void adviseFreshHostMemory(void* p, std::size_t bytes) noexcept;

}  // namespace detail
}  // namespace tcqr

#endif  // TCQR_DETAIL_HOSTMEMORY_H
