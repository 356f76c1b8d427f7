#include "client/plan_command.h"

#include "client/proto_json.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include "client/connection.h"
#include "client/exit_codes.h"
#include "client/graphviz.h"
#include "client/model_options.h"
#include "client/plan_explain.h"
#include "client/text_format.h"
#include "costmodel/cost_model.h"
#include "costmodel/residual.h"
#include "graph/canonical.h"
#include "graph/plan.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

struct PlanFlags {
  ModelOptions model;
  ConnectionOptions connection;
  std::string target;
  bool json = false;
  bool dot = false;
  bool wide = false;
  std::string svg;
};

struct Loaded {
  Graph graph;
  v1::Plan proto;
  bool stale = false;
  FusionPlan plan;
  HardwareProfile profile;
};

StatusOr<HardwareProfile> ProfileOf(TunerApi& api, const std::string& target_id) {
  FUSOR_ASSIGN_OR_RETURN(v1::ListTargetsResponse targets, api.ListTargets({}));
  for (const auto& p : targets.profiles()) {
    if (p.target().id() == target_id) return ProfileFromProto(p);
  }
  return Status::NotFound("target '" + target_id + "' is not known to the tuner");
}

StatusOr<Loaded> Load(const PlanFlags& f) {
  Loaded l;
  FUSOR_ASSIGN_OR_RETURN(l.graph, f.model.Import());
  FUSOR_ASSIGN_OR_RETURN(auto api, Connect(f.connection));
  v1::GetPlanRequest request;
  request.set_graph_hash(CanonicalHash(l.graph));
  request.set_target_id(f.target);
  auto response = api->GetPlan(request);
  if (!response.ok()) {
    if (response.status().code() != Status::Code::kNotFound) return response.status();
    return Status::NotFound(response.status().message() + "; tune it first: fusor tune " +
                            f.model.path);
  }
  l.proto = response->plan();
  l.stale = response->stale();
  FUSOR_ASSIGN_OR_RETURN(l.plan, PlanFromProto(l.graph, l.proto));
  FUSOR_ASSIGN_OR_RETURN(l.profile, ProfileOf(*api, l.proto.target_id()));
  return l;
}

std::string Us(double ns) { return fmt::format("{:.1f}", ns / 1e3); }

// The groups in the TermColumns (client/plan_explain.h), which add up to each group's predicted
// time; the ops cut to fit kTextColumns unless `wide`.
void PrintTable(const Loaded& l, bool wide) {
  std::cout << "plan for " << l.graph.model_name << " on target " << l.proto.target_id()
            << (l.stale ? " (STALE: older cost model or calibration; retune)" : "") << "\n";
  TextTable table({"group", "kind", "predicted", "compute", "memory", "launch", "other",
                   "ops (* = recomputed copy)"});
  for (int i = 0; i < l.proto.groups_size(); ++i) {
    const v1::CostTerms& t = l.proto.groups(i).predicted();
    const double other = t.total_ns() - t.compute_ns() - t.memory_ns() - t.launch_ns();
    table.Add({std::to_string(i), std::string(GroupKindName(l.plan.groups[i].kind)),
               Us(t.total_ns()), Us(t.compute_ns()), Us(t.memory_ns()), Us(t.launch_ns()),
               Us(other), GroupOps(l.graph, l.plan.groups[i])});
  }
  for (size_t column : {0, 2, 3, 4, 5, 6}) table.AlignRight(column);
  if (!wide) table.FitTo(kTextColumns, 7);
  std::cout << "times in us; predicted = compute + memory + launch + other\n";
  table.Print(std::cout);
  std::cout << OtherColumnText() << "; `fusor plan explain` lists each term\n";
  // The whole plan: its groups' sum and what the plan adds (CostModel::WholePlan).
  const double in_plan = l.proto.in_plan_ns();
  std::cout << "total: predicted " << DurationText(l.proto.predicted_ns()) << " = groups "
            << DurationText(l.proto.predicted_ns() - in_plan) << " + in-plan "
            << (in_plan > 0 ? DurationText(in_plan) : "0") << " (unfused "
            << DurationText(l.proto.unfused_predicted_ns()) << ")\n";
  if (l.proto.measured_ns() > 0) {
    std::cout << "       measured " << DurationText(l.proto.measured_ns()) << " (unfused "
              << DurationText(l.proto.unfused_measured_ns()) << ")\n";
  }
}

// Graphviz: one cluster per group, edges between nodes; recomputed copies are dashed.
std::string ToDot(const Loaded& l) {
  std::ostringstream out;
  out << "digraph plan {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  for (size_t i = 0; i < l.plan.groups.size(); ++i) {
    const FusionGroup& group = l.plan.groups[i];
    const v1::FusionGroup& stored = l.proto.groups(static_cast<int>(i));
    out << "  subgraph cluster_" << i << " {\n    label=\"#" << i << " "
        << GroupKindName(group.kind) << "  predicted "
        << DurationText(stored.predicted().total_ns())
        << (stored.measured_ns() > 0 ? ", measured " + DurationText(stored.measured_ns()) : "")
        << "\";\n";
    for (NodeId n : group.nodes) {
      bool copy = std::count(group.recomputed.begin(), group.recomputed.end(), n) > 0;
      out << "    g" << i << "_n" << n << " [label=\"" << l.graph.node(n).op_type << "\""
          << (copy ? ", style=dashed" : "") << "];\n";
    }
    out << "  }\n";
  }
  // An edge from the producer's copy in the same group if there is one, else from its owner.
  for (size_t i = 0; i < l.plan.groups.size(); ++i) {
    for (NodeId n : l.plan.groups[i].nodes) {
      for (TensorId t : l.graph.node(n).inputs) {
        NodeId p = t == kNoId ? kNoId : l.graph.tensor(t).producer;
        if (p == kNoId) continue;
        size_t from = i;
        if (!std::count(l.plan.groups[i].nodes.begin(), l.plan.groups[i].nodes.end(), p)) {
          for (size_t k = 0; k < l.plan.groups.size(); ++k) {
            const auto& gk = l.plan.groups[k];
            if (std::count(gk.nodes.begin(), gk.nodes.end(), p) &&
                !std::count(gk.recomputed.begin(), gk.recomputed.end(), p)) {
              from = k;
            }
          }
        }
        out << "  g" << from << "_n" << p << " -> g" << i << "_n" << n << ";\n";
      }
    }
  }
  out << "}\n";
  return out.str();
}

