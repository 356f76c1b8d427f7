// fusor._fusor.Database: a tuning database (or a `fusor db export` snapshot) opened read-only, as
// `fusor db query` and `fusor db show` read it: plans with their staleness, measurements, history
// and counts. Nothing is written, not even a schema migration. Plans come out as dicts (the fields
// of `fusor db query --json`, plus the plan JSON and its per-group times) that python/fusor/
// database.py shapes into StoredPlan objects. The store is safe from many threads; every call
// releases the GIL while it reads.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "db/default_path.h"
#include "db/layered_plan_store.h"
#include "db/open_plan_store.h"
#include "db/plan_order.h"
#include "engine/plan_source.h"
#include "graph/graph_proto.h"

namespace fusor::python {
namespace {

namespace py = pybind11;

// The store at `location` ("" for the per-user default, which must exist) over the snapshots,
// every layer read-only, as the CLI's `fusor db` opens them.
StatusOr<std::unique_ptr<db::PlanStore>> OpenReadOnly(const std::string& location,
                                                      const std::vector<std::string>& snapshots) {
  std::string path = location;
  if (path.empty()) {
    FUSOR_ASSIGN_OR_RETURN(path, db::DefaultDatabasePath(/*create_directories=*/false));
  }
  std::vector<std::unique_ptr<db::PlanStore>> layers;
  std::vector<std::string> locations = {path};
  locations.insert(locations.end(), snapshots.begin(), snapshots.end());
  for (const std::string& l : locations) {
    FUSOR_ASSIGN_OR_RETURN(auto store, db::OpenPlanStore(l, {/*read_only=*/true}));
    layers.push_back(std::move(store));
  }
  if (layers.size() == 1) return std::move(layers.front());
  return std::unique_ptr<db::PlanStore>(std::make_unique<db::LayeredPlanStore>(std::move(layers)));
}

// The stored plan's graph, for the plan JSON (which names nodes by the graph's). A graph that no
// longer converts leaves the plan without its JSON rather than failing the whole query.
std::optional<Graph> GraphOf(db::PlanStore& store, const std::string& graph_hash) {
  StatusOr<v1::Graph> proto = store.GetGraph(graph_hash);
  if (!proto.ok()) return std::nullopt;
  StatusOr<Graph> g = FromProto(*proto);
  if (!g.ok()) return std::nullopt;
  return std::move(g).value();
}

// The fields of `fusor db query --json` (PlanFields' and the store's), and the plan JSON
// ("plan_json", None when its graph is missing).
py::dict StoredPlanDict(const db::StoredPlan& s, const std::optional<Graph>& graph) {
  const v1::Plan& p = s.plan;
  py::dict d = PlanFields(p);
  d["model_name"] = s.model_name;
  d["search_options"] = p.search_options();
  std::optional<double> speedup = db::SpeedUp(p);
  d["speedup"] = speedup ? py::object(py::float_(*speedup)) : py::none();
  d["created_unix_ms"] = p.created_unix_ms();
  d["stale"] = s.stale;
  d["stale_reason"] = s.stale_reason;
  d["database"] = s.database;
  d["plan_json"] = graph ? py::object(py::str(PlanJsonText(*graph, p))) : py::none();
  return d;
}

py::dict MeasurementDict(const db::Measurement& m) {
  py::dict d;
  d["group"] = m.group_id ? py::object(py::int_(*m.group_id)) : py::none();
  d["median_ns"] = m.median_ns;
  d["spread"] = m.spread;
  d["samples_ns"] = m.samples_ns;
  d["measured_unix_ms"] = m.measured_unix_ms;
  d["agent_id"] = m.agent_id.empty() ? py::none() : py::object(py::str(m.agent_id));
  return d;
}

py::dict HistoryDict(const db::HistoryEvent& e) {
  py::dict d;
  d["at_unix_ms"] = e.at_unix_ms;
  d["event"] = e.event;
  d["graph_hash"] = e.key.graph_hash;
  d["target"] = e.key.target_id;
  d["cost_model_version"] = e.key.cost_model_version;
  d["search_options"] = e.key.search_options;
  d["predicted_ns"] = MeasuredNs(e.predicted_ns);
  d["measured_ns"] = MeasuredNs(e.measured_ns);
  d["detail"] = e.detail;
  d["database"] = e.database;
  return d;
}

py::dict StatsDict(const db::DatabaseStats& s) {
  py::dict d;
  d["path"] = s.path;
  d["schema_version"] = s.schema_version;
  d["snapshot_of_target"] = s.snapshot_of_target;
  d["file_bytes"] = s.file_bytes;
  d["targets"] = s.targets;
  d["graphs"] = s.graphs;
  d["plans"] = s.plans;
  d["stale_plans"] = s.stale_plans;
  d["measurements"] = s.measurements;
  d["history_events"] = s.history_events;
  d["calibration_runs"] = s.calibration_runs;
  py::list targets;
  for (const db::TargetStats& t : s.per_target) {
    py::dict row;
    row["target"] = t.target_id;
    row["cpu_model"] = t.cpu_model;
    row["isa"] = t.isa;
    row["calibrated_unix_ms"] = t.calibrated_unix_ms;
    row["plans"] = t.plans;
    row["stale_plans"] = t.stale_plans;
    targets.append(row);
  }
  d["per_target"] = targets;
  return d;
}

// The read-only store and the cost-model version plans are judged against ("" for each target's
// calibrated one).
class Database {
 public:
  Database(const std::string& location, const std::vector<std::string>& snapshots,
           std::string cost_model_version)
      : cost_model_version_(std::move(cost_model_version)) {
    py::gil_scoped_release nogil;
    store_ = ValueOrThrow(OpenReadOnly(location, snapshots));
  }

