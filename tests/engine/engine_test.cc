// The embeddable engine on a model with its weights (bundled SqueezeNet filled by
// tools/fill_weights.py): a plan JSON that applies is compiled, one that does not falls back to the
// rules plan naming why, a plan stored in a real tuning database or snapshot for this CPU's target
// is found by graph hash (never one of another target or a stale one), outputs equal the reference
// interpreter's on the same weights, runs from several threads give the same outputs, and bad
// inputs and unreadable databases are errors naming them.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "costmodel/hardware_profile.h"
#include "db/snapshot.h"
#include "db/sqlite_plan_store.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "lowering/plan_legality.h"
#include "runtime/constant_evaluator.h"
#include "runtime/model_weights.h"
#include "runtime/onednn_info.h"
#include "runtime/reference.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;

std::string FilledModel() { return std::string(FUSOR_FILLED_DIR) + "/squeezenet1_1.onnx"; }

EngineTensor Ramp(const EngineTensor& spec) {
  EngineTensor t = spec;
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  for (int64_t e = 0; e < n; ++e) t.floats.push_back(static_cast<float>(e % 13) / 13.0f - 0.5f);
  return t;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plan_path_ =
        (fs::temp_directory_path() / ("fusor-engine-plan-" + std::to_string(getpid()) + ".json"))
            .string();
  }
  void TearDown() override { fs::remove(plan_path_); }
  std::string plan_path_;
};

TEST_F(EngineTest, APlanJsonIsCompiledAndOutputsEqualTheReference) {
  auto imported = ImportOnnxFileWithWeights(FilledModel());
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  Graph g = imported->graph;
  FusionPlan plan = MaxFusionPlan(g);
  std::ofstream(plan_path_) << PlanToJson(plan, {CanonicalHash(g), ""}).dump();
  EngineOptions options;
  options.plan_json_path = plan_path_;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source(),
            "plan JSON " + plan_path_ + " (" + std::to_string(plan.groups.size()) + " groups)");
  ASSERT_EQ((*engine)->inputs().size(), 1u);
  EngineTensor x = Ramp((*engine)->inputs()[0]);
  auto out = (*engine)->Run({x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();

  auto leaves = ModelLeafValues(g, std::move(imported->weights), 1);
  ASSERT_TRUE(leaves.ok());
  ASSERT_TRUE(
      SetInputValue(g, x.name, {x.name, DType::kFloat32, x.dims, x.floats, {}}, &*leaves).ok());
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  HostTensor got{DType::kFloat32, (*out)[0].dims, (*out)[0].floats, {}};
  auto c = Compare(want->at(g.outputs()[0]), got);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_LE(c->worst_ratio, 1.0) << c->ToString();
}

TEST_F(EngineTest, APlanForAnotherGraphFallsBackToTheRulesPlanNamingBothGraphs) {
  auto imported = ImportOnnxFile(FilledModel(), WithConstantFolding({}));
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  const std::string other(64, 'a');
  std::ofstream(plan_path_) << PlanToJson(UnfusedPlan(*imported), {other, ""}).dump();
  EngineOptions options;
  options.plan_json_path = plan_path_;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const std::string& source = (*engine)->plan_source();
  EXPECT_EQ(source.rfind("rules plan (", 0), 0u) << source;
  EXPECT_NE(
      source.find("plan is for graph " + other + ", this model is " + CanonicalHash(*imported)),
      std::string::npos)
      << source;
}

TEST_F(EngineTest, AnIllegalPlanFallsBackToTheRulesPlanWithTheReason) {
  std::ofstream(plan_path_) << R"({"version": 1, "groups": [{"kind": "single", "nodes": [0]}]})";
  EngineOptions options;
  options.plan_json_path = plan_path_;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source().rfind("rules plan (", 0), 0u) << (*engine)->plan_source();
  EXPECT_GT((*engine)->plan_source().size(), std::string("rules plan (10 groups): ").size());
}

