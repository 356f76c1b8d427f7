// Recurrent groups on each implementation, side by side. For a model with LSTM or GRU nodes
// (default models/lstm_tagger.onnx; models/gru_tagger.onnx), the rules plan built four times: as
// lowered (lowering/rnn_form.h picks each node's implementation), every recurrent node on our
// recurrence loop (runtime/rnn_loop.h), every one on oneDNN's RNN primitive (runtime/rnn_kernel.h)
// and every one through the reference fallback; then each recurrent group and the whole plan timed
// side by side (TimeSideBySide) in one process. Prints the medians, the ratios to ours, and the
// cost model's prediction of each group as lowered (default profile, or --profile P.json).
//
// --sweep instead times lone LSTM and GRU nodes (input size = hidden size) over a grid of batch
// and hidden sizes, ours against oneDNN's primitive (each with the threads lowering/threading.h
// gives it), with the implementation the lowering picks: the measurements behind its rule.
//
//   ./build/bench/rnn_bench [--profile P.json] [model.onnx]
//   ./build/bench/rnn_bench --sweep [--seq N]
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "graph/graph_builder.h"
#include "graph/onnx_import.h"
#include "lowering/rnn_form.h"
#include "runtime/constant_evaluator.h"
#include "runtime/executor.h"
#include "runtime/measurer.h"
#include "search/plan_search.h"

