#include "runtime/affine_map.h"

namespace fusor {

void AffineIndices(const Affine& m, const Shape& consumer_dims, const IndexSet& idx, int64_t* out) {
  const Shape& dims = SpaceOf(m, consumer_dims);
  size_t rank = dims.size();
  if (rank == 0) {
    std::fill(out, out + idx.n, m.base);
    return;
  }
  if (idx.list != nullptr) {
    int64_t inner = dims[rank - 1], step = m.coef[rank - 1];
    for (int64_t e = 0; e < idx.n; ++e) {
      int64_t flat = idx.list[e];
      // Lists mostly hold runs of consecutive indices: step along the row instead of dividing.
      if (e > 0 && flat == idx.list[e - 1] + 1 && flat % inner != 0) {
        out[e] = out[e - 1] + step;
        continue;
      }
      int64_t off = m.base;
      for (size_t d = rank; d-- > 0;) {
        off += (flat % dims[d]) * m.coef[d];
        flat /= dims[d];
      }
      out[e] = off;
    }
    return;
  }
  ForEachRun(m, dims, idx.begin, idx.n, [&](int64_t e, int64_t off, int64_t run, int64_t step) {
    for (int64_t j = 0; j < run; ++j) out[e + j] = off + j * step;
  });
}

}  // namespace fusor