TEST_F(EngineTest, AVersionOnePlanJsonRunsWithAWarningInItsSource) {
  auto imported = ImportOnnxFile(FilledModel(), WithConstantFolding({}));
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  nlohmann::json j = PlanToJson(UnfusedPlan(*imported), {CanonicalHash(*imported), ""});
  j.erase("graph_hash");
  j.erase("target_id");
  j["version"] = 1;
  std::ofstream(plan_path_) << j.dump();
  EngineOptions options;
  options.plan_json_path = plan_path_;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source().rfind("plan JSON " + plan_path_, 0), 0u)
      << (*engine)->plan_source();
  EXPECT_NE((*engine)->plan_source().find("; warning: plan JSON version 1 names no graph"),
            std::string::npos)
      << (*engine)->plan_source();
}

// A real SQLite tuning database holding, for this CPU's target (calibrated at t=1000 ms), the
// unfused plan of the filled SqueezeNet (created at t=2000 ms): a plan the rules never choose.
class EngineDatabaseTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    dir_ = fs::temp_directory_path() / ("fusor-engine-db-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    auto imported = ImportOnnxFileWithWeights(FilledModel());
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    graph_ = imported->graph;
    plan_ = UnfusedPlan(graph_);
    auto local = DetectTarget(OneDnnIsa(), OneDnnVersion());
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    profile_.target = *local;
    profile_.calibrated_unix_ms = 1000;
    auto store = db::SqlitePlanStore::Open(DbPath(), {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    ASSERT_TRUE(PutProfile().ok());
    v1::Plan p;
    PlanToProto(plan_, &p);
    p.set_graph_hash(CanonicalHash(graph_));
    p.set_target_id(local->Id());
    p.set_cost_model_version(kCostModelVersion);
    p.set_created_unix_ms(2000);
    Status put = store_->PutPlan(p, ToProto(graph_), {});
    ASSERT_TRUE(put.ok()) << put.ToString();
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
    EngineTest::TearDown();
  }
  Status PutProfile() {
    v1::HardwareProfile proto;
    ProfileToProto(profile_, &proto);
    return store_->PutTarget(proto);
  }
  std::string DbPath() const { return (dir_ / "tuning.db").string(); }
  // The plan source's tail for the stored plan (created at t=2000 ms).
  std::string Groups() const {
    return "tuned 1970-01-01 00:00:02 UTC (" + std::to_string(plan_.groups.size()) + " groups)";
  }

  fs::path dir_;
  Graph graph_;
  FusionPlan plan_;
  HardwareProfile profile_;
  std::unique_ptr<db::SqlitePlanStore> store_;
};

TEST_F(EngineDatabaseTest, TheStoredPlanForThisCpuIsFoundByGraphHashAndRunsLikeItsJson) {
  EngineOptions options;
  options.plan_database_path = DbPath();
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source(),
            "tuning database " + DbPath() + ", target " + profile_.target.Id() + ", " + Groups());
  std::ofstream(plan_path_)
      << PlanToJson(plan_, {CanonicalHash(graph_), profile_.target.Id()}).dump();
  EngineOptions json_options;
  json_options.plan_json_path = plan_path_;
  auto from_json = Engine::Load(FilledModel(), json_options);
  ASSERT_TRUE(from_json.ok()) << from_json.status().ToString();
  EngineTensor x = Ramp((*engine)->inputs()[0]);
  auto a = (*engine)->Run({x});
  auto b = (*from_json)->Run({x});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].floats, (*b)[0].floats);
}

TEST_F(EngineDatabaseTest, ADeploymentSnapshotServesTheSamePlan) {
  std::string snapshot = (dir_ / "deploy.db").string();
  auto exported =
      db::ExportSnapshot(*store_, profile_.target.Id(), kCostModelVersion, snapshot, false);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  store_.reset();
  fs::remove(DbPath());
  EngineOptions options;
  options.plan_database_path = snapshot;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source(),
            "tuning database " + snapshot + ", target " + profile_.target.Id() + ", " + Groups());
}

TEST_F(EngineDatabaseTest, APlanOfAnotherTargetIsNeverUsed) {
  EngineOptions options;
  options.plan_database_path = DbPath();
  options.target_id = "0123456789abcdef01234567";
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source().rfind("rules plan (", 0), 0u) << (*engine)->plan_source();
  EXPECT_NE((*engine)->plan_source().find("no current plan in '" + DbPath() + "' for graph " +
                                          CanonicalHash(graph_).substr(0, 16) +
                                          " on target 0123456789abcdef01234567"),
            std::string::npos)
      << (*engine)->plan_source();
}

