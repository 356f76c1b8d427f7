#include "client/db_cli.h"

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

int Fail(std::string_view command, const Status& s) {
  return ReportError("db " + std::string(command), s);
}

namespace {

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace {

std::optional<int64_t> ParseCalendarTime(const std::string& text) {
  for (const char* format : {"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"}) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end != nullptr && *end == '\0') return static_cast<int64_t>(timegm(&tm)) * 1000;
  }
  return std::nullopt;
}

}  // namespace

// Accepts milliseconds since the epoch, an ISO date or UTC date-time, or a span ago (90m, 12h, 7d).
std::optional<int64_t> ParseTime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (std::optional<int64_t> calendar = ParseCalendarTime(text)) return calendar;
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits + 1 < text.size()) return std::nullopt;
  int64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc() || end != text.data() + digits) return std::nullopt;
  if (digits == text.size()) return number;
  static const std::map<char, int64_t> kUnitMs = {
      {'s', 1000}, {'m', 60'000}, {'h', 3'600'000}, {'d', 86'400'000}};
  auto unit = kUnitMs.find(text.back());
  if (unit == kUnitMs.end()) return std::nullopt;
  return NowUnixMs() - number * unit->second;
}

CLI::Validator TimeValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (ParseTime(text)) return "";
        return "'" + text +
               "' is not a time: use 2024-05-01, 2024-05-01T12:00:00Z, "
               "milliseconds since the epoch, or a span ago like 12h or 7d";
      },
      "TIME");
}

// A graph hash or prefix of one, checked by the store's own rule before anything is opened: a
// model file given where a hash belongs is a usage error (exit 2), not a failed lookup.
CLI::Validator GraphHashValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        StatusOr<std::string> prefix = db::NormalizeHashPrefix(text);
        if (prefix.ok()) return "";
        return prefix.status().message() +
               "; `fusor db query` lists the graphs' hashes, and `fusor plan show MODEL.onnx` "
               "shows a model file's plan";
      },
      "HASH");
}

std::string SpeedUpText(const v1::Plan& plan) {
  std::optional<double> speedup = db::SpeedUp(plan);
  return speedup ? RatioText(*speedup, 1) : "-";
}

StatusOr<std::string> DatabasePath(const DbOptions& options, bool create_directories) {
  if (!options.db_path.empty()) return options.db_path;
  return db::DefaultDatabasePath(create_directories);
}

namespace {

Status AddReadOnlyLayer(const std::string& path,
                        std::vector<std::unique_ptr<db::PlanStore>>& layers) {
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<db::PlanStore> store,
                         db::OpenPlanStore(path, {/*read_only=*/true}));
  layers.push_back(std::move(store));
  return Status::Ok();
}

}  // namespace

// The database (when it exists or was named) over the snapshots, all read-only.
StatusOr<std::unique_ptr<db::PlanStore>> OpenForReading(const DbOptions& options) {
  FUSOR_ASSIGN_OR_RETURN(std::string path, DatabasePath(options, false));
  std::vector<std::unique_ptr<db::PlanStore>> layers;
  std::error_code ec;
  bool default_absent = options.db_path.empty() && !std::filesystem::exists(path, ec);
  if (default_absent && options.snapshots.empty()) {
    return Status::NotFound(fmt::format(
        "no tuning database at '{}' (the default); tune a model first, or pass --db PATH or "
        "--snapshot PATH",
        path));
  }
  if (!default_absent) FUSOR_RETURN_IF_ERROR(AddReadOnlyLayer(path, layers));
  for (const std::string& snapshot : options.snapshots) {
    FUSOR_RETURN_IF_ERROR(AddReadOnlyLayer(snapshot, layers));
  }
  if (layers.size() == 1) return std::move(layers.front());
  return std::unique_ptr<db::PlanStore>(std::make_unique<db::LayeredPlanStore>(std::move(layers)));
}

ordered_json PlanSummaryJson(const db::StoredPlan& stored) {
  const v1::Plan& p = stored.plan;
  std::optional<double> speedup = db::SpeedUp(p);
  return ordered_json{
      {"graph_hash", p.graph_hash()},
      {"model_name", stored.model_name},
      {"target_id", p.target_id()},
      {"cost_model_version", p.cost_model_version()},
      {"residual_training_samples", p.residual_training_samples()},
      {"search_options", p.search_options()},
      {"predicted_ns", p.predicted_ns()},
      {"measured_ns", OptionalNs(p.measured_ns())},
      {"unfused_predicted_ns", OptionalNs(p.unfused_predicted_ns())},
      {"unfused_measured_ns", OptionalNs(p.unfused_measured_ns())},
      {"speedup", speedup ? ordered_json(*speedup) : ordered_json(nullptr)},
      {"groups", p.groups_size()},
      {"peak_memory_bytes", p.peak_memory_bytes()},
      {"created_unix_ms", p.created_unix_ms()},
      {"stale", stored.stale},
      {"stale_reason", stored.stale_reason},
      {"database", stored.database},
  };
}

void AddCommonOptions(CLI::App* command, DbOptions* o, bool snapshots) {
  command->add_option("--db", o->db_path,
                      "Tuning database: a SQLite file, sqlite:PATH or postgresql://... "
                      "(default: $XDG_DATA_HOME/fusor/tuning.db)");
  if (snapshots) {
    command
        ->add_option("--snapshot", o->snapshots,
                     "Read-only snapshot database to query under --db (repeatable)")
        ->check(CLI::ExistingFile);
  }
  command->add_option("--cost-model-version", o->cost_model_version,
                      "Current cost-model version (default: each target's calibrated one)");
  command->add_flag("--json", o->json, "Print JSON for scripts instead of a table");
}

// The hidden --server of a verb that reads database files only, and runs `run` unless
// it was given.
void RefuseServerThenRun(CLI::App* command, DbOptions* o, int* exit_code,
                         std::function<int()> run) {
  command->add_option("--server", o->server_refused)->group("");
  const std::string verb = "db " + command->get_name();
  command->callback([o, exit_code, verb, run = std::move(run)] {
    *exit_code = o->server_refused.empty()
                     ? run()
                     : ReportUsageError(verb, "--server: `fusor " + verb +
                                                  "` reads database files (--db, --snapshot); "
                                                  "`fusor db query --server` asks a fusord");
  });
}

}  // namespace fusor::dbcli
