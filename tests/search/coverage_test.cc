// Coverage of real exports: every shared model (models/, weights stripped) imports with the
// constant folding the CLI uses, gets a plan from the rules search, and runs through the real
// runtime, unknown ops included (they run through the reference fallback). A subset small enough
// for the test budget is also compared with the reference interpreter, output by output; the
// bench command `coverage_bench` compares all of them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "graph/onnx_import.h"
#include "graph/summary.h"
#include "lowering/unfused_ops.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/reference.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

struct Case {
  std::string model;
  bool compare;  // Also compared with the reference interpreter.
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

StatusOr<Graph> ImportModel(const std::string& model) {
  ImportOptions options = WithConstantFolding({});
  // The two exports with symbolic dims, bound as a deployment would.
  if (model == "resnet18_dynamic_batch") options.dims["batch"] = 1;
  if (model == "distil_encoder_dynamic") {
    options.dims["batch"] = 1;
    options.dims["seq"] = 32;
  }
  return ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/" + model + ".onnx", options);
}

class Coverage : public ::testing::TestWithParam<Case> {};

TEST_P(Coverage, ImportsTunesAndRuns) {
  auto g = ImportModel(GetParam().model);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto leaves = RandomLeafValues(*g, 11);
  ASSERT_TRUE(leaves.ok()) << leaves.status().ToString();
  AnalyticalCostModel model{HardwareProfile{}};
  SearchOptions o;
  o.algorithm = SearchAlgorithm::kRules;
  auto searched = SearchPlan(*g, model, o);
  ASSERT_TRUE(searched.ok()) << searched.status().ToString();
  for (const FusionGroup& group : searched->plan.groups) {
    if (group.kind == GroupKind::kOpaque) {
      EXPECT_EQ(group.nodes.size(), 1u);
    }
  }
  ExecutorOptions eo;
  eo.chain_backend = ChainBackend::kFusedLoop;  // No timing at Create: values only.
  eo.residual_add = ResidualAdd::kBinary;
  auto exec = Executor::Create(*g, searched->plan, *leaves, eo);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  (*exec)->Run();
  auto got = (*exec)->ReadOutputs();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  if (!GetParam().compare) {
    for (const auto& [t, value] : *got) {
      for (int64_t e = 0; value.is_float() && e < value.num_elements(); ++e) {
        ASSERT_TRUE(std::isfinite(value.f[e])) << g->tensor(t).name << " element " << e;
      }
    }
    return;
  }
  auto want = RunReference(*g, *leaves);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  for (const auto& [t, value] : *want) {
    auto c = Compare(value, got->at(t));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_LE(c->worst_ratio, 1.0) << "output '" << g->tensor(t).name << "': " << c->ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    SharedModels, Coverage,
    ::testing::Values(
        Case{"lstm_tagger", true}, Case{"gru_tagger", true}, Case{"gpt_decoder_4l", true},
        Case{"audio_encoder", true}, Case{"distil_encoder_dynamic", true},
        Case{"shufflenet_v2_x0_5", true}, Case{"mobilenet_v3_small", true},
        Case{"lraspp_mobilenet_v3", false}, Case{"vit_b_32", false}, Case{"googlenet", false},
        Case{"resnext50_32x4d", false}, Case{"regnet_x_400mf", false},
        Case{"efficientnet_v2_s", false}, Case{"fcn_resnet50", false}, Case{"alexnet", false},
        Case{"vgg11_bn", false}, Case{"resnet18_dynamic_batch", false}, Case{"resnet18", false},
        Case{"mobilenet_v2", false}, Case{"squeezenet1_1", false}, Case{"efficientnet_b0", false},
        Case{"bert_base_encoder", false}, Case{"swin_t", false}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.model; });

// The GPT decoder's causal mask is Trilu over a Constant: it folds at import, so no node of the
// imported graph is a Trilu or a Constant, and the mask tensor carries its values.
TEST(CoverageFolding, CausalMaskFoldsAtImport) {
  auto g = ImportModel("gpt_decoder_4l");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const Node& n : g->nodes()) {
    EXPECT_NE(n.op_type, "Trilu") << n.name;
    EXPECT_NE(n.op_type, "Constant") << n.name;
  }
}

// Swin's shifted-window masks are built from the input's shape (Range, Expand, ScatterND, Equal,
// Not over constants): they all fold at import, the first stage's [64, 49, 49] mask too (within
// kMaxFoldedElements), so nothing runs unfused.
TEST(CoverageFolding, SwinWindowMasksFoldAtImport) {
  auto g = ImportModel("swin_t");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const Node& n : g->nodes()) {
    EXPECT_NE(n.op_type, "ScatterND") << n.name;
    EXPECT_NE(n.op_type, "Dropout") << n.name;
    EXPECT_NE(n.op_type, "Equal") << n.name;
    EXPECT_NE(n.op_type, "Not") << n.name;
  }
  EXPECT_TRUE(UnfusedOps(*g).empty()) << UnfusedOpsText(UnfusedOps(*g));
}

// LSTM runs unfused (on our recurrence loop), and the summary `fusor inspect` and `fusor tune`
// print counts it.
TEST(CoverageFolding, LstmIsCountedAsUnfused) {
  auto g = ImportModel("lstm_tagger");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(UnfusedOpsText(UnfusedOps(*g)), "2 nodes run unfused: LSTM (recurrence loop) x2");
}

// torch's GRU export (two bidirectional layers, linear_before_reset 1, initial_h an Expand of zeros
// that folds at import) runs on our recurrence loop, counted the same way.
TEST(CoverageFolding, GruIsCountedAsUnfused) {
  auto g = ImportModel("gru_tagger");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(UnfusedOpsText(UnfusedOps(*g)), "2 nodes run unfused: GRU (recurrence loop) x2");
}

}  // namespace
}  // namespace fusor
