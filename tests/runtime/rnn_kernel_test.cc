// The LSTM and GRU lowerings, on our recurrence loop (runtime/rnn_loop.h) and on oneDNN's RNN
// primitives, against the reference interpreter, with seeded weights: every direction, with and
// without initial state, a full sequence_lens, GRU's linear_before_reset 0 and 1, batch > 1, and
// with only some outputs read; small nodes run on one thread, larger ones on the whole team
// (lowering/threading.h). What they do not lower runs through the reference fallback and still
// gives the reference's values. The reference itself is
// checked by hand (reference_test.cc) and, for GRU, against values torch and ONNX Runtime computed
// (data/gru, written by tools/export_gru_models.py): the same models run through the reference,
// the unfused plan and the rules plan.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "costmodel/cost_model.h"
#include "graph/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/plan.h"
#include "graph/tensor_file.h"
#include "lowering/rnn_form.h"
#include "lowering/threading.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/model_weights.h"
#include "runtime/reference.h"
#include "search/plan_search.h"
#include "tests/graph/ir_builder.h"

namespace fusor {
namespace {

using testing::Int;
using testing::IrBuilder;

struct LstmCase {
  std::string direction;
  bool initial_state;
  bool sequence_lens;
  bool read_y;             // Y a graph output (else only Y_h and Y_c are).
  std::string extra_attr;  // An attribute oneDNN's LSTM does not take: runs the fallback.
};

void PrintTo(const LstmCase& c, std::ostream* os) {
  *os << c.direction << (c.initial_state ? " h0/c0" : "") << (c.sequence_lens ? " lens" : "")
      << (c.read_y ? " Y" : "") << (c.extra_attr.empty() ? "" : " " + c.extra_attr);
}

constexpr int64_t kSeq = 5, kBatch = 3, kIn = 4, kHid = 6;

struct LstmGraph {
  Graph g;
  TensorId w, r, b;
};

LstmGraph BuildLstm(const LstmCase& c) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, kBatch, kIn});
  TensorId w = b.Weight("w", {dirs, 4 * kHid, kIn}), r = b.Weight("r", {dirs, 4 * kHid, kHid});
  TensorId bias = b.Weight("b", {dirs, 8 * kHid});
  TensorId lens =
      c.sequence_lens ? b.IntConstant("lens", std::vector<int64_t>(kBatch, kSeq)) : kNoId;
  TensorId h0 = c.initial_state ? b.Input("h0", {dirs, kBatch, kHid}) : kNoId;
  TensorId c0 = c.initial_state ? b.Input("c0", {dirs, kBatch, kHid}) : kNoId;
  TensorId y = b.Act("y", {kSeq, dirs, kBatch, kHid});
  TensorId yh = b.Act("yh", {dirs, kBatch, kHid}), yc = b.Act("yc", {dirs, kBatch, kHid});
  std::vector<Attribute> attrs = {Int("hidden_size", kHid), {"direction", c.direction}};
  if (c.extra_attr == "clip") attrs.push_back({"clip", 0.5});
  b.Op("LSTM", {x, w, r, bias, lens, h0, c0}, {y, yh, yc}, attrs);
  if (c.read_y) b.Output(y);
  b.Output(yh);
  b.Output(yc);
  return {b.Build(), w, r, bias};
}

class LstmLowering : public ::testing::TestWithParam<LstmCase> {};

