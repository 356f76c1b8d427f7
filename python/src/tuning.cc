// fusor._fusor.tune and inspect: the CLI's `fusor tune` and `fusor inspect` for Python. The model
// is imported by the CLI's ModelOptions (so --shape and --dim mean the same and give the same graph
// hashes) and tuned through TuneGraph (client/tune_command.h) against the same in-process
// TuningService local mode uses, or a fusord over gRPC. The per-group rows and plan JSON of a
// tuned plan are built here for database.cc's stored plans too.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "client/connection.h"
#include "client/model_options.h"
#include "client/tune_command.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "graph/summary.h"
#include "lowering/plan_legality.h"
#include "lowering/unfused_ops.h"

namespace fusor::python {

namespace py = pybind11;

// A measured time, or None for 0 (not measured).
py::object MeasuredNs(double ns) { return ns > 0 ? py::object(py::float_(ns)) : py::none(); }

namespace {

py::dict GroupRow(const v1::FusionGroup& group) {
  py::dict row;
  row["group"] = group.id();
  row["kind"] = std::string(GroupKindName(static_cast<GroupKind>(group.kind())));
  row["nodes"] = group.nodes_size();
  row["recomputed"] = group.recomputed_size();
  row["predicted_ns"] = group.predicted().total_ns();
  row["measured_ns"] = MeasuredNs(group.measured_ns());
  return row;
}

}  // namespace

py::dict PlanFields(const v1::Plan& plan) {
  py::dict d;
  d["graph_hash"] = plan.graph_hash();
  d["target"] = plan.target_id();
  d["cost_model_version"] = plan.cost_model_version();
  d["predicted_ns"] = plan.predicted_ns();
  d["unfused_predicted_ns"] = plan.unfused_predicted_ns();
  d["measured_ns"] = MeasuredNs(plan.measured_ns());
  d["unfused_measured_ns"] = MeasuredNs(plan.unfused_measured_ns());
  d["peak_memory_bytes"] = plan.peak_memory_bytes();
  py::list groups;
  for (const auto& group : plan.groups()) groups.append(GroupRow(group));
  d["groups"] = groups;
  return d;
}

std::string PlanJsonText(const Graph& g, const v1::Plan& plan) {
  return PlanToJson(ValueOrThrow(PlanFromProto(g, plan)), {plan.graph_hash(), plan.target_id()})
      .dump();
}

namespace {

ModelOptions Model(const std::string& path, const std::vector<std::string>& shapes,
                   const std::vector<std::string>& dims) {
  ModelOptions m;
  m.path = path;
  m.shapes = shapes;
  m.dims = dims;
  return m;
}

// Local (db, calibrating a never-calibrated CPU first when `calibrate`) unless `connection` names
// a server.
StatusOr<std::unique_ptr<TunerApi>> OpenTuner(const ConnectionOptions& connection, bool calibrate) {
  if (connection.remote()) return Connect(connection);
  FUSOR_ASSIGN_OR_RETURN(auto local, OpenLocalTuner(connection.db_path, calibrate));
  return std::unique_ptr<TunerApi>(std::move(local));
}

py::dict ResultDict(const std::string& label, const Graph& g, const v1::TuneEvent::Result& r) {
  const v1::Plan& plan = r.plan();
  py::dict d = PlanFields(plan);
  d["binding"] = label;
  d["plan_json"] = PlanJsonText(g, plan);
  d["cache_hit"] = r.cache_hit();
  d["measured_by"] = r.measured_by();
  d["unmeasured_reason"] = r.unmeasured_reason();
  return d;
}

// Calls a Python progress callback from the tuner's thread. The first exception it raises cancels
// the tune and is raised again from tune() once the tuner has stopped.
class ProgressRelay {
 public:
  explicit ProgressRelay(py::object callback) : callback_(std::move(callback)) {}

