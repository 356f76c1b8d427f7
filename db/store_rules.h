// What every TuningDatabase backend decides the same way, whatever its SQL: which plans,
// measurements and calibration runs are accepted, how a graph-hash prefix and a page size are read,
// how a measurement's samples are summarised and kept as text, and how a stored plan row is judged
// (staleness.h). SqlitePlanStore and PostgresPlanStore both call these, so the two stores cannot
// drift apart. Pure functions, safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "db/tuning_database.h"
#include "proto/plan.pb.h"
#include "proto/target.pb.h"

namespace fusor::db {

// The statement that stores a target's profile unless the stored one was calibrated later or is
// identical (the newer calibration wins), in SQL both stores run. `values` are the placeholders
// of target_id, cpu_model, isa, cores, onednn_version, cost_model_version, calibrated_unix_ms,
// fingerprint, profile and updated_unix_ms, in that order ("?" for SQLite, "$n" for PostgreSQL).
std::string UpsertTargetSql(const std::array<std::string, 10>& values);

// The first 12 hex digits of a graph hash, for messages.
std::string ShortHash(std::string_view hash);

// A graph-hash prefix in lower case; InvalidArgument when it is not up to 64 hex digits.
StatusOr<std::string> NormalizeHashPrefix(std::string_view prefix);

// What PutPlan, its measurements and AppendCalibrationRun accept; InvalidArgument naming the field.
Status ValidatePlan(const v1::Plan& plan);
Status ValidateMeasurements(const v1::Plan& plan, std::span<const Measurement> measurements);
Status ValidateCalibrationRun(const CalibrationRun& run);
// What AppendResidualSamples, ResidualSamples and PutResidual accept.
Status ValidateResidualSamples(std::span<const ResidualSampleRow> rows);
Status ValidateResidualSampleQuery(const ResidualSampleQuery& query);
Status ValidateResidual(const StoredResidual& residual);
// An expiry rule selects something.
Status ValidateExpireRule(const ExpireRule& rule);

// The page size a query asks for (default and cap applied); InvalidArgument when negative.
StatusOr<int32_t> PageSizeOf(const PlanQuery& query);

// A measurement's median and spread (interquartile range over median), from its samples.
struct SampleSummary {
  double median_ns = 0;
  double spread = 0;
};
SampleSummary Summarize(std::vector<double> samples_ns);

// Samples as the JSON array text a store keeps, and back; Corruption naming `database` when the
// text is not an array of numbers.
std::string SamplesJson(std::span<const double> samples_ns);
StatusOr<std::vector<double>> ParseSamplesJson(std::string_view json, const std::string& database);

// A stored serialized message read back; Corruption naming `database` and `what` when it does not
// parse.
template <typename Message>
StatusOr<Message> ParseStored(const std::string& bytes, std::string_view what,
                              const std::string& database) {
  Message message;
  if (!message.ParseFromString(bytes)) {
    return Status::Corruption("database '" + database + "': a stored " + std::string(what) +
                              " does not parse as " + Message::descriptor()->full_name());
  }
  return message;
}

// A stored plan read back: Corruption also for 0 bytes, which parse as an empty plan but are
// never what PutPlan wrote (a plan always names its graph and target).
StatusOr<v1::Plan> ParseStoredPlan(const std::string& bytes, const std::string& database);

// Adds a listed plan to `page`, or, when reading its row failed with Corruption, names the row
// (`graph_hash`, `target_id`) in page->corrupt_plans and the log instead; other errors return.
Status AddListedPlan(StatusOr<StoredPlan> read, std::string_view graph_hash,
                     std::string_view target_id, const std::string& database, PlanPage* page);

// A plan read back with its model name, judged against its target's cost-model version and
// calibration time as stored beside it.
StoredPlan JudgedPlan(v1::Plan plan, std::string model_name, std::string target_cost_model_version,
                      int64_t target_calibrated_unix_ms,
                      std::string_view current_cost_model_version, std::string database);

// The history row PutTarget appends when a newer calibration is stored.
HistoryEvent CalibratedEvent(const v1::HardwareProfile& profile, int64_t now_ms);
// A history row for something that happened to plan now.
HistoryEvent PlanEvent(std::string_view event, const v1::Plan& plan, int64_t now_ms,
                       std::string detail);

// 32 bits of a SHA-256 over the key's fields: which lock LockPlanKey takes for a key. Two keys
// sharing them only make their tunes take turns.
uint32_t PlanKeyLockId(const PlanKey& key);

// Milliseconds since the Unix epoch, now.
int64_t NowUnixMs();

// Measurement jobs (plan_store.h). The condition, in SQL both stores run over measurement_jobs,
// that a job may be leased at time `now` (a placeholder): queued, or leased with its lease
// expired.
std::string LeasableJobSql(std::string_view now);
// What PutAgent, EnqueueJob and the lease calls accept; InvalidArgument naming the field.
Status ValidateAgent(const AgentRecord& agent);
Status ValidateJob(const v1::MeasurementJob& job);
Status ValidateLease(const JobLease& lease, int64_t lease_ms);
// What PruneJobs accepts: an age of at least 0 ms.
Status ValidatePruneAge(int64_t older_than_ms);
// Ok when `row` (read under the job's row lock) is the lease the agent names: leased, to that
// agent, under that lease number; otherwise FailedPrecondition saying who holds the job now.
Status CheckHoldsLease(const JobLease& lease, const MeasurementJobRow& row,
                       const std::string& database);
// Copies a job row's id and lease into its MeasurementJob message, as an agent receives it.
void FillJobLease(MeasurementJobRow& row);
// NotFound naming a job id the store does not know.
Status UnknownJob(int64_t job_id, const std::string& database);

}  // namespace fusor::db