// Runs `g` (one recurrent node, group 0) with seeded weights `weights` in [-range, range] through
// the unfused plan, twice, checking the node runs on the kernel `kernel` names and every output
// equals the reference interpreter's.
void ExpectMatchesTheReference(const Graph& g, const std::vector<TensorId>& weights, float range,
                               uint64_t seed, uint32_t weight_seed, const std::string& kernel,
                               const ExecutorOptions& options = {}) {
  auto leaves = RandomLeafValues(g, seed);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  std::mt19937 rng(weight_seed);
  std::uniform_real_distribution<float> weight(-range, range);
  for (TensorId t : weights) {
    for (float& v : (*leaves)[t].f) v = weight(rng);
  }
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves, options);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  const std::string described = (*exec)->DescribeGroup(0);
  EXPECT_NE(described.find(kernel), std::string::npos) << described;
  for (int run = 0; run < 2; ++run) {  // A second run starts from the same state.
    (*exec)->Run();
    for (TensorId t : g.outputs()) {
      auto got = (*exec)->Read(t);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto close = Compare(want->at(t), *got);
      ASSERT_TRUE(close.ok()) << close.status().ToString();
      EXPECT_LE(close->worst_ratio, 1.0) << g.tensor(t).name << ": " << close->ToString();
    }
  }
}

// The executor options that run every recurrent node on `impl`.
ExecutorOptions On(RnnImplementation impl) {
  ExecutorOptions o;
  o.rnn_implementation = impl;
  return o;
}

// What Describe says of a node of `cell` ("LSTM", "GRU", "GRU (lbr)") on `impl`.
std::string KernelOf(const std::string& cell, RnnImplementation impl) {
  return cell + (impl == RnnImplementation::kLoop ? " recurrence loop" : " oneDNN");
}

constexpr RnnImplementation kBoth[] = {RnnImplementation::kLoop, RnnImplementation::kPrimitive};

TEST_P(LstmLowering, MatchesTheReference) {
  const LstmCase& c = GetParam();
  LstmGraph lg = BuildLstm(c);
  for (RnnImplementation impl : kBoth) {
    SCOPED_TRACE(KernelOf("LSTM", impl));
    ExpectMatchesTheReference(lg.g, {lg.w, lg.r, lg.b}, 0.5f, 21, 7,
                              c.extra_attr.empty() ? KernelOf("LSTM", impl) : "reference fallback",
                              On(impl));
  }
}

INSTANTIATE_TEST_SUITE_P(Directions, LstmLowering,
                         ::testing::Values(LstmCase{"forward", false, false, true, ""},
                                           LstmCase{"forward", true, true, true, ""},
                                           LstmCase{"reverse", true, false, true, ""},
                                           LstmCase{"reverse", false, false, false, ""},
                                           LstmCase{"bidirectional", true, false, true, ""},
                                           LstmCase{"bidirectional", false, true, false, ""},
                                           LstmCase{"forward", true, false, true, "clip"}),
                         [](const ::testing::TestParamInfo<LstmCase>& info) {
                           const LstmCase& c = info.param;
                           return c.direction + (c.initial_state ? "_state" : "") +
                                  (c.sequence_lens ? "_lens" : "") +
                                  (c.read_y ? "_y" : "_states_only") +
                                  (c.extra_attr.empty() ? "" : "_" + c.extra_attr);
                         });

// initial_h without initial_c (the cell starts at zero), and Y_h read without Y_c.
TEST(LstmLowering, InitialHiddenAloneAndFinalHiddenAlone) {
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, kBatch, kIn});
  TensorId w = b.Weight("w", {1, 4 * kHid, kIn}), r = b.Weight("r", {1, 4 * kHid, kHid});
  TensorId h0 = b.Input("h0", {1, kBatch, kHid});
  TensorId y = b.Act("y", {kSeq, 1, kBatch, kHid}), yh = b.Act("yh", {1, kBatch, kHid});
  b.Op("LSTM", {x, w, r, kNoId, kNoId, h0}, {y, yh}, {Int("hidden_size", kHid)});
  b.Output(yh);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 5);
  ASSERT_TRUE(leaves.ok());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> weight(-0.5f, 0.5f);
  for (TensorId t : {w, r}) {
    for (float& v : (*leaves)[t].f) v = weight(rng);
  }
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok());
  for (RnnImplementation impl : kBoth) {
    auto exec = Executor::Create(g, UnfusedPlan(g), *leaves, On(impl));
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    EXPECT_NE((*exec)->DescribeGroup(0).find(KernelOf("LSTM", impl)), std::string::npos);
    (*exec)->Run();
    auto got = (*exec)->Read(yh);
    ASSERT_TRUE(got.ok());
    auto close = Compare(want->at(yh), *got);
    ASSERT_TRUE(close.ok());
    EXPECT_LE(close->worst_ratio, 1.0) << (*exec)->DescribeGroup(0) << ": " << close->ToString();
  }
}

