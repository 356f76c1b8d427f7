#include "runtime/affine_map.h"

#include "runtime/op_params.h"

namespace fusor {

bool IsIdentity(const std::vector<int64_t>& coef, int64_t base, const Shape& in, const Shape& out) {
  if (base != 0 || NumElements(in) != NumElements(out)) return false;
  std::vector<int64_t> strides = RowMajorStrides(out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] > 1 && coef[d] != strides[d]) return false;
  }
  return true;
}

Affine BroadcastMap(const Shape& in, const Shape& out) {
  Affine m;
  if (in == out) {
    m.identity = true;
    return m;
  }
  if (NumElements(in) == 1) {
    m.scalar = true;
    return m;
  }
  std::vector<int64_t> strides = RowMajorStrides(in);
  m.coef.assign(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) m.coef[lead + i] = in[i] == 1 ? 0 : strides[i];
  m.identity = IsIdentity(m.coef, 0, in, out);
  return m;
}

Affine CoordMap(size_t rank, size_t dim) {
  Affine m;
  m.coef.assign(rank, 0);
  m.coef[dim] = 1;
  return m;
}

int64_t RunStep(const Affine& m, const Shape& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] > 1) return m.coef[d];
  }
  return 0;
}

void AffineIndices(const Affine& m, const Shape& dims, const IndexSet& idx, int64_t* out) {
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

Affine StridedMap(const std::vector<int64_t>& coef, int64_t base, const Shape& in,
                  const Shape& out) {
  Affine m;
  m.coef = coef;
  m.base = base;
  m.identity = IsIdentity(coef, base, in, out);
  return m;
}

}  // namespace fusor
