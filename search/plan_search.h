// Plan search: from a graph and a cost model to a fusion plan. Algorithms, selectable by name:
//   none     every op alone (the reference);
//   rules    a baseline in the manner of TVM's FuseOps: an anchor takes the elementwise chain after
//            it, elementwise fuses into elementwise along single-consumer chains; no cost model;
//   greedy   in the manner of XLA's priority fusion: repeatedly apply the merge (producer group
//   into
//            consumer group) or recompute (a cheap producer duplicated into all its consumers) with
//            the largest predicted benefit, updating priorities incrementally;
//   optimal  the exact minimum predicted cost over all partitions of each region of at most
//            `optimal_region_nodes` nodes (dynamic programming over the region's down-sets),
//            starting from greedy's plan, so it is never worse than greedy;
//   default  greedy, then optimal on every region small enough.
// Every search refuses a plan whose peak activation memory passes the budget. Search is
// deterministic for a seed; thresholds are named constants in SearchOptions. Thread-safe: a search
// owns its state; the graph and cost model are only read.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"
#include "costmodel/cost_model.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

enum class SearchAlgorithm : uint8_t { kNone, kRules, kGreedy, kOptimal, kDefault };
std::string_view AlgorithmName(SearchAlgorithm a);
StatusOr<SearchAlgorithm> ParseAlgorithm(std::string_view name);

struct SearchOptions {
  SearchAlgorithm algorithm = SearchAlgorithm::kDefault;
  uint64_t seed = 1;
  // No group grows past this many nodes (bounds compile time of fused loops and search work).
  int max_group_nodes = 64;
  // Regions the exact search re-partitions hold at most this many nodes.
  int optimal_region_nodes = 12;
  // Candidate groups the exact search considers per region, at most.
  int max_region_candidates = 20000;
  // Recompute a producer only if it has at most this many nodes (cheap producers only).
  int max_recompute_nodes = 4;
  bool allow_recompute = true;
  // Peak activation bytes allowed; 0 for no limit.
  int64_t memory_budget_bytes = 0;

  // "algorithm=default;seed=1;..." — part of the key a tuned plan is stored under.
  std::string CanonicalText() const;
};

struct SearchStats {
  int64_t candidates = 0;      // Legal groups enumerated for the exact search.
  double candidates_ms = 0;    // Time spent enumerating them.
  double search_ms = 0;        // Whole search, wall time.
  int64_t merges = 0;          // Greedy merges applied.
  int64_t recomputes = 0;      // Greedy recomputes applied.
  int regions_optimized = 0;   // Regions the exact search solved.
  double greedy_ns = 0;        // Predicted time of greedy's plan (when greedy ran).
  double optimal_gain_ns = 0;  // How much the exact search improved on greedy.
  bool stopped_early = false;  // The deadline ended the search with the plan found so far.
};

// What ends a search before it is done, checked between greedy steps and between the exact
// search's regions (each step and region is bounded by max_group_nodes and
// max_region_candidates, so a check comes within milliseconds). Cancellation fails the search
// (Cancelled); the deadline ends it with the legal plan found so far (SearchStats::stopped_early),
// since a caller with a time limit would rather have a partly fused plan than none.
struct SearchStop {
  const std::atomic<bool>* cancelled = nullptr;
  const Clock* clock = nullptr;                               // Null: Clock::Real().
  int64_t deadline_ns = std::numeric_limits<int64_t>::max();  // On `clock`.

  bool Cancelled() const { return cancelled != nullptr && cancelled->load(); }
  bool Expired() const;
};

struct SearchResult {
  FusionPlan plan;
  PlanCost cost;
  SearchStats stats;
};

StatusOr<SearchResult> SearchPlan(const Graph& g, const CostModel& model,
                                  const SearchOptions& options = {}, const SearchStop& stop = {});

// The individual algorithms (SearchPlan dispatches to them).
FusionPlan RulesPlan(const Graph& g, int max_group_nodes);
StatusOr<FusionPlan> GreedyPlan(const Graph& g, const CostModel& model,
                                const SearchOptions& options, SearchStats* stats,
                                const SearchStop& stop = {});
StatusOr<FusionPlan> OptimizeRegions(const Graph& g, const CostModel& model,
                                     const FusionPlan& start, const SearchOptions& options,
                                     SearchStats* stats, const SearchStop& stop = {});

}  // namespace fusor
