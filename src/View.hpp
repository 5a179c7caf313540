// View.hpp - non-owning column-major matrix view used by the backend-generic algorithms. Pointers may be host or
// device pointers: the view never dereferences them.
#pragma once

#include <cstddef>

namespace tcqr {
namespace detail {

using Index = std::ptrdiff_t;

template <typename S>
struct View {
  S* p = nullptr;
  Index rows = 0, cols = 0, ld = 1;

  View() = default;
  View(S* p_, Index r, Index c, Index ld_) : p(p_), rows(r), cols(c), ld(ld_ < 1 ? 1 : ld_) {}

  View block(Index r, Index c, Index nr, Index nc) const { return View(p + r + c * ld, nr, nc, ld); }
  View topRows(Index nr) const { return block(0, 0, nr, cols); }
  View bottomRows(Index nr) const { return block(rows - nr, 0, nr, cols); }
  View leftCols(Index nc) const { return block(0, 0, rows, nc); }
  View rightCols(Index nc) const { return block(0, cols - nc, rows, nc); }
  bool empty() const { return rows == 0 || cols == 0; }
};

enum class Op { N, T };

}  // namespace detail
}  // namespace tcqr
