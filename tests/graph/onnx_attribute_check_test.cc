// What libonnx's shape inference assumes of a node is checked before it runs: a crafted model
// is an error naming the node and the attribute, never a crash of the command that reads it.
#include "graph/onnx_attribute_check.h"

#include <gtest/gtest.h>

#include "graph/onnx_import.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

using testing::OnnxBuilder;

// Conv x (1x3x8x8) * w (4x3x3x3) -> y, with `edit` applied to the node.
std::string ConvError(const std::function<void(onnx::NodeProto&)>& edit,
                      std::vector<int64_t> w_dims = {4, 3, 3, 3}) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8}).Weight("w", w_dims).Output("y");
  edit(b.Node("Conv", {"x", "w"}, {"y"}, "conv_1"));
  auto g = ImportOnnxBytes(b.Serialize());
  return g.ok() ? "imported" : g.status().message();
}

// Found by the issue 44 audit: a zero stride killed every model-reading command with SIGFPE
// inside libonnx's shape inference.
TEST(OnnxAttributeCheck, AZeroStrideIsAnErrorNamingTheNodeNotACrash) {
  EXPECT_EQ(ConvError([](onnx::NodeProto& n) {
              OnnxBuilder::IntsAttr(n, "strides", {1, 0});
            }),
            "node 'conv_1' (Conv): attribute strides[1] is 0; it must be between 1 and "
            "2147483647");
}

// Found by fuzz_smoke.onnx_import: libonnx reads a strides list whatever the attribute's declared
// type, so the check does too.
TEST(OnnxAttributeCheck, AZeroStrideInAnAttributeOfUndefinedTypeIsAnError) {
  EXPECT_NE(
      ConvError([](onnx::NodeProto& n) {
        OnnxBuilder::IntsAttr(n, "strides", {2, 0});
        n.mutable_attribute(n.attribute_size() - 1)->set_type(onnx::AttributeProto::UNDEFINED);
      }).find("attribute strides[1] is 0"),
      std::string::npos);
}

TEST(OnnxAttributeCheck, WindowAttributesOutOfRangeAreErrors) {
  struct Case {
    const char* attr;
    std::vector<int64_t> values;
    const char* expected;
  };
  for (const Case& c : std::vector<Case>{
           {"dilations", {0, 1}, "attribute dilations[0] is 0; it must be between 1"},
           {"kernel_shape", {3, -1}, "attribute kernel_shape[1] is -1; it must be between 1"},
           {"pads", {0, 0, -1, 0}, "attribute pads[2] is -1; it must be between 0"},
           {"strides", {int64_t{1} << 31, 1}, "attribute strides[0] is 2147483648"},
           {"pads", {0, 0, 0}, "attribute pads has 3 values; it needs two per spatial axis"},
           {"dilations", {1, 1, 1}, "attribute strides covers 2 spatial axes, dilations 3"},
       }) {
    std::string error = ConvError([&](onnx::NodeProto& n) {
      OnnxBuilder::IntsAttr(n, c.attr, c.values);
      if (std::string(c.attr) != "strides") OnnxBuilder::IntsAttr(n, "strides", {1, 1});
    });
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.attr << ": " << error;
  }
  EXPECT_NE(ConvError([](onnx::NodeProto& n) {
              OnnxBuilder::IntAttr(n, "group", 0);
            }).find("node 'conv_1' (Conv): attribute group is 0; it must be between 1"),
            std::string::npos);
}

TEST(OnnxAttributeCheck, APoolWithAZeroStrideIsAnError) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8}).Output("y");
  auto& pool = b.Node("MaxPool", {"x"}, {"y"}, "pool");
  OnnxBuilder::IntsAttr(pool, "kernel_shape", {2, 2});
  OnnxBuilder::IntsAttr(pool, "strides", {0, 2});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'pool' (MaxPool): attribute strides[0] is 0"),
            std::string::npos)
      << g.status().message();
}

// libonnx takes a Conv's kernel shape from W's dims and indexes X's dims with it.
TEST(OnnxAttributeCheck, WeightsOfHigherRankThanTheInputAreAnErrorNotAReadPastIt) {
  std::string error = ConvError([](onnx::NodeProto&) {}, {4, 3, 3, 3, 3, 3});
  EXPECT_NE(error.find("Conv: input X has rank 4 and the weights W rank 6"), std::string::npos)
      << error;
}

