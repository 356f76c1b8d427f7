#include "graph/onnx_import.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "graph/canonical.h"
#include "graph/constant_folding.h"
#include "graph/node_attrs.h"
#include "graph/op_registry.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

using testing::OnnxBuilder;

std::string ModelPath(const std::string& name) {
  return std::string(FUSOR_MODELS_DIR) + "/" + name + ".onnx";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int CountOp(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

class SharedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedModel, ImportsWithEveryShapeStatic) {
  auto g = ImportOnnxFile(ModelPath(GetParam()));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->model_name, GetParam());
  EXPECT_TRUE(Validate(*g).ok());
  for (const Tensor& t : g->tensors()) {
    EXPECT_NE(t.dtype, DType::kUnspecified) << t.name;
    for (int64_t d : t.dims) EXPECT_GE(d, 1) << t.name;
  }
  // Shape arithmetic and pass-through ops are gone; nothing is opaque.
  for (const char* op :
       {"Shape", "Constant", "Identity", "Dropout", "Gather_shape", "ConstantOfShape"}) {
    EXPECT_EQ(CountOp(*g, op), 0) << op;
  }
  for (const Node& n : g->nodes()) {
    EXPECT_NE(ClassifyNode(*g, n), OpClass::kOpaque) << n.name << " " << n.op_type;
    EXPECT_GT(n.op_version, 0) << n.name;
  }
  // Node ids follow the canonical order.
  auto order = CanonicalOrder(*g);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], static_cast<NodeId>(i));
}

INSTANTIATE_TEST_SUITE_P(AllModels, SharedModel,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "efficientnet_b0", "bert_base_encoder"));

TEST(OnnxImport, KnownModelStructure) {
  auto resnet = ImportOnnxFile(ModelPath("resnet18"));
  ASSERT_TRUE(resnet.ok());
  EXPECT_EQ(CountOp(*resnet, "Conv"), 20);
  EXPECT_EQ(CountOp(*resnet, "Gemm"), 1);
  EXPECT_EQ(resnet->tensor(resnet->outputs()[0]).dims, (Shape{1, 1000}));
  auto bert = ImportOnnxFile(ModelPath("bert_base_encoder"));
  ASSERT_TRUE(bert.ok());
  EXPECT_EQ(CountOp(*bert, "Softmax"), 12);
  EXPECT_EQ(CountOp(*bert, "Erf"), 12);
  EXPECT_EQ(bert->tensor(bert->outputs()[0]).dims, (Shape{1, 128, 768}));
}

