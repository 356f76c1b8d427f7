// Shared fixtures for the db/ tests: a temporary directory removed afterwards, and small builders
// for targets, graphs and plans. Everything runs against real SQLite files; nothing is mocked.
// Single-threaded helpers; each test owns its directory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "db/plan_store.h"
#include "db/sqlite_plan_store.h"
#include "proto/graph.pb.h"
#include "proto/plan.pb.h"
#include "proto/target.pb.h"

namespace fusor::db::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A calibration time before every plan the builders below make by default.
inline constexpr int64_t kCalibrated = 1'600'000'000'000;

// A 64-hex-digit graph hash derived from n (distinct n, distinct hashes).
std::string GraphHash(uint64_t n);

v1::HardwareProfile Profile(const std::string& target_id, const std::string& cost_model_version,
                            int64_t calibrated_unix_ms);
v1::Graph Graph(const std::string& model_name, int nodes);

struct PlanSpec {
  std::string graph_hash;
  std::string target_id = "target-a";
  std::string cost_model_version = "cm1";
  std::string search_options = "";
  double predicted_ns = 1000;
  double measured_ns = 0;
  double unfused_predicted_ns = 2000;
  double unfused_measured_ns = 0;
  int64_t created_unix_ms = 1'700'000'000'000;
  int groups = 2;
};
v1::Plan Plan(const PlanSpec& spec);

// A calibration run of `samples` samples named bench_0, bench_1, ... with made-up features (the
// store does not read them), times 100, 200, ... ns and cv 0.01.
CalibrationRun SampleRun(const std::string& target_id, const std::string& cost_model_version,
                         int samples, int64_t run_unix_ms = 0);

// Appends a run, recording a test failure on error; returns its run id (-1 on error).
int64_t Append(CalibrationLog& store, const CalibrationRun& run);
// The newest max_runs runs of target under cmv, recording a test failure on error.
std::vector<CalibrationRun> Runs(CalibrationLog& store, const std::string& target,
                                 const std::string& cmv, int32_t max_runs = 8);

// Opens a writable store, failing the test (and returning null) on error.
std::unique_ptr<SqlitePlanStore> OpenWritable(const std::string& path);
std::unique_ptr<SqlitePlanStore> OpenReadOnly(const std::string& path);

// Every plan the query selects, page after page; records a test failure on an error or on a page
// larger than query.page_size. *pages, when given, receives the number of pages.
std::vector<StoredPlan> AllPages(PlanStore& store, PlanQuery query, int* pages = nullptr);

// Expects plans in listing order, each graph once.
void ExpectListedOnceInOrder(const std::vector<StoredPlan>& plans);

// Runs one SQL statement on the file with a raw SQLite connection; returns the first column of the
// first row as text ("" when none), or "error: ..." when it fails.
std::string RawQuery(const std::string& path, const std::string& sql);
// Runs an SQL script (several statements) on the file with a raw SQLite connection; "" when it
// succeeds, else "error: ...".
std::string RawScript(const std::string& path, const std::string& sql);

}  // namespace fusor::db::testing
