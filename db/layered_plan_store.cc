#include "db/layered_plan_store.h"

#include <algorithm>
#include <deque>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "db/newest_over_layers.h"
#include "db/plan_order.h"
#include "db/staleness.h"

namespace fusor::db {
namespace {

// One layer's progress through a merged listing.
struct LayerCursor {
  std::deque<StoredPlan> buffered;
  std::string page_token;
  bool exhausted = false;
};

// Reads the next page of every layer whose buffer ran empty; the corrupt rows they left out are
// added to `corrupt`.
Status FillCursors(const std::vector<std::unique_ptr<PlanStore>>& layers,
                   std::vector<LayerCursor>& cursors, PlanQuery query,
                   std::vector<std::string>* corrupt) {
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerCursor& cursor = cursors[i];
    if (!cursor.buffered.empty() || cursor.exhausted) continue;
    query.page_token = cursor.page_token;
    FUSOR_ASSIGN_OR_RETURN(PlanPage page, layers[i]->QueryPlans(query));
    cursor.buffered.assign(std::make_move_iterator(page.plans.begin()),
                           std::make_move_iterator(page.plans.end()));
    cursor.page_token = page.next_page_token;
    cursor.exhausted = page.next_page_token.empty();
    corrupt->insert(corrupt->end(), page.corrupt_plans.begin(), page.corrupt_plans.end());
  }
  return Status::Ok();
}

// The layer whose next plan comes first in listing order; nullopt when all are done.
std::optional<size_t> FirstListed(const std::vector<LayerCursor>& cursors) {
  std::optional<size_t> first;
  for (size_t i = 0; i < cursors.size(); ++i) {
    if (cursors[i].buffered.empty()) continue;
    if (!first || ListedBefore(ListingPosition::Of(cursors[i].buffered.front().plan),
                               ListingPosition::Of(cursors[*first].buffered.front().plan))) {
      first = i;
    }
  }
  return first;
}

}  // namespace

LayeredPlanStore::LayeredPlanStore(std::vector<std::unique_ptr<PlanStore>> layers)
    : layers_(std::move(layers)) {}

// Writes go to the top layer ------------------------------------------------------------------

Status LayeredPlanStore::PutTarget(const v1::HardwareProfile& profile) {
  return layers_.front()->PutTarget(profile);
}

Status LayeredPlanStore::PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                                 std::span<const Measurement> measurements) {
  return layers_.front()->PutPlan(plan, graph, measurements);
}

Status LayeredPlanStore::DeletePlan(const PlanKey& key) { return layers_.front()->DeletePlan(key); }

StatusOr<int64_t> LayeredPlanStore::ExpirePlans(const ExpireRule& rule) {
  return layers_.front()->ExpirePlans(rule);
}

// Targets and graphs ----------------------------------------------------------------------------

StatusOr<std::optional<v1::HardwareProfile>> LayeredPlanStore::LatestTarget(
    std::string_view target_id) {
  std::optional<v1::HardwareProfile> latest;
  for (const auto& layer : layers_) {
    StatusOr<v1::HardwareProfile> profile = layer->GetTarget(target_id);
    if (profile.status().code() == Status::Code::kNotFound) continue;
    if (!profile.ok()) return profile.status();
    if (!latest || profile->calibrated_unix_ms() > latest->calibrated_unix_ms()) {
      latest = *std::move(profile);
    }
  }
  return latest;
}

StatusOr<v1::HardwareProfile> LayeredPlanStore::GetTarget(std::string_view target_id) {
  FUSOR_ASSIGN_OR_RETURN(std::optional<v1::HardwareProfile> latest, LatestTarget(target_id));
  if (!latest) {
    return Status::NotFound(
        fmt::format("target '{}' is in none of the {} databases", target_id, layers_.size()));
  }
  return *std::move(latest);
}

