// `fusor db query|show|stats|export|import` end to end: runs the scratch CLI binary on real files
// and checks its tables, its JSON, its exit codes and its errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "client/exit_codes.h"
#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"

namespace fusor::db {
namespace {

using nlohmann::json;
using testing::Graph;
using testing::GraphHash;
using testing::Plan;
using testing::Profile;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class DbCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("tuning.db");
    std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(db_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutTarget(Profile("target-a", "cm1", 1)).ok());
    ASSERT_TRUE(store->PutTarget(Profile("target-b", "cm1", 1)).ok());
    std::vector<Measurement> m(1);
    m[0].samples_ns = {900, 950, 1000};
    ASSERT_TRUE(store
                    ->PutPlan(Plan({.graph_hash = GraphHash(1),
                                    .measured_ns = 950,
                                    .unfused_measured_ns = 1900,
                                    .created_unix_ms = 3000}),
                              Graph("resnet18", 4), m)
                    .ok());
    ASSERT_TRUE(store
                    ->PutPlan(Plan({.graph_hash = GraphHash(2),
                                    .unfused_predicted_ns = 1500,
                                    .created_unix_ms = 2000}),
                              Graph("bert", 4), {})
                    .ok());
    ASSERT_TRUE(store
                    ->PutPlan(Plan({.graph_hash = GraphHash(3),
                                    .target_id = "target-b",
                                    .unfused_predicted_ns = 1500,
                                    .created_unix_ms = 1000}),
                              Graph("bert", 4), {})
                    .ok());
  }

  // Runs the CLI with args (shell words) and env assignments; XDG paths point into the temp dir.
  CliResult Run(const std::string& args, const std::string& env = "") {
    std::string out = dir_.File("stdout.txt");
    std::string err = dir_.File("stderr.txt");
    std::string command = "env HOME=" + dir_.File("home") + " XDG_DATA_HOME=" + dir_.File("xdg") +
                          " " + env + " " + FUSOR_DB_CLI + " " + args + " >" + out + " 2>" + err;
    int status = std::system(command.c_str());
    CliResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  json RunJson(const std::string& args) {
    CliResult r = Run(args + " --json");
    EXPECT_EQ(r.exit_code, kExitOk) << r.err;
    return json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  }

  testing::TempDir dir_;
  std::string db_;
};

TEST_F(DbCliTest, QueryPrintsJsonForScriptsWithFiltersAndPages) {
  json all = RunJson("db query --db " + db_);
  ASSERT_TRUE(all.is_object()) << all;
  ASSERT_EQ(all["plans"].size(), 3u);
  EXPECT_EQ(all["plans"][0]["graph_hash"], GraphHash(1));  // Newest first.
  EXPECT_EQ(all["plans"][0]["model_name"], "resnet18");
  EXPECT_DOUBLE_EQ(all["plans"][0]["speedup"].get<double>(), 2.0);
  EXPECT_FALSE(all["plans"][0]["stale"].get<bool>());
  EXPECT_EQ(RunJson("db query --target target-a --db " + db_)["plans"].size(), 2u);
  EXPECT_EQ(RunJson("db query --model bert --db " + db_)["plans"].size(), 2u);
  EXPECT_EQ(RunJson("db query --min-speedup 1.9 --db " + db_)["plans"].size(), 1u);
  EXPECT_EQ(RunJson("db query --since 2000 --db " + db_)["plans"].size(), 2u);

  json first = RunJson("db query --limit 2 --db " + db_);
  ASSERT_EQ(first["plans"].size(), 2u);
  std::string token = first["next_page_token"];
  ASSERT_FALSE(token.empty());
  json second = RunJson("db query --limit 2 --page-token " + token + " --db " + db_);
  ASSERT_EQ(second["plans"].size(), 1u);
  EXPECT_EQ(second["plans"][0]["graph_hash"], GraphHash(3));
  EXPECT_EQ(second["next_page_token"], "");
}

TEST_F(DbCliTest, QueryPrintsATableForPeople) {
  CliResult r = Run("db query --db " + db_);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("GRAPH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resnet18"), std::string::npos);
  EXPECT_NE(r.out.find("2.00x"), std::string::npos);
  EXPECT_NE(r.out.find("current"), std::string::npos);
  CliResult stale = Run("db query --cost-model-version cm2 --db " + db_);
  EXPECT_NE(stale.out.find("stale"), std::string::npos);
  CliResult none = Run("db query --current --cost-model-version cm2 --db " + db_);
  EXPECT_NE(none.out.find("no plans match"), std::string::npos);
}

