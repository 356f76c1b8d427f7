// What the `fusor db` verbs share (client/db_*.cc, one file per verb): the options every verb
// takes, opening the databases read-only, times as the flags accept them, a plan's JSON summary,
// and registering a verb. Each verb's file registers it with its Add function; db_commands.cc
// registers them all. Not thread-safe (CLI setup and each verb run on one thread).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "db/plan_store.h"

namespace fusor::dbcli {

using nlohmann::ordered_json;

// Options every subcommand shares.
struct DbOptions {
  std::string db_path;                 // "" for the default database.
  std::vector<std::string> snapshots;  // Read-only layers under the database.
  std::string cost_model_version;      // "" for each target's calibrated version.
  bool json = false;
  // --server given to a verb that reads files only; refused as a usage error that names the verb
  // that does talk to a fusord (`db query`), rather than CLI11's "arguments were not expected".
  std::string server_refused;
};

// Prints "fusor db COMMAND: MESSAGE" and returns the exit code for s.
int Fail(std::string_view command, const Status& s);

// Milliseconds since the epoch, an ISO date or UTC date-time, or a span ago (90m, 12h, 7d).
std::optional<int64_t> ParseTime(const std::string& text);
CLI::Validator TimeValidator();
// A graph hash or a prefix of one, by the store's rule (a model file is a usage error).
CLI::Validator GraphHashValidator();

std::string SpeedUpText(const v1::Plan& plan);
inline ordered_json OptionalNs(double ns) {
  return ns > 0 ? ordered_json(ns) : ordered_json(nullptr);
}

StatusOr<std::string> DatabasePath(const DbOptions& options, bool create_directories);
// The database (when it exists or was named) over the snapshots, all read-only.
StatusOr<std::unique_ptr<db::PlanStore>> OpenForReading(const DbOptions& options);

ordered_json PlanSummaryJson(const db::StoredPlan& stored);

void AddCommonOptions(CLI::App* command, DbOptions* o, bool snapshots);
// Registers the hidden --server of a verb that reads database files only, and runs `run` unless
// it was given.
void RefuseServerThenRun(CLI::App* command, DbOptions* o, int* exit_code, std::function<int()> run);

void AddQuery(CLI::App& db, int* exit_code);
void AddShow(CLI::App& db, int* exit_code);
void AddStats(CLI::App& db, int* exit_code);
void AddExport(CLI::App& db, int* exit_code);
void AddImport(CLI::App& db, int* exit_code);

}  // namespace fusor::dbcli
