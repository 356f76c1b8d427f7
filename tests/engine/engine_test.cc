// The embeddable engine on a model with its weights (bundled SqueezeNet filled by
// tools/fill_weights.py): a plan JSON that applies is compiled, one that does not falls back to the
// rules plan naming why, outputs equal the reference interpreter's on the same weights, runs from
// several threads give the same outputs, and bad inputs are errors naming the input.
#include "fusor/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "graph/onnx_import.h"
#include "graph/plan_json.h"
#include "runtime/model_weights.h"
#include "runtime/reference.h"

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
  std::ofstream(plan_path_) << PlanToJson(plan).dump();
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

TEST_F(EngineTest, APlanForAnotherGraphFallsBackToTheRulesPlanWithTheReason) {
  std::ofstream(plan_path_) << R"({"version": 1, "groups": [{"kind": "single", "nodes": [0]}]})";
  EngineOptions options;
  options.plan_json_path = plan_path_;
  auto engine = Engine::Load(FilledModel(), options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->plan_source().rfind("rules plan (", 0), 0u) << (*engine)->plan_source();
  EXPECT_GT((*engine)->plan_source().size(), std::string("rules plan (10 groups): ").size());
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
  EXPECT_NE(wrong.status().message().find("input 'input' is given as float32 1x3x112x448"),
            std::string::npos)
      << wrong.status().message();
  auto missing = Engine::Load(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx");
  EXPECT_NE(missing.status().message().find("resnet18.weights' does not exist"), std::string::npos)
      << missing.status().message();
}

}  // namespace
}  // namespace fusor
