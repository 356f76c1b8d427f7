// Which recurrent nodes run as a recurrent kernel, in which form and on which implementation
// (lowering/rnn_form.h): rules of the graph alone. tests/runtime/rnn_kernel_test.cc runs the
// kernels they pick against the reference.
#include "lowering/rnn_form.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::IrBuilder;

constexpr int64_t kSeq = 5, kIn = 6, kHid = 4;

// One `op` node over X [kSeq, batch, kIn] with `attrs`; `lens`, when not empty, its sequence_lens.
Graph Recurrence(const std::string& op, int64_t batch, std::vector<Attribute> attrs,
                 const std::vector<int64_t>& lens = {}) {
  IrBuilder b;
  const int64_t gates = op == "LSTM" ? 4 : 3;
  int64_t dirs = 1;
  for (const Attribute& a : attrs) {
    if (a.name == "direction" && std::get<std::string>(a.value) == "bidirectional") dirs = 2;
  }
  attrs.push_back(Int("hidden_size", kHid));
  TensorId y = b.Act("y", {kSeq, dirs, batch, kHid});
  b.Op(op,
       {b.Input("x", {kSeq, batch, kIn}), b.Weight("w", {dirs, gates * kHid, kIn}),
        b.Weight("r", {dirs, gates * kHid, kHid}), kNoId,
        lens.empty() ? kNoId : b.IntConstant("lens", lens)},
       {y}, attrs);
  b.Output(y);
  return b.Build();
}

// The form carries the cell, sizes and direction the kernel is built with.
TEST(RnnPrimitiveForm, ReadsTheCellSizesAndDirection) {
  Graph gru = Recurrence(
      "GRU", 3, {{"direction", std::string("bidirectional")}, Int("linear_before_reset", 1)});
  auto p = RnnPrimitiveForm(gru, gru.node(0));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cell, RnnCell::kLbrGru);
  EXPECT_EQ(p->bias_gates(), 4);
  EXPECT_EQ(p->directions, 2);
  EXPECT_FALSE(p->reverse);
  EXPECT_EQ(p->seq, kSeq);
  EXPECT_EQ(p->batch, 3);
  EXPECT_EQ(p->input, kIn);
  EXPECT_EQ(p->hidden, kHid);
  Graph lstm = Recurrence("LSTM", 2, {{"direction", std::string("reverse")}}, {kSeq, kSeq});
  p = RnnPrimitiveForm(lstm, lstm.node(0));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cell, RnnCell::kLstm);
  EXPECT_EQ(p->gates(), 4);
  EXPECT_TRUE(p->reverse);
  EXPECT_TRUE(RunsAsRnnPrimitive(lstm, lstm.node(0)));
}

// What oneDNN's primitives and our loop do not compute is refused, naming the node and the reason,
// and the node runs through the reference fallback.
TEST(RnnPrimitiveForm, AFormNeitherKernelComputesIsRefusedNamingTheNodeAndWhy) {
  struct Case {
    Graph g;
    std::string why;
  };
  std::vector<Case> cases;
  cases.push_back({Recurrence("LSTM", 2, {Int("layout", 1)}), "with layout=1 (batch first)"});
  cases.push_back({Recurrence("GRU", 2, {{"clip", 3.0}}), "with clip"});
  cases.push_back({Recurrence("LSTM", 2, {}, {kSeq, kSeq - 1}),
                   "with sequence_lens other than the full length"});
  for (const Case& c : cases) {
    const Node& n = c.g.node(0);
    auto p = RnnPrimitiveForm(c.g, n);
    ASSERT_FALSE(p.ok()) << c.why;
    EXPECT_EQ(p.status().code(), Status::Code::kUnimplemented) << c.why;
    EXPECT_NE(p.status().message().find(n.name), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(c.why), std::string::npos) << p.status().message();
    EXPECT_FALSE(RunsAsRnnPrimitive(c.g, n)) << c.why;
  }
}

// A GRU of kRnnPrimitiveMinGruBatch or more runs on oneDNN's primitive, a smaller one and every
// LSTM on our loop.
TEST(RnnImplementationFor, AGruFromTheMinimumBatchOnThePrimitiveEverythingElseOnOurLoop) {
  auto implementation = [](RnnCell cell, int64_t batch) {
    RnnPrimitive p;
    p.cell = cell;
    p.batch = batch;
    return RnnImplementationFor(p);
  };
  EXPECT_EQ(implementation(RnnCell::kGru, kRnnPrimitiveMinGruBatch), RnnImplementation::kPrimitive);
  EXPECT_EQ(implementation(RnnCell::kLbrGru, 32), RnnImplementation::kPrimitive);
  EXPECT_EQ(implementation(RnnCell::kGru, kRnnPrimitiveMinGruBatch - 1), RnnImplementation::kLoop);
  EXPECT_EQ(implementation(RnnCell::kLstm, 32), RnnImplementation::kLoop);
  Graph g = Recurrence("GRU", kRnnPrimitiveMinGruBatch, {});
  EXPECT_EQ(RnnPrimitiveForm(g, g.node(0))->implementation, RnnImplementation::kPrimitive);
}

}  // namespace
}  // namespace fusor
