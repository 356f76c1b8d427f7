// Runs the real fusord (and the fusor CLI, and `fusor agent`) as child processes for the
// integration tests: start fusord on
// a free loopback port (fusord is given port 0 and its log says which it bound), stop with
// SIGTERM, read the log. The destructor kills a fusord still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace fusor::testing {

// fusord: $FUSORD_FOR_TEST if set (another build of it, to measure before and after a change),
// else the one built here.
std::string FusordBinary();
// The fusor CLI: $FUSOR_CLI_FOR_TEST if set (a build of it elsewhere), else the one built here.
std::string FusorBinary();

class FusordProcess {
 public:
  // Starts fusord with `args` and --listen 127.0.0.1:0, logging to `log`; waits until it listens.
  static StatusOr<std::unique_ptr<FusordProcess>> Start(const std::vector<std::string>& args,
                                                        const std::filesystem::path& log);
  // Starts any program (argv[0] a path, a `fusor agent` for instance) logging to `log`, without
  // waiting for anything; port() is 0.
  static StatusOr<std::unique_ptr<FusordProcess>> StartProgram(const std::vector<std::string>& argv,
                                                               const std::filesystem::path& log);
  ~FusordProcess();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool running() const;
  // SIGKILL, as a crash or the OOM killer would end it; waits for it to be gone.
  void Kill();
  // Sends SIGTERM and waits; returns the exit code, or -1 when it had to be killed.
  int Terminate(std::chrono::seconds timeout);
  std::string Log() const;

 private:
  FusordProcess(pid_t pid, std::filesystem::path log) : pid_(pid), log_(std::move(log)) {}

  mutable pid_t pid_;  // 0 once reaped.
  int port_ = 0;
  std::filesystem::path log_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr interleaved.
};

// Runs argv[0] with the arguments and extra environment variables; waits up to `timeout`.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace fusor::testing