StatusOr<std::vector<v1::HardwareProfile>> LayeredPlanStore::ListTargets() {
  std::map<std::string, v1::HardwareProfile> latest;
  for (const auto& layer : layers_) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<v1::HardwareProfile> profiles, layer->ListTargets());
    for (v1::HardwareProfile& profile : profiles) {
      auto [it, inserted] = latest.try_emplace(profile.target().id(), profile);
      if (!inserted && profile.calibrated_unix_ms() > it->second.calibrated_unix_ms()) {
        it->second = std::move(profile);
      }
    }
  }
  std::vector<v1::HardwareProfile> all;
  for (auto& [id, profile] : latest) all.push_back(std::move(profile));
  return all;
}

StatusOr<v1::Graph> LayeredPlanStore::GetGraph(std::string_view graph_hash) {
  for (const auto& layer : layers_) {
    StatusOr<v1::Graph> graph = layer->GetGraph(graph_hash);
    if (graph.status().code() != Status::Code::kNotFound) return graph;
  }
  return Status::NotFound(
      fmt::format("graph {} is in none of the {} databases", graph_hash, layers_.size()));
}

// Plans -----------------------------------------------------------------------------------------

StatusOr<bool> LayeredPlanStore::HiddenAbove(size_t layer, const PlanKey& key) {
  for (size_t above = 0; above < layer; ++above) {
    StatusOr<StoredPlan> plan = layers_[above]->GetPlan(key, "");
    if (plan.ok()) return true;
    if (plan.status().code() != Status::Code::kNotFound) return plan.status();
  }
  return false;
}

Status LayeredPlanStore::Rejudge(StoredPlan& plan, std::string_view current_cost_model_version,
                                 TargetCache& targets) {
  auto it = targets.find(plan.plan.target_id());
  if (it == targets.end()) {
    FUSOR_ASSIGN_OR_RETURN(std::optional<v1::HardwareProfile> latest,
                           LatestTarget(plan.plan.target_id()));
    it = targets.emplace(plan.plan.target_id(), std::move(latest)).first;
  }
  const std::optional<v1::HardwareProfile>& target = it->second;
  if (!target) {
    return Status::Internal(
        fmt::format("plan for target '{}' came without its target", plan.plan.target_id()));
  }
  plan.stale_reason = StaleReason(plan.plan, current_cost_model_version, *target);
  plan.stale = !plan.stale_reason.empty();
  return Status::Ok();
}

StatusOr<StoredPlan> LayeredPlanStore::GetPlan(const PlanKey& key,
                                               std::string_view current_cost_model_version) {
  for (const auto& layer : layers_) {
    StatusOr<StoredPlan> plan = layer->GetPlan(key, current_cost_model_version);
    if (plan.status().code() == Status::Code::kNotFound) continue;
    if (!plan.ok()) return plan;
    TargetCache targets;
    FUSOR_RETURN_IF_ERROR(Rejudge(*plan, current_cost_model_version, targets));
    return plan;
  }
  return Status::NotFound(fmt::format("no plan for graph {} on target '{}' in any of {} databases",
                                      key.graph_hash.substr(0, 12), key.target_id, layers_.size()));
}

StatusOr<StoredPlan> LayeredPlanStore::BestPlan(std::string_view graph_hash,
                                                std::string_view target_id,
                                                std::string_view current_cost_model_version) {
  PlanQuery query;
  query.graph_hash_prefix = graph_hash;
  query.target_id = target_id;
  query.current_cost_model_version = current_cost_model_version;
  query.page_size = PlanQuery::kMaxPageSize;
  std::optional<StoredPlan> best;
  int64_t stale = 0;
  do {
    FUSOR_ASSIGN_OR_RETURN(PlanPage page, QueryPlans(query));
    for (StoredPlan& plan : page.plans) {
      if (plan.plan.graph_hash() != graph_hash) continue;
      if (plan.stale) {
        ++stale;
      } else if (!best || BetterPlan(plan.plan, best->plan)) {
        best = std::move(plan);
      }
    }
    query.page_token = page.next_page_token;
  } while (!query.page_token.empty());
  if (best) return *std::move(best);
  return Status::NotFound(
      fmt::format("no current plan for graph {} on target '{}' in any of {} databases ({} stale)",
                  graph_hash.substr(0, 12), target_id, layers_.size(), stale));
}

