#include "db/snapshot.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "db/plan_order.h"
#include "db/schema.h"
#include "db/store_rules.h"
#include "db/tables.h"

namespace fusor::db {
namespace {

// Every plan the query selects, over all pages.
StatusOr<std::vector<StoredPlan>> AllPlans(PlanStore& store, PlanQuery query) {
  query.page_size = PlanQuery::kMaxPageSize;
  std::vector<StoredPlan> all;
  do {
    FUSOR_ASSIGN_OR_RETURN(PlanPage page, store.QueryPlans(query));
    all.insert(all.end(), std::make_move_iterator(page.plans.begin()),
               std::make_move_iterator(page.plans.end()));
    query.page_token = page.next_page_token;
  } while (!query.page_token.empty());
  return all;
}

// Adds the plans with their measurements, and the graphs they need, to bundle.
Status AddPlans(PlanStore& source, const std::vector<v1::Plan>& plans, PlanBundle& bundle) {
  std::set<std::string> graphs;
  for (const v1::Plan& plan : plans) {
    FUSOR_ASSIGN_OR_RETURN(std::vector<Measurement> measurements,
                           source.GetMeasurements(PlanKey::Of(plan)));
    bundle.plans.push_back({plan, std::move(measurements)});
    if (!graphs.insert(plan.graph_hash()).second) continue;
    FUSOR_ASSIGN_OR_RETURN(v1::Graph graph, source.GetGraph(plan.graph_hash()));
    bundle.graphs.emplace_back(plan.graph_hash(), std::move(graph));
  }
  return Status::Ok();
}

StatusOr<PlanBundle> BestCurrentPlans(PlanStore& source, std::string_view target_id,
                                      std::string_view current_cost_model_version) {
  PlanBundle bundle;
  FUSOR_ASSIGN_OR_RETURN(v1::HardwareProfile target, source.GetTarget(target_id));
  bundle.targets.push_back(std::move(target));
  PlanQuery query;
  query.target_id = target_id;
  query.only_current = true;
  query.current_cost_model_version = current_cost_model_version;
  FUSOR_ASSIGN_OR_RETURN(std::vector<StoredPlan> current, AllPlans(source, query));
  std::map<std::string, v1::Plan> best;  // By graph hash.
  for (StoredPlan& stored : current) {
    auto [it, inserted] = best.try_emplace(stored.plan.graph_hash(), stored.plan);
    if (!inserted && BetterPlan(stored.plan, it->second)) it->second = std::move(stored.plan);
  }
  std::vector<v1::Plan> plans;
  for (auto& [hash, plan] : best) plans.push_back(std::move(plan));
  FUSOR_RETURN_IF_ERROR(AddPlans(source, plans, bundle));
  return bundle;
}

StatusOr<PlanBundle> Everything(PlanStore& source) {
  PlanBundle bundle;
  FUSOR_ASSIGN_OR_RETURN(bundle.targets, source.ListTargets());
  FUSOR_ASSIGN_OR_RETURN(std::vector<StoredPlan> stored, AllPlans(source, PlanQuery()));
  std::vector<v1::Plan> plans;
  for (StoredPlan& s : stored) plans.push_back(std::move(s.plan));
  FUSOR_RETURN_IF_ERROR(AddPlans(source, plans, bundle));
  return bundle;
}

void RemoveDatabaseFiles(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    unlink((path + suffix).c_str());
  }
}

Status WriteSnapshotFile(const PlanBundle& bundle, const std::string& path,
                         const std::string& target_id) {
  {
    FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqlitePlanStore> store,
                           SqlitePlanStore::Open(path, SqliteOpenOptions()));
    FUSOR_RETURN_IF_ERROR(store->Merge(bundle, "export", /*record_history=*/false).status());
  }  // Closing the last connection checkpoints the write-ahead log into the file.
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> connection,
                         SqliteConnection::Open(path, /*read_only=*/false));
  FUSOR_RETURN_IF_ERROR(MarkSnapshot(*connection, target_id, NowUnixMs()));
  return connection->ExecuteScript("VACUUM");
}

Status Publish(const std::string& temp, const std::string& out_path) {
  if (chmod(temp.c_str(), 0444) != 0 || rename(temp.c_str(), out_path.c_str()) != 0) {
    return Status::IOError(
        fmt::format("cannot write snapshot '{}': {}", out_path, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ExportSummary> ExportSnapshot(PlanStore& source, std::string_view target_id,
                                       std::string_view current_cost_model_version,
                                       const std::string& out_path, bool overwrite) {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(out_path, ec)) {
    return Status::AlreadyExists(fmt::format(
        "snapshot '{}' already exists; choose another path or allow overwriting", out_path));
  }
  FUSOR_ASSIGN_OR_RETURN(PlanBundle bundle,
                         BestCurrentPlans(source, target_id, current_cost_model_version));
  if (bundle.plans.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "no current plan for target '{}' to export (plans are stale after a cost-model change or "
        "recalibration; tune again first)",
        target_id));
  }
  std::string temp = fmt::format("{}.partial-{}", out_path, getpid());
  RemoveDatabaseFiles(temp);
  Status s = WriteSnapshotFile(bundle, temp, std::string(target_id));
  if (s.ok()) s = Publish(temp, out_path);
  if (!s.ok()) {
    RemoveDatabaseFiles(temp);
    return s.WithContext(fmt::format("export target '{}'", target_id));
  }
  ExportSummary summary{out_path, static_cast<int64_t>(bundle.plans.size()),
                        static_cast<int64_t>(bundle.graphs.size())};
  spdlog::info("db: exported {} plans ({} graphs) for target {} to '{}'", summary.plans,
               summary.graphs, target_id, out_path);
  return summary;
}

StatusOr<MergeCounts> ImportSnapshot(const std::string& snapshot_path, SqlitePlanStore& into) {
  std::error_code ec;
  if (std::filesystem::equivalent(snapshot_path, into.path(), ec)) {
    return Status::InvalidArgument(
        fmt::format("cannot import '{}' into itself; name another database", snapshot_path));
  }
  SqliteOpenOptions read_only;
  read_only.read_only = true;
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<SqlitePlanStore> snapshot,
                         SqlitePlanStore::Open(snapshot_path, read_only));
  FUSOR_ASSIGN_OR_RETURN(PlanBundle bundle, Everything(*snapshot));
  return into.Merge(bundle, snapshot_path, /*record_history=*/true);
}

}  // namespace fusor::db
