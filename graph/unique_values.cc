#include "graph/unique_values.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace fusor {

UniqueSlices FindUniqueSlices(const std::vector<double>& values, const Shape& dims,
                              std::optional<int64_t> axis, bool sorted) {
  int64_t outer = 1, len = static_cast<int64_t>(values.size()), inner = 1;
  if (axis) {
    len = dims[*axis];
    outer = NumElements(Shape(dims.begin(), dims.begin() + *axis));
    inner = NumElements(Shape(dims.begin() + *axis + 1, dims.end()));
  }
  std::vector<std::vector<double>> slices(len);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < len; ++k) {
      for (int64_t i = 0; i < inner; ++i) slices[k].push_back(values[(o * len + k) * inner + i]);
    }
  }
  UniqueSlices u;
  std::map<std::vector<double>, int64_t> seen;  // Slice -> its position among first occurrences.
  std::vector<int64_t> occurrence_of(len);
  for (int64_t k = 0; k < len; ++k) {
    auto [it, added] = seen.emplace(slices[k], static_cast<int64_t>(u.first.size()));
    if (added) u.first.push_back(k);
    occurrence_of[k] = it->second;
  }
  std::vector<int64_t> order(u.first.size());  // Output position -> occurrence position.
  std::iota(order.begin(), order.end(), 0);
  if (sorted) {
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return slices[u.first[a]] < slices[u.first[b]]; });
  }
  std::vector<int64_t> position(order.size());
  for (size_t p = 0; p < order.size(); ++p) position[order[p]] = static_cast<int64_t>(p);
  std::vector<int64_t> first(order.size());
  for (size_t p = 0; p < order.size(); ++p) first[p] = u.first[order[p]];
  u.first = std::move(first);
  u.counts.assign(order.size(), 0);
  for (int64_t k = 0; k < len; ++k) {
    u.inverse.push_back(position[occurrence_of[k]]);
    ++u.counts[u.inverse.back()];
  }
  return u;
}

}  // namespace fusor
