#include "client/agent_command.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <memory>

#include "client/connection.h"
#include "client/exit_codes.h"
#include "client/measurement_agent.h"

namespace fusor {
namespace {

// Set by SIGTERM / SIGINT: the agent finishes (or gives up) its poll and stops between jobs.
std::atomic<bool> g_stop{false};

void RequestStop(int) { g_stop = true; }

struct AgentFlags {
  ConnectionOptions connection;
  std::string local_db;
  std::string log_level = "info";
  MeasurementAgentOptions agent;
};

int RunAgent(const AgentFlags& f) {
  if (!f.connection.remote()) {
    return ReportUsageError("agent",
                            "fusor agent needs --server (the fusord it measures for) and a token "
                            "with the 'agent' role");
  }
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  auto server = Connect(f.connection);
  if (!server.ok()) return ReportError("agent", server.status());
  auto local = OpenLocalTuner(f.local_db, /*auto_calibrate=*/false);
  if (!local.ok()) return ReportError("agent", local.status().WithContext("--local-db"));
  auto profile = CalibratedLocalProfile(**local);
  if (!profile.ok()) return ReportError("agent", profile.status());
  MeasurementAgent agent(server->get(), f.agent);
  if (Status s = agent.Register(*profile); !s.ok()) return ReportError("agent", s);
  spdlog::info("agent: {} measuring for target {} at {}", agent.agent_id(), agent.target_id(),
               f.connection.server);
  std::signal(SIGTERM, RequestStop);
  std::signal(SIGINT, RequestStop);
  if (Status s = agent.Run(&g_stop); !s.ok()) return ReportError("agent", s);
  return kExitOk;
}

}  // namespace

void AddAgentCommand(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "agent", "Measure plans for a fusord on this machine (a measurement agent of its target)");
  auto f = std::make_shared<AgentFlags>();
  AddRemoteOptions(cmd, &f->connection, "The fusord this agent measures for (host:port)");
  cmd->add_option("--local-db", f->local_db,
                  "This machine's tuning database, holding its calibration (default: the "
                  "per-user SQLite file)");
  cmd->add_option("--name", f->agent.name, "Name of this agent (default: the host name)");
  cmd->add_option("--measure-threads", f->agent.measure_threads, "OpenMP threads; 0: all cores");
  cmd->add_option("--min-measure-ms", f->agent.min_measure_ms,
                  "Repeat each plan's timing this long (default: as fusord asks)");
  cmd->add_option("--poll", f->agent.poll_s, "Seconds one poll for a job waits");
  cmd->add_option("--max-jobs", f->agent.max_jobs, "Stop after this many jobs (default: never)");
  cmd->add_option("--log-level", f->log_level,
                  "Log lines at this level and above (info: one line per job and at exit)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  cmd->callback([f, exit_code] { *exit_code = RunAgent(*f); });
}

}  // namespace fusor
