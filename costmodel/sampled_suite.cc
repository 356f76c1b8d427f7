#include "costmodel/sampled_suite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "graph/canonical.h"
#include "graph/op_registry.h"
#include "lowering/plan_legality.h"

namespace fusor {
namespace {

struct Candidate {
  const Graph* model;
  std::vector<NodeId> nodes;
};

// Distinct groups of each model's structural plans (most fused, a random legal one, every op
// alone), cut to their first `max_ops` ops, binned by kind.
std::map<std::string, std::vector<Candidate>> Bins(const std::vector<const Graph*>& models,
                                                   const SampledSuiteOptions& options) {
  std::map<std::string, std::vector<Candidate>> bins;
  std::set<std::string> seen;
  for (const Graph* g : models) {
    for (const FusionPlan& plan :
         {MaxFusionPlan(*g), RandomLegalPlan(*g, options.seed, 0.7, 0.0), UnfusedPlan(*g)}) {
      for (const FusionGroup& group : plan.groups) {
        size_t n = std::min<size_t>(group.nodes.size(), std::max(options.max_ops, 1));
        std::vector<NodeId> nodes(group.nodes.begin(), group.nodes.begin() + n);
        Graph region = g->ExtractRegion(nodes);
        std::vector<NodeId> all(region.num_nodes());
        for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<NodeId>(i);
        auto kind = InferGroupKind(region, all);
        if (!kind.ok() || !seen.insert(CanonicalHash(region)).second) continue;
        FusionGroup whole{*kind, all, {}};
        bins[GroupKindLabel(region, whole)].push_back({g, std::move(nodes)});
      }
    }
  }
  return bins;
}

// Benchmarks per bin: proportional to the square root of its size, at least one each while the
// count allows, largest remainders first.
std::map<std::string, int> Shares(const std::map<std::string, std::vector<Candidate>>& bins,
                                  int count) {
  double total = 0;
  for (const auto& [label, list] : bins) total += std::sqrt(list.size());
  std::map<std::string, int> shares;
  std::vector<std::pair<double, std::string>> remainders;
  int given = 0;
  for (const auto& [label, list] : bins) {
    double exact = count * std::sqrt(list.size()) / total;
    int n = std::min<int>(std::max(1, static_cast<int>(exact)), list.size());
    shares[label] = n;
    given += n;
    remainders.emplace_back(-(exact - std::floor(exact)), label);
  }
  std::sort(remainders.begin(), remainders.end());
  for (size_t i = 0; given < count && i < remainders.size(); ++i) {
    const std::string& label = remainders[i].second;
    if (shares[label] < static_cast<int>(bins.at(label).size())) ++shares[label], ++given;
  }
  return shares;
}

}  // namespace

std::string GroupKindLabel(const Graph& g, const FusionGroup& group) {
  std::string kind(GroupKindName(group.kind));
  if (group.nodes.size() == 1) return kind + ":" + g.node(group.nodes[0]).op_type;
  if (group.kind != GroupKind::kAnchor) return kind;
  for (NodeId id : group.nodes) {
    if (ClassifyNode(g, g.node(id)) == OpClass::kAnchor) return kind + ":" + g.node(id).op_type;
  }
  return kind;
}

std::vector<CalibrationBenchmark> SampledCalibrationSuite(const std::vector<const Graph*>& models,
                                                          const SampledSuiteOptions& options) {
  auto bins = Bins(models, options);
  std::map<std::string, int> shares = Shares(bins, options.count);
  std::mt19937_64 rng(options.seed);
  std::vector<CalibrationBenchmark> suite;
  for (auto& [label, list] : bins) {
    std::shuffle(list.begin(), list.end(), rng);
    for (int i = 0; i < shares[label]; ++i) {
      const Candidate& c = list[i];
      Graph region = c.model->ExtractRegion(c.nodes);
      std::vector<NodeId> all(region.num_nodes());
      for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<NodeId>(k);
      GroupKind kind = InferGroupKind(region, all).value();
      std::string name =
          "sampled:" + c.model->model_name + ":" + label + ":" + c.model->node(c.nodes[0]).name;
      suite.push_back({name, std::move(region), FusionPlan{{FusionGroup{kind, all, {}}}}, false});
    }
  }
  return suite;
}

}  // namespace fusor
