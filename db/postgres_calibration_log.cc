// PostgresPlanStore's calibration log and the learned residual's log and fits
// (db/calibration_log.h), as rows of the tables postgres_schema.cc creates.
#include <spdlog/spdlog.h>

#include "db/postgres_plan_store.h"
#include "db/postgres_sql.h"
#include "db/store_rules.h"

namespace fusor::db {

// Calibration log
// ----------------------------------------------------------------------------------

StatusOr<int64_t> PostgresPlanStore::AppendCalibrationRun(const CalibrationRun& run) {
  FUSOR_RETURN_IF_ERROR(ValidateCalibrationRun(run));
  int64_t run_id = 0;
  FUSOR_RETURN_IF_ERROR(Write(
      fmt::format("append a calibration run of target '{}'", run.target_id),
      [&](pqxx::dbtransaction& txn) -> Status {
        Params t;
        if (t.Exec(txn,
                   fmt::format("SELECT 1 FROM targets WHERE target_id = {}", t.Text(run.target_id)))
                .empty()) {
          return Status::FailedPrecondition(fmt::format(
              "target '{}' is not in database '{}'; store (register) its hardware profile first",
              run.target_id, name_));
        }
        run_id = txn.exec("SELECT nextval('calibration_run_ids')")[0][0].as<int64_t>();
        int64_t at = run.run_unix_ms != 0 ? run.run_unix_ms : NowUnixMs();
        for (const CalibrationSampleRow& sample : run.samples) {
          Params p;
          p.Exec(txn,
                 fmt::format("INSERT INTO calibration_samples (target_id, "
                             "cost_model_version, run_id, run_unix_ms, benchmark, features, "
                             "measured_ns, cv) VALUES ({}, {}, {}, {}, {}, {}, {}, {})",
                             p.Text(run.target_id), p.Text(run.cost_model_version), p.Int(run_id),
                             p.Int(at), p.Text(sample.benchmark), p.Text(sample.features_json),
                             p.Real(sample.measured_ns), p.Real(sample.cv)));
        }
        return Status::Ok();
      }));
  spdlog::info("db: appended calibration run {} of target {} (cost model {}, {} samples) to '{}'",
               run_id, run.target_id, run.cost_model_version, run.samples.size(), name_);
  return run_id;
}

StatusOr<std::vector<CalibrationRun>> PostgresPlanStore::CalibrationRuns(
    const CalibrationRunQuery& query) {
  if (query.max_runs < 1) {
    return Status::InvalidArgument(
        fmt::format("max_runs is {}; ask for at least 1 calibration run", query.max_runs));
  }
  std::vector<CalibrationRun> runs;
  FUSOR_RETURN_IF_ERROR(Read("read the calibration log", [&](pqxx::dbtransaction& txn) -> Status {
    runs.clear();
    Params p;
    std::string target = p.Text(query.target_id);
    std::string cmv = p.Text(query.cost_model_version);
    std::string sql = fmt::format(
        "SELECT run_id, run_unix_ms, sample_id, benchmark, features, measured_ns, cv "
        "FROM calibration_samples WHERE target_id = {0} AND cost_model_version = {1} "
        "AND run_id IN (SELECT DISTINCT run_id FROM calibration_samples "
        "WHERE target_id = {0} AND cost_model_version = {1} ORDER BY run_id DESC LIMIT {2}) "
        "ORDER BY run_id DESC, sample_id",
        target, cmv, p.Int(query.max_runs));
    for (const pqxx::row& row : p.Exec(txn, sql)) {
      int64_t run_id = row[0].as<int64_t>();
      if (runs.empty() || runs.back().run_id != run_id) {
        runs.push_back(
            {run_id, query.target_id, query.cost_model_version, row[1].as<int64_t>(), {}, name_});
      }
      runs.back().samples.push_back({row[2].as<int64_t>(), row[3].as<std::string>(),
                                     row[4].as<std::string>(), row[5].as<double>(),
                                     row[6].as<double>()});
    }
    return Status::Ok();
  }));
  return runs;
}

// Learned residual
// ---------------------------------------------------------------------------------

Status PostgresPlanStore::AppendResidualSamples(std::span<const ResidualSampleRow> rows) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSamples(rows));
  if (rows.empty()) return Status::Ok();
  return Write(
      fmt::format("append {} residual samples of target '{}'", rows.size(), rows.front().target_id),
      [&](pqxx::dbtransaction& txn) -> Status {
        const int64_t now = NowUnixMs();
        for (const ResidualSampleRow& r : rows) {
          FUSOR_RETURN_IF_ERROR(RequireTarget(txn, r.target_id));
          Params p;
          p.Exec(txn,
                 fmt::format("INSERT INTO residual_samples (target_id, cost_model_version, "
                             "graph_hash, source, features_version, features, measured_ns, "
                             "measured_unix_ms) VALUES ({}, {}, {}, {}, {}, {}, {}, {})",
                             p.Text(r.target_id), p.Text(r.cost_model_version),
                             p.Text(r.graph_hash), p.Text(r.source), p.Text(r.features_version),
                             p.Text(r.features_json), p.Real(r.measured_ns),
                             p.Int(r.measured_unix_ms != 0 ? r.measured_unix_ms : now)));
        }
        return Status::Ok();
      });
}

