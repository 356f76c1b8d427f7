// The nodes that never fuse, counted per op and by how they run (lowering/unfused_ops.h): the
// names `fusor inspect`, `fusor tune` and `fusor plan explain` print.
#include "lowering/unfused_ops.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "lowering/rnn_form.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::IrBuilder;

// A CumSum (reference fallback), an InstanceNormalization (oneDNN normalization), a GRU of
// kRnnPrimitiveMinGruBatch (oneDNN RNN), two LSTMs (recurrence loop), a com.example op (reference
// fallback, named with its domain) and a Relu, which fuses and is not counted.
TEST(UnfusedOps, OpaqueNodesAreCountedPerOpAndByTheKernelTheyRunOn) {
  IrBuilder b;
  const int64_t batch = kRnnPrimitiveMinGruBatch, hid = 4;
  TensorId x = b.Input("x", {3, batch, 6});
  auto out = [&](const std::string& name, const Shape& dims) {
    TensorId t = b.Act(name, dims);
    b.Output(t);
    return t;
  };
  b.Op("CumSum", {x, b.IntScalar("axis", 0)}, {out("sum", {3, batch, 6})});  // 0
  b.Op("InstanceNormalization", {x, b.Weight("scale", {batch}), b.Weight("bias", {batch})},
       {out("norm", {3, batch, 6})});  // 1
  b.Op("GRU", {x, b.Weight("gw", {1, 3 * hid, 6}), b.Weight("gr", {1, 3 * hid, hid})},
       {out("gru", {3, 1, batch, hid})}, {Int("hidden_size", hid)});  // 2
  for (int i = 0; i < 2; ++i) {
    const std::string k = std::to_string(i);
    b.Op("LSTM", {x, b.Weight("lw" + k, {1, 4 * hid, 6}), b.Weight("lr" + k, {1, 4 * hid, hid})},
         {out("lstm" + k, {3, 1, batch, hid})}, {Int("hidden_size", hid)});  // 3, 4
  }
  b.Op("Mystery", {x}, {out("mystery", {3, batch, 6})});  // 5
  b.Op("Relu", {x}, {out("relu", {3, batch, 6})});        // 6
  Graph g = b.Build();
  g.mutable_node(5).domain = "com.example";
  EXPECT_EQ(UnfusedKernelName(g, g.node(0)), "reference fallback");
  EXPECT_EQ(UnfusedKernelName(g, g.node(1)), "oneDNN normalization");
  EXPECT_EQ(UnfusedKernelName(g, g.node(2)), "oneDNN RNN");
  EXPECT_EQ(UnfusedKernelName(g, g.node(3)), "recurrence loop");
  EXPECT_EQ(UnfusedOps(g),
            (std::map<std::string, int64_t>{{"CumSum", 1},
                                            {"GRU (oneDNN RNN)", 1},
                                            {"InstanceNormalization (oneDNN normalization)", 1},
                                            {"LSTM (recurrence loop)", 2},
                                            {"com.example.Mystery", 1}}));
}

}  // namespace
}  // namespace fusor
