#include "lowering/affine_map.h"

#include <cstdlib>

namespace fusor {

std::vector<int64_t> RowMajorStrides(const Shape& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

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
  m.coef.assign(out.size(), 0);
  if (NumElements(in) == 1 && in != out) {
    m.scalar = true;
    return m;
  }
  std::vector<int64_t> strides = RowMajorStrides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) m.coef[lead + i] = in[i] == 1 ? 0 : strides[i];
  m.identity = in == out || IsIdentity(m.coef, 0, in, out);
  return m;
}

Affine CoordMap(size_t rank, size_t dim) {
  Affine m;
  m.coef.assign(rank, 0);
  m.coef[dim] = 1;
  return m;
}

int64_t RunStep(const Affine& m, const Shape& consumer_dims) {
  const Shape& dims = SpaceOf(m, consumer_dims);
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] > 1) return m.coef[d];
  }
  return 0;
}

size_t MergeRunDims(const Affine& m, const Shape& space, int64_t* dims, int64_t* coefs) {
  size_t rank = 0;
  for (size_t d = space.size(); d-- > 0;) {
    if (space[d] == 1) continue;  // Its coordinate is always 0.
    if (rank > 0 && m.coef[d] == coefs[rank - 1] * dims[rank - 1]) {
      dims[rank - 1] *= space[d];
      continue;
    }
    dims[rank] = space[d];
    coefs[rank] = m.coef[d];
    ++rank;
  }
  if (rank == 0) {
    dims[0] = 1;
    coefs[0] = 0;
    rank = 1;
  }
  std::reverse(dims, dims + rank);
  std::reverse(coefs, coefs + rank);
  return rank;
}

RunShape RunShapeOf(const Affine& m, const Shape& consumer_dims) {
  const Shape& dims = SpaceOf(m, consumer_dims);
  SmallInts merged(dims.size() + 1), coefs(dims.size() + 1);
  const size_t rank = MergeRunDims(m, dims, merged.data(), coefs.data());
  RunShape runs{merged.data()[rank - 1], coefs.data()[rank - 1], 1,
                static_cast<int64_t>(dims.size())};
  for (size_t d = rank; d-- > 0 && std::abs(coefs.data()[d]) != 1;)
    runs.streams *= merged.data()[d];
  return runs;
}

Affine StridedMap(const std::vector<int64_t>& coef, int64_t base, const Shape& in,
                  const Shape& out) {
  Affine m;
  m.coef = coef;
  m.base = base;
  m.identity = IsIdentity(coef, base, in, out);
  return m;
}

Affine SplitMap(const std::vector<int64_t>& coef, int64_t base, const Shape& in,
                const Shape& split) {
  Affine m = StridedMap(coef, base, in, split);
  m.split = split;
  return m;
}

}  // namespace fusor