// Found by the attribute sweep (onnx_attribute_sweep): LayerNormalization's inference indexed X's
// dims with an axis of 2^31 (or below -rank) and crashed; libFuzzer found the default axis -1 on a
// rank-0 input.
TEST(OnnxAttributeCheck, ALayerNormalizationAxisOutOfRangeIsAnErrorNotACrash) {
  OnnxBuilder scalar(17);
  scalar.Input("x", {}).Weight("scale", {}).Output("y");
  scalar.Node("LayerNormalization", {"x", "scale"}, {"y"}, "norm");
  auto g = ImportOnnxBytes(scalar.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("axis is -1; for an input of rank 0"), std::string::npos)
      << g.status().message();
  for (int64_t axis : {int64_t{1} << 31, int64_t{-5}}) {
    OnnxBuilder b(17);
    b.Input("x", {2, 3, 4}).Weight("scale", {4}).Output("y");
    OnnxBuilder::IntAttr(b.Node("LayerNormalization", {"x", "scale"}, {"y"}, "norm"), "axis", axis);
    auto g = ImportOnnxBytes(b.Serialize());
    ASSERT_FALSE(g.ok());
    EXPECT_NE(
        g.status().message().find("LayerNormalization: attribute axis is " + std::to_string(axis) +
                                  "; for an input of rank 3 it must be between -3 and 3"),
        std::string::npos)
        << g.status().message();
  }
}

// Found by the attribute sweep (gru_tagger.onnx with a Transpose perm of [0, 0, 2]): the
// Transpose's inference fails, libonnx goes on, and Shape's data propagation dereferenced the
// missing type of the Transpose's output.
TEST(OnnxAttributeCheck, AShapeOfANodeWhoseInferenceFailedIsNotACrash) {
  OnnxBuilder b(17);
  b.Input("x", {2, 3, 4}).Output("y");
  OnnxBuilder::IntsAttr(b.Node("Transpose", {"x"}, {"t"}, "transpose"), "perm", {0, 0, 2});
  b.Node("Shape", {"t"}, {"s"}, "shape");
  OnnxBuilder::IntAttr(b.Node("Cast", {"s"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
  auto g = ImportOnnxBytes(b.Serialize());
  EXPECT_FALSE(g.ok());
}

// Found by fuzz_smoke.onnx_import: MaxUnpool's inference read dim 1 of its indices input, which
// had no shape (a name nothing defines).
TEST(OnnxAttributeCheck, AMaxUnpoolWhoseIndicesHaveNoShapeIsAnErrorNotACrash) {
  OnnxBuilder b(11);
  b.Input("x", {1, 1, 2, 2}).Output("y");
  auto& unpool = b.Node("MaxUnpool", {"x", "nowhere"}, {"y"}, "unpool");
  OnnxBuilder::IntsAttr(unpool, "kernel_shape", {2, 2});
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
}

// Found by libFuzzer (onnx_import, an opset-6 Gemm whose B was renamed to its rank-1 C): Gemm-6's
// inference, run by the old-opset conversion, read dim 1 of a rank-1 input and crashed.
TEST(OnnxAttributeCheck, AGemmInputOfRankOtherThanTwoIsAnErrorNotACrash) {
  OnnxBuilder b(6);
  b.Input("a", {2, 3}).Input("c", {4}).Output("y");
  b.Node("Gemm", {"a", "c", "c"}, {"y"}, "gemm");
  auto g = ImportOnnxBytes(b.Serialize());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("Gemm: input B has rank 1; Gemm needs rank 2"),
            std::string::npos)
      << g.status().message();
}

TEST(OnnxAttributeCheck, AValidConvImports) {
  EXPECT_EQ(ConvError([](onnx::NodeProto& n) {
              OnnxBuilder::IntsAttr(n, "strides", {2, 2});
              OnnxBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
              OnnxBuilder::IntsAttr(n, "kernel_shape", {3, 3});
            }),
            "imported");
}

}  // namespace
}  // namespace fusor
