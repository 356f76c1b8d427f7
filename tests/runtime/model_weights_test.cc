// Running a model with its own weights: the weights import folded are computed from the real
// data, every plan gives the hand-computed result, and inputs given as values replace the seeded
// ones only when they fit.
#include "runtime/model_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"
#include "runtime/executor.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;

// y = Relu(x @ Transpose(w) + b) with w 4x3 = 1..12 and b = (0.5, -100, 2, 0): the Transpose of
// the weight is folded at import, so its value must come from w's data.
std::string WriteModel(const fs::path& dir) {
  testing::OnnxBuilder b(13);
  b.Input("x", {2, 3});
  auto* w = b.model().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(3);
  for (int v = 1; v <= 12; ++v) w->add_float_data(static_cast<float>(v));
  auto* bias = b.model().mutable_graph()->add_initializer();
  bias->set_name("b");
  bias->set_data_type(onnx::TensorProto::FLOAT);
  bias->add_dims(4);
  for (float v : {0.5f, -100.f, 2.f, 0.f}) bias->add_float_data(v);
  b.Node("Transpose", {"w"}, {"wt"});
  b.Node("MatMul", {"x", "wt"}, {"xw"});
  b.Node("Add", {"xw", "b"}, {"z"});
  b.Node("Relu", {"z"}, {"y"});
  b.Output("y");
  fs::create_directories(dir);
  std::string path = (dir / "m.onnx").string();
  std::ofstream(path, std::ios::binary) << b.Serialize();
  return path;
}

class ModelWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fusor-model-weights-" + std::to_string(::getpid()));
    path_ = WriteModel(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string path_;
};

TEST_F(ModelWeightsTest, EveryPlanComputesTheResultOfTheRealWeights) {
  auto m = ImportOnnxFileWithWeights(path_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Graph g = m->graph;
  auto leaves = ModelLeafValues(g, std::move(m->weights), 1);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  TensorData x{"x", DType::kFloat32, {2, 3}, {1, 0, -1, 0.5f, 2, 1}, {}};
  ASSERT_TRUE(SetInputValue(g, "x", x, &*leaves).ok());
  // Row r of x times row c of w, plus b[c], then Relu.
  std::vector<float> want;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 4; ++c) {
      float acc = std::vector<float>{0.5f, -100, 2, 0}[c];
      for (int k = 0; k < 3; ++k) acc += x.f[r * 3 + k] * static_cast<float>(c * 3 + k + 1);
      want.push_back(std::max(acc, 0.0f));
    }
  }
  for (const FusionPlan& plan : {UnfusedPlan(g), MaxFusionPlan(g)}) {
    auto exec = Executor::Create(g, plan, *leaves);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    (*exec)->Run();
    auto y = (*exec)->Read(g.outputs()[0]);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    ASSERT_EQ(y->f.size(), want.size());
    for (size_t e = 0; e < want.size(); ++e) EXPECT_NEAR(y->f[e], want[e], 1e-4) << e;
  }
}

TEST_F(ModelWeightsTest, InputsThatDoNotFitAreRefusedNamingTheInput) {
  auto m = ImportOnnxFileWithWeights(path_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto leaves = ModelLeafValues(m->graph, std::move(m->weights), 1);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  TensorData wrong_shape{"x", DType::kFloat32, {3, 2}, std::vector<float>(6, 1), {}};
  Status s = SetInputValue(m->graph, "x", wrong_shape, &*leaves);
  EXPECT_NE(s.message().find("input 'x' is given as float32 3x2; the model needs float32 2x3"),
            std::string::npos)
      << s.message();
  TensorData ints{"x", DType::kInt64, {2, 3}, {}, std::vector<int64_t>(6, 1)};
  EXPECT_FALSE(SetInputValue(m->graph, "x", ints, &*leaves).ok());
  s = SetInputValue(m->graph, "w", wrong_shape, &*leaves);
  EXPECT_NE(s.message().find("'w' is not an input of the model (its inputs: 'x')"),
            std::string::npos)
      << s.message();
}

TEST_F(ModelWeightsTest, WithoutWeightsInputsAreTheSeededOnes) {
  auto m = ImportOnnxFileWithWeights(path_);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Graph g = m->graph;
  auto real = ModelLeafValues(g, std::move(m->weights), 9);
  auto seeded = RandomLeafValues(g, 9);
  ASSERT_TRUE(real.ok() && seeded.ok());
  TensorId x = g.inputs()[0];
  EXPECT_EQ(real->at(x).f, seeded->at(x).f);
  TensorId wt = *g.FindTensor("wt");
  EXPECT_EQ(real->at(wt).f[0], 1.0f);  // w[0][0]: the transpose of the real data.
  EXPECT_EQ(real->at(wt).f[1], 4.0f);  // w[1][0].
  EXPECT_NE(seeded->at(wt).f[1], 4.0f);
}

}  // namespace
// uint64 is computed in int64: values up to 2^63 - 1 are kept exactly, a larger one is refused
// naming the tensor and the value instead of turning negative.
TEST(ToHostTensor, Uint64AboveTheInt64RangeIsRefusedNamingTheValue) {
  TensorData d;
  d.name = "x";
  d.dtype = DType::kUInt64;
  d.dims = {2};
  d.i = {7, std::numeric_limits<int64_t>::max()};
  auto kept = ToHostTensor(d);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->i, d.i);
  d.i[1] = static_cast<int64_t>(uint64_t{1} << 63);
  auto refused = ToHostTensor(d);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kUnimplemented);
  EXPECT_NE(
      refused.status().message().find("tensor 'x' holds the uint64 value 9223372036854775808"),
      std::string::npos)
      << refused.status().message();
}

}  // namespace fusor