// Shape(X) -> Gather(0) -> Unsqueeze -> Concat([n, -1]) -> Reshape(X): an exporter's flatten.
TEST(OnnxImport, FoldsShapeSubgraphsSoReshapeIsStatic) {
  OnnxBuilder b;
  b.Input("x", {2, 3, 4, 5}).Output("y");
  b.Int64Constant("zero", {0}, {}).Int64Constant("axes", {0}).Int64Constant("minus_one", {-1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Gather", {"s", "zero"}, {"n"});
  b.Node("Unsqueeze", {"n", "axes"}, {"n1"});
  auto& concat = b.Node("Concat", {"n1", "minus_one"}, {"shape"});
  OnnxBuilder::IntAttr(concat, "axis", 0);
  b.Node("Reshape", {"x", "shape"}, {"r"});
  b.Node("Identity", {"r"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->node(0).op_type, "Reshape");
  const Tensor& out = g->tensor(g->outputs()[0]);
  EXPECT_EQ(out.dims, (Shape{2, 60}));
  EXPECT_EQ(out.name, "y");  // Identity removed, the user's output name kept.
  const Tensor& shape = g->tensor(g->node(0).inputs[1]);
  EXPECT_EQ(shape.kind, TensorKind::kConstant);
  EXPECT_EQ(shape.int_data, (std::vector<int64_t>{2, -1}));
}

TEST(OnnxImport, RemovesInferenceDropout) {
  OnnxBuilder b;
  b.Input("x", {4, 8}).Output("y");
  b.Node("Dropout", {"x"}, {"d"});
  b.Node("Relu", {"d"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->node(0).op_type, "Relu");
}

// CastLike(x, like) imports as Cast(x) to like's type (float16 here), the Cast of the model's
// opset; a float16 output keeps its declared dtype, so the model hashes unlike its float32 twin.
TEST(OnnxImport, CastLikeImportsAsCastToTheTypeOfItsSecondInput) {
  auto model = [](const std::string& op, int to) {
    OnnxBuilder b(15);
    b.Input("x", {2, 3}).Output("y", to);
    if (op == "CastLike") {
      b.Input("like", {1}, "", to);
      b.Node("CastLike", {"x", "like"}, {"y"});
    } else {
      OnnxBuilder::IntAttr(b.Node("Cast", {"x"}, {"y"}), "to", to);
    }
    auto g = ImportOnnxBytes(b.Serialize());
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return std::move(g).value();
  };
  Graph like = model("CastLike", onnx::TensorProto::FLOAT16);
  ASSERT_EQ(like.num_nodes(), 1u);
  EXPECT_EQ(like.node(0).op_type, "Cast");
  EXPECT_EQ(like.node(0).inputs.size(), 1u);
  EXPECT_EQ(like.node(0).GetInt("to", 0), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(like.tensor(like.outputs()[0]).dtype, DType::kFloat16);
  const Graph cast = model("Cast", onnx::TensorProto::FLOAT16);
  EXPECT_EQ(like.node(0).op_version, cast.node(0).op_version);
  EXPECT_NE(CanonicalHash(cast), CanonicalHash(model("Cast", onnx::TensorProto::FLOAT)));
}

// Max, Min, Sum and Mean take one or more inputs; the IR's elementwise ops take two. Import
// chains binary nodes (conformance: a third input was ignored, a single one crashed the reference).
TEST(OnnxImport, VariadicOpsBecomeChainsOfBinaryOps) {
  OnnxBuilder b;
  b.Input("a", {2, 3}).Input("b", {3}).Input("c", {1}).Output("y").Output("z");
  b.Node("Max", {"a", "b", "c"}, {"m"});
  b.Node("Min", {"m"}, {"n"});
  b.Node("Mean", {"n", "b", "c"}, {"y"});
  b.Node("Sum", {"a", "b"}, {"z"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::multiset<std::string> ops;
  for (const Node& n : g->nodes()) {
    ops.insert(n.op_type);
    EXPECT_EQ(n.inputs.size(), 2u) << NodeLabel(n);
    EXPECT_EQ(g->tensor(n.outputs[0]).dims, (Shape{2, 3})) << NodeLabel(n);
  }
  EXPECT_EQ(ops, (std::multiset<std::string>{"Max", "Max", "Add", "Add", "Div", "Add"}));
}

// An input that decides a shape is refused naming it and --const-input; given a value at import,
// it becomes a constant and the shape folds.
TEST(OnnxImport, ShapeDecidingInputFixedAtImportFolds) {
  OnnxBuilder b;
  b.Input("x", {2, 6}).Input("shape", {2}, "", onnx::TensorProto::INT64).Output("y");
  b.Node("Reshape", {"x", "shape"}, {"r"});
  b.Node("Relu", {"r"}, {"y"});
  auto refused = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--const-input shape=FILE"), std::string::npos)
      << refused.status().message();
  ImportOptions options;
  TensorData shape;
  shape.dtype = DType::kInt64;
  shape.dims = {2};
  shape.i = {3, 4};
  options.constant_inputs["shape"] = shape;
  auto g = ImportOnnxBytes(b.Serialize(), options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{3, 4}));
  options.constant_inputs["nope"] = shape;
  EXPECT_FALSE(ImportOnnxBytes(b.Serialize(), options).ok());
}

// A shape operand computed from a graph input (an expanded HannWindow's Range over Cast(size))
// is refused naming that input and --const-input; given a value, the chain folds.
TEST(OnnxImport, ShapeOperandComputedFromAGraphInputNamesThatInput) {
  OnnxBuilder b;
  b.Input("n", {}, "", onnx::TensorProto::INT64).Output("y", onnx::TensorProto::INT64);
  b.Int64Constant("zero", {0}, {}).Int64Constant("one", {1}, {});
  b.Node("Add", {"n", "one"}, {"limit"});
  b.Node("Range", {"zero", "limit", "one"}, {"y"});
  auto refused = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("from graph input 'n'"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--const-input n=FILE"), std::string::npos);
  ImportOptions options;
  TensorData n;
  n.dtype = DType::kInt64;
  n.i = {4};
  options.constant_inputs["n"] = n;
  auto g = ImportOnnxBytes(b.Serialize(), options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{5}));
}

// ONNX's shape inference gives OneHot no dims; with a constant depth the import does: the
// indices' dims with depth inserted at axis, in the values' element type.
TEST(OnnxImport, OneHotWithConstantDepthGetsItsShape) {
  OnnxBuilder b;
  b.Input("indices", {2, 3}, "", onnx::TensorProto::INT64).Output("y");
  b.Int64Constant("depth", {4}, {}).FloatConstant("values", {0, 1});
  OnnxBuilder::IntAttr(b.Node("OneHot", {"indices", "depth", "values"}, {"y"}), "axis", 1);
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{2, 4, 3}));
  EXPECT_EQ(g->tensor(g->outputs()[0]).dtype, DType::kFloat32);
}

// Compress's output length is the count of true entries of its condition: refused naming the
// condition while it is a graph input, shaped once it is given at import.
TEST(OnnxImport, CompressWithConditionGivenAtImportKeepsTheTrueSlices) {
  OnnxBuilder b;
  b.Input("x", {3, 2}).Input("condition", {3}, "", onnx::TensorProto::BOOL).Output("y");
  OnnxBuilder::IntAttr(b.Node("Compress", {"x", "condition"}, {"y"}), "axis", 0);
  auto refused = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--const-input condition=FILE"), std::string::npos)
      << refused.status().message();
  ImportOptions options;
  TensorData condition;
  condition.dtype = DType::kBool;
  condition.dims = {3};
  condition.i = {1, 0, 1};
  options.constant_inputs["condition"] = condition;
  auto g = ImportOnnxBytes(b.Serialize(), options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{2, 2}));
}

// ONNX's shape inference gives Einsum its rank only; the import gives its dims from the equation.
TEST(OnnxImport, EinsumGetsItsDimsFromTheEquation) {
  OnnxBuilder b(12);
  b.Input("a", {5, 2, 3}).Input("b", {5, 3, 4}).Output("y");
  OnnxBuilder::StringAttr(b.Node("Einsum", {"a", "b"}, {"y"}), "equation", "bij,bjk->bki");
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{5, 4, 2}));
}

// Unique's output sizes depend on its input's values: refused naming --const-input while the
// input is a graph input, sized from the value once it is given at import.
TEST(OnnxImport, UniqueOfAnInputGivenAtImportIsSized) {
  OnnxBuilder b(11);
  b.Input("x", {6}).Output("y").Output("counts", onnx::TensorProto::INT64);
  b.Node("Unique", {"x"}, {"y", "", "", "counts"});
  auto refused = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--const-input x=FILE"), std::string::npos)
      << refused.status().message();
  ImportOptions options;
  TensorData x;
  x.dtype = DType::kFloat32;
  x.dims = {6};
  x.f = {2, 1, 1, 3, 4, 3};
  options.constant_inputs["x"] = x;
  options.keep_constant_nodes = true;
  auto g = ImportOnnxBytes(b.Serialize(), options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (TensorId out : g->outputs()) EXPECT_EQ(g->tensor(out).dims, (Shape{4}));
}

TEST(OnnxImport, FoldsWeightOnlyNodesIntoWeights) {
  OnnxBuilder b;
  b.Input("x", {4, 8}).Output("y").Weight("w", {16, 8});
  auto& t = b.Node("Transpose", {"w"}, {"wt"});
  OnnxBuilder::IntsAttr(t, "perm", {1, 0});
  b.Node("MatMul", {"x", "wt"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  const Tensor& wt = g->tensor(g->node(0).inputs[1]);
  EXPECT_EQ(wt.kind, TensorKind::kWeight);
  EXPECT_EQ(wt.dims, (Shape{8, 16}));
}

TEST(OnnxImport, UnknownOpsAreOpaqueNotRejected) {
  OnnxBuilder b;
  b.Input("x", {4, 8}).Output("y");
  b.Node("Softplus", {"x"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(ClassifyNode(*g, g->node(0)), OpClass::kOpaque);
}

OnnxBuilder SymbolicBatchModel() {
  OnnxBuilder b;
  b.Input("x", {-1, 3, 8, 8}, "batch").Output("y");
  b.Node("Relu", {"x"}, {"y"});
  return b;
}

TEST(OnnxImport, UnboundSymbolicDimIsNamed) {
  auto g = ImportOnnxBytes(SymbolicBatchModel().Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "graph input 'x' dim 0 is symbolic ('batch'); bind it with --dim batch=N or --shape "
            "x=DxDx...");
}

TEST(OnnxImport, SymbolicDimsBindFromDimOrShape) {
  ImportOptions dim;
  ASSERT_TRUE(ParseDimBinding("batch=8", &dim).ok());
  auto g = ImportOnnxBytes(SymbolicBatchModel().Serialize(), dim);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{8, 3, 8, 8}));

  ImportOptions shape;
  ASSERT_TRUE(ParseShapeBinding("x=2x3x8x8", &shape).ok());
  g = ImportOnnxBytes(SymbolicBatchModel().Serialize(), shape);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{2, 3, 8, 8}));
}

TEST(OnnxImport, BadBindingsAreNamed) {
  ImportOptions o;
  EXPECT_FALSE(ParseShapeBinding("x=2xAx8", &o).ok());
  EXPECT_FALSE(ParseShapeBinding("2x3", &o).ok());
  EXPECT_FALSE(ParseDimBinding("batch=0", &o).ok());
  EXPECT_FALSE(ParseDimBinding("batch=-3", &o).ok());
  ImportOptions wrong;
  ASSERT_TRUE(ParseDimBinding("seq=8", &wrong).ok());
  ASSERT_TRUE(ParseDimBinding("batch=1", &wrong).ok());
  auto g = ImportOnnxBytes(SymbolicBatchModel().Serialize(), wrong);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'seq'"), std::string::npos) << g.status().message();
  ImportOptions missing_input;
  ASSERT_TRUE(ParseShapeBinding("ids=1x128", &missing_input).ok());
  g = ImportOnnxBytes(SymbolicBatchModel().Serialize(), missing_input);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(
      g.status().message().find("input 'ids', which the model does not have (its inputs: 'x')"),
      std::string::npos)
      << g.status().message();
}

// ---------------------------------------------------------------------------------------------
// Malformed inputs: each a clear error, never a crash.

TEST(OnnxImport, TruncatedProtobuf) {
  std::string bytes = ReadFile(ModelPath("resnet18"));
  auto g = ImportOnnxBytes(bytes.substr(0, bytes.size() / 2));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(g.status().message().find("not a valid ONNX model"), std::string::npos);
}

TEST(OnnxImport, EveryTruncationFailsCleanly) {
  std::string bytes = ReadFile(ModelPath("squeezenet1_1"));
  for (size_t len = 0; len < bytes.size(); len += 997) {
    auto g = ImportOnnxBytes(bytes.substr(0, len));
    EXPECT_FALSE(g.ok()) << len;
  }
}

TEST(OnnxImport, NonOnnxFiles) {
  for (std::string bytes : {std::string(""), std::string("hello, this is a text file\n"),
                            std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16)}) {
    auto g = ImportOnnxBytes(bytes);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), Status::Code::kInvalidArgument);
  }
}

