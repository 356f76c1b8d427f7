// Where a model's fusion plan comes from, read the same way by the engine (engine.h) and by
// `fusor run`: a plan JSON (`fusor tune --save-plan`), or the best current plan a tuning database
// or deployment snapshot stores for the model's graph hash on a target, or the rules plan with the
// reason neither applied. A plan for another graph or another target is never used: the JSON names
// both (graph/plan_json.h), and stored plans are looked up by them. Each caller decides what a plan
// that does not apply means (the engine falls back to the rules plan, `fusor run` stops). Stateless
// functions; safe from several threads.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "graph/graph.h"
#include "graph/plan.h"

namespace fusor {

// A plan and where it came from, for people.
struct SourcedPlan {
  FusionPlan plan;
  // "plan JSON PATH (N groups)", "tuning database PATH, target T, tuned TIME (N groups)" or
  // "rules plan (N groups): REASON".
  std::string source;
  // Non-empty when the plan loaded but could not be checked against the graph and target (a
  // version-1 plan JSON).
  std::string warning;
};

// The target whose plans are wanted: `target_id`, or this CPU's fingerprint when it is empty.
StatusOr<std::string> PlanTargetId(const std::string& target_id);

// The plan JSON at `path` for `g` on `target_id`; an error names the file and, for a plan of
// another graph or target, both hashes or targets.
StatusOr<SourcedPlan> PlanFromJsonFile(const Graph& g, const std::string& path,
                                       const std::string& target_id);

// The best current plan for g's graph hash on `target_id` in the database at `location` (a SQLite
// tuning database or snapshot, or postgresql://..., opened read-only); nullopt with *reason when it
// holds none (the reason says when the only plans are stale). A database that cannot be read, or a
// stored plan that does not fit the graph of its own hash, is an error.
StatusOr<std::optional<SourcedPlan>> PlanFromDatabase(const Graph& g, const std::string& location,
                                                      const std::string& target_id,
                                                      std::string* reason);

// The rules plan (search/rules.cc), with the reason no other plan applied.
SourcedPlan RulesPlanBecause(const Graph& g, const std::string& reason);

}  // namespace fusor
