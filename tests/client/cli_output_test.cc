// The CLI's tables and reports for people, as a person reads them: the real `fusor` binary against
// a real SQLite file and a real fusord on loopback. Without --wide every line fits 100 columns
// (client/text_format.h, kTextColumns); --wide prints every column whole; --json is unchanged.
// (`fusor calibrate`'s report: calibration_summary_test.cc, as a calibration takes a minute.)
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "db/sqlite_plan_store.h"
#include "tests/db/test_db.h"
#include "tests/server/fusord_process.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kColumns = 100;
const std::string kLongModel = "a_model_exported_with_a_very_long_name_from_some_training_run_v17";
const std::string kLongOptions =
    "algorithm=greedy;seed=1;max_group_nodes=64;optimal_region_nodes=12;recompute=1;"
    "max_recompute_nodes=4;memory_budget=0;measure_budget=2";

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void ExpectEveryLineFits(const CommandResult& r) {
  for (const std::string& line : Lines(r.output)) EXPECT_LE(line.size(), kColumns) << line;
}

class CliOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("cli-output");
    tokens_ = WriteTokenFile(dir_);
    db_ = (dir_ / "tuning.db").string();
    std::unique_ptr<db::SqlitePlanStore> store = db::testing::OpenWritable(db_);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->PutTarget(db::testing::Profile("target-a", "cm1", 1)).ok());
    v1::Plan plan = db::testing::Plan({.graph_hash = db::testing::GraphHash(7),
                                       .search_options = kLongOptions,
                                       .measured_ns = 950,
                                       .unfused_measured_ns = 1900});
    ASSERT_TRUE(store->PutPlan(plan, db::testing::Graph(kLongModel, 4), {}).ok());
  }
  void TearDown() override {
    if (HasFailure() && fusord_) std::cerr << "fusord log:\n" << fusord_->Log();
    fusord_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartFusord() {
    auto p = FusordProcess::Start({"--db", db_, "--token-file", tokens_}, dir_ / "fusord.log");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fusord_ = std::move(p).value();
  }

  CommandResult Fusor(std::vector<std::string> args, std::chrono::seconds timeout = 30s) {
    args.insert(args.begin(), FusorBinary());
    return RunCommand(args, {{"XDG_DATA_HOME", (dir_ / "xdg").string()}}, timeout);
  }

  std::filesystem::path dir_;
  std::string tokens_;
  std::string db_;
  std::unique_ptr<FusordProcess> fusord_;
};

// db query printed about 150 columns: the cost model, the search options and an ISO time on one
// line (issue 48).
void ExpectNarrowQuery(const CommandResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectEveryLineFits(r);
  EXPECT_NE(r.output.find(kLongModel.substr(0, 20)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("...  target-a"), std::string::npos) << "the model name is cut";
  EXPECT_EQ(r.output.find("algorithm=greedy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" d ago"), std::string::npos) << "created as an age: " << r.output;
}

void ExpectWideQuery(const CommandResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(kLongModel), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(kLongOptions), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(db::testing::GraphHash(7)), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("COST MODEL"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("T"), std::string::npos) << "an ISO 8601 time: " << r.output;
}

TEST_F(CliOutput, DbQueryFitsOneHundredColumnsAndWideShowsEveryColumnWhole) {
  ExpectNarrowQuery(Fusor({"db", "query", "--db", db_}));
  ExpectWideQuery(Fusor({"db", "query", "--db", db_, "--wide"}));
  StartFusord();
  const std::vector<std::string> remote = {"db",      "query",   "--server", fusord_->address(),
                                           "--token", kReadToken};
  ExpectNarrowQuery(Fusor(remote));
  std::vector<std::string> wide = remote;
  wide.push_back("--wide");
  ExpectWideQuery(Fusor(wide));
  std::vector<std::string> json = remote;
  json.push_back("--json");
  CommandResult j = Fusor(json);
  ASSERT_EQ(j.exit_code, 0) << j.output;
  auto parsed = nlohmann::json::parse(j.output, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(parsed.is_object()) << j.output;
  EXPECT_EQ(parsed["plans"][0]["search_options"], kLongOptions) << j.output;
  EXPECT_EQ(parsed["plans"][0]["created_unix_ms"], 1'700'000'000'000) << j.output;
}

}  // namespace
}  // namespace fusor::testing