namespace fusor {
namespace {

struct Args {
  std::string model = std::string(FUSOR_MODELS_DIR) + "/lstm_tagger.onnx";
  std::string profile;
  bool sweep = false;
  int64_t seq = 32;
};

StatusOr<HardwareProfile> LoadProfile(const std::string& path) {
  if (path.empty()) return HardwareProfile{};
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read profile '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ProfileFromJsonText(text.str());
}

TimingOptions Timing(bool quick) {
  TimingOptions o;
  o.min_repeats = quick ? 5 : 15;
  o.min_total_ns = quick ? 100'000'000 : 300'000'000;
  o.quiet_wait_ms = 250;
  return o;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

double Ratio(const Measurement& a, const Measurement& ours) {
  return static_cast<double>(a.median_ns) / static_cast<double>(ours.median_ns);
}

ExecutorOptions On(RnnImplementation impl) {
  ExecutorOptions o;
  o.rnn_implementation = impl;
  return o;
}

const char* Name(RnnImplementation impl) {
  return impl == RnnImplementation::kLoop ? "ours" : "oneDNN";
}

Status RunModel(const Args& a) {
  FUSOR_ASSIGN_OR_RETURN(Graph g, ImportOnnxFile(a.model, WithConstantFolding({})));
  FUSOR_ASSIGN_OR_RETURN(HardwareProfile profile, LoadProfile(a.profile));
  AnalyticalCostModel model(profile);
  SearchOptions so;
  so.algorithm = SearchAlgorithm::kRules;
  FUSOR_ASSIGN_OR_RETURN(SearchResult searched, SearchPlan(g, model, so));
  const FusionPlan& plan = searched.plan;
  PlanCost predicted = model.Cost(g, plan);
  FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
  ExecutorOptions fallback;
  fallback.lower_rnn = false;
  FUSOR_ASSIGN_OR_RETURN(auto lowered, Executor::Create(g, plan, leaves));
  FUSOR_ASSIGN_OR_RETURN(auto ours,
                         Executor::Create(g, plan, leaves, On(RnnImplementation::kLoop)));
  FUSOR_ASSIGN_OR_RETURN(auto dnnl,
                         Executor::Create(g, plan, leaves, On(RnnImplementation::kPrimitive)));
  FUSOR_ASSIGN_OR_RETURN(auto off, Executor::Create(g, plan, leaves, fallback));
  SettleHost(kSettleHostMaxMs, "rnn_bench");
  std::printf("%-28s %10s %10s %10s %10s %9s %9s\n", "group", "predicted", "ours", "oneDNN",
              "fallback", "oneDNN/us", "fallb/us");
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const std::string& op = g.node(plan.groups[i].nodes[0]).op_type;
    if (op != "LSTM" && op != "GRU") continue;
    for (auto* e : {ours.get(), dnnl.get(), off.get()}) e->Run();
    auto t = TimeSideBySide({[&, i] { ours->RunGroup(i); }, [&, i] { dnnl->RunGroup(i); },
                             [&, i] { off->RunGroup(i); }},
                            Timing(false));
    std::printf("%-28s %7.3f ms %7.3f ms %7.3f ms %7.3f ms %8.2fx %8.2fx\n",
                ("group " + std::to_string(i) + " " + g.node(plan.groups[i].nodes[0]).name).c_str(),
                predicted.groups[i].total_ns / 1e6, Ms(t[0].median_ns), Ms(t[1].median_ns),
                Ms(t[2].median_ns), Ratio(t[1], t[0]), Ratio(t[2], t[0]));
    std::printf("  lowered: %s\n  ours: %s\n  oneDNN: %s\n", lowered->DescribeGroup(i).c_str(),
                ours->DescribeGroup(i).c_str(), dnnl->DescribeGroup(i).c_str());
  }
  auto whole = TimeSideBySide(
      {[&] { lowered->Run(); }, [&] { ours->Run(); }, [&] { dnnl->Run(); }, [&] { off->Run(); }},
      Timing(false));
  std::printf(
      "whole plan: predicted %.3f ms; lowered %.3f ms, ours %.3f ms, oneDNN %.3f ms "
      "(%.2fx ours), fallback %.3f ms (%.2fx ours)\n",
      predicted.total.total_ns / 1e6, Ms(whole[0].median_ns), Ms(whole[1].median_ns),
      Ms(whole[2].median_ns), Ratio(whole[2], whole[1]), Ms(whole[3].median_ns),
      Ratio(whole[3], whole[1]));
  std::printf("timings: lowered %s; ours %s; oneDNN %s; fallback %s\n", whole[0].ToString().c_str(),
              whole[1].ToString().c_str(), whole[2].ToString().c_str(),
              whole[3].ToString().c_str());
  return Status::Ok();
}

// A lone recurrent node X [seq, batch, hidden] -> Y, GRU with linear_before_reset 1.
Graph LoneRecurrent(const std::string& op, int64_t seq, int64_t batch, int64_t hidden) {
  GraphBuilder b;
  const int64_t gates = op == "LSTM" ? 4 : 3;
  TensorId x = b.Input({seq, batch, hidden});
  std::vector<Attribute> attrs = {{"hidden_size", hidden}};
  if (gates == 3) attrs.push_back({"linear_before_reset", int64_t{1}});
  b.Output(b.Op(op,
                {x, b.Weight({1, gates * hidden, hidden}), b.Weight({1, gates * hidden, hidden}),
                 b.Weight({1, 2 * gates * hidden})},
                {seq, 1, batch, hidden}, attrs));
  return b.Linked();
}

Status RunSweep(const Args& a) {
  SettleHost(kSettleHostMaxMs, "rnn_bench");
  std::printf("%-5s %4s %6s %6s %10s %10s %11s %8s\n", "op", "seq", "batch", "hidden", "ours",
              "oneDNN", "oneDNN/ours", "lowered");
  for (const char* op : {"LSTM", "GRU"}) {
    for (int64_t hidden : {64, 256, 1024}) {
      for (int64_t batch : {1, 4, 8, 32}) {
        Graph g = LoneRecurrent(op, a.seq, batch, hidden);
        FusionPlan plan = UnfusedPlan(g);
        FUSOR_ASSIGN_OR_RETURN(TensorValues leaves, RandomLeafValues(g, 1));
        FUSOR_ASSIGN_OR_RETURN(RnnPrimitive form, RnnPrimitiveForm(g, g.node(0)));
        FUSOR_ASSIGN_OR_RETURN(auto ours,
                               Executor::Create(g, plan, leaves, On(RnnImplementation::kLoop)));
        FUSOR_ASSIGN_OR_RETURN(
            auto dnnl, Executor::Create(g, plan, leaves, On(RnnImplementation::kPrimitive)));
        auto t = TimeSideBySide({[&] { ours->Run(); }, [&] { dnnl->Run(); }}, Timing(true));
        std::printf("%-5s %4lld %6lld %6lld %7.3f ms %7.3f ms %10.2fx %8s\n", op,
                    static_cast<long long>(a.seq), static_cast<long long>(batch),
                    static_cast<long long>(hidden), Ms(t[0].median_ns), Ms(t[1].median_ns),
                    Ratio(t[1], t[0]), Name(form.implementation));
        std::fflush(stdout);
      }
    }
  }
  return Status::Ok();
}

}  // namespace
}  // namespace fusor

int main(int argc, char** argv) {
  fusor::Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--profile" && i + 1 < argc) {
      a.profile = argv[++i];
    } else if (s == "--sweep") {
      a.sweep = true;
    } else if (s == "--seq" && i + 1 < argc) {
      a.seq = std::stoll(argv[++i]);
    } else if (s.rfind("-", 0) == 0) {
      std::fprintf(stderr, "usage: %s [--profile P.json] [model.onnx] | --sweep [--seq N]\n",
                   argv[0]);
      return 2;
    } else {
      a.model = s;
    }
  }
  fusor::Status s = a.sweep ? fusor::RunSweep(a) : fusor::RunModel(a);
  if (!s.ok()) {
    std::fprintf(stderr, "rnn_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