TEST(OnnxImport, MissingFileAndDirectory) {
  auto g = ImportOnnxFile("/nonexistent/model.onnx");
  EXPECT_EQ(g.status().code(), Status::Code::kNotFound);
  EXPECT_NE(g.status().message().find("/nonexistent/model.onnx"), std::string::npos);
  g = ImportOnnxFile(FUSOR_MODELS_DIR);
  EXPECT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("is a directory"), std::string::npos);
}

TEST(OnnxImport, CyclicGraph) {
  OnnxBuilder b;
  b.Input("x", {4}).Output("y");
  b.Node("Add", {"x", "b"}, {"a"}, "first");
  b.Node("Relu", {"a"}, {"b"}, "second");
  b.Node("Relu", {"b"}, {"y"}, "third");
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(g.status().message().find("is on a cycle"), std::string::npos) << g.status().message();
}

TEST(OnnxImport, NodesOutOfOrderInTheFileAreSorted) {
  OnnxBuilder b;
  b.Input("x", {4}).Output("y");
  b.Node("Relu", {"a"}, {"y"});
  b.Node("Neg", {"x"}, {"n"});
  b.Node("Abs", {"n"}, {"a"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->num_nodes(), 3u);
}

TEST(OnnxImport, MissingInput) {
  OnnxBuilder b;
  b.Input("x", {4}).Output("y");
  b.Node("Add", {"x", "ghost"}, {"y"}, "adder");
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'adder' (Add)"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("'ghost'"), std::string::npos);
}

// Found by libFuzzer (onnx_import): a Dropout without outputs (or a zero Pad, a Slice without
// inputs) counted as a copy of its input, and removing it read past an empty list.
TEST(OnnxImport, APassThroughOpWithoutInputsOrOutputsFailsCleanly) {
  OnnxBuilder dropout;
  dropout.Input("x", {4}).Output("y");
  dropout.Node("Dropout", {"x"}, {}, "no_outputs");
  dropout.Node("Relu", {"x"}, {"y"}, "relu");
  auto no_outputs = ImportOnnxBytes(dropout.Serialize());  // Crashed; now a result or an error.
  EXPECT_TRUE(no_outputs.ok() || !no_outputs.status().message().empty());
  for (const char* op : {"Pad", "Slice", "Dropout"}) {
    OnnxBuilder b;
    b.Input("x", {4}).Output("y");
    auto& n = b.Node(op, {}, {"y"}, "copy");
    OnnxBuilder::IntsAttr(n, "pads", {0, 0});
    auto g = ImportOnnxBytes(b.Serialize());
    EXPECT_FALSE(g.ok()) << op;
  }
}

// Found by tests/fuzz (onnx_import): constant folding read inputs a malformed node lacks (an Expand
// with one input read past the end of its input list; an empty input was dereferenced; a Squeeze
// axis out of range wrote past its flags). Such nodes are left unfolded, and the import fails with
// an error instead of crashing.
TEST(OnnxImport, FoldingNodeWithMissingInputsOrBadAxesFailsCleanly) {
  for (const char* op : {"Expand", "Reshape", "Gather", "Range", "Where", "Add", "Concat"}) {
    OnnxBuilder b;
    b.Input("x", {4}).Output("y");
    b.Int64Constant("c", {2, 2});
    b.Node(op, {"c"}, {"f"}, "folded");
    b.Node("Add", {"x", "f"}, {"y"});
    auto g = ImportOnnxBytes(b.Serialize());
    EXPECT_FALSE(g.ok()) << op;
    OnnxBuilder empty_input;
    empty_input.Input("x", {4}).Output("y");
    empty_input.Int64Constant("c", {2, 2});
    empty_input.Node(op, {"c", ""}, {"f"}, "folded");
    empty_input.Node("Add", {"x", "f"}, {"y"});
    EXPECT_FALSE(ImportOnnxBytes(empty_input.Serialize()).ok()) << op;
  }
  OnnxBuilder squeeze;
  squeeze.Input("x", {4}).Output("y");
  squeeze.Int64Constant("c", {2, 2});
  squeeze.Int64Constant("axes", {7});
  squeeze.Node("Squeeze", {"c", "axes"}, {"f"}, "squeeze");
  squeeze.Node("Add", {"x", "f"}, {"y"});
  EXPECT_FALSE(ImportOnnxBytes(squeeze.Serialize()).ok());
}

// Found by tests/fuzz (onnx_import): folding computes integers in double, and converting a result
// beyond int64 (or NaN) back was undefined behaviour (UBSan: 7.6e20 "outside the range of
// representable values"). It saturates now.
TEST(ConstantFolding, IntegerResultBeyondInt64Saturates) {
  EXPECT_EQ(ToInt64(7.56317e20), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ToInt64(-1e300), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ToInt64(std::nan("")), 0);
  EXPECT_EQ(ToInt64(-3.9), -3);
  OnnxBuilder b;
  b.Input("x", {4}).Output("y");
  b.Int64Constant("big", {int64_t{1} << 40});
  b.Node("Mul", {"big", "big"}, {"square"});  // 2^80, folded.
  b.Node("Reshape", {"x", "square"}, {"y"}, "reshape");
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
}

TEST(OnnxImport, HugeTensorIsRefusedByTheCap) {
  OnnxBuilder b;
  b.Input("x", {1 << 20, 1 << 20}).Output("y");  // 2^40 elements.
  b.Node("Relu", {"x"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(
      g.status().message().find("tensor 'x' of shape 1048576x1048576 has 1099511627776 elements"),
      std::string::npos)
      << g.status().message();
}

TEST(OnnxImport, ElementCountOverflowIsNamed) {
  OnnxBuilder b;
  b.Input("x", {int64_t{1} << 40, int64_t{1} << 40}).Output("y");
  b.Node("Relu", {"x"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("more elements than int64 can count"), std::string::npos)
      << g.status().message();
}

TEST(OnnxImport, NodeCapIsApplied) {
  ImportOptions o;
  o.limits.max_nodes = 10;
  auto g = ImportOnnxFile(ModelPath("resnet18"), o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), Status::Code::kResourceExhausted);
}

TEST(OnnxImport, OpsetsElevenToSeventeenImport) {
  for (int opset : {11, 13, 17}) {
    OnnxBuilder b(opset);
    b.Input("x", {2, 4}).Output("y");
    b.Node("Softmax", {"x"}, {"s"});
    b.Node("Relu", {"s"}, {"y"});
    auto g = ImportOnnxBytes(b.Serialize());
    ASSERT_TRUE(g.ok()) << opset << ": " << g.status().ToString();
    EXPECT_EQ(g->node(0).op_version, opset >= 13 ? 13 : 11);
  }
}

// Flattening by the product of the input's dims (Shape -> ReduceProd -> Reshape), as exporters
// write a flatten: the folder computes the product, so every dim is static.
TEST(OnnxImport, ShapeArithmeticThroughReduceProdResolves) {
  OnnxBuilder b(13);
  b.Input("x", {2, 6}).Output("y");
  b.Node("Shape", {"x"}, {"s"});
  b.Node("ReduceProd", {"s"}, {"n"});
  b.Node("Reshape", {"x", "n"}, {"flat"});
  b.Node("Relu", {"flat"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{12}));
}

// Swin-style padding: pads computed from the input's shape, laid out as a [2, 2] matrix, transposed
// and flattened before Pad. The folder transposes the constant, so Pad's output is static.
TEST(OnnxImport, PadsThroughATransposedConstantResolve) {
  OnnxBuilder b(13);
  b.Input("x", {1, 5}).Output("y");
  b.Int64Constant("idx", {1}, {});
  b.Int64Constant("idx0", {0}, {1});
  b.Int64Constant("seven", {7}, {});
  b.Int64Constant("two_zeros", {0, 0}, {2});
  b.Int64Constant("one_zero", {0}, {1});
  b.Int64Constant("two_by_two", {2, 2}, {2});
  b.Int64Constant("minus_one", {-1}, {1});
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Gather", {"s", "idx"}, {"w"});           // 5
  b.Node("Sub", {"seven", "w"}, {"pad"});          // 2
  b.Node("Unsqueeze", {"pad", "idx0"}, {"pad1"});  // [2]
  OnnxBuilder::IntAttr(b.Node("Concat", {"two_zeros", "pad1", "one_zero"}, {"flat"}), "axis", 0);
  b.Node("Reshape", {"flat", "two_by_two"}, {"m"});                           // [[0, 0], [2, 0]]
  OnnxBuilder::IntsAttr(b.Node("Transpose", {"m"}, {"mt"}), "perm", {1, 0});  // [[0, 2], [0, 0]]
  b.Node("Reshape", {"mt", "minus_one"}, {"pads"});  // Begins 0, 2; ends 0, 0.
  b.Node("Pad", {"x", "pads"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{1, 7})) << "untransposed pads give 3x5";
}

// Swin's shifted-window mask: index grids built from the shape of a tensor whose shape is known
// only after a first fold (Reshape by a Range-derived target), expanded to a shape given through
// Where (as torch writes `expand`), and stacked by a Concat too large to fold in the ONNX folder
// (50x50x2: the grids, 2500 elements each, fold there). Shape inference types the grids with
// symbolic dims before they fold; once folded they are initializers, and their static shapes must
// reach the Concat, or its output stays [unk, unk, 2] and the import fails there.
TEST(OnnxImport, ConcatOfFoldedExpandedGridsIsStatic) {
  OnnxBuilder b(13);
  b.Input("x", {1, 50}).Output("y").Output("xr");
  b.Int64Constant("one", {1}, {}).Int64Constant("zero", {0}, {}).Int64Constant("step", {1}, {});
  b.Int64Constant("axis0", {0}, {1}).Int64Constant("axis1", {1}, {1});
  b.Int64Constant("axis2", {2}, {1}).Int64Constant("one1", {1}, {1});
  b.Int64Constant("minus_ones", {-1, -1}, {2}).Int64Constant("ones", {1, 1}, {2});
  b.Node("Shape", {"x"}, {"s0"});
  b.Node("Gather", {"s0", "one"}, {"n0"});
  b.Node("Range", {"zero", "n0", "step"}, {"r0"});
  b.Node("Shape", {"r0"}, {"len0"});
  OnnxBuilder::IntAttr(b.Node("Concat", {"one1", "len0"}, {"target"}), "axis", 0);
  b.Node("Reshape", {"x", "target"}, {"xr"});  // [1, 50], known from the second round on.
  b.Node("Shape", {"xr"}, {"s"});
  b.Node("Gather", {"s", "one"}, {"n"});          // 50
  b.Node("Range", {"zero", "n", "step"}, {"r"});  // [50]
  b.Node("Unsqueeze", {"n", "axis0"}, {"n1"});
  OnnxBuilder::IntAttr(b.Node("Concat", {"n1", "n1"}, {"dims"}), "axis", 0);  // [50, 50]
  b.Node("Equal", {"dims", "minus_ones"}, {"is_free"});
  b.Node("Where", {"is_free", "ones", "dims"}, {"grid_shape"});
  b.Node("Unsqueeze", {"r", "axis1"}, {"rows"});  // [50, 1]
  b.Node("Expand", {"rows", "grid_shape"}, {"row_grid"});
  b.Node("Expand", {"r", "grid_shape"}, {"col_grid"});
  b.Node("Unsqueeze", {"row_grid", "axis2"}, {"row3"});
  b.Node("Unsqueeze", {"col_grid", "axis2"}, {"col3"});
  OnnxBuilder::IntAttr(b.Node("Concat", {"row3", "col3"}, {"grid"}, "grid_concat"), "axis", 2);
  OnnxBuilder::IntAttr(b.Node("Cast", {"grid"}, {"gridf"}), "to", onnx::TensorProto::FLOAT);
  b.Node("Relu", {"gridf"}, {"y"});
  ImportOptions keep;  // graph/ has no evaluator; the shapes are what this test is about.
  keep.keep_constant_nodes = true;
  auto g = ImportOnnxBytes(b.Serialize(), keep);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{50, 50, 2}));
}

// torch exports F.dropout(p=0.0) as a Dropout in training mode with a constant ratio 0 (Swin's
// attention): it drops nothing, so import removes it like an inference Dropout.
TEST(OnnxImport, RemovesDropoutWithConstantRatioZero) {
  OnnxBuilder b;
  b.Input("x", {4, 8}).Output("y").FloatScalar("ratio", 0.0f);
  auto* training = b.model().mutable_graph()->add_initializer();
  training->set_name("training");
  training->set_data_type(onnx::TensorProto::BOOL);
  training->add_int32_data(1);
  b.Node("Dropout", {"x", "ratio", "training"}, {"d"});
  b.Node("Relu", {"d"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->node(0).op_type, "Relu");
}

// torchvision's Swin pads each stage to a multiple of the window and crops back after the
// attention; at 224 pixels both copy their input, so import removes them like an Identity.
TEST(OnnxImport, RemovesAZeroPadAndTheSliceThatTakesEveryElement) {
  OnnxBuilder b(13);
  b.Input("x", {1, 4, 6}).Output("y");
  b.Int64Constant("pads", {0, 0, 0, 0, 0, 0}).Int64Constant("starts", {0, 0});
  b.Int64Constant("ends", {4, std::numeric_limits<int64_t>::max()}).Int64Constant("axes", {1, 2});
  b.Int64Constant("steps", {1, 1});
  b.Node("Pad", {"x", "pads"}, {"padded"});
  b.Node("Relu", {"padded"}, {"r"});
  b.Node("Slice", {"r", "starts", "ends", "axes", "steps"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 1u);
  EXPECT_EQ(g->node(0).op_type, "Relu");
  EXPECT_EQ(g->tensor(g->outputs()[0]).name, "y");
}

// A Pad that pads, a Slice that crops, and a Slice over every element backwards all change their
// input: import keeps each.
TEST(OnnxImport, KeepsAPadThatPadsAndSlicesThatCropOrReverse) {
  OnnxBuilder b(13);
  b.Input("x", {1, 4, 6}).Output("padded").Output("cropped").Output("reversed");
  b.Int64Constant("pads", {0, 0, 0, 0, 0, 1}).Int64Constant("start0", {0});
  b.Int64Constant("end3", {3}).Int64Constant("axis1", {1});
  b.Int64Constant("start_last", {-1})
      .Int64Constant("end_first", {std::numeric_limits<int64_t>::min()});
  b.Int64Constant("minus_one", {-1});
  b.Node("Pad", {"x", "pads"}, {"padded"});
  b.Node("Slice", {"x", "start0", "end3", "axis1"}, {"cropped"});
  b.Node("Slice", {"x", "start_last", "end_first", "axis1", "minus_one"}, {"reversed"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->num_nodes(), 3u);
  EXPECT_EQ(g->tensor(g->outputs()[0]).dims, (Shape{1, 4, 7}));
  EXPECT_EQ(g->tensor(g->outputs()[1]).dims, (Shape{1, 3, 6}));
  EXPECT_EQ(g->tensor(g->outputs()[2]).dims, (Shape{1, 4, 6}));
}

// A Reshape whose target shape is a graph input's values: every input is bound, yet the output's
// dims cannot be known. The error names the node that lost them and why, not --dim.
TEST(OnnxImport, LostDimNamesTheNodeAndTheShapeOperand) {
  OnnxBuilder b(13);
  b.Input("x", {2, 6}).Input("target", {2}, "", onnx::TensorProto::INT64).Output("y");
  b.Node("Reshape", {"x", "target"}, {"r"}, "reshape_by_input");
  b.Node("Relu", {"r"}, {"y"});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  const std::string& m = g.status().message();
  EXPECT_NE(m.find("node 'reshape_by_input' (Reshape) loses a dim"), std::string::npos) << m;
  EXPECT_NE(m.find("its input 'target' decides the output shape"), std::string::npos) << m;
  EXPECT_NE(m.find("a graph input"), std::string::npos) << m;
  EXPECT_NE(m.find("--dim cannot help"), std::string::npos) << m;
}

// A NonZero's output length depends on the data of its input, which the message names with the
// --const-input that would give it.
TEST(OnnxImport, LostDimOfADataDependentOpSaysSo) {
  OnnxBuilder b(13);
  b.Input("x", {2, 6}).Output("y");
  b.Node("NonZero", {"x"}, {"idx"}, "nz");
  OnnxBuilder::IntAttr(b.Node("Cast", {"idx"}, {"y"}), "to", onnx::TensorProto::FLOAT);
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'nz' (NonZero) loses a dim"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("depends on the values of its input 'x'"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("--const-input x=FILE"), std::string::npos);
}

}  // namespace
}  // namespace fusor
