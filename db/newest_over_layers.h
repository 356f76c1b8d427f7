// NewestOverLayers: merges what each layer of a layered store returns into one list, newest
// first, for the layered stores' time-ordered reads (LayeredPlanStore's history,
// LayeredCalibrationLog's runs). Internal to db/; a pure function of its arguments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "base/status.h"

namespace fusor::db {

// What read() returns from every layer, newest first by time_of (the higher layer first on a tie),
// at most limit items (no limit when negative).
template <typename Item, typename Layer, typename Read, typename TimeOf>
StatusOr<std::vector<Item>> NewestOverLayers(const std::vector<std::unique_ptr<Layer>>& layers,
                                             Read read, TimeOf time_of, int64_t limit) {
  std::vector<Item> items;
  for (const auto& layer : layers) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<Item> more, read(*layer));
    items.insert(items.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  std::stable_sort(items.begin(), items.end(),
                   [&](const Item& a, const Item& b) { return time_of(a) > time_of(b); });
  if (limit >= 0 && items.size() > static_cast<size_t>(limit)) {
    items.resize(static_cast<size_t>(limit));
  }
  return items;
}

}  // namespace fusor::db
