#include "graph/graph_proto.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "graph/canonical.h"
#include "graph/onnx_import.h"

namespace fusor {
namespace {

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, ImportToProtoToIrIsExact) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + GetParam() + ".onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  v1::Graph p = ToProto(*g);
  auto back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToProto(*back), p));
  EXPECT_EQ(CanonicalHash(*back), CanonicalHash(*g));
  ASSERT_EQ(back->num_nodes(), g->num_nodes());
  for (size_t i = 0; i < g->num_nodes(); ++i) {
    EXPECT_EQ(back->node(i).name, g->node(i).name);
    EXPECT_EQ(back->node(i).attributes, g->node(i).attributes);
    EXPECT_EQ(back->node(i).inputs, g->node(i).inputs);
  }
  for (size_t i = 0; i < g->num_tensors(); ++i) {
    EXPECT_EQ(back->tensor(i).dims, g->tensor(i).dims);
    EXPECT_EQ(back->tensor(i).int_data, g->tensor(i).int_data);
    EXPECT_EQ(back->tensor(i).float_data, g->tensor(i).float_data);
    EXPECT_EQ(back->tensor(i).kind, g->tensor(i).kind);
  }
  // The wire form carries no weight data: a model's proto stays small.
  EXPECT_LT(p.ByteSizeLong(), 400u * 1024);
}

INSTANTIATE_TEST_SUITE_P(AllModels, RoundTrip,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "efficientnet_b0", "bert_base_encoder"));

v1::Graph TinyProto() {
  v1::Graph p;
  p.set_model_name("tiny");
  auto add_tensor = [&](const char* name, v1::TensorKind kind) {
    auto* t = p.add_tensors();
    t->set_name(name);
    t->set_dtype(v1::FLOAT32);
    t->add_dims(4);
    t->set_kind(kind);
  };
  add_tensor("x", v1::GRAPH_INPUT);
  add_tensor("y", v1::ACTIVATION);
  auto* n = p.add_nodes();
  n->set_name("relu");
  n->set_op_type("Relu");
  n->add_inputs("x");
  n->add_outputs("y");
  p.add_inputs("x");
  p.add_outputs("y");
  return p;
}

TEST(FromProto, AcceptsAWellFormedGraph) { EXPECT_TRUE(FromProto(TinyProto()).ok()); }

// Found by tests/fuzz (onnx_import): an ONNX attribute holding an empty list imported, but its
// wire form carried no value, so FromProto (what fusord runs) refused the graph.
TEST(ToProto, EmptyListAttributesSurviveTheWireForm) {
  v1::Graph p = TinyProto();
  v1::Node* relu = p.mutable_nodes(0);
  relu->add_attributes()->set_name("ints");
  relu->mutable_attributes(0)->mutable_ints();
  relu->add_attributes()->set_name("floats");
  relu->mutable_attributes(1)->mutable_floats();
  relu->add_attributes()->set_name("strings");
  relu->mutable_attributes(2)->mutable_strings();
  auto g = FromProto(p);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  v1::Graph wire = ToProto(*g);
  ASSERT_EQ(wire.nodes(0).attributes_size(), 3);
  for (const v1::Attribute& a : wire.nodes(0).attributes()) {
    EXPECT_NE(a.value_case(), v1::Attribute::VALUE_NOT_SET) << a.name();
  }
  v1::Graph parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  auto back = FromProto(parsed);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node(0).attributes, g->node(0).attributes);
}

TEST(FromProto, RejectsUntrustedInputWithNamedErrors) {
  struct Case {
    const char* what;
    std::function<void(v1::Graph*)> mutate;
    const char* message;
  };
  std::vector<Case> cases = {
      {"unknown tensor", [](v1::Graph* p) { p->mutable_nodes(0)->set_inputs(0, "ghost"); },
       "names tensor 'ghost', which is not declared"},
      {"duplicate tensor", [](v1::Graph* p) { *p->add_tensors() = p->tensors(0); },
       "tensor name 'x' is declared twice"},
      {"bad dtype",
       [](v1::Graph* p) { p->mutable_tensors(0)->set_dtype(static_cast<v1::DataType>(99)); },
       "tensor 'x' has invalid dtype 99"},
      {"bad kind",
       [](v1::Graph* p) { p->mutable_tensors(1)->set_kind(static_cast<v1::TensorKind>(7)); },
       "tensor 'y' has invalid kind 7"},
      {"negative dim", [](v1::Graph* p) { p->mutable_tensors(0)->set_dims(0, -4); },
       "tensor 'x' has dim 0 = -4"},
      {"self loop", [](v1::Graph* p) { p->mutable_nodes(0)->set_inputs(0, "y"); }, "on a cycle"},
      {"no outputs", [](v1::Graph* p) { p->clear_outputs(); }, "graph has no outputs"},
      {"attribute without value",
       [](v1::Graph* p) { p->mutable_nodes(0)->add_attributes()->set_name("a"); },
       "attribute 'a' has no value"},
  };
  for (const Case& c : cases) {
    v1::Graph p = TinyProto();
    c.mutate(&p);
    auto g = FromProto(p);
    ASSERT_FALSE(g.ok()) << c.what;
    EXPECT_NE(g.status().message().find(c.message), std::string::npos)
        << c.what << ": " << g.status().message();
  }
}

TEST(FromProto, NodeCapIsCheckedBeforeBuilding) {
  v1::Graph p = TinyProto();
  ValidationLimits limits;
  limits.max_nodes = 0;
  auto g = FromProto(p, limits);
  EXPECT_EQ(g.status().code(), Status::Code::kResourceExhausted);
}

// 20k attributes on one node took 0.65 s to convert (a linear search and a vector insert each):
// now the count is capped, and a node at the cap converts in one sort.
TEST(FromProto, AttributesPerNodeAreCappedAndDuplicatesNamed) {
  auto with_attributes = [](int n, bool duplicate) {
    v1::Graph p = TinyProto();
    for (int i = n - 1; i >= 0; --i) {
      auto* a = p.mutable_nodes(0)->add_attributes();
      a->set_name("a" + std::to_string(duplicate ? i / 2 : i));
      a->set_i(i);
    }
    return p;
  };
  auto many = FromProto(with_attributes(20'000, false));
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("node 'relu' (Relu) has 20000 attributes, the limit is "
                                         "1024"),
            std::string::npos)
      << many.status().message();

  auto at_cap = FromProto(with_attributes(1024, false));
  ASSERT_TRUE(at_cap.ok()) << at_cap.status().ToString();
  const Node& relu = at_cap->node(0);
  ASSERT_EQ(relu.attributes.size(), 1024u);
  EXPECT_TRUE(
      std::is_sorted(relu.attributes.begin(), relu.attributes.end(),
                     [](const Attribute& a, const Attribute& b) { return a.name < b.name; }));
  EXPECT_EQ(relu.GetInt("a517", -1), 517);
  EXPECT_EQ(relu.GetInt("b", -1), -1);

  auto twice = FromProto(with_attributes(10, true));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("has attribute 'a0' twice"), std::string::npos)
      << twice.status().message();
}

}  // namespace
}  // namespace fusor