TEST_F(EngineDatabaseTest, APlanOlderThanItsTargetsCalibrationIsNeverUsed) {
  profile_.calibrated_unix_ms = 3000;
  ASSERT_TRUE(PutProfile().ok());
  EngineOptions options;
  options.plan_database_path = DbPath();
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source().rfind("rules plan (", 0), 0u) << (*engine)->plan_source();
  EXPECT_NE((*engine)->plan_source().find(", only a stale one (created 1970-01-01 00:00:02 UTC"),
            std::string::npos)
      << (*engine)->plan_source();
}

// A plan stored under an older lowering, which recorded a group of one node as opaque (its JSON
// edited so), no longer passes the plan check: loading it is an error naming the database, the
// plan (graph, target, cost model, when tuned), the group and what replaces it (a new Tune).
TEST_F(EngineDatabaseTest, APlanTheGraphsLoweringNoLongerFitsIsAnErrorNamingTheGroupAndTheFix) {
  nlohmann::json j = PlanToJson(plan_, {CanonicalHash(graph_), profile_.target.Id()});
  size_t single = 0;
  while (plan_.groups[single].kind != GroupKind::kSingle) ++single;
  j["groups"][single]["kind"] = "opaque";
  auto stale = DecodePlanJson(graph_, j, profile_.target.Id());
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  v1::Plan p;
  PlanToProto(*stale, &p);
  p.set_graph_hash(CanonicalHash(graph_));
  p.set_target_id(profile_.target.Id());
  p.set_cost_model_version(kCostModelVersion);
  p.set_created_unix_ms(2000);
  ASSERT_TRUE(store_->PutPlan(p, ToProto(graph_), {}).ok());
  EngineOptions options;
  options.plan_database_path = DbPath();
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_FALSE(engine.ok());
  const std::string& message = engine.status().message();
  for (const std::string& part : std::vector<std::string>{
           "plan database '" + DbPath() + "': the plan for graph " +
               CanonicalHash(graph_).substr(0, 16) + " on target " + profile_.target.Id() +
               " (cost model " + kCostModelVersion + ", tuned 1970-01-01 00:00:02 UTC)",
           "group " + std::to_string(single) + ": ", "is declared opaque but its nodes form single",
           "tune the graph again to replace it"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << "\n" << message;
  }
}

TEST_F(EngineDatabaseTest, AnUnreadableDatabaseIsAnErrorNamingIt) {
  std::string junk = (dir_ / "junk.db").string();
  std::ofstream(junk) << "this is not a database, just forty-odd bytes of text";
  EngineOptions options;
  options.plan_database_path = junk;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().message().rfind("plan database '" + junk + "': ", 0), 0u)
      << engine.status().message();
  options.plan_database_path = (dir_ / "missing.db").string();
  auto missing = Engine::Load(FilledModel(), options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.db"), std::string::npos)
      << missing.status().message();
}

// x [4, 4] + Trilu(Constant of -1, k = 1), then Relu: a causal mask as GPT exports build it. `fusor
// tune` folds the Trilu and its Constant at import, so the engine must too, or the graph it hashes
// is another one and the plan stored for the model never applies.
TEST_F(EngineDatabaseTest, AModelWithAFoldedCausalMaskFindsItsStoredPlan) {
  testing::OnnxBuilder b(14);
  b.Input("x", {4, 4}).Int64Constant("k", {1}, {});
  auto* value = b.Node("Constant", {}, {"full"}).add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(4);
  value->mutable_t()->add_dims(4);
  for (int i = 0; i < 16; ++i) value->mutable_t()->add_float_data(-1.0f);
  b.Node("Trilu", {"full", "k"}, {"mask"});
  b.Node("Add", {"x", "mask"}, {"sum"});
  b.Node("Relu", {"sum"}, {"y"});
  b.Output("y");
  const std::string path = (dir_ / "causal.onnx").string();
  std::ofstream(path, std::ios::binary) << b.Serialize();
  auto g = ImportOnnxFile(path, WithConstantFolding({}));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 2u) << "the mask folds at import";
  FusionPlan unfused = UnfusedPlan(*g);
  v1::Plan p;
  PlanToProto(unfused, &p);
  p.set_graph_hash(CanonicalHash(*g));
  p.set_target_id(profile_.target.Id());
  p.set_cost_model_version(kCostModelVersion);
  p.set_created_unix_ms(2000);
  ASSERT_TRUE(store_->PutPlan(p, ToProto(*g), {}).ok());
  EngineOptions options;
  options.plan_database_path = DbPath();
  auto engine = Engine::Load(path, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source(), "tuning database " + DbPath() + ", target " +
                                          profile_.target.Id() +
                                          ", tuned 1970-01-01 00:00:02 UTC (2 groups)");
  EngineTensor x{"x", "float32", {4, 4}, std::vector<float>(16, 0.5f), {}};
  auto out = (*engine)->Run({x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // Row 0 keeps x where the mask is 0 (column 0) and is Relu(0.5 - 1) = 0 above the diagonal.
  EXPECT_EQ((*out)[0].floats[0], 0.5f);
  EXPECT_EQ((*out)[0].floats[1], 0.0f);
}

// An output that is also a part of a Concat written in place lives at its slice of the Concat's
// buffer: a binding cannot put it in the caller's memory, so it copies it out, and both outputs
// hold the copying run's values.
TEST_F(EngineTest, ABindingCopiesOutThePartsOfAConcatWrittenInPlace) {
  testing::OnnxBuilder b(13);
  b.Input("x", {1, 16, 4, 4});
  b.Node("GlobalAveragePool", {"x"}, {"a"});
  b.Node("GlobalMaxPool", {"x"}, {"s"});
  auto* axis = b.Node("Concat", {"a", "s"}, {"y"}).add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  b.Output("y").Output("a");
  auto engine = Engine::LoadFromBuffer(b.Serialize());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::vector<float> x(256), y(32, -7.0f), a(16, -7.0f), y_copied(32), a_copied(16);
  for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(e % 11) / 11.0f - 0.5f;
  const std::vector<int64_t> xd = {1, 16, 4, 4}, yd = {1, 32, 1, 1}, ad = {1, 16, 1, 1};
  std::vector<TensorView> in = {{"x", DType::kFloat32, xd, x.data(), x.size() * 4}};
  std::vector<TensorView> bound = {{"y", DType::kFloat32, yd, y.data(), y.size() * 4},
                                   {"a", DType::kFloat32, ad, a.data(), a.size() * 4}};
  std::vector<TensorView> copied = {{"y", DType::kFloat32, yd, y_copied.data(), y.size() * 4},
                                    {"a", DType::kFloat32, ad, a_copied.data(), a.size() * 4}};
  ASSERT_TRUE((*engine)->Run(in, copied).ok());
  auto binding = (*engine)->Bind(in, bound);
  ASSERT_TRUE(binding.ok()) << binding.status().ToString();
  ASSERT_TRUE((*binding)->Run().ok());
  EXPECT_EQ(y, y_copied);
  EXPECT_EQ(a, a_copied);
  EXPECT_NE(y[0], -7.0f);
  EXPECT_GT((*binding)->copied_bytes(), 0);
}

TEST_F(EngineTest, RunsFromSeveralThreadsGiveTheSameOutputs) {
  auto engine = Engine::Load(FilledModel());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EngineTensor x = Ramp((*engine)->inputs()[0]);
  auto first = (*engine)->Run({x});
  ASSERT_TRUE(first.ok());
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto out = (*engine)->Run({x});
      if (out.ok()) got[i] = (*out)[0].floats;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, (*first)[0].floats);
}

TEST_F(EngineTest, BadInputsAreErrorsNamingTheInput) {
  auto engine = Engine::Load(FilledModel());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto none = (*engine)->Run({});
  EXPECT_EQ(none.status().message(), "input 'input' is not given");
  EngineTensor x = Ramp((*engine)->inputs()[0]);
  x.dims = {1, 3, 112, 448};
  auto wrong = (*engine)->Run({x});
  EXPECT_NE(wrong.status().message().find(
                "input 'input' needs float32[1x3x224x224] (or another floating-point type), got "
                "float32[1x3x112x448]"),
            std::string::npos)
      << wrong.status().message();
  auto missing = Engine::Load(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx");
  EXPECT_NE(missing.status().message().find("resnet18.weights' does not exist"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace fusor