  // One page of plans (db::PlanQuery's filters), newest first, and the next page's token.
  py::tuple Query(db::PlanQuery q) {
    q.current_cost_model_version = cost_model_version_;
    db::PlanPage page;
    std::vector<std::optional<Graph>> graphs;
    {
      py::gil_scoped_release nogil;
      page = ValueOrThrow(store_->QueryPlans(q));
      for (const db::StoredPlan& s : page.plans)
        graphs.push_back(GraphOf(*store_, s.plan.graph_hash()));
    }
    py::list plans;
    for (size_t i = 0; i < page.plans.size(); ++i)
      plans.append(StoredPlanDict(page.plans[i], graphs[i]));
    return py::make_tuple(plans, page.next_page_token);
  }

  // The plan an Engine given this database runs for the graph on the target ("" for this CPU's):
  // the store's best current one; None when it holds none that is current.
  py::object Best(const std::string& graph_hash, const std::string& target) {
    std::optional<std::pair<db::StoredPlan, std::optional<Graph>>> best;
    {
      py::gil_scoped_release nogil;
      const std::string target_id = ValueOrThrow(PlanTargetId(target));
      StatusOr<db::StoredPlan> s = store_->BestPlan(graph_hash, target_id, cost_model_version_);
      if (!s.ok() && s.status().code() != Status::Code::kNotFound) ThrowStatus(s.status());
      if (s.ok()) best.emplace(*s, GraphOf(*store_, graph_hash));
    }
    if (!best) return py::none();
    return StoredPlanDict(best->first, best->second);
  }

  py::list Measurements(const db::PlanKey& key) {
    std::vector<db::Measurement> rows = [&] {
      py::gil_scoped_release nogil;
      return ValueOrThrow(store_->GetMeasurements(key));
    }();
    py::list out;
    for (const db::Measurement& m : rows) out.append(MeasurementDict(m));
    return out;
  }

  py::list History(const db::HistoryQuery& q) {
    std::vector<db::HistoryEvent> rows = [&] {
      py::gil_scoped_release nogil;
      return ValueOrThrow(store_->History(q));
    }();
    py::list out;
    for (const db::HistoryEvent& e : rows) out.append(HistoryDict(e));
    return out;
  }

  py::list Stats() {
    std::vector<db::DatabaseStats> rows = [&] {
      py::gil_scoped_release nogil;
      return ValueOrThrow(store_->Stats(cost_model_version_));
    }();
    py::list out;
    for (const db::DatabaseStats& s : rows) out.append(StatsDict(s));
    return out;
  }

 private:
  std::string cost_model_version_;
  std::unique_ptr<db::PlanStore> store_;
};

db::PlanQuery MakeQuery(const std::string& model, const std::string& target,
                        const std::string& graph, int64_t since_ms, int64_t until_ms,
                        double min_speedup, bool current, int page_size,
                        const std::string& page_token) {
  db::PlanQuery q;
  q.model_name = model;
  q.target_id = target;
  q.graph_hash_prefix = graph;
  q.created_after_unix_ms = since_ms;
  q.created_before_unix_ms = until_ms;
  q.min_speedup = min_speedup;
  q.only_current = current;
  q.page_size = page_size;
  q.page_token = page_token;
  return q;
}

}  // namespace

void RegisterDatabase(py::module_& m) {
  py::class_<Database>(m, "Database")
      .def(py::init<const std::string&, const std::vector<std::string>&, std::string>(),
           py::arg("location"), py::arg("snapshots"), py::arg("cost_model_version"))
      .def(
          "query",
          [](Database& d, const std::string& model, const std::string& target,
             const std::string& graph, int64_t since_ms, int64_t until_ms, double min_speedup,
             bool current, int page_size, const std::string& page_token) {
            return d.Query(MakeQuery(model, target, graph, since_ms, until_ms, min_speedup, current,
                                     page_size, page_token));
          },
          py::arg("model"), py::arg("target"), py::arg("graph"), py::arg("since_ms"),
          py::arg("until_ms"), py::arg("min_speedup"), py::arg("current"), py::arg("page_size"),
          py::arg("page_token"))
      .def(
          "measurements",
          [](Database& d, const std::string& graph_hash, const std::string& target,
             const std::string& cost_model_version, const std::string& search_options) {
            return d.Measurements({graph_hash, target, cost_model_version, search_options});
          },
          py::arg("graph_hash"), py::arg("target"), py::arg("cost_model_version"),
          py::arg("search_options"))
      .def(
          "history",
          [](Database& d, const std::string& graph, const std::string& target, int limit) {
            return d.History({graph, target, limit});
          },
          py::arg("graph"), py::arg("target"), py::arg("limit"))
      .def("best", &Database::Best, py::arg("graph_hash"), py::arg("target"))
      .def("stats", &Database::Stats);
  m.attr("MAX_PAGE_SIZE") = db::PlanQuery::kMaxPageSize;
}

}  // namespace fusor::python
