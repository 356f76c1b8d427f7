#include "client/graphviz.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace fusor {
namespace {

// The source goes to `dot` through a private temporary file as its standard input: a pipe would
// need a writer thread, and a file next to `path` would need a name the user did not choose.
StatusOr<std::string> WriteTemporary(const std::string& text) {
  const char* tmp = std::getenv("TMPDIR");
  std::string name =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/fusor-plan-XXXXXX";
  int fd = ::mkstemp(name.data());
  if (fd < 0) return Status::IOError("cannot create a temporary file for dot: " + name);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != text.size()) {
    std::remove(name.c_str());
    return Status::IOError("cannot write the temporary file '" + name + "' for dot");
  }
  return name;
}

// Runs dot with stdin from `input`; its exit status, or the spawn error as a negative errno.
int RunDot(const std::string& input, const std::string& path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, input.c_str(), O_RDONLY, 0);
  // "-oPATH" as one argument: a path starting with '-' stays a path.
  std::string out_flag = "-o" + path;
  std::vector<char*> argv = {const_cast<char*>("dot"), const_cast<char*>("-Tsvg"), out_flag.data(),
                             nullptr};
  pid_t pid = 0;
  int err = posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return -err;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -errno;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Status RenderSvg(const std::string& dot_source, const std::string& path) {
  FUSOR_ASSIGN_OR_RETURN(std::string input, WriteTemporary(dot_source));
  int rc = RunDot(input, path);
  std::remove(input.c_str());
  if (rc == -ENOENT) {
    return Status::FailedPrecondition(
        "--svg needs Graphviz's `dot` (apt-get install graphviz); --dot prints the source "
        "instead");
  }
  if (rc < 0) return Status::IOError(std::string("cannot run dot: ") + std::strerror(-rc));
  if (rc != 0) {
    return Status::IOError("dot failed to write '" + path + "' (exit status " + std::to_string(rc) +
                           ")");
  }
  return Status::Ok();
}

}  // namespace fusor
