// `fusor run` chooses its plan as a user runs it: the real binary on the bundled SqueezeNet
// (seeded weights), with a real SQLite tuning database in a temporary directory. The stored plan
// for this CPU's target runs by default and the output says where it came from (--db, or the
// default database); without one the rules plan runs and the output says so; a plan JSON of
// another model or target is refused naming both; a version-1 plan JSON runs with a warning.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "costmodel/hardware_profile.h"
#include "db/sqlite_plan_store.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/onednn_info.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;

std::string Model(const std::string& name) {
  return std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx";
}

struct CommandOutput {
  int exit_code = -1;
  std::string text;  // stdout and stderr.
};

// Runs `fusor ARGS` with XDG_DATA_HOME set to `xdg` (where the default database lives).
CommandOutput RunFusor(const std::string& args, const fs::path& xdg) {
  std::string command = "XDG_DATA_HOME=" + xdg.string() + " " + FUSOR_CLI + " " + args + " 2>&1";
  CommandOutput out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.text.append(buffer, n);
  int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// A tuning database holding, for this CPU's target (calibrated at t=1000 ms), the unfused plan of
// SqueezeNet (created at t=2000 ms): a plan the rules never choose, so its group count shows
// which plan ran.
class RunCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fusor-run-test-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "empty");
    auto g = ImportOnnxFile(Model("squeezenet1_1"), WithConstantFolding({}));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    graph_ = *std::move(g);
    auto local = DetectTarget(OneDnnIsa(), OneDnnVersion());
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    target_ = local->Id();
    HardwareProfile profile;
    profile.target = *local;
    profile.calibrated_unix_ms = 1000;
    fs::create_directories(dir_ / "xdg" / "fusor");
    auto store = db::SqlitePlanStore::Open(DbPath(), {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    v1::HardwareProfile proto;
    ProfileToProto(profile, &proto);
    ASSERT_TRUE((*store)->PutTarget(proto).ok());
    v1::Plan p;
    PlanToProto(UnfusedPlan(graph_), &p);
    p.set_graph_hash(CanonicalHash(graph_));
    p.set_target_id(target_);
    p.set_cost_model_version(kCostModelVersion);
    p.set_created_unix_ms(2000);
    ASSERT_TRUE((*store)->PutPlan(p, ToProto(graph_), {}).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The default database's path under XDG_DATA_HOME=dir_/xdg.
  std::string DbPath() const { return (dir_ / "xdg" / "fusor" / "tuning.db").string(); }
  std::string StoredSource(const std::string& db) const {
    return "plan: tuning database " + db + ", target " + target_ +
           ", tuned 1970-01-01 00:00:02 UTC (" + std::to_string(graph_.num_nodes()) + " groups)";
  }
  std::string WritePlan(const nlohmann::json& j) const {
    std::string path = (dir_ / "plan.json").string();
    std::ofstream(path) << j.dump();
    return path;
  }

  fs::path dir_;
  Graph graph_;
  std::string target_;
};

TEST_F(RunCommand, RunsTheStoredPlanOfTheDatabaseGivenAndSaysWhereItCameFrom) {
  fs::copy_file(DbPath(), dir_ / "given.db");
  std::string given = (dir_ / "given.db").string();
  CommandOutput out =
      RunFusor("run " + Model("squeezenet1_1") + " --no-timing --db " + given, dir_ / "empty");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find(StoredSource(given)), std::string::npos) << out.text;
}

TEST_F(RunCommand, RunsTheStoredPlanOfTheDefaultDatabaseWhenItExists) {
  CommandOutput out = RunFusor("run " + Model("squeezenet1_1") + " --no-timing", dir_ / "xdg");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find(StoredSource(DbPath())), std::string::npos) << out.text;
}

TEST_F(RunCommand, WithoutAStoredPlanRunsTheRulesPlanAndSaysSo) {
  CommandOutput none = RunFusor("run " + Model("squeezenet1_1") + " --no-timing", dir_ / "empty");
  ASSERT_EQ(none.exit_code, 0) << none.text;
  EXPECT_NE(none.text.find("plan: no stored plan: rules plan ("), std::string::npos) << none.text;
  EXPECT_NE(none.text.find("no tuning database at '" + (dir_ / "empty").string()),
            std::string::npos)
      << none.text;
  // A database without a plan for this model: mobilenet_v2 is not in it.
  CommandOutput other =
      RunFusor("run " + Model("mobilenet_v2") + " --no-timing --db " + DbPath(), dir_ / "empty");
  ASSERT_EQ(other.exit_code, 0) << other.text;
  EXPECT_NE(other.text.find("plan: no stored plan: rules plan ("), std::string::npos) << other.text;
  EXPECT_NE(other.text.find("no current plan in '" + DbPath() + "'"), std::string::npos)
      << other.text;
}

TEST_F(RunCommand, APlanJsonOfAnotherModelIsRefusedNamingBothGraphs) {
  auto mobilenet = ImportOnnxFile(Model("mobilenet_v2"), WithConstantFolding({}));
  ASSERT_TRUE(mobilenet.ok()) << mobilenet.status().ToString();
  std::string plan =
      WritePlan(PlanToJson(MaxFusionPlan(*mobilenet), {CanonicalHash(*mobilenet), target_}));
  CommandOutput out =
      RunFusor("run " + Model("squeezenet1_1") + " --no-timing --plan " + plan, dir_ / "empty");
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("plan is for graph " + CanonicalHash(*mobilenet) + ", this model is " +
                          CanonicalHash(graph_)),
            std::string::npos)
      << out.text;
}

TEST_F(RunCommand, APlanJsonTunedForAnotherTargetIsRefused) {
  std::string plan =
      WritePlan(PlanToJson(MaxFusionPlan(graph_), {CanonicalHash(graph_), "elsewhere"}));
  CommandOutput out =
      RunFusor("run " + Model("squeezenet1_1") + " --no-timing --plan " + plan, dir_ / "empty");
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("plan was tuned for target elsewhere, this is target " + target_),
            std::string::npos)
      << out.text;
}

TEST_F(RunCommand, AVersionOnePlanJsonRunsWithAWarning) {
  nlohmann::json j = PlanToJson(MaxFusionPlan(graph_), {CanonicalHash(graph_), target_});
  j.erase("graph_hash");
  j.erase("target_id");
  j["version"] = 1;
  std::string plan = WritePlan(j);
  CommandOutput out =
      RunFusor("run " + Model("squeezenet1_1") + " --no-timing --plan " + plan, dir_ / "empty");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("warning: plan JSON version 1 names no graph or target"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("plan: plan JSON " + plan), std::string::npos) << out.text;
}

}  // namespace
}  // namespace fusor
