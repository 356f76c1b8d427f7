#include "client/tune_command.h"

#include "client/proto_json.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "client/confidence_text.h"
#include "client/connection.h"
#include "client/exit_codes.h"
#include "client/model_options.h"
#include "client/progress_display.h"
#include "client/text_format.h"
#include "graph/graph_proto.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "graph/summary.h"
#include "lowering/plan_legality.h"
#include "lowering/unfused_ops.h"

namespace fusor {
namespace {

struct TuneFlags {
  ModelOptions model;
  ConnectionOptions connection;
  TuneSettings settings;
  bool json = false;
  std::string save_plan;
};

void PrintSummary(const v1::TuneEvent::Result& result, const Graph& g) {
  const v1::Plan& plan = result.plan();
  const bool cache_hit = result.cache_hit();
  std::map<std::string, int> kinds;
  int recomputed = 0;
  for (const auto& group : plan.groups()) {
    ++kinds[std::string(GroupKindName(static_cast<GroupKind>(group.kind())))];
    recomputed += group.recomputed_size();
  }
  std::printf("model            %s (%zu nodes)\n", g.model_name.c_str(), g.num_nodes());
  std::printf("graph hash       %s\n", plan.graph_hash().c_str());
  std::printf("target           %s\n", plan.target_id().c_str());
  std::printf("cache            %s\n",
              cache_hit ? "hit (stored plan, current)" : "miss (tuned now)");
  std::printf("cost model       %s\n",
              CostModelText(plan.cost_model_version(), plan.residual_training_samples()).c_str());
  std::printf("groups           %d (", plan.groups_size());
  bool first = true;
  for (const auto& [k, n] : kinds) {
    std::printf("%s%d %s", first ? "" : ", ", n, k.c_str());
    first = false;
  }
  std::printf(")%s\n",
              recomputed ? (", " + std::to_string(recomputed) + " recomputed copies").c_str() : "");
  std::string unfused = UnfusedOpsText(UnfusedOps(g));
  if (!unfused.empty())
    std::printf("unfused          %s (reference fallback unless marked)\n", unfused.c_str());
  std::printf("predicted        %s vs %s unfused: %s\n", DurationText(plan.predicted_ns()).c_str(),
              DurationText(plan.unfused_predicted_ns()).c_str(),
              RatioText(plan.unfused_predicted_ns(), plan.predicted_ns()).c_str());
  if (plan.measured_ns() > 0) {
    std::printf(
        "measured         %s vs %s unfused: %s%s\n", DurationText(plan.measured_ns()).c_str(),
        DurationText(plan.unfused_measured_ns()).c_str(),
        RatioText(plan.unfused_measured_ns(), plan.measured_ns()).c_str(),
        result.measured_by().empty() ? "" : (" (on agent " + result.measured_by() + ")").c_str());
    if (const std::string confidence = ConfidenceText(plan.confidence()); !confidence.empty()) {
      std::printf("confidence       %s\n", confidence.c_str());
    }
    for (const std::string& note : ConfidenceNotes(plan.confidence())) {
      std::printf("note             %s\n", note.c_str());
    }
  } else if (!result.unmeasured_reason().empty()) {
    std::printf("measured         not measured: %s\n", result.unmeasured_reason().c_str());
  } else {
    std::printf("measured         not measured (the target is not this machine, or budget 0)\n");
  }
  std::printf("peak activations %.1f MiB\n",
              static_cast<double>(plan.peak_memory_bytes()) / (1 << 20));
}

Status SavePlan(const Graph& g, const v1::Plan& plan, const std::string& path) {
  FUSOR_ASSIGN_OR_RETURN(FusionPlan p, PlanFromProto(g, plan));
  std::ofstream out(path);
  if (!out) return Status::IOError("cannot write '" + path + "'");
  out << PlanToJson(p, {plan.graph_hash(), plan.target_id()}).dump(2) << "\n";
  return out ? Status::Ok() : Status::IOError("cannot write '" + path + "'");
}

// PLAN.json for one binding, PLAN.batch=8.json when several bindings are tuned.
std::string PlanPathFor(const std::string& path, const std::string& label, bool several) {
  if (!several || label.empty()) return path;
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return has_ext ? path.substr(0, dot) + "." + label + path.substr(dot) : path + "." + label;
}

// Tunes one bound graph and prints its summary; returns an exit code.
int TuneOne(const TuneFlags& f, TunerApi& api, const Graph& g, const std::string& save_path) {
  ProgressDisplay progress;
  auto result = TuneGraph(
      api, g, f.settings,
      [&](const v1::TuneEvent::Progress& p) {
        progress.Update(p.stage(), p.fraction(), p.detail());
      },
      nullptr);
  progress.Finish();
  if (!result.ok()) {
    return ReportError("tune", result.status());
  }
  if (!save_path.empty()) {
    Status saved = SavePlan(g, result->plan(), save_path);
    if (!saved.ok()) {
      return ReportError("tune", saved);
    }
  }
  if (f.json) {
    std::cout << ProtoJsonText(*result) << "\n";
  } else {
    PrintSummary(*result, g);
  }
  return kExitOk;
}

// Every binding of the symbolic dims (`--dim batch=1,8,32`) is its own graph and hash, tuned and
// stored in turn, as a build farm tunes each shape it deploys.
int RunTune(const TuneFlags& f) {
  auto bound = f.model.ImportEach();
  if (!bound.ok()) {
    return ReportError("tune", bound.status());
  }
  auto api = Connect(f.connection);
  if (!api.ok()) {
    return ReportError("tune", api.status());
  }
  bool several = bound->size() > 1;
  for (size_t i = 0; i < bound->size(); ++i) {
    const ModelOptions::Bound& b = (*bound)[i];
    if (several && !f.json) std::printf("%sbinding          %s\n", i ? "\n" : "", b.label.c_str());
    int code = TuneOne(f, **api, b.graph, PlanPathFor(f.save_plan, b.label, several));
    if (code != kExitOk) return code;
  }
  return kExitOk;
}

}  // namespace

StatusOr<v1::TuneEvent::Result> TuneGraph(TunerApi& api, const Graph& g, const TuneSettings& s,
                                          const ProgressSink& on_progress,
                                          const std::atomic<bool>* cancelled) {
  v1::TuneRequest request;
  *request.mutable_graph() = ToProto(g);
  request.set_target_id(s.target);
  request.set_force(s.force);
  auto* o = request.mutable_options();
  o->set_algorithm(s.algorithm);
  o->set_measure_budget(s.budget);
  o->set_time_limit_s(s.time_limit_s);
  o->set_seed(s.seed);
  o->set_memory_budget_bytes(s.memory_budget);
  o->set_no_residual(s.no_residual);
  o->set_no_kernel_choice(s.no_kernel_choice);
  v1::TuneEvent::Result result;
  bool got_result = false;
  Status status = api.Tune(
      request,
      [&](const v1::TuneEvent& e) {
        if (e.has_progress() && on_progress) {
          on_progress(e.progress());
        } else if (e.has_result()) {
          result = e.result();
          got_result = true;
        }
      },
      cancelled);
  if (status.ok() && !got_result) status = Status::Internal("the tuner finished without a result");
  if (!status.ok()) return status;
  return result;
}

void AddTuneCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("tune", "Tune a model: search, measure, store the best plan");
  auto f = std::make_shared<TuneFlags>();
  f->model.AddTo(cmd);
  AddConnectionOptions(cmd, &f->connection);
  cmd->add_option("--algorithm", f->settings.algorithm, "none, rules, greedy, optimal or default");
  cmd->add_option("--budget", f->settings.budget, "Measurements to spend (0: the tuner's default)");
  cmd->add_option("--time-limit", f->settings.time_limit_s,
                  "Seconds for the whole job (0: default)");
  cmd->add_option("--seed", f->settings.seed, "Seed of every random choice")->capture_default_str();
  cmd->add_option("--memory-budget", f->settings.memory_budget,
                  "Peak activation bytes allowed (0: none)");
  cmd->add_option("--target", f->settings.target,
                  "Target id to tune for (default: the tuner's own CPU)");
  cmd->add_flag("--force", f->settings.force, "Tune again even if a current plan is stored");
  cmd->add_flag("--no-residual", f->settings.no_residual,
                "Score with the analytical cost model alone, without the target's learned "
                "residual");
  cmd->add_flag("--no-kernel-choice", f->settings.no_kernel_choice,
                "Keep oneDNN's first choice of each Conv / MatMul / Gemm implementation instead "
                "of timing the ones it offers");
  cmd->add_flag("--json", f->json, "Print the result as JSON");
  cmd->add_option("--save-plan", f->save_plan,
                  "Write the plan as JSON for `fusor run --plan` (PLAN.batch=8.json per binding "
                  "when --dim gives several)");
  cmd->callback([f, exit_code] { *exit_code = RunTune(*f); });
}

}  // namespace fusor