StatusOr<std::vector<ResidualSampleRow>> PostgresPlanStore::ResidualSamples(
    const ResidualSampleQuery& query) {
  FUSOR_RETURN_IF_ERROR(ValidateResidualSampleQuery(query));
  std::vector<ResidualSampleRow> rows;
  FUSOR_RETURN_IF_ERROR(Read("read the residual samples", [&](pqxx::dbtransaction& txn) -> Status {
    rows.clear();
    Params p;
    std::string sql = fmt::format(
        "SELECT * FROM (SELECT sample_id, graph_hash, source, features_version, features, "
        "measured_ns, measured_unix_ms FROM residual_samples WHERE target_id = {} AND "
        "cost_model_version = {} AND sample_id > {} ORDER BY sample_id DESC LIMIT {}) newest "
        "ORDER BY sample_id",
        p.Text(query.target_id), p.Text(query.cost_model_version), p.Int(query.after_sample_id),
        p.Int(query.max_samples));
    for (const pqxx::row& row : p.Exec(txn, sql)) {
      rows.push_back({row[0].as<int64_t>(), query.target_id, query.cost_model_version,
                      row[1].as<std::string>(), row[2].as<std::string>(), row[3].as<std::string>(),
                      row[4].as<std::string>(), row[5].as<double>(), row[6].as<int64_t>()});
    }
    return Status::Ok();
  }));
  return rows;
}

Status PostgresPlanStore::PutResidual(const StoredResidual& r) {
  FUSOR_RETURN_IF_ERROR(ValidateResidual(r));
  return Write(
      fmt::format("store the residual of target '{}'", r.target_id),
      [&](pqxx::dbtransaction& txn) -> Status {
        FUSOR_RETURN_IF_ERROR(RequireTarget(txn, r.target_id));
        Params p;
        p.Exec(txn, fmt::format("INSERT INTO residuals (target_id, cost_model_version, residual, "
                                "training_samples, last_sample_id, fitted_unix_ms) VALUES ({}, {}, "
                                "{}, {}, {}, {}) ON CONFLICT (target_id) DO UPDATE SET "
                                "cost_model_version = EXCLUDED.cost_model_version, residual = "
                                "EXCLUDED.residual, training_samples = EXCLUDED.training_samples, "
                                "last_sample_id = EXCLUDED.last_sample_id, fitted_unix_ms = "
                                "EXCLUDED.fitted_unix_ms",
                                p.Text(r.target_id), p.Text(r.cost_model_version),
                                p.Text(r.residual_json), p.Int(r.training_samples),
                                p.Int(r.last_sample_id),
                                p.Int(r.fitted_unix_ms != 0 ? r.fitted_unix_ms : NowUnixMs())));
        return Status::Ok();
      });
}

StatusOr<StoredResidual> PostgresPlanStore::GetResidual(std::string_view target_id) {
  std::optional<StoredResidual> found;
  FUSOR_RETURN_IF_ERROR(Read("read a residual", [&](pqxx::dbtransaction& txn) -> Status {
    Params p;
    pqxx::result r = p.Exec(
        txn, fmt::format("SELECT cost_model_version, residual, training_samples, last_sample_id, "
                         "fitted_unix_ms FROM residuals WHERE target_id = {}",
                         p.Text(target_id)));
    if (r.empty()) return Status::Ok();
    found = StoredResidual{std::string(target_id),
                           r[0][0].as<std::string>(),
                           r[0][1].as<std::string>(),
                           r[0][2].as<int64_t>(),
                           r[0][3].as<int64_t>(),
                           r[0][4].as<int64_t>(),
                           name_};
    return Status::Ok();
  }));
  if (!found) {
    return Status::NotFound(
        fmt::format("no learned residual for target '{}' in '{}'", target_id, name_));
  }
  return std::move(*found);
}

}  // namespace fusor::db
