#include "db/store_rules.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "base/sha256.h"
#include "db/staleness.h"

namespace fusor::db {
namespace {

bool IsLowerHex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Linear interpolation between closest ranks of sorted samples, q in [0, 1].
double Quantile(const std::vector<double>& sorted, double q) {
  double rank = q * static_cast<double>(sorted.size() - 1);
  size_t below = static_cast<size_t>(std::floor(rank));
  size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (rank - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

}  // namespace

std::string UpsertTargetSql(const std::array<std::string, 10>& values) {
  std::string list;
  for (const std::string& v : values) list += (list.empty() ? "" : ", ") + v;
  return "INSERT INTO targets (target_id, cpu_model, isa, cores, onednn_version, "
         "cost_model_version, calibrated_unix_ms, fingerprint, profile, updated_unix_ms) "
         "VALUES (" +
         list +
         ") "
         "ON CONFLICT (target_id) DO UPDATE SET cpu_model = excluded.cpu_model, isa = "
         "excluded.isa, "
         "cores = excluded.cores, onednn_version = excluded.onednn_version, "
         "cost_model_version = excluded.cost_model_version, "
         "calibrated_unix_ms = excluded.calibrated_unix_ms, fingerprint = excluded.fingerprint, "
         "profile = excluded.profile, updated_unix_ms = excluded.updated_unix_ms "
         "WHERE excluded.calibrated_unix_ms > targets.calibrated_unix_ms OR "
         "(excluded.calibrated_unix_ms = targets.calibrated_unix_ms AND "
         "excluded.profile IS DISTINCT FROM targets.profile)";
}

std::string ShortHash(std::string_view hash) { return std::string(hash.substr(0, 12)); }

StatusOr<std::string> NormalizeHashPrefix(std::string_view prefix) {
  std::string lower(prefix);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.size() > 64 || !IsLowerHex(lower)) {
    return Status::InvalidArgument(fmt::format(
        "graph hash '{}' is not hex; a graph hash is up to 64 hex digits (SHA-256)", prefix));
  }
  return lower;
}

Status ValidatePlan(const v1::Plan& plan) {
  if (plan.graph_hash().size() != 64 || !IsLowerHex(plan.graph_hash())) {
    return Status::InvalidArgument(
        fmt::format("plan graph_hash '{}' is not a canonical graph hash (64 lower-case hex digits)",
                    plan.graph_hash()));
  }
  if (plan.target_id().empty() || plan.cost_model_version().empty()) {
    return Status::InvalidArgument(fmt::format(
        "plan for graph {} needs a target_id and a cost_model_version (got '{}' and '{}')",
        ShortHash(plan.graph_hash()), plan.target_id(), plan.cost_model_version()));
  }
  if (!std::isfinite(plan.predicted_ns()) || plan.predicted_ns() < 0) {
    return Status::InvalidArgument(fmt::format("plan for graph {} has predicted_ns {}, needs >= 0",
                                               ShortHash(plan.graph_hash()), plan.predicted_ns()));
  }
  return Status::Ok();
}

Status ValidateMeasurements(const v1::Plan& plan, std::span<const Measurement> measurements) {
  for (const Measurement& m : measurements) {
    bool bad_sample = std::any_of(m.samples_ns.begin(), m.samples_ns.end(),
                                  [](double s) { return !std::isfinite(s) || s < 0; });
    if (m.samples_ns.empty() || bad_sample) {
      return Status::InvalidArgument(fmt::format(
          "measurement of plan for graph {} needs at least one sample, each finite and >= 0",
          ShortHash(plan.graph_hash())));
    }
    if (!m.group_id) continue;
    bool known = std::any_of(plan.groups().begin(), plan.groups().end(),
                             [&](const v1::FusionGroup& g) { return g.id() == *m.group_id; });
    if (!known) {
      return Status::InvalidArgument(
          fmt::format("measurement names group {}, which plan for graph "
                      "{} does not have",
                      *m.group_id, ShortHash(plan.graph_hash())));
    }
  }
  return Status::Ok();
}

Status ValidateCalibrationRun(const CalibrationRun& run) {
  if (run.target_id.empty() || run.cost_model_version.empty()) {
    return Status::InvalidArgument(fmt::format(
        "a calibration run needs a target_id and a cost_model_version (got '{}' and '{}')",
        run.target_id, run.cost_model_version));
  }
  if (run.samples.empty()) {
    return Status::InvalidArgument(fmt::format(
        "calibration run of target '{}' has no samples; a run needs at least one", run.target_id));
  }
  for (const CalibrationSampleRow& s : run.samples) {
    bool time_ok = std::isfinite(s.measured_ns) && s.measured_ns > 0;
    bool cv_ok = std::isfinite(s.cv) && s.cv >= 0;
    if (s.benchmark.empty() || s.features_json.empty() || !time_ok || !cv_ok) {
      return Status::InvalidArgument(fmt::format(
          "calibration sample '{}' of target '{}' has measured_ns {} and cv {}; a sample needs a "
          "benchmark name, features, a finite time > 0 and a finite cv >= 0",
          s.benchmark, run.target_id, s.measured_ns, s.cv));
    }
  }
  return Status::Ok();
}

Status ValidateResidualSamples(std::span<const ResidualSampleRow> rows) {
  for (const ResidualSampleRow& r : rows) {
    bool time_ok = std::isfinite(r.measured_ns) && r.measured_ns > 0;
    if (r.target_id.empty() || r.cost_model_version.empty() || r.features_version.empty() ||
        r.features_json.empty() || !time_ok) {
      return Status::InvalidArgument(fmt::format(
          "residual sample '{}' of graph {} on target '{}' has measured_ns {}; a sample needs a "
          "target_id, a cost_model_version, a features_version, features and a finite time > 0",
          r.source, ShortHash(r.graph_hash), r.target_id, r.measured_ns));
    }
  }
  return Status::Ok();
}

Status ValidateResidualSampleQuery(const ResidualSampleQuery& query) {
  if (query.max_samples < 1) {
    return Status::InvalidArgument(
        fmt::format("max_samples is {}; ask for at least 1 residual sample", query.max_samples));
  }
  return Status::Ok();
}

Status ValidateResidual(const StoredResidual& r) {
  if (r.target_id.empty() || r.cost_model_version.empty() || r.residual_json.empty() ||
      r.training_samples < 0) {
    return Status::InvalidArgument(fmt::format(
        "a residual needs a target_id, a cost_model_version, its JSON and a training set size >= "
        "0 (got '{}', '{}', {} characters, {})",
        r.target_id, r.cost_model_version, r.residual_json.size(), r.training_samples));
  }
  return Status::Ok();
}

Status ValidateExpireRule(const ExpireRule& rule) {
  if (rule.created_before_unix_ms == 0 && !rule.stale) {
    return Status::InvalidArgument("an expiry rule needs created_before_unix_ms or stale");
  }
  return Status::Ok();
}

StatusOr<int32_t> PageSizeOf(const PlanQuery& query) {
  if (query.page_size < 0) {
    return Status::InvalidArgument(
        fmt::format("page size {} is negative; use 0 for the default", query.page_size));
  }
  return query.page_size == 0 ? PlanQuery::kDefaultPageSize
                              : std::min(query.page_size, PlanQuery::kMaxPageSize);
}

SampleSummary Summarize(std::vector<double> samples_ns) {
  if (samples_ns.empty()) return {};
  std::sort(samples_ns.begin(), samples_ns.end());
  double median = Quantile(samples_ns, 0.5);
  double spread =
      median > 0 ? (Quantile(samples_ns, 0.75) - Quantile(samples_ns, 0.25)) / median : 0;
  return {median, spread};
}

std::string SamplesJson(std::span<const double> samples_ns) {
  return fmt::format("[{}]", fmt::join(samples_ns, ","));
}

StatusOr<std::vector<double>> ParseSamplesJson(std::string_view json, const std::string& database) {
  Status bad = Status::Corruption(
      fmt::format("database '{}': measurement samples '{}' are not a JSON array of numbers",
                  database, json.substr(0, 40)));
  if (json.size() < 2 || json.front() != '[' || json.back() != ']') return bad;
  json = json.substr(1, json.size() - 2);
  std::vector<double> samples;
  while (!json.empty()) {
    size_t comma = std::min(json.find(','), json.size());
    double value = 0;
    auto [end, ec] = std::from_chars(json.data(), json.data() + comma, value);
    if (ec != std::errc() || end != json.data() + comma) return bad;
    samples.push_back(value);
    json.remove_prefix(std::min(comma + 1, json.size()));
  }
  return samples;
}

StoredPlan JudgedPlan(v1::Plan plan, std::string model_name, std::string target_cost_model_version,
                      int64_t target_calibrated_unix_ms,
                      std::string_view current_cost_model_version, std::string database) {
  StoredPlan stored;
  stored.plan = std::move(plan);
  stored.model_name = std::move(model_name);
  v1::HardwareProfile target;
  target.mutable_target()->set_id(stored.plan.target_id());
  target.set_cost_model_version(std::move(target_cost_model_version));
  target.set_calibrated_unix_ms(target_calibrated_unix_ms);
  stored.stale_reason = StaleReason(stored.plan, current_cost_model_version, target);
  stored.stale = !stored.stale_reason.empty();
  stored.database = std::move(database);
  return stored;
}

HistoryEvent CalibratedEvent(const v1::HardwareProfile& profile, int64_t now_ms) {
  return HistoryEvent{now_ms,
                      "calibrated",
                      {"", profile.target().id(), "", ""},
                      0,
                      0,
                      fmt::format("cost model {}, calibrated_unix_ms {}",
                                  profile.cost_model_version(), profile.calibrated_unix_ms()),
                      ""};
}

HistoryEvent PlanEvent(std::string_view event, const v1::Plan& plan, int64_t now_ms,
                       std::string detail) {
  return HistoryEvent{now_ms,
                      std::string(event),
                      PlanKey::Of(plan),
                      plan.predicted_ns(),
                      plan.measured_ns(),
                      std::move(detail),
                      ""};
}

uint32_t PlanKeyLockId(const PlanKey& key) {
  Sha256 sha;
  for (const std::string* field :
       {&key.graph_hash, &key.target_id, &key.cost_model_version, &key.search_options}) {
    sha.UpdateString(*field);
  }
  std::array<uint8_t, 32> digest = sha.Finish();
  return uint32_t{digest[0]} | uint32_t{digest[1]} << 8 | uint32_t{digest[2]} << 16 |
         uint32_t{digest[3]} << 24;
}

std::string LeasableJobSql(std::string_view now) {
  return fmt::format("(state = '{}' OR (state = '{}' AND lease_expires_unix_ms < {}))", kJobQueued,
                     kJobLeased, now);
}

Status ValidateAgent(const AgentRecord& agent) {
  if (agent.agent_id.empty()) return Status::InvalidArgument("agent has no agent_id");
  if (agent.target_id.empty()) {
    return Status::InvalidArgument(fmt::format("agent '{}' has no target_id", agent.agent_id));
  }
  return Status::Ok();
}

Status ValidateJob(const v1::MeasurementJob& job) {
  if (job.target_id().empty()) return Status::InvalidArgument("measurement job has no target_id");
  if (job.graph_hash().size() != 64) {
    return Status::InvalidArgument(
        fmt::format("measurement job's graph_hash '{}' is not a canonical hash (64 hex digits)",
                    job.graph_hash()));
  }
  if (job.plans_size() == 0) {
    return Status::InvalidArgument("measurement job has no plans to measure");
  }
  return Status::Ok();
}

Status ValidatePruneAge(int64_t older_than_ms) {
  if (older_than_ms < 0) {
    return Status::InvalidArgument(fmt::format(
        "finished jobs older than {} ms: the age must not be negative (0: every finished job)",
        older_than_ms));
  }
  return Status::Ok();
}

Status ValidateLease(const JobLease& lease, int64_t lease_ms) {
  if (lease.agent_id.empty()) return Status::InvalidArgument("lease names no agent_id");
  if (lease.job_id <= 0 || lease.lease <= 0) {
    return Status::InvalidArgument(
        fmt::format("lease {} of job {} is not a lease a store gives (both start at 1)",
                    lease.lease, lease.job_id));
  }
  if (lease_ms <= 0) {
    return Status::InvalidArgument(fmt::format("lease time {} ms must be positive", lease_ms));
  }
  return Status::Ok();
}

Status CheckHoldsLease(const JobLease& lease, const MeasurementJobRow& row,
                       const std::string& database) {
  if (row.state == kJobLeased && row.agent_id == lease.agent_id && row.lease == lease.lease) {
    return Status::Ok();
  }
  std::string now;
  if (row.state == kJobLeased) {
    now = fmt::format("leased to agent '{}' (lease {})", row.agent_id, row.lease);
  } else if (row.state == kJobDone) {
    now = fmt::format("done, reported by agent '{}'", row.agent_id);
  } else {
    now = std::string(row.state);
  }
  return Status::FailedPrecondition(fmt::format(
      "agent '{}' no longer holds measurement job {} (its lease {}) in '{}': the job is {} now; "
      "a lease not renewed in time goes to another agent",
      lease.agent_id, lease.job_id, lease.lease, database, now));
}

void FillJobLease(MeasurementJobRow& row) {
  row.job.set_job_id(row.job_id);
  row.job.set_target_id(row.target_id);
  row.job.set_lease(row.lease);
  row.job.set_lease_expires_unix_ms(row.lease_expires_unix_ms);
}

Status UnknownJob(int64_t job_id, const std::string& database) {
  return Status::NotFound(
      fmt::format("measurement job {} is not in database '{}'", job_id, database));
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StatusOr<v1::Plan> ParseStoredPlan(const std::string& bytes, const std::string& database) {
  if (bytes.empty()) {
    return Status::Corruption("database '" + database +
                              "': a stored plan is 0 bytes (a plan always names its graph and "
                              "target)");
  }
  return ParseStored<v1::Plan>(bytes, "plan", database);
}

Status AddListedPlan(StatusOr<StoredPlan> read, std::string_view graph_hash,
                     std::string_view target_id, const std::string& database, PlanPage* page) {
  if (read.ok()) {
    page->plans.push_back(std::move(read).value());
    return Status::Ok();
  }
  if (read.status().code() != Status::Code::kCorruption) return read.status();
  spdlog::warn("database '{}': plan of graph {} on target '{}' left out of a listing: {}", database,
               graph_hash, target_id, read.status().message());
  page->corrupt_plans.push_back(std::string(graph_hash) + " " + std::string(target_id));
  return Status::Ok();
}

}  // namespace fusor::db
