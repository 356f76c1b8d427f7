#include "search/plan_search.h"

#include <chrono>

namespace fusor {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Status CheckBudget(const PlanCost& cost, const SearchOptions& options) {
  if (options.memory_budget_bytes <= 0 ||
      cost.peak_activation_bytes <= options.memory_budget_bytes) {
    return Status::Ok();
  }
  return Status::ResourceExhausted("the best plan found needs " +
                                   std::to_string(cost.peak_activation_bytes) +
                                   " bytes of activations at its peak, over the memory budget of " +
                                   std::to_string(options.memory_budget_bytes) + " bytes");
}

}  // namespace

bool SearchStop::Expired() const {
  if (deadline_ns == std::numeric_limits<int64_t>::max()) return false;
  return (clock != nullptr ? *clock : Clock::Real()).NowNs() >= deadline_ns;
}

std::string_view AlgorithmName(SearchAlgorithm a) {
  switch (a) {
    case SearchAlgorithm::kNone:
      return "none";
    case SearchAlgorithm::kRules:
      return "rules";
    case SearchAlgorithm::kGreedy:
      return "greedy";
    case SearchAlgorithm::kOptimal:
      return "optimal";
    case SearchAlgorithm::kDefault:
      return "default";
  }
  return "default";
}

StatusOr<SearchAlgorithm> ParseAlgorithm(std::string_view name) {
  for (auto a : {SearchAlgorithm::kNone, SearchAlgorithm::kRules, SearchAlgorithm::kGreedy,
                 SearchAlgorithm::kOptimal, SearchAlgorithm::kDefault}) {
    if (AlgorithmName(a) == name) return a;
  }
  if (name.empty()) return SearchAlgorithm::kDefault;
  return Status::InvalidArgument("unknown search algorithm '" + std::string(name) +
                                 "'; expected none, rules, greedy, optimal or default");
}

std::string SearchOptions::CanonicalText() const {
  return "algorithm=" + std::string(AlgorithmName(algorithm)) + ";seed=" + std::to_string(seed) +
         ";max_group_nodes=" + std::to_string(max_group_nodes) +
         ";optimal_region_nodes=" + std::to_string(optimal_region_nodes) +
         ";recompute=" + (allow_recompute ? "1" : "0") +
         ";max_recompute_nodes=" + std::to_string(max_recompute_nodes) +
         ";memory_budget=" + std::to_string(memory_budget_bytes);
}

StatusOr<SearchResult> SearchPlan(const Graph& g, const CostModel& model,
                                  const SearchOptions& options, const SearchStop& stop) {
  auto t0 = std::chrono::steady_clock::now();
  SearchResult result;
  switch (options.algorithm) {
    case SearchAlgorithm::kNone:
      result.plan = UnfusedPlan(g);
      break;
    case SearchAlgorithm::kRules:
      result.plan = RulesPlan(g, options.max_group_nodes);
      break;
    case SearchAlgorithm::kGreedy: {
      FUSOR_ASSIGN_OR_RETURN(result.plan, GreedyPlan(g, model, options, &result.stats, stop));
      break;
    }
    case SearchAlgorithm::kOptimal:
    case SearchAlgorithm::kDefault: {
      FUSOR_ASSIGN_OR_RETURN(FusionPlan greedy, GreedyPlan(g, model, options, &result.stats, stop));
      result.stats.greedy_ns = model.Cost(g, greedy).total.total_ns;
      FUSOR_ASSIGN_OR_RETURN(result.plan,
                             OptimizeRegions(g, model, greedy, options, &result.stats, stop));
      break;
    }
  }
  result.cost = model.Cost(g, result.plan);
  if (result.stats.greedy_ns > 0) {
    result.stats.optimal_gain_ns = result.stats.greedy_ns - result.cost.total.total_ns;
  }
  result.stats.search_ms = MsSince(t0);
  FUSOR_RETURN_IF_ERROR(CheckBudget(result.cost, options));
  return result;
}

}  // namespace fusor
