// SqlitePlanStore's calibration log and the learned residual's log and fits
// (db/calibration_log.h; tables.cc holds the rows).
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "db/sqlite_plan_store.h"
#include "db/store_rules.h"
#include "db/tables.h"

namespace fusor::db {

// Calibration log -------------------------------------------------------------------------------

StatusOr<int64_t> SqlitePlanStore::AppendCalibrationRun(const CalibrationRun& run) {
  FUSOR_RETURN_IF_ERROR(ValidateCalibrationRun(run));
  int64_t run_id = 0;
  Status s =
      Write(fmt::format("append a calibration run of target '{}'", run.target_id),
            [&](SqliteConnection& c) -> Status {
              FUSOR_RETURN_IF_ERROR(RequireTarget(c, run.target_id));
              FUSOR_ASSIGN_OR_RETURN(run_id, tables::InsertCalibrationRun(c, run, NowUnixMs()));
              return Status::Ok();
            });
  if (!s.ok()) return s;
  spdlog::info("db: appended calibration run {} of target {} (cost model {}, {} samples) to '{}'",
               run_id, run.target_id, run.cost_model_version, run.samples.size(), path_);
  return run_id;
}

StatusOr<std::vector<CalibrationRun>> SqlitePlanStore::CalibrationRuns(
    const CalibrationRunQuery& query) {
  if (query.max_runs < 1) {
    return Status::InvalidArgument(
        fmt::format("max_runs is {}; ask for at least 1 calibration run", query.max_runs));
  }
  if (schema_.version < kCalibrationLogVersion) return std::vector<CalibrationRun>();
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::ReadCalibrationRuns(*c, query);
}

// Learned residual ------------------------------------------------------------------------------

Status SqlitePlanStore::AppendResidualSamples(std::span<const ResidualSampleRow> rows) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSamples(rows));
  if (rows.empty()) return Status::Ok();
  return Write(
      fmt::format("append {} residual samples of target '{}'", rows.size(), rows.front().target_id),
      [&](SqliteConnection& c) -> Status {
        for (const ResidualSampleRow& r : rows)
          FUSOR_RETURN_IF_ERROR(RequireTarget(c, r.target_id));
        return tables::InsertResidualSamples(c, rows, NowUnixMs());
      });
}

StatusOr<std::vector<ResidualSampleRow>> SqlitePlanStore::ResidualSamples(
    const ResidualSampleQuery& query) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSampleQuery(query));
  if (schema_.version < kResidualLogVersion) return std::vector<ResidualSampleRow>();
  FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
  return tables::ReadResidualSamples(*c, query);
}

Status SqlitePlanStore::PutResidual(const StoredResidual& residual) {
  FUSOR_RETURN_IF_ERROR(ValidateResidual(residual));
  return Write(fmt::format("store the residual of target '{}'", residual.target_id),
               [&](SqliteConnection& c) -> Status {
                 FUSOR_RETURN_IF_ERROR(RequireTarget(c, residual.target_id));
                 return tables::UpsertResidual(c, residual, NowUnixMs());
               });
}

StatusOr<StoredResidual> SqlitePlanStore::GetResidual(std::string_view target_id) {
  std::optional<StoredResidual> found;
  if (schema_.version >= kResidualLogVersion) {
    FUSOR_ASSIGN_OR_RETURN(ConnectionLease c, Connect());
    FUSOR_ASSIGN_OR_RETURN(found, tables::FindResidual(*c, target_id));
  }
  if (!found) {
    return Status::NotFound(
        fmt::format("no learned residual for target '{}' in '{}'", target_id, path_));
  }
  return std::move(*found);
}

}  // namespace fusor::db