// A sequence_lens shorter than the sequence changes which steps run: oneDNN's LSTM has no such
// input, so the node runs through the fallback, with the reference's values.
TEST(LstmLowering, ShortSequenceLensRunsTheFallback) {
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, 2, kIn});
  TensorId w = b.Weight("w", {1, 4 * kHid, kIn}), r = b.Weight("r", {1, 4 * kHid, kHid});
  TensorId lens = b.IntConstant("lens", {kSeq, 2});
  TensorId y = b.Act("y", {kSeq, 1, 2, kHid});
  b.Op("LSTM", {x, w, r, kNoId, lens}, {y}, {Int("hidden_size", kHid)});
  b.Output(y);
  Graph g = b.Build();
  auto leaves = RandomLeafValues(g, 3);
  ASSERT_TRUE(leaves.ok());
  const Status why = RnnPrimitiveForm(g, g.node(0)).status();
  EXPECT_NE(why.message().find("with sequence_lens other than the full length"), std::string::npos)
      << why.message();
  EXPECT_NE(why.message().find("reference fallback"), std::string::npos) << why.message();
  auto exec = Executor::Create(g, UnfusedPlan(g), *leaves);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_NE((*exec)->DescribeGroup(0).find("reference fallback"), std::string::npos);
  (*exec)->Run();
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok());
  auto got = (*exec)->Read(y);
  ASSERT_TRUE(got.ok());
  auto close = Compare(want->at(y), *got);
  ASSERT_TRUE(close.ok());
  EXPECT_LE(close->worst_ratio, 1.0) << close->ToString();
}

// ---------------------------------------------------------------------------------------------
// GRU

struct GruCase {
  std::string direction;
  bool linear_before_reset;
  bool initial_h;
  bool sequence_lens;      // A constant of the full length.
  bool read_y;             // Y a graph output (else only Y_h is).
  std::string extra_attr;  // An attribute oneDNN's GRU does not take: runs the fallback.
};

void PrintTo(const GruCase& c, std::ostream* os) {
  *os << c.direction << (c.linear_before_reset ? " lbr" : "") << (c.initial_h ? " h0" : "")
      << (c.sequence_lens ? " lens" : "") << (c.read_y ? " Y" : "")
      << (c.extra_attr.empty() ? "" : " " + c.extra_attr);
}

struct GruGraph {
  Graph g;
  TensorId w, r, b;
};

GruGraph BuildGru(const GruCase& c) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, kBatch, kIn});
  TensorId w = b.Weight("w", {dirs, 3 * kHid, kIn}), r = b.Weight("r", {dirs, 3 * kHid, kHid});
  TensorId bias = b.Weight("b", {dirs, 6 * kHid});
  TensorId lens =
      c.sequence_lens ? b.IntConstant("lens", std::vector<int64_t>(kBatch, kSeq)) : kNoId;
  TensorId h0 = c.initial_h ? b.Input("h0", {dirs, kBatch, kHid}) : kNoId;
  TensorId y = b.Act("y", {kSeq, dirs, kBatch, kHid}), yh = b.Act("yh", {dirs, kBatch, kHid});
  std::vector<Attribute> attrs = {Int("hidden_size", kHid),
                                  {"direction", c.direction},
                                  Int("linear_before_reset", c.linear_before_reset ? 1 : 0)};
  if (c.extra_attr == "clip") attrs.push_back({"clip", 0.5});
  b.Op("GRU", {x, w, r, bias, lens, h0}, {y, yh}, attrs);
  if (c.read_y) b.Output(y);
  b.Output(yh);
  return {b.Build(), w, r, bias};
}

