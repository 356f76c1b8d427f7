#include "graph/canonical.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <unordered_map>

#include "graph/onnx_import.h"
#include "tests/graph/ir_builder.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

using testing::OnnxBuilder;

std::string ReadModel(const std::string& name) {
  std::ifstream in(std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Renames every tensor and node, and emits the nodes in another (random) topological order.
std::string Scramble(const std::string& bytes, uint64_t seed) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  auto* g = m.mutable_graph();
  std::unordered_map<std::string, std::string> rename;
  auto name = [&](const std::string& old) -> std::string {
    if (old.empty()) return old;
    auto [it, fresh] = rename.try_emplace(old, "");
    if (fresh) it->second = "renamed_" + std::to_string(rename.size() * 7919 % 100003);
    return it->second;
  };
  for (auto& v : *g->mutable_input()) v.set_name(name(v.name()));
  for (auto& v : *g->mutable_output()) v.set_name(name(v.name()));
  for (auto& v : *g->mutable_value_info()) v.set_name(name(v.name()));
  for (auto& t : *g->mutable_initializer()) t.set_name(name(t.name()));
  for (auto& n : *g->mutable_node()) {
    for (auto& i : *n.mutable_input()) i = name(i);
    for (auto& o : *n.mutable_output()) o = name(o);
    n.set_name("node_" + std::to_string(std::hash<std::string>()(n.name()) % 9973));
  }
  // Random topological order: Kahn's algorithm picking a random ready node each step.
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i) {
    for (const auto& o : g->node(i).output()) producer[o] = i;
  }
  std::vector<int> pending(g->node_size(), 0);
  std::vector<std::vector<int>> consumers(g->node_size());
  for (int i = 0; i < g->node_size(); ++i) {
    for (const auto& in : g->node(i).input()) {
      if (auto it = producer.find(in); it != producer.end()) {
        ++pending[i];
        consumers[it->second].push_back(i);
      }
    }
  }
  std::mt19937_64 rng(seed);
  std::vector<int> ready, order;
  for (int i = 0; i < g->node_size(); ++i) {
    if (pending[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    size_t pick = rng() % ready.size();
    int i = ready[pick];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
    order.push_back(i);
    for (int c : consumers[i]) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i : order) *nodes.Add() = g->node(i);
  g->mutable_node()->Swap(&nodes);
  return m.SerializeAsString();
}

std::string HashOf(const std::string& bytes, const ImportOptions& options = {}) {
  auto g = ImportOnnxBytes(bytes, options);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? CanonicalHash(*g) : "";
}

class SharedModelHash : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedModelHash, InvariantToNamesAndNodeOrder) {
  std::string bytes = ReadModel(GetParam());
  std::string base = HashOf(bytes);
  EXPECT_EQ(base.size(), 64u);
  for (uint64_t seed : {1, 2, 3}) EXPECT_EQ(HashOf(Scramble(bytes, seed)), base) << seed;
}

INSTANTIATE_TEST_SUITE_P(AllModels, SharedModelHash,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "efficientnet_b0", "bert_base_encoder"));

// Stored plans are keyed by this hash: a change of the hashing (of its SHA-256, or of what it
// feeds it) would orphan every plan in every tuning database. The value is pinned.
TEST(CanonicalHash, IsPinnedForAFixedGraph) {
  testing::IrBuilder b;
  TensorId x = b.Input("x", {1, 8, 16, 16});
  TensorId c = b.Act("c", {1, 8, 16, 16}), y = b.Act("y", {1, 8, 16, 16});
  b.Op("Conv", {x, b.Weight("w", {8, 8, 3, 3})}, {c}, {testing::Ints("pads", {1, 1, 1, 1})});
  b.Op("Relu", {c}, {y});
  b.Output(y);
  EXPECT_EQ(CanonicalHash(b.Build()),
            "43ea5e2ddf0d54cf49c82667fc626ef27a2d3bb27b6eb6cb4c016547c0c1a92c");
}

TEST(CanonicalHash, ChangesWithAnInputDim) {
  std::string bytes = ReadModel("resnet18");
  ImportOptions batch2;
  ASSERT_TRUE(ParseShapeBinding("input=2x3x224x224", &batch2).ok());
  EXPECT_NE(HashOf(bytes), HashOf(bytes, batch2));
}

std::string SmallModel(float alpha, bool swap_sub, float clip_max, bool share_weight) {
  OnnxBuilder b;
  b.Input("x", {4, 8}).Input("z", {4, 8}).Output("y");
  b.Weight("w1", {4, 8}).Weight("w2", {4, 8});
  b.FloatScalar("lo", 0.0f).FloatScalar("hi", clip_max);
  auto& leaky = b.Node("LeakyRelu", {"x"}, {"a"});
  auto* attr = leaky.add_attribute();
  attr->set_name("alpha");
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(alpha);
  b.Node("Sub", swap_sub ? std::vector<std::string>{"z", "a"} : std::vector<std::string>{"a", "z"},
         {"s"});
  b.Node("Clip", {"s", "lo", "hi"}, {"c"});
  b.Node("Add", {"c", "w1"}, {"p"});
  b.Node("Add", {"p", share_weight ? "w1" : "w2"}, {"y"});
  return b.Serialize();
}

TEST(CanonicalHash, SensitiveToAttributesEdgesConstantsAndSharing) {
  std::string base = HashOf(SmallModel(0.1f, false, 6.0f, false));
  EXPECT_EQ(HashOf(SmallModel(0.1f, false, 6.0f, false)), base);
  EXPECT_NE(HashOf(SmallModel(0.2f, false, 6.0f, false)), base);  // Attribute.
  EXPECT_NE(HashOf(SmallModel(0.1f, true, 6.0f, false)), base);   // Edge (operand order).
  EXPECT_NE(HashOf(SmallModel(0.1f, false, 5.0f, false)), base);  // Constant value.
  EXPECT_NE(HashOf(SmallModel(0.1f, false, 6.0f, true)), base);   // One weight read twice.
}

TEST(CanonicalHash, WeightValuesNeverEnter) {
  auto with_weight_data = [](float v) {
    OnnxBuilder b;
    b.Input("x", {2, 3}).Output("y");
    auto* t = b.model().mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->add_dims(3);
    for (int i = 0; i < 6; ++i) t->add_float_data(v * static_cast<float>(i));
    b.Node("Mul", {"x", "w"}, {"y"});
    return b.Serialize();
  };
  EXPECT_EQ(HashOf(with_weight_data(1.0f)), HashOf(with_weight_data(-3.5f)));
}

}  // namespace
}  // namespace fusor