TEST_F(DbCliTest, ShowFindsAGraphByHashPrefix) {
  CliResult r = Run("db show " + GraphHash(1).substr(0, 10) + " --db " + db_);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_NE(r.out.find(GraphHash(1)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ANCHOR"), std::string::npos);
  EXPECT_NE(r.out.find("history"), std::string::npos);
  json j = RunJson("db show " + GraphHash(1) + " --db " + db_);
  ASSERT_EQ(j["plans"].size(), 1u);
  EXPECT_EQ(j["plans"][0]["plan"]["groups"].size(), 2u);
  EXPECT_EQ(j["plans"][0]["measurements"][0]["samples"], 3);
  CliResult missing = Run("db show ffff0000 --db " + db_);
  EXPECT_NE(missing.exit_code, kExitOk);
  EXPECT_NE(missing.err.find("ffff0000"), std::string::npos) << missing.err;
}

TEST_F(DbCliTest, StatsCountPlansPerTarget) {
  json j = RunJson("db stats --db " + db_);
  ASSERT_EQ(j["databases"].size(), 1u);
  EXPECT_EQ(j["databases"][0]["plans"], 3);
  EXPECT_EQ(j["databases"][0]["per_target"].size(), 2u);
  CliResult r = Run("db stats --db " + db_);
  EXPECT_NE(r.out.find("target-b"), std::string::npos) << r.out;
}

TEST_F(DbCliTest, StatsCountCalibrationSamples) {
  {
    std::unique_ptr<SqlitePlanStore> store = testing::OpenWritable(db_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->AppendCalibrationRun(testing::SampleRun("target-a", "cm1", 3)).ok());
    ASSERT_TRUE(store->AppendCalibrationRun(testing::SampleRun("target-a", "cm1", 2)).ok());
  }
  json j = RunJson("db stats --db " + db_);
  EXPECT_EQ(j["databases"][0]["calibration_samples"], 5);
  EXPECT_EQ(j["databases"][0]["calibration_runs"], 2);
  EXPECT_EQ(j["databases"][0]["per_target"][0]["calibration_samples"], 5);
  CliResult r = Run("db stats --db " + db_);
  EXPECT_NE(r.out.find("5 calibration samples from 2 calibration runs"), std::string::npos)
      << r.out;
}

TEST_F(DbCliTest, ExportThenImportAndQueryLayered) {
  std::string snapshot = dir_.File("deploy.db");
  CliResult exported = Run("db export --target target-a " + snapshot + " --db " + db_);
  ASSERT_EQ(exported.exit_code, kExitOk) << exported.err;
  EXPECT_NE(exported.out.find("exported 2 plans"), std::string::npos) << exported.out;
  CliResult again = Run("db export --target target-a " + snapshot + " --db " + db_);
  EXPECT_NE(again.exit_code, kExitOk);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;

  std::string edge = dir_.File("edge.db");
  json imported = RunJson("db import " + snapshot + " --db " + edge);
  EXPECT_EQ(imported["imports"][0]["plans_added"], 2);
  json twice = RunJson("db import " + snapshot + " --db " + edge);
  EXPECT_EQ(twice["imports"][0]["plans_added"], 0);
  EXPECT_EQ(twice["imports"][0]["plans_kept"], 2);

  // A deployed system: only the snapshot, no database of its own.
  json layered = RunJson("db query --snapshot " + snapshot);
  EXPECT_EQ(layered["plans"].size(), 2u);
  json both = RunJson("db query --db " + db_ + " --snapshot " + snapshot);
  EXPECT_EQ(both["plans"].size(), 3u);  // The snapshot's two are hidden by the same keys above.
}

TEST_F(DbCliTest, DefaultDatabaseLivesUnderXdgDataHome) {
  CliResult missing = Run("db stats");
  EXPECT_EQ(missing.exit_code, kExitError);
  EXPECT_NE(missing.err.find("no tuning database"), std::string::npos) << missing.err;
  ASSERT_EQ(Run("db export --target target-a " + dir_.File("s.db") + " --db " + db_).exit_code,
            kExitOk);
  CliResult imported = Run("db import " + dir_.File("s.db"));
  ASSERT_EQ(imported.exit_code, kExitOk) << imported.err;
  EXPECT_TRUE(std::filesystem::exists(dir_.File("xdg/fusor/tuning.db")));
  EXPECT_EQ(RunJson("db query")["plans"].size(), 2u);
}

TEST_F(DbCliTest, ErrorsNameTheFileAndSetTheExitCode) {
  std::string text = dir_.File("notes.txt");
  std::ofstream(text) << "not a database at all, just some words to fill a page or two\n";
  CliResult corrupt = Run("db stats --db " + text);
  EXPECT_EQ(corrupt.exit_code, kExitError);  // A corrupt database is not an invalid model.
  EXPECT_NE(corrupt.err.find(text), std::string::npos) << corrupt.err;
  EXPECT_TRUE(corrupt.out.empty());

  ASSERT_EQ(testing::RawQuery(db_, "PRAGMA user_version = 7"), "");
  CliResult newer = Run("db query --db " + db_);
  EXPECT_EQ(newer.exit_code, kExitError);
  EXPECT_NE(newer.err.find("upgrade fusor"), std::string::npos) << newer.err;

  EXPECT_EQ(Run("db query --since yesterday-ish --db " + db_).exit_code, kExitUsage);
  EXPECT_EQ(Run("db frobnicate").exit_code, kExitUsage);
}

}  // namespace
}  // namespace fusor::db