class GruLowering : public ::testing::TestWithParam<GruCase> {};

TEST_P(GruLowering, MatchesTheReference) {
  const GruCase& c = GetParam();
  GruGraph gg = BuildGru(c);
  for (RnnImplementation impl : kBoth) {
    const std::string lowered = KernelOf(c.linear_before_reset ? "GRU (lbr)" : "GRU", impl);
    SCOPED_TRACE(lowered);
    ExpectMatchesTheReference(gg.g, {gg.w, gg.r, gg.b}, 0.6f, 23, 9,
                              c.extra_attr.empty() ? lowered : "reference fallback", On(impl));
  }
}

INSTANTIATE_TEST_SUITE_P(Directions, GruLowering,
                         ::testing::Values(GruCase{"forward", false, false, false, true, ""},
                                           GruCase{"forward", true, true, true, true, ""},
                                           GruCase{"reverse", false, true, false, true, ""},
                                           GruCase{"reverse", true, false, false, false, ""},
                                           GruCase{"bidirectional", false, true, true, true, ""},
                                           GruCase{"bidirectional", true, false, false, true, ""},
                                           GruCase{"bidirectional", true, true, false, false, ""},
                                           GruCase{"forward", false, true, false, true, "clip"}),
                         [](const ::testing::TestParamInfo<GruCase>& info) {
                           const GruCase& c = info.param;
                           return c.direction + (c.linear_before_reset ? "_lbr" : "_nolbr") +
                                  (c.initial_h ? "_state" : "") + (c.sequence_lens ? "_lens" : "") +
                                  (c.read_y ? "_y" : "_state_only") +
                                  (c.extra_attr.empty() ? "" : "_" + c.extra_attr);
                         });

// Nodes large enough to run on the whole thread team (lowering/threading.h): hidden 40 (three
// blocks of 16 units, the last one padded), batch 5 (AVX-512 computes 4 batch rows at a time,
// then 1), every direction, initial states given, and one output read at a time.
struct TeamCase {
  std::string op;  // "LSTM", "GRU" or "GRU (lbr)".
  std::string direction;
  int read;  // The one output a graph output: 0 Y, 1 Y_h, 2 Y_c.
};

void PrintTo(const TeamCase& c, std::ostream* os) {
  *os << c.op << " " << c.direction << " output " << c.read;
}

class RecurrenceOnTheTeam : public ::testing::TestWithParam<TeamCase> {};

TEST_P(RecurrenceOnTheTeam, MatchesTheReference) {
  const TeamCase& c = GetParam();
  constexpr int64_t kTeamSeq = 10, kTeamBatch = 5, kTeamIn = 20, kTeamHid = 40;
  const bool lstm = c.op == "LSTM";
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1, gates = lstm ? 4 : 3;
  IrBuilder b;
  TensorId x = b.Input("x", {kTeamSeq, kTeamBatch, kTeamIn});
  TensorId w = b.Weight("w", {dirs, gates * kTeamHid, kTeamIn});
  TensorId r = b.Weight("r", {dirs, gates * kTeamHid, kTeamHid});
  TensorId bias = b.Weight("b", {dirs, 2 * gates * kTeamHid});
  TensorId h0 = b.Input("h0", {dirs, kTeamBatch, kTeamHid});
  std::vector<TensorId> ins = {x, w, r, bias, kNoId, h0};
  if (lstm) ins.push_back(b.Input("c0", {dirs, kTeamBatch, kTeamHid}));
  std::vector<TensorId> outs = {b.Act("y", {kTeamSeq, dirs, kTeamBatch, kTeamHid}),
                                b.Act("yh", {dirs, kTeamBatch, kTeamHid})};
  if (lstm) outs.push_back(b.Act("yc", {dirs, kTeamBatch, kTeamHid}));
  std::vector<Attribute> attrs = {Int("hidden_size", kTeamHid), {"direction", c.direction}};
  if (!lstm) attrs.push_back(Int("linear_before_reset", c.op == "GRU (lbr)" ? 1 : 0));
  b.Op(lstm ? "LSTM" : "GRU", ins, outs, attrs);
  b.Output(outs[c.read]);
  Graph g = b.Build();
  ASSERT_FALSE(RunsSerially(g, UnfusedPlan(g).groups[0]));
  ExpectMatchesTheReference(g, {w, r, bias}, 0.4f, 31, 11, KernelOf(c.op, RnnImplementation::kLoop),
                            On(RnnImplementation::kLoop));
}

