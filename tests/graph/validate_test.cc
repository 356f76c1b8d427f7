#include "graph/validate.h"

#include <gtest/gtest.h>

#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::IrBuilder;

Status ValidateChain(Shape dims, ValidationLimits limits = {}) {
  IrBuilder b;
  TensorId x = b.Input("x", dims);
  TensorId y = b.Act("y", dims);
  b.Op("Relu", {x}, {y});
  b.Output(y);
  return Validate(b.Build(), limits);
}

TEST(Validate, AcceptsASimpleGraph) { EXPECT_TRUE(ValidateChain({2, 3}).ok()); }

TEST(Validate, ZeroAndNegativeDims) {
  Status s = ValidateChain({2, 0});
  EXPECT_EQ(s.message(), "tensor 'x' has dim 1 = 0; dims must be 1 or more");
  EXPECT_FALSE(ValidateChain({-1, 3}).ok());
}

TEST(Validate, ElementCapAndOverflow) {
  ValidationLimits small;
  small.max_tensor_elements = 5;
  Status s = ValidateChain({2, 3}, small);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "tensor 'x' of shape 2x3 has 6 elements, the limit is 5");
  s = ValidateChain({int64_t{1} << 62, 4});
  EXPECT_NE(s.message().find("more elements than int64 can count"), std::string::npos);
}

TEST(Validate, NodeCap) {
  ValidationLimits none;
  none.max_nodes = 0;
  EXPECT_EQ(ValidateChain({2}, none).code(), Status::Code::kResourceExhausted);
}

TEST(Validate, DuplicateTensorNames) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId y = b.Act("x", {2});
  b.Op("Relu", {x}, {y});
  b.Output(y);
  EXPECT_EQ(Validate(b.Build()).message(), "tensor name 'x' is used by two tensors");
}

TEST(Validate, DanglingInput) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId ghost = b.Act("ghost", {2});
  TensorId y = b.Act("y", {2});
  b.Op("Add", {x, ghost}, {y});
  b.Output(y);
  EXPECT_NE(Validate(b.Build()).message().find(
                "node 'Add_0' (Add) reads 'ghost', which no node produces"),
            std::string::npos);
}

TEST(Validate, TwoProducers) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId y = b.Act("y", {2});
  b.Op("Relu", {x}, {y});
  b.Op("Tanh", {x}, {y});
  b.Output(y);
  EXPECT_NE(Validate(b.Build()).message().find("tensor 'y' is written by two nodes"),
            std::string::npos);
}

TEST(Validate, Cycle) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId a = b.Act("a", {2});
  TensorId c = b.Act("c", {2});
  b.Op("Add", {x, c}, {a});
  b.Op("Relu", {a}, {c});
  b.Output(c);
  EXPECT_NE(Validate(b.Build()).message().find("is on a cycle"), std::string::npos);
}

TEST(Validate, InconsistentElementwiseShapes) {
  IrBuilder b;
  TensorId x = b.Input("x", {2, 3});
  TensorId z = b.Input("z", {4, 3});
  TensorId y = b.Act("y", {4, 3});
  b.Op("Add", {x, z}, {y});
  b.Output(y);
  EXPECT_NE(
      Validate(b.Build()).message().find("input 'z' of shape 4x3 does not broadcast with 2x3"),
      std::string::npos);
}

TEST(Validate, AbsurdInputCountsAreRefused) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId y = b.Act("y", {2});
  std::vector<TensorId> inputs(1000, kNoId);
  inputs[0] = x;
  b.Op("Relu", inputs, {y});
  b.Output(y);
  EXPECT_EQ(Validate(b.Build()).message(),
            "node 'Relu_0' (Relu) has 1000 inputs; it takes at most 5");
}

TEST(Validate, WritingAWeightIsRefused) {
  IrBuilder b;
  TensorId x = b.Input("x", {2});
  TensorId w = b.Weight("w", {2});
  b.Op("Relu", {x}, {w});
  b.Output(w);
  EXPECT_NE(Validate(b.Build()).message().find("writes 'w', which is a weight"), std::string::npos);
}

// An InstanceNormalization whose scale is not one value per channel is refused naming the node,
// the tensor and the shape expected, before any kernel would index past its end.
TEST(Validate, InstanceNormalizationScaleNotPerChannelIsNamed) {
  IrBuilder b;
  TensorId x = b.Input("x", {1, 3, 4});
  TensorId s = b.Weight("s", {1}), bias = b.Weight("bias", {3});
  TensorId y = b.Act("y", {1, 3, 4});
  b.Op("InstanceNormalization", {x, s, bias}, {y});
  b.Output(y);
  Status st = Validate(b.Build());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("scale 's' has shape 1, expected 3 (the channels)"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace fusor