// Merges the layers' listings in listing order, dropping hidden plans and (when asked) plans
// stale against the newest calibration. Reads one plan past the page to know whether more follow.
StatusOr<PlanPage> LayeredPlanStore::QueryPlans(const PlanQuery& query) {
  if (query.page_size < 0) {
    return Status::InvalidArgument(
        fmt::format("page size {} is negative; use 0 for the default", query.page_size));
  }
  size_t page_size = static_cast<size_t>(query.page_size == 0
                                             ? PlanQuery::kDefaultPageSize
                                             : std::min(query.page_size, PlanQuery::kMaxPageSize));
  PlanQuery layer_query = query;
  layer_query.page_size = static_cast<int32_t>(page_size);
  // Without an explicit cost model each layer would judge against its own copy of the target,
  // which may be older than another layer's; judge only here then.
  if (query.current_cost_model_version.empty()) layer_query.only_current = false;
  std::vector<LayerCursor> cursors(layers_.size());
  for (LayerCursor& cursor : cursors) cursor.page_token = query.page_token;

  TargetCache targets;
  PlanPage page;
  while (page.plans.size() <= page_size) {
    FUSOR_RETURN_IF_ERROR(FillCursors(layers_, cursors, layer_query, &page.corrupt_plans));
    std::optional<size_t> layer = FirstListed(cursors);
    if (!layer) break;
    StoredPlan plan = std::move(cursors[*layer].buffered.front());
    cursors[*layer].buffered.pop_front();
    FUSOR_ASSIGN_OR_RETURN(bool hidden, HiddenAbove(*layer, PlanKey::Of(plan.plan)));
    if (hidden) continue;
    FUSOR_RETURN_IF_ERROR(Rejudge(plan, query.current_cost_model_version, targets));
    if (query.only_current && plan.stale) continue;
    page.plans.push_back(std::move(plan));
  }
  if (page.plans.size() > page_size) {
    page.plans.pop_back();
    page.next_page_token = EncodePageToken(ListingPosition::Of(page.plans.back().plan));
  }
  return page;
}

StatusOr<std::vector<Measurement>> LayeredPlanStore::GetMeasurements(const PlanKey& key) {
  for (const auto& layer : layers_) {
    StatusOr<std::vector<Measurement>> measurements = layer->GetMeasurements(key);
    if (measurements.status().code() != Status::Code::kNotFound) return measurements;
  }
  return Status::NotFound(fmt::format("no plan for graph {} on target '{}' in any of {} databases",
                                      key.graph_hash.substr(0, 12), key.target_id, layers_.size()));
}

StatusOr<std::vector<HistoryEvent>> LayeredPlanStore::History(const HistoryQuery& query) {
  return NewestOverLayers<HistoryEvent>(
      layers_, [&](PlanStore& layer) { return layer.History(query); },
      [](const HistoryEvent& e) { return e.at_unix_ms; }, query.limit);
}

StatusOr<std::vector<DatabaseStats>> LayeredPlanStore::Stats(
    std::string_view current_cost_model_version) {
  std::vector<DatabaseStats> all;
  for (const auto& layer : layers_) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<DatabaseStats> stats,
                           layer->Stats(current_cost_model_version));
    all.insert(all.end(), stats.begin(), stats.end());
  }
  return all;
}

StatusOr<std::unique_ptr<PlanKeyLock>> LayeredPlanStore::LockPlanKey(
    const PlanKey& key, const std::atomic<bool>* cancelled) {
  return layers_.front()->LockPlanKey(key, cancelled);
}

}  // namespace fusor::db