INSTANTIATE_TEST_SUITE_P(
    Cells, RecurrenceOnTheTeam,
    ::testing::Values(TeamCase{"LSTM", "forward", 0}, TeamCase{"LSTM", "reverse", 1},
                      TeamCase{"LSTM", "bidirectional", 2}, TeamCase{"LSTM", "bidirectional", 0},
                      TeamCase{"GRU", "forward", 0}, TeamCase{"GRU", "bidirectional", 1},
                      TeamCase{"GRU (lbr)", "reverse", 0},
                      TeamCase{"GRU (lbr)", "bidirectional", 1}),
    [](const ::testing::TestParamInfo<TeamCase>& info) {
      const TeamCase& c = info.param;
      std::string op = c.op == "GRU (lbr)" ? "GRU_lbr" : c.op;
      return op + "_" + c.direction + "_output" + std::to_string(c.read);
    });

// The lowering's rule (lowering/rnn_form.h RnnImplementationFor): a GRU over a batch of
// kRnnPrimitiveMinGruBatch runs on oneDNN's primitive, on one thread; an LSTM of that batch, and
// a GRU of a smaller one, on our loop. Each gives the reference's values.
TEST(RecurrentImplementation, TheLoweringPicksByCellAndBatch) {
  for (const auto& [op, batch, want] :
       {std::tuple<std::string, int64_t, RnnImplementation>{"GRU", kRnnPrimitiveMinGruBatch,
                                                            RnnImplementation::kPrimitive},
        {"GRU", kRnnPrimitiveMinGruBatch - 1, RnnImplementation::kLoop},
        {"LSTM", kRnnPrimitiveMinGruBatch, RnnImplementation::kLoop}}) {
    SCOPED_TRACE(op + " batch " + std::to_string(batch));
    const int64_t gates = op == "LSTM" ? 4 : 3;
    IrBuilder b;
    TensorId x = b.Input("x", {kSeq, batch, kIn});
    TensorId w = b.Weight("w", {1, gates * kHid, kIn}), r = b.Weight("r", {1, gates * kHid, kHid});
    TensorId y = b.Act("y", {kSeq, 1, batch, kHid});
    b.Op(op, {x, w, r}, {y}, {Int("hidden_size", kHid)});
    b.Output(y);
    Graph g = b.Build();
    ASSERT_EQ(RnnPrimitiveForm(g, g.node(0))->implementation, want);
    if (want == RnnImplementation::kPrimitive) {
      EXPECT_TRUE(RunsSerially(g, UnfusedPlan(g).groups[0]));
    }
    ExpectMatchesTheReference(g, {w, r}, 0.5f, 41, 13, KernelOf(op, want));
  }
}

// Models with their weights and the values another implementation computed for them
// (tools/export_gru_models.py): torch for its own export (a 2-layer bidirectional GRU tagger,
// linear_before_reset 1), ONNX Runtime for GRU nodes built with onnx.helper.
struct GruModelCase {
  std::string name;
  bool lowered;  // Every GRU runs on a recurrent kernel (else through the fallback).
};