int Fail(const char* verb, const Status& s) { return ReportError("plan " + std::string(verb), s); }

int RunShow(const PlanFlags& f) {
  auto l = Load(f);
  if (!l.ok()) return Fail("show", l.status());
  if (f.json) {
    std::cout << ProtoJsonText(l->proto) << "\n";
  } else if (f.dot) {
    std::cout << ToDot(*l);
  } else {
    PrintTable(*l, f.wide);
  }
  if (!f.svg.empty()) {
    Status s = RenderSvg(ToDot(*l), f.svg);
    if (!s.ok()) return Fail("show", s);
    std::cerr << "wrote " << f.svg << "\n";
  }
  return kExitOk;
}

// The model the plan was chosen with: the analytical one, with the learned residual the plan
// carries on top (its `learned` term) when it has one.
StatusOr<std::unique_ptr<CostModel>> ChoosingModel(const Loaded& l) {
  if (l.proto.learned_residual().empty()) {
    return std::unique_ptr<CostModel>(std::make_unique<AnalyticalCostModel>(l.profile));
  }
  nlohmann::json j = nlohmann::json::parse(l.proto.learned_residual(), nullptr, false);
  StatusOr<ResidualModel> residual =
      j.is_discarded() ? Status::InvalidArgument("it is not JSON") : ResidualFromJson(j);
  if (!residual.ok()) {
    return Status::Corruption("the learned residual stored with the plan of graph " +
                              l.proto.graph_hash().substr(0, 12) + " on target '" +
                              l.proto.target_id() + "' does not read back (" +
                              residual.status().message() + "); retune with --force");
  }
  return std::unique_ptr<CostModel>(
      std::make_unique<CorrectedCostModel>(l.profile, *std::move(residual)));
}

// Every group's predicted time and the named terms it adds up to (client/plan_explain.h).
int RunExplain(const PlanFlags& f) {
  auto l = Load(f);
  if (!l.ok()) return Fail("explain", l.status());
  StatusOr<std::unique_ptr<CostModel>> model = ChoosingModel(*l);
  if (!model.ok()) return Fail("explain", model.status());
  ExplainedPlan groups = ExplainPlan(l->graph, l->plan, **model);
  const std::string& version = l->proto.cost_model_version();
  const int32_t training = l->proto.residual_training_samples();
  if (f.json) {
    nlohmann::json out = ExplainJson(groups);
    out["cost_model_version"] = version;
    out["residual_training_samples"] = training;
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "chosen with " << CostModelText(version, training) << "\n";
    std::cout << ExplainTable(groups, l->profile.calibrated_unix_ms != 0, f.wide);
  }
  return kExitOk;
}

CLI::App* AddVerb(CLI::App* plan, const char* name, const char* help,
                  const std::shared_ptr<PlanFlags>& f) {
  auto* cmd = plan->add_subcommand(name, help);
  f->model.AddTo(cmd);
  AddConnectionOptions(cmd, &f->connection);
  cmd->add_option("--target", f->target, "Target id (default: the tuner's own CPU)");
  return cmd;
}

}  // namespace

void AddPlanCommands(CLI::App& app, int* exit_code) {
  auto* plan = app.add_subcommand("plan", "Show a stored plan, or explain its fusions");
  plan->require_subcommand(1);
  auto show = std::make_shared<PlanFlags>();
  auto* show_cmd =
      AddVerb(plan, "show", "The stored plan of a model: groups and predicted terms", show);
  show_cmd->add_flag("--json", show->json, "Print the plan proto as JSON");
  show_cmd->add_flag("--dot", show->dot, "Print Graphviz source, one cluster per group");
  show_cmd->add_flag("--wide", show->wide, "Print every group's ops whole");
  show_cmd->add_option("--svg", show->svg, "Render the plan to an SVG file (needs graphviz)");
  show_cmd->callback([show, exit_code] { *exit_code = RunShow(*show); });
  auto explain = std::make_shared<PlanFlags>();
  auto* explain_cmd = AddVerb(
      plan, "explain", "Each group's predicted time and the cost terms it adds up to", explain);
  explain_cmd->add_flag("--json", explain->json, "Print the groups and their terms as JSON");
  explain_cmd->add_flag("--wide", explain->wide,
                        "Every named term in a column of its own, and the ops whole");
  explain_cmd->callback([explain, exit_code] { *exit_code = RunExplain(*explain); });
}

}  // namespace fusor
