// TfIdfVectorizer in the reference interpreter: counts the n-grams of each row of an integer input
// ([C] or [N, C]) that are in the node's pool (pool_int64s; string pools are refused), skipping up
// to max_skip_count items between an n-gram's items, and writes each count (TF), its weight where
// the count is not 0 (IDF), or their product (TFIDF) at the n-gram's output index. As ONNX
// Runtime counts: a unigram once per position, longer n-grams once per skip distance. Stateless;
// thread-safe.
#pragma once

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor {

// Fills `out` (float, allocated to the output's dims). InvalidArgument naming the node when its
// pool attributes do not fit together or the output is too short for an index.
Status RunTfIdfVectorizer(const Node& n, const HostTensor& x, HostTensor* out);

}  // namespace fusor