void PrintTo(const GruModelCase& c, std::ostream* os) { *os << c.name; }

class GruModels : public ::testing::TestWithParam<GruModelCase> {};

std::string GruDataDir(const std::string& name) {
  return std::string(FUSOR_SOURCE_DIR) + "/tests/runtime/data/gru/" + name;
}

TEST_P(GruModels, ReferenceMatchesTheOtherImplementationAndEveryPlanMatchesTheReference) {
  const std::string dir = GruDataDir(GetParam().name);
  auto m = ImportOnnxFileWithWeights(dir + "/model.onnx", WithConstantFolding({}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Graph g = m->graph;
  auto leaves = ModelLeafValues(g, std::move(m->weights), 1);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  for (TensorId t : g.inputs()) {
    auto value = ReadTensorFile(dir + "/" + g.tensor(t).name + ".npy");
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    ASSERT_TRUE(SetInputValue(g, g.tensor(t).name, std::move(*value), &*leaves).ok());
  }
  auto want = RunReference(g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    auto expected = ReadTensorFile(dir + "/output_" + std::to_string(k) + ".npy");
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    auto e = ToHostTensor(std::move(*expected));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto close = Compare(*e, want->at(g.outputs()[k]));
    ASSERT_TRUE(close.ok()) << close.status().ToString();
    EXPECT_LE(close->worst_ratio, 1.0) << "reference, output " << k << ": " << close->ToString();
  }
  AnalyticalCostModel model{HardwareProfile{}};
  SearchOptions so;
  so.algorithm = SearchAlgorithm::kRules;
  auto rules = SearchPlan(g, model, so);
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  for (const FusionPlan& plan : {UnfusedPlan(g), rules->plan}) {
    auto exec = Executor::Create(g, plan, *leaves);
    ASSERT_TRUE(exec.ok()) << exec.status().ToString();
    for (size_t i = 0; i < plan.groups.size(); ++i) {
      if (g.node(plan.groups[i].nodes[0]).op_type != "GRU") continue;
      const std::string kernel = (*exec)->DescribeGroup(i);
      EXPECT_NE(kernel.find(GetParam().lowered ? "recurrence loop" : "reference fallback"),
                std::string::npos)
          << kernel;
    }
    (*exec)->Run();
    for (TensorId t : g.outputs()) {
      auto got = (*exec)->Read(t);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto close = Compare(want->at(t), *got);
      ASSERT_TRUE(close.ok()) << close.status().ToString();
      EXPECT_LE(close->worst_ratio, 1.0) << g.tensor(t).name << ": " << close->ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OtherImplementations, GruModels,
                         ::testing::Values(GruModelCase{"torch_tagger", true},
                                           GruModelCase{"lbr0_bidirectional", true},
                                           GruModelCase{"lbr0_reverse_short_lens", false},
                                           GruModelCase{"lbr1_forward_state_only", true}),
                         [](const ::testing::TestParamInfo<GruModelCase>& info) {
                           return info.param.name;
                         });

// A GRU whose W does not have the shape its hidden_size gives is refused at import, naming the
// node and the tensor, before any kernel indexes it.
TEST(GruLowering, MisshapenWeightsAreRefusedNamingTheNode) {
  IrBuilder b;
  TensorId x = b.Input("x", {kSeq, kBatch, kIn});
  TensorId w = b.Weight("w", {1, 4 * kHid, kIn}), r = b.Weight("r", {1, 3 * kHid, kHid});
  TensorId y = b.Act("y", {kSeq, 1, kBatch, kHid});
  b.Op("GRU", {x, w, r}, {y}, {Int("hidden_size", kHid)});
  b.Output(y);
  Graph g = b.Build();
  Status s = CheckNodeShapes(g, g.node(0));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("W 'w' has shape 1x24x4, expected 1x18x4"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace fusor
