// Deployment snapshots: a compact database file (same schema) holding, for one target, the best
// current plan of every graph, with those graphs, the target's profile and the plans'
// measurements, but no history. Deployed systems query it read-only, without the server.
//
// A snapshot is marked in its meta table ('snapshot_of_target'), uses a rollback journal so the
// one file is complete, and is left with mode 0444; SqlitePlanStore refuses to open it for
// writing. Export writes a temporary file beside the output and renames it into place, so nobody
// sees a half-written snapshot. Import merges a snapshot (or any Fusor database) into a writable
// database without duplicates, by SqlitePlanStore::Merge's rule: under the same key the newer plan
// wins. Functions are safe to call from several threads on different outputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "db/plan_store.h"
#include "db/sqlite_plan_store.h"

namespace fusor::db {

struct ExportSummary {
  std::string path;
  int64_t plans = 0;
  int64_t graphs = 0;
};

// Writes the best current plan per graph for target_id from source to out_path. Fails with
// AlreadyExists when out_path exists and !overwrite, and with FailedPrecondition when there is
// no current plan to export.
StatusOr<ExportSummary> ExportSnapshot(PlanStore& source, std::string_view target_id,
                                       std::string_view current_cost_model_version,
                                       const std::string& out_path, bool overwrite);

// Merges every target, graph and plan of the database at snapshot_path into `into`.
StatusOr<MergeCounts> ImportSnapshot(const std::string& snapshot_path, SqlitePlanStore& into);

}  // namespace fusor::db
