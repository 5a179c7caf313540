// HostMemory.h - first-touch advice for host result matrices the public headers have just allocated.
#ifndef TCQR_DETAIL_HOSTMEMORY_H
#define TCQR_DETAIL_HOSTMEMORY_H

#include <cstddef>

namespace tcqr {
namespace detail {

/// Asks the OS to back host memory that is about to be written whole with huge pages, which pays where nothing has
/// written it yet (Linux: madvise MADV_HUGEPAGE on the whole 2 MiB pages inside [p, p + bytes); elsewhere, or under 4 MiB, or with
/// TCQR_HUGEPAGE_RESULTS=0, nothing). A hint: errors are ignored, and the memory behaves as before. On the H100
/// machine (transparent huge pages on request) a 256 MiB result written by a device-to-host copy took 200-238 ms
/// with 4 KiB pages against 84-105 ms with the advice, and 25-28 ms into memory written before
/// (bench/host_memory_probe.cpp; bench/results/logs/2026-11-28-h100-apply-q-hugepage-dc3458e.log): the faults of a
/// fresh result cost more than the transfer. The public headers call it on the results they write whole
/// (householderQ() products and Q, solve() into a plain matrix, the packed factor's host copy, the tall-skinny Q, R
/// and T) right after sizing them, never on storage they only update (applyOnTheLeft/Right) or read. On storage
/// already written the advice changes nothing that the program can observe.
void adviseFreshHostMemory(void* p, std::size_t bytes) noexcept;

}  // namespace detail
}  // namespace tcqr

#endif  // TCQR_DETAIL_HOSTMEMORY_H
