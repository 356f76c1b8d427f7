// `fusor db stats`: counts of targets, graphs, plans and calibration samples per database.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include <spdlog/fmt/fmt.h>
#include <nlohmann/json.hpp>

#include "client/confidence_text.h"
#include "client/connection.h"
#include "client/db_cli.h"
#include "client/exit_codes.h"
#include "client/proto_json.h"
#include "client/text_format.h"
#include "db/default_path.h"
#include "db/layered_plan_store.h"
#include "db/open_plan_store.h"
#include "db/plan_order.h"
#include "db/snapshot.h"
#include "db/sqlite_plan_store.h"
#include "db/store_rules.h"

namespace fusor::dbcli {
namespace {

ordered_json StatsJson(const db::DatabaseStats& s) {
  ordered_json targets = ordered_json::array();
  for (const db::TargetStats& t : s.per_target) {
    targets.push_back({{"target_id", t.target_id},
                       {"cpu_model", t.cpu_model},
                       {"isa", t.isa},
                       {"calibrated_unix_ms", t.calibrated_unix_ms},
                       {"plans", t.plans},
                       {"stale_plans", t.stale_plans},
                       {"calibration_samples", t.calibration_samples}});
  }
  return ordered_json{{"path", s.path},
                      {"schema_version", s.schema_version},
                      {"read_only", s.read_only},
                      {"snapshot_of_target", s.snapshot_of_target},
                      {"file_bytes", s.file_bytes},
                      {"targets", s.targets},
                      {"graphs", s.graphs},
                      {"plans", s.plans},
                      {"stale_plans", s.stale_plans},
                      {"measurements", s.measurements},
                      {"history_events", s.history_events},
                      {"calibration_runs", s.calibration_runs},
                      {"calibration_samples", s.calibration_samples},
                      {"per_target", targets}};
}

void PrintStats(const db::DatabaseStats& s) {
  std::cout << fmt::format(
      "database {}\n  schema version {}, {}{}, {}\n", s.path, s.schema_version,
      s.read_only ? "opened read-only" : "writable",
      s.snapshot_of_target.empty() ? "" : ", snapshot of target " + s.snapshot_of_target,
      ByteString(s.file_bytes));
  std::cout << fmt::format(
      "  {} targets, {} graphs, {} plans ({} stale), {} measurements, {} history events\n",
      s.targets, s.graphs, s.plans, s.stale_plans, s.measurements, s.history_events);
  std::cout << fmt::format("  {} calibration samples from {} calibration runs\n",
                           s.calibration_samples, s.calibration_runs);
  if (s.per_target.empty()) return;
  TextTable table({"TARGET", "CPU", "ISA", "CALIBRATED", "PLANS", "STALE", "CALIBRATION SAMPLES"});
  for (const db::TargetStats& t : s.per_target) {
    table.Add({t.target_id, t.cpu_model, t.isa, LocalIsoTime(t.calibrated_unix_ms),
               std::to_string(t.plans), std::to_string(t.stale_plans),
               std::to_string(t.calibration_samples)});
  }
  table.Print(std::cout, "  ");
}

int RunStats(const DbOptions& o) {
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o);
  if (!store.ok()) return Fail("stats", store.status());
  StatusOr<std::vector<db::DatabaseStats>> stats = (*store)->Stats(o.cost_model_version);
  if (!stats.ok()) return Fail("stats", stats.status());
  if (o.json) {
    ordered_json databases = ordered_json::array();
    for (const db::DatabaseStats& s : *stats) databases.push_back(StatsJson(s));
    std::cout << ordered_json{{"databases", databases}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const db::DatabaseStats& s : *stats) PrintStats(s);
  return kExitOk;
}

}  // namespace

void AddStats(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<DbOptions>();
  CLI::App* stats = db.add_subcommand(
      "stats", "Count targets, graphs, plans, stale plans and calibration samples");
  AddCommonOptions(stats, o.get(), true);
  RefuseServerThenRun(stats, o.get(), exit_code, [o] { return RunStats(*o); });
}

}  // namespace fusor::dbcli
