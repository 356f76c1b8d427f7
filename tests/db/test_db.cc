#include "tests/db/test_db.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <set>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "base/sha256.h"
#include "db/plan_order.h"

namespace fusor::db::testing {
namespace {

// One line per stored plan is right for a server and noise in a test log.
const bool kQuietLogs = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/fusor_db_test_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string GraphHash(uint64_t n) {
  Sha256 sha;
  sha.UpdateU64(n);
  return sha.FinishHex();
}

v1::HardwareProfile Profile(const std::string& target_id, const std::string& cost_model_version,
                            int64_t calibrated_unix_ms) {
  v1::HardwareProfile profile;
  v1::TargetFingerprint* fp = profile.mutable_target();
  fp->set_id(target_id);
  fp->set_cpu_model("Test CPU " + target_id);
  fp->set_isa("avx2");
  fp->set_cores(8);
  fp->set_onednn_version("3.0.0");
  profile.set_cost_model_version(cost_model_version);
  profile.set_calibrated_unix_ms(calibrated_unix_ms);
  profile.mutable_dispatch_ns()->set_value(900);
  return profile;
}

v1::Graph Graph(const std::string& model_name, int nodes) {
  v1::Graph graph;
  graph.set_model_name(model_name);
  for (int i = 0; i < nodes; ++i) {
    v1::Node* node = graph.add_nodes();
    node->set_op_type(i % 2 == 0 ? "Conv" : "Relu");
    node->add_inputs(fmt::format("t{}", i));
    node->add_outputs(fmt::format("t{}", i + 1));
  }
  return graph;
}

v1::Plan Plan(const PlanSpec& spec) {
  v1::Plan plan;
  plan.set_graph_hash(spec.graph_hash);
  plan.set_target_id(spec.target_id);
  plan.set_cost_model_version(spec.cost_model_version);
  plan.set_search_options(spec.search_options);
  plan.set_predicted_ns(spec.predicted_ns);
  plan.set_measured_ns(spec.measured_ns);
  plan.set_unfused_predicted_ns(spec.unfused_predicted_ns);
  plan.set_unfused_measured_ns(spec.unfused_measured_ns);
  plan.set_created_unix_ms(spec.created_unix_ms);
  plan.set_peak_memory_bytes(1 << 20);
  for (int g = 0; g < spec.groups; ++g) {
    v1::FusionGroup* group = plan.add_groups();
    group->set_id(g);
    group->set_kind(v1::ANCHOR);
    group->add_nodes(2 * g);
    group->add_nodes(2 * g + 1);
    group->mutable_predicted()->set_total_ns(spec.predicted_ns / spec.groups);
  }
  return plan;
}

int64_t Append(CalibrationLog& store, const CalibrationRun& run) {
  StatusOr<int64_t> id = store.AppendCalibrationRun(run);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : -1;
}

std::vector<CalibrationRun> Runs(CalibrationLog& store, const std::string& target,
                                 const std::string& cmv, int32_t max_runs) {
  StatusOr<std::vector<CalibrationRun>> runs = store.CalibrationRuns({target, cmv, max_runs});
  EXPECT_TRUE(runs.ok()) << runs.status().ToString();
  return runs.ok() ? *runs : std::vector<CalibrationRun>();
}

std::unique_ptr<SqlitePlanStore> OpenWritable(const std::string& path) {
  StatusOr<std::unique_ptr<SqlitePlanStore>> store =
      SqlitePlanStore::Open(path, SqliteOpenOptions());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

std::unique_ptr<SqlitePlanStore> OpenReadOnly(const std::string& path) {
  SqliteOpenOptions options;
  options.read_only = true;
  StatusOr<std::unique_ptr<SqlitePlanStore>> store = SqlitePlanStore::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

std::vector<StoredPlan> AllPages(PlanStore& store, PlanQuery query, int* pages) {
  std::vector<StoredPlan> all;
  int count = 0;
  do {
    StatusOr<PlanPage> page = store.QueryPlans(query);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) break;
    if (query.page_size > 0) {
      EXPECT_LE(page->plans.size(), static_cast<size_t>(query.page_size));
    }
    all.insert(all.end(), page->plans.begin(), page->plans.end());
    query.page_token = page->next_page_token;
    ++count;
  } while (!query.page_token.empty());
  if (pages != nullptr) *pages = count;
  return all;
}

void ExpectListedOnceInOrder(const std::vector<StoredPlan>& plans) {
  std::set<std::string> graphs;
  for (size_t i = 0; i < plans.size(); ++i) {
    EXPECT_TRUE(graphs.insert(plans[i].plan.graph_hash()).second) << "graph listed twice at " << i;
    if (i == 0) continue;
    EXPECT_TRUE(
        ListedBefore(ListingPosition::Of(plans[i - 1].plan), ListingPosition::Of(plans[i].plan)))
        << "out of order at " << i;
  }
}

std::string RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    std::string error = std::string("error: ") + sqlite3_errmsg(db);
    sqlite3_close(db);
    return error;
  }
  sqlite3_busy_timeout(db, 10'000);
  sqlite3_stmt* stmt = nullptr;
  std::string result;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    result = text != nullptr ? reinterpret_cast<const char*>(text) : "";
  } else if (rc != SQLITE_DONE) {
    result = std::string("error: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return result;
}

std::string RawScript(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string result;
  char* error = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    result = std::string("error: ") + sqlite3_errmsg(db);
  } else if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    result = std::string("error: ") + (error != nullptr ? error : "unknown");
  }
  sqlite3_free(error);
  sqlite3_close(db);
  return result;
}

CalibrationRun SampleRun(const std::string& target_id, const std::string& cost_model_version,
                         int samples, int64_t run_unix_ms) {
  CalibrationRun run;
  run.target_id = target_id;
  run.cost_model_version = cost_model_version;
  run.run_unix_ms = run_unix_ms;
  for (int i = 0; i < samples; ++i) {
    run.samples.push_back({0, "bench_" + std::to_string(i), "{\"i\": " + std::to_string(i) + "}",
                           100.0 * (i + 1), 0.01});
  }
  return run;
}

}  // namespace fusor::db::testing
