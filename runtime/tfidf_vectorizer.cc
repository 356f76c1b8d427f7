#include "runtime/tfidf_vectorizer.h"

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "graph/node_attrs.h"

namespace fusor {
namespace {

// The pool: for each n-gram length n (index n - 1), each n-gram's output index.
using Pool = std::vector<std::map<std::vector<int64_t>, int64_t>>;

StatusOr<Pool> PoolOf(const Node& n) {
  const std::vector<int64_t> items = n.GetInts("pool_int64s"), starts = n.GetInts("ngram_counts");
  const std::vector<int64_t> indexes = n.GetInts("ngram_indexes");
  if (items.empty()) {
    return Status::Unimplemented(NodeLabel(n) +
                                 ": only an integer pool (pool_int64s) is "
                                 "supported; Fusor does not compute string tensors");
  }
  Pool pool(starts.size());
  size_t next_index = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t len = static_cast<int64_t>(k) + 1;
    const int64_t end = k + 1 < starts.size() ? starts[k + 1] : static_cast<int64_t>(items.size());
    if (starts[k] < 0 || end < starts[k] || end > static_cast<int64_t>(items.size()) ||
        (end - starts[k]) % len != 0) {
      return Status::InvalidArgument(NodeLabel(n) + ": ngram_counts " + ShapeString(starts) +
                                     " does not divide a pool of " + std::to_string(items.size()) +
                                     " items into n-grams");
    }
    for (int64_t at = starts[k]; at < end; at += len, ++next_index) {
      if (next_index >= indexes.size()) {
        return Status::InvalidArgument(NodeLabel(n) + ": ngram_indexes has " +
                                       std::to_string(indexes.size()) +
                                       " entries, fewer than the pool's n-grams");
      }
      pool[k][std::vector<int64_t>(items.begin() + at, items.begin() + at + len)] =
          indexes[next_index];
    }
  }
  return pool;
}

// Adds the pool's n-grams in row [first, first + len) of x to `counts`.
void CountRow(const Node& n, const Pool& pool, const HostTensor& x, int64_t first, int64_t len,
              std::vector<double>* counts) {
  const int64_t min_len = n.GetInt("min_gram_length", 1);
  const int64_t max_len = std::min<int64_t>(n.GetInt("max_gram_length", 1), pool.size());
  const int64_t max_skip = n.GetInt("max_skip_count", 0);
  auto count = [&](const std::vector<int64_t>& gram) {
    const auto& grams = pool[gram.size() - 1];
    auto it = grams.find(gram);
    if (it != grams.end() && static_cast<int64_t>(gram.size()) >= min_len) (*counts)[it->second]++;
  };
  for (int64_t start = 0; start < len; ++start) {
    std::vector<int64_t> gram = {static_cast<int64_t>(x.at(first + start))};
    if (max_len >= 1) count(gram);
    for (int64_t step = 1; step <= max_skip + 1; ++step) {
      gram.resize(1);
      for (int64_t at = start + step; static_cast<int64_t>(gram.size()) < max_len && at < len;
           at += step) {
        gram.push_back(static_cast<int64_t>(x.at(first + at)));
        count(gram);
      }
    }
  }
}

}  // namespace

Status RunTfIdfVectorizer(const Node& n, const HostTensor& x, HostTensor* out) {
  FUSOR_ASSIGN_OR_RETURN(Pool pool, PoolOf(n));
  const int64_t width = out->dims.back();
  for (const auto& grams : pool) {
    for (const auto& [gram, index] : grams) {
      if (index < 0 || index >= width) {
        return Status::InvalidArgument(NodeLabel(n) + ": ngram index " + std::to_string(index) +
                                       " is outside the output's " + std::to_string(width));
      }
    }
  }
  const std::string mode = n.GetString("mode", "TF");
  std::vector<double> weights;
  if (const Attribute* a = n.FindAttr("weights")) {
    if (const auto* v = std::get_if<std::vector<double>>(&a->value)) weights = *v;
  }
  const int64_t rows = x.dims.size() == 2 ? x.dims[0] : 1, len = x.dims.back();
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> counts(width, 0);
    CountRow(n, pool, x, r * len, len, &counts);
    for (int64_t i = 0; i < width; ++i) {
      const double w = i < static_cast<int64_t>(weights.size()) ? weights[i] : 1.0;
      double v = counts[i];
      if (mode == "IDF") v = counts[i] > 0 ? w : 0;
      if (mode == "TFIDF") v = counts[i] * w;
      out->f[r * width + i] = static_cast<float>(v);
    }
  }
  return Status::Ok();
}

}  // namespace fusor
