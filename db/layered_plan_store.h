// LayeredPlanStore: several databases seen as one, as a deployed system queries them: typically a
// writable database on top of read-only deployment snapshots.
//
// Layers are ordered top first. Reads see the union of all layers, except that a plan whose key is
// in a higher layer hides the same key below it. Staleness is judged again against the newest
// calibration of the plan's target found in any layer, so a snapshot cannot serve a plan that a
// newer calibration elsewhere made stale. Writes (plans, targets, deletes, expiry) go to the top
// layer only, which fails them if it was opened read-only; lower layers are never written. The
// calibration log over the same layers is LayeredCalibrationLog (layered_calibration_log.h).
//
// Owns its layers. Safe to use from many threads when the layers are (SqlitePlanStore is).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/plan_store.h"

namespace fusor::db {

class LayeredPlanStore final : public PlanStore {
 public:
  // layers[0] is the top; there must be at least one layer.
  explicit LayeredPlanStore(std::vector<std::unique_ptr<PlanStore>> layers);

  Status PutTarget(const v1::HardwareProfile& profile) override;
  // The profile with the newest calibration over all layers.
  StatusOr<v1::HardwareProfile> GetTarget(std::string_view target_id) override;
  StatusOr<std::vector<v1::HardwareProfile>> ListTargets() override;
  StatusOr<v1::Graph> GetGraph(std::string_view graph_hash) override;
  Status PutPlan(const v1::Plan& plan, const v1::Graph& graph,
                 std::span<const Measurement> measurements) override;
  StatusOr<StoredPlan> GetPlan(const PlanKey& key,
                               std::string_view current_cost_model_version) override;
  StatusOr<StoredPlan> BestPlan(std::string_view graph_hash, std::string_view target_id,
                                std::string_view current_cost_model_version) override;
  StatusOr<PlanPage> QueryPlans(const PlanQuery& query) override;
  StatusOr<std::vector<Measurement>> GetMeasurements(const PlanKey& key) override;
  StatusOr<std::vector<HistoryEvent>> History(const HistoryQuery& query) override;
  Status DeletePlan(const PlanKey& key) override;
  StatusOr<int64_t> ExpirePlans(const ExpireRule& rule) override;
  StatusOr<std::vector<DatabaseStats>> Stats(std::string_view current_cost_model_version) override;
  // The top layer's lock: the only layer that is written.
  StatusOr<std::unique_ptr<PlanKeyLock>> LockPlanKey(const PlanKey& key,
                                                     const std::atomic<bool>* cancelled) override;

 private:
  // The newest-calibrated profile of a target over all layers; nullopt when no layer has it.
  StatusOr<std::optional<v1::HardwareProfile>> LatestTarget(std::string_view target_id);
  // True when a layer above `layer` holds a plan under key.
  StatusOr<bool> HiddenAbove(size_t layer, const PlanKey& key);
  // Newest profiles already looked up during one call, by target id.
  using TargetCache = std::map<std::string, std::optional<v1::HardwareProfile>, std::less<>>;
  // Judges plan again against the newest calibration of its target.
  Status Rejudge(StoredPlan& plan, std::string_view current_cost_model_version,
                 TargetCache& targets);

  const std::vector<std::unique_ptr<PlanStore>> layers_;
};

}  // namespace fusor::db
