#include "tests/server/fusord_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace fusor::testing {
namespace {

using namespace std::chrono_literals;

std::vector<char*> Pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& a : strings) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

// The current environment with `extra` set, built before fork: the child of a multithreaded
// process may only call async-signal-safe functions, which setenv is not.
std::vector<std::string> Environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!extra.count(kv.substr(0, kv.find('=')))) out.push_back(kv);
  }
  for (const auto& [k, v] : extra) out.push_back(k + "=" + v);
  return out;
}

// Forks and runs argv with output to `fd`; returns the child's pid.
pid_t Spawn(const std::vector<std::string>& argv, int fd,
            const std::map<std::string, std::string>& env) {
  std::vector<std::string> environment = Environment(env);
  std::vector<char*> args = Pointers(argv);
  std::vector<char*> envp = Pointers(environment);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` up to `timeout`; the exit code, or -1 if still running.
int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() > end) return -1;
    std::this_thread::sleep_for(10ms);
  }
}

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string FusordBinary() {
  if (const char* override_path = std::getenv("FUSORD_FOR_TEST")) return override_path;
  return std::string(FUSOR_BINARY_DIR) + "/server/fusord";
}
std::string FusorBinary() {
  if (const char* override_path = std::getenv("FUSOR_CLI_FOR_TEST")) return override_path;
  return std::string(FUSOR_BINARY_DIR) + "/client/fusor";
}

StatusOr<std::unique_ptr<FusordProcess>> FusordProcess::StartProgram(
    const std::vector<std::string>& argv, const std::filesystem::path& log) {
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status::IOError("cannot create " + log.string());
  pid_t pid = Spawn(argv, fd, {{"OMP_WAIT_POLICY", "passive"}});
  close(fd);
  return std::unique_ptr<FusordProcess>(new FusordProcess(pid, log));
}

StatusOr<std::unique_ptr<FusordProcess>> FusordProcess::Start(const std::vector<std::string>& args,
                                                              const std::filesystem::path& log) {
  // Tests of other things do not spend a minute calibrating before their first measured Tune.
  std::vector<std::string> argv = {FusordBinary(), "--listen", "127.0.0.1:0",
                                   "--measure-uncalibrated"};
  argv.insert(argv.end(), args.begin(), args.end());
  FUSOR_ASSIGN_OR_RETURN(std::unique_ptr<FusordProcess> p, StartProgram(argv, log));
  std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
  auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end) {
    std::smatch m;
    std::string text = p->Log();
    if (std::regex_search(text, m, listening)) {
      p->port_ = std::stoi(m[1]);
      return p;
    }
    if (!p->running()) return Status::Unavailable("fusord exited at start:\n" + text);
    std::this_thread::sleep_for(20ms);
  }
  return Status::DeadlineExceeded("fusord did not start listening:\n" + p->Log());
}

FusordProcess::~FusordProcess() { Kill(); }

void FusordProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

bool FusordProcess::running() const {
  if (pid_ <= 0) return false;
  int status;
  if (waitpid(pid_, &status, WNOHANG) == 0) return true;
  pid_ = 0;  // Reaped: nothing left to signal or wait for.
  return false;
}

int FusordProcess::Terminate(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int code = WaitExit(pid_, timeout);
  if (code == -1) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = 0;
  return code;
}

std::string FusordProcess::Log() const { return ReadAll(log_); }

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         std::chrono::seconds timeout) {
  char path[] = "/tmp/fusor-command-XXXXXX";
  int fd = mkstemp(path);
  CommandResult r;
  if (fd < 0) return r;
  pid_t pid = Spawn(argv, fd, env);
  close(fd);
  r.exit_code = WaitExit(pid, timeout);
  if (r.exit_code == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  r.output = ReadAll(path);
  unlink(path);
  return r;
}

}  // namespace fusor::testing
