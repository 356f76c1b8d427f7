// `fusor db export` and `fusor db import`: read-only snapshots of a target's plans, merged
// into another database.

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

struct ExportOptions {
  DbOptions db;
  std::string target, out;
  bool force = false;
};

struct ImportOptions {
  DbOptions db;
  std::vector<std::string> inputs;
};

int RunExport(const ExportOptions& o) {
  StatusOr<std::unique_ptr<db::PlanStore>> store = OpenForReading(o.db);
  if (!store.ok()) return Fail("export", store.status());
  StatusOr<db::ExportSummary> summary =
      db::ExportSnapshot(**store, o.target, o.db.cost_model_version, o.out, o.force);
  if (!summary.ok()) {
    Status s = summary.status();
    if (s.code() == Status::Code::kAlreadyExists) s = s.WithContext("pass --force to replace it");
    return Fail("export", s);
  }
  if (o.db.json) {
    std::cout << ordered_json{{"path", summary->path},
                              {"target_id", o.target},
                              {"plans", summary->plans},
                              {"graphs", summary->graphs}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << fmt::format("exported {} plans ({} graphs) for target {} to {}\n", summary->plans,
                             summary->graphs, o.target, summary->path);
  }
  return kExitOk;
}

int RunImport(const ImportOptions& o) {
  StatusOr<std::string> path = DatabasePath(o.db, /*create_directories=*/true);
  if (!path.ok()) return Fail("import", path.status());
  StatusOr<db::StoreLocation> location = db::ParseStoreLocation(*path);
  if (!location.ok()) return Fail("import", location.status());
  if (location->kind != db::StoreLocation::Kind::kSqlite) {
    return Fail("import", Status::Unimplemented(fmt::format(
                              "import merges into a SQLite tuning database; '{}' is PostgreSQL",
                              db::RedactedLocation(*path))));
  }
  StatusOr<std::unique_ptr<db::SqlitePlanStore>> store =
      db::SqlitePlanStore::Open(location->target, db::SqliteOpenOptions());
  if (!store.ok()) return Fail("import", store.status());
  ordered_json imports = ordered_json::array();
  for (const std::string& input : o.inputs) {
    StatusOr<db::MergeCounts> counts = db::ImportSnapshot(input, **store);
    if (!counts.ok()) return Fail("import", counts.status());
    imports.push_back({{"snapshot", input},
                       {"plans_added", counts->plans_added},
                       {"plans_replaced", counts->plans_replaced},
                       {"plans_kept", counts->plans_kept},
                       {"graphs_added", counts->graphs_added},
                       {"targets_updated", counts->targets_updated}});
    if (o.db.json) continue;
    std::cout << fmt::format(
        "imported {} into {}: {} plans added, {} replaced, {} kept (stored plan newer), {} graphs "
        "added, {} targets updated\n",
        input, *path, counts->plans_added, counts->plans_replaced, counts->plans_kept,
        counts->graphs_added, counts->targets_updated);
  }
  if (o.db.json)
    std::cout << ordered_json{{"database", *path}, {"imports", imports}}.dump(2) << "\n";
  return kExitOk;
}

}  // namespace

void AddExport(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* command =
      db.add_subcommand("export", "Write a read-only snapshot of a target's best current plans");
  AddCommonOptions(command, &o->db, true);
  command->add_option("--target", o->target, "Target id to export")->required();
  command->add_option("out", o->out, "Snapshot file to write")->required();
  command->add_flag("--force", o->force, "Replace the snapshot file if it exists");
  RefuseServerThenRun(command, &o->db, exit_code, [o] { return RunExport(*o); });
}

void AddImport(CLI::App& db, int* exit_code) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* command = db.add_subcommand(
      "import", "Merge snapshots into the database; under one key the newer plan wins");
  AddCommonOptions(command, &o->db, false);
  command->add_option("snapshots", o->inputs, "Snapshot (or any Fusor database) files")
      ->required()
      ->check(CLI::ExistingFile);
  RefuseServerThenRun(command, &o->db, exit_code, [o] { return RunImport(*o); });
}

}  // namespace fusor::dbcli
