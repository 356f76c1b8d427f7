#include "client/agents_command.h"

#include <spdlog/fmt/fmt.h>

#include <iostream>
#include <memory>

#include "client/connection.h"
#include "client/exit_codes.h"
#include "client/proto_json.h"
#include "client/text_format.h"

namespace fusor {
namespace {

struct ListFlags {
  ConnectionOptions connection;
  bool json = false;
  bool all = false;  // jobs list: also the done and cancelled jobs still kept.
};

void PrintAgents(const v1::ListAgentsResponse& r) {
  if (r.agents().empty()) {
    std::cout << "no agents registered\n";
    return;
  }
  TextTable table({"AGENT", "TARGET", "STATE", "LAST SEEN", "REGISTERED"});
  for (const v1::AgentStatus& a : r.agents()) {
    table.Add({a.agent_id(), a.target_id(), a.live() ? "live" : "silent",
               AgoText(a.last_seen_unix_ms(), r.now_unix_ms()),
               AgoText(a.registered_unix_ms(), r.now_unix_ms())});
  }
  table.Print(std::cout);
  std::cout << fmt::format("live: heard from within {:.0f} s\n", r.live_s());
}

// What a job is doing, in words: who holds it and until when, or since when it waits.
std::string JobStateText(const v1::MeasurementJobStatus& j, int64_t now) {
  if (j.state() == "leased" && j.lease_expires_unix_ms() < now) {
    return fmt::format("lease of {} expired {}", j.agent_id(),
                       AgoText(j.lease_expires_unix_ms(), now));
  }
  if (j.state() == "leased") {
    return fmt::format("leased to {}, expires {}", j.agent_id(),
                       AgoText(j.lease_expires_unix_ms(), now));
  }
  if (j.state() == "done") {
    return fmt::format("done by {}{}", j.agent_id(), j.error().empty() ? "" : ": " + j.error());
  }
  return j.state();
}

void PrintJobs(const v1::ListMeasurementJobsResponse& r) {
  if (r.jobs().empty()) {
    std::cout << "no measurement jobs\n";
    return;
  }
  TextTable table({"JOB", "TARGET", "GRAPH", "PLANS", "LEASES", "CREATED", "STATE"});
  for (const v1::MeasurementJobStatus& j : r.jobs()) {
    table.Add({std::to_string(j.job_id()), j.target_id(), j.graph_hash().substr(0, 12),
               std::to_string(j.plans()), std::to_string(j.lease()),
               AgoText(j.created_unix_ms(), r.now_unix_ms()), JobStateText(j, r.now_unix_ms())});
  }
  table.Print(std::cout);
}

int RunAgentsList(const ListFlags& f) {
  auto api = Connect(f.connection);
  if (!api.ok()) return ReportError("agents list", api.status());
  auto response = (*api)->ListAgents({});
  if (!response.ok()) return ReportError("agents list", response.status());
  if (f.json) {
    std::cout << ProtoJsonText(*response) << "\n";
  } else {
    PrintAgents(*response);
  }
  return kExitOk;
}

int RunJobsList(const ListFlags& f) {
  auto api = Connect(f.connection);
  if (!api.ok()) return ReportError("jobs list", api.status());
  v1::ListMeasurementJobsRequest request;
  request.set_include_finished(f.all);
  auto response = (*api)->ListMeasurementJobs(request);
  if (!response.ok()) return ReportError("jobs list", response.status());
  if (f.json) {
    std::cout << ProtoJsonText(*response) << "\n";
  } else {
    PrintJobs(*response);
  }
  return kExitOk;
}

CLI::App* AddList(CLI::App* parent, const std::string& help, const std::shared_ptr<ListFlags>& f) {
  CLI::App* list = parent->add_subcommand("list", help);
  AddConnectionOptions(list, &f->connection);
  list->add_flag("--json", f->json, "Print JSON for scripts instead of a table");
  return list;
}

}  // namespace

void AddAgentsAndJobsCommands(CLI::App& app, int* exit_code) {
  CLI::App* agents = app.add_subcommand("agents", "A fusord's measurement agents");
  agents->require_subcommand(1);
  auto a = std::make_shared<ListFlags>();
  AddList(agents, "Every registered agent: live or silent, and when last heard from", a)
      ->callback([a, exit_code] { *exit_code = RunAgentsList(*a); });

  CLI::App* jobs = app.add_subcommand("jobs", "A fusord's measurement job queue");
  jobs->require_subcommand(1);
  auto j = std::make_shared<ListFlags>();
  CLI::App* list = AddList(
      jobs, "Measurement jobs waiting or held, oldest first: who holds each and until when", j);
  list->add_flag("--all", j->all, "Also the done and cancelled jobs still kept (a day)");
  list->callback([j, exit_code] { *exit_code = RunJobsList(*j); });
}

}  // namespace fusor