  ProgressSink Sink() {
    if (callback_.is_none()) return {};
    return [this](const v1::TuneEvent::Progress& p) {
      py::gil_scoped_acquire gil;
      if (error_) return;
      try {
        callback_(p.stage(), p.fraction(), p.detail());
      } catch (py::error_already_set& e) {
        error_.emplace(std::move(e));
        cancelled_ = true;
      }
    };
  }
  const std::atomic<bool>* cancelled() const { return &cancelled_; }
  // Raises the callback's exception, if it raised one. Needs the GIL.
  void RaiseIfFailed() {
    if (error_) throw std::move(*error_);
  }

 private:
  py::object callback_;
  std::optional<py::error_already_set> error_;
  std::atomic<bool> cancelled_{false};
};

py::list Tune(const std::string& model_path, const std::vector<std::string>& shapes,
              const std::vector<std::string>& dims, const TuneSettings& settings,
              const ConnectionOptions& connection, bool calibrate, py::object progress) {
  ProgressRelay relay(std::move(progress));
  std::vector<std::pair<const ModelOptions::Bound*, StatusOr<v1::TuneEvent::Result>>> results;
  std::vector<ModelOptions::Bound> bound;
  Status status = [&]() -> Status {
    py::gil_scoped_release nogil;
    FUSOR_ASSIGN_OR_RETURN(bound, Model(model_path, shapes, dims).ImportEach());
    FUSOR_ASSIGN_OR_RETURN(auto api, OpenTuner(connection, calibrate));
    for (const ModelOptions::Bound& b : bound) {
      results.emplace_back(&b, TuneGraph(*api, b.graph, settings, relay.Sink(), relay.cancelled()));
      if (!results.back().second.ok()) return results.back().second.status();
    }
    return Status::Ok();
  }();
  relay.RaiseIfFailed();
  if (!status.ok()) ThrowStatus(status);
  py::list out;
  for (const auto& [b, result] : results) out.append(ResultDict(b->label, b->graph, *result));
  return out;
}

std::string Inspect(const std::string& model_path, const std::vector<std::string>& shapes,
                    const std::vector<std::string>& dims) {
  py::gil_scoped_release nogil;
  Graph g = ValueOrThrow(Model(model_path, shapes, dims).Import());
  return SummaryToJson(Summarize(g, UnfusedOps(g))).dump();
}

}  // namespace

void RegisterTuning(py::module_& m) {
  py::class_<TuneSettings>(m, "TuneSettings")
      .def(py::init<>())
      .def_readwrite("algorithm", &TuneSettings::algorithm)
      .def_readwrite("budget", &TuneSettings::budget)
      .def_readwrite("time_limit_s", &TuneSettings::time_limit_s)
      .def_readwrite("seed", &TuneSettings::seed)
      .def_readwrite("memory_budget", &TuneSettings::memory_budget)
      .def_readwrite("target", &TuneSettings::target)
      .def_readwrite("force", &TuneSettings::force)
      .def_readwrite("no_residual", &TuneSettings::no_residual);
  py::class_<ConnectionOptions>(m, "ConnectionOptions")
      .def(py::init<>())
      .def_readwrite("server", &ConnectionOptions::server)
      .def_readwrite("token_file", &ConnectionOptions::token_file)
      .def_readwrite("tls", &ConnectionOptions::tls)
      .def_readwrite("tls_ca", &ConnectionOptions::tls_ca)
      .def_readwrite("allow_insecure_remote", &ConnectionOptions::allow_insecure_remote)
      .def_readwrite("timeout_s", &ConnectionOptions::timeout_s)
      .def_readwrite("db_path", &ConnectionOptions::db_path);
  m.def("tune", &Tune, py::arg("model_path"), py::arg("shapes"), py::arg("dims"),
        py::arg("settings"), py::arg("connection"), py::arg("calibrate"), py::arg("progress"));
  m.def("inspect", &Inspect, py::arg("model_path"), py::arg("shapes"), py::arg("dims"));
}

}  // namespace fusor::python
