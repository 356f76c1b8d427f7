// The TuningDatabase contract tests (plan_store_contract_test.cc, job_queue_contract_test.cc) run
// against every backend: each test binary instantiates them with the backends it has
// (INSTANTIATE_TEST_SUITE_P over StoreBackendFactory values). A backend gives a fresh empty store
// per test, reopens it, names it as StoredPlan::database does, and answers raw SQL for checks the
// interface cannot make.
// Single-threaded, owned by one test.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "db/tuning_database.h"
#include "tests/db/test_db.h"

namespace fusor::db::testing {

class StoreBackend {
 public:
  virtual ~StoreBackend() = default;
  // Opens the backend's store (created and migrated on first open); null with a test failure on
  // error.
  virtual std::unique_ptr<TuningDatabase> Open() = 0;
  // How StoredPlan::database and DatabaseStats::path name the store.
  virtual std::string Name() const = 0;
  // The first column of the first row of sql as text, or "error: ...".
  virtual std::string RawQuery(const std::string& sql) const = 0;
};

struct StoreBackendFactory {
  std::string name;  // Test-name suffix: sqlite, postgresql.
  std::function<std::unique_ptr<StoreBackend>()> make;
};

std::unique_ptr<StoreBackend> SqliteBackend();
std::unique_ptr<StoreBackend> PostgresBackend();

// Names the parameter by its backend in test output (gtest prints an unknown type as bytes).
inline void PrintTo(const StoreBackendFactory& factory, std::ostream* os) { *os << factory.name; }

inline std::string BackendName(const ::testing::TestParamInfo<StoreBackendFactory>& info) {
  return info.param.name;
}

}  // namespace fusor::db::testing

namespace fusor::db {

// A fresh store of the backend under test, knowing target-a and target-b calibrated at
// testing::kCalibrated with cost model cm1.
class PlanStoreContract : public ::testing::TestWithParam<testing::StoreBackendFactory> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr);
    store_ = backend_->Open();
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->PutTarget(testing::Profile("target-a", "cm1", testing::kCalibrated)).ok());
    ASSERT_TRUE(store_->PutTarget(testing::Profile("target-b", "cm1", testing::kCalibrated)).ok());
  }

  void Put(const v1::Plan& plan, const std::string& model = "resnet18") {
    Status s = store_->PutPlan(plan, testing::Graph(model, 4), {});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::vector<StoredPlan> All(const PlanQuery& query) { return testing::AllPages(*store_, query); }

  std::string RawQuery(const std::string& sql) const { return backend_->RawQuery(sql); }

  std::unique_ptr<testing::StoreBackend> backend_;
  std::unique_ptr<TuningDatabase> store_;
};

// PlanStoreContract with agents a1 and a2 of target-a registered, for the job queue's contract
// (job_queue_contract_test.cc).
class JobQueueContract : public PlanStoreContract {
 protected:
  void SetUp() override {
    PlanStoreContract::SetUp();
    if (HasFatalFailure()) return;
    for (const char* agent : {"a1", "a2"}) {
      Status s = store_->PutAgent({agent, "target-a", std::string(agent) + "-host", 0, 0});
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
};

}  // namespace fusor::db
