// ONNX's own backend test suite (Debian's libonnx-testdata) as a test: every case of the node,
// pytorch-converted, pytorch-operator and simple suites runs through the import, the reference
// interpreter and the executor (unfused and rules plans) against its expected outputs
// (backend_case.h). Each suite's expected outcomes are checked in as
// tests/conformance/expected/<suite>.txt, one line per case: "<case> pass" or
// "<case> refused <category>". The test fails on any wrong answer, any crash, and any case whose
// outcome differs from the file; it prints each suite's counts.
//
// Cases run in a forked child, one after the other; a case that kills the child (a signal) or
// runs longer than kCaseTimeoutSeconds is reported as a crash and a new child carries on with the
// next case. The parent never runs oneDNN or OpenMP, so forking it is safe.
//
// Regenerating the expectation files after a change that makes more cases pass (or refuses one on
// purpose): FUSOR_CONFORMANCE_UPDATE=1 ctest --test-dir build -R conformance_test
// (or run build/tests/conformance/conformance_test with it set), then review the diff.
// FUSOR_CONFORMANCE_FILTER=REGEX runs only the cases whose names match (no file is checked).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/conformance/backend_case.h"

namespace fusor::conformance {
namespace {

namespace fs = std::filesystem;

constexpr int kCaseTimeoutSeconds = 120;

std::vector<std::string> CaseNames(const fs::path& suite) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(suite)) {
    if (fs::exists(entry.path() / "model.onnx")) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  const char* filter = std::getenv("FUSOR_CONFORMANCE_FILTER");
  if (filter != nullptr && *filter != '\0') {
    std::regex re(filter);
    std::erase_if(names, [&](const std::string& n) { return !std::regex_search(n, re); });
  }
  return names;
}

void WriteAll(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n <= 0) _exit(3);
    done += static_cast<size_t>(n);
  }
}

// The child: runs cases[from...] and writes "B <k>\n" before case k and
// "E <k>\t<outcome>\t<detail>\n" after it.
[[noreturn]] void RunChild(int fd, const fs::path& suite, const std::vector<std::string>& cases,
                           size_t from) {
  for (size_t k = from; k < cases.size(); ++k) {
    WriteAll(fd, "B " + std::to_string(k) + "\n");
    CaseOutcome o = RunBackendCase((suite / cases[k]).string());
    std::string detail = o.detail;
    for (char& c : detail) {
      if (c == '\n' || c == '\t') c = ' ';
    }
    WriteAll(fd, "E " + std::to_string(k) + "\t" + OutcomeText(o) + "\t" + detail + "\n");
  }
  _exit(0);
}

struct Result {
  std::string outcome;  // OutcomeText
  std::string detail;
};

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  return "stopped";
}

// Runs one child from case `from`; records the results it reports. Returns the index of the first
// case the child did not finish (cases.size() when it finished them all).
size_t RunSomeCases(const fs::path& suite, const std::vector<std::string>& cases, size_t from,
                    std::vector<Result>* results) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    RunChild(fds[1], suite, cases, from);
  }
  close(fds[1]);
  std::string buffer;
  long running = -1;
  bool timed_out = false;
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    int ready = poll(&p, 1, kCaseTimeoutSeconds * 1000);
    if (ready == 0) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    char chunk[4096];
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (line.rfind("B ", 0) == 0) {
        running = std::stol(line.substr(2));
      } else if (line.rfind("E ", 0) == 0) {
        size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
        size_t k = std::stoul(line.substr(2, t1 - 2));
        (*results)[k] = {line.substr(t1 + 1, t2 - t1 - 1), line.substr(t2 + 1)};
        running = -1;
      }
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (running < 0) return cases.size();
  (*results)[running] = {timed_out ? "crash timeout" : "crash " + DescribeExit(status),
                         timed_out ? "no result after " + std::to_string(kCaseTimeoutSeconds) + " s"
                                   : "the case killed the process"};
  return static_cast<size_t>(running) + 1;
}

std::vector<Result> RunSuite(const fs::path& suite, const std::vector<std::string>& cases) {
  std::vector<Result> results(cases.size());
  for (size_t next = 0; next < cases.size();) next = RunSomeCases(suite, cases, next, &results);
  return results;
}

fs::path ExpectationFile(const std::string& suite) {
  return fs::path(FUSOR_SOURCE_DIR) / "tests/conformance/expected" / (suite + ".txt");
}

std::map<std::string, std::string> ReadExpectations(const fs::path& path) {
  std::map<std::string, std::string> expected;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find(' ');
    expected[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
  }
  return expected;
}

void WriteExpectations(const fs::path& path, const std::string& suite,
                       const std::vector<std::string>& cases, const std::vector<Result>& results) {
  std::ofstream out(path);
  out << "# Expected outcome of each case of ONNX's backend test suite '" << suite
      << "' (libonnx-testdata),\n# written by FUSOR_CONFORMANCE_UPDATE=1 "
         "build/tests/conformance/conformance_test (tests/conformance/onnx_backend_test.cc).\n";
  for (size_t k = 0; k < cases.size(); ++k) out << cases[k] << " " << results[k].outcome << "\n";
}

std::string Verdict(const std::string& outcome) { return outcome.substr(0, outcome.find(' ')); }

void CheckSuite(const std::string& suite) {
  const fs::path dir = fs::path(FUSOR_ONNX_TESTDATA_DIR) / suite;
  ASSERT_TRUE(fs::is_directory(dir))
      << dir << " is missing: install Debian's libonnx-testdata (deploy/install-deps.sh)";
  const std::vector<std::string> cases = CaseNames(dir);
  const std::vector<Result> results = RunSuite(dir, cases);
  const char* filter = std::getenv("FUSOR_CONFORMANCE_FILTER");
  const bool filtered = filter != nullptr && *filter != '\0';
  const char* update = std::getenv("FUSOR_CONFORMANCE_UPDATE");
  if (update != nullptr && std::string(update) == "1" && !filtered) {
    WriteExpectations(ExpectationFile(suite), suite, cases, results);
  }
  const std::map<std::string, std::string> expected =
      filtered ? std::map<std::string, std::string>{} : ReadExpectations(ExpectationFile(suite));
  std::map<std::string, int> counts;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Result& r = results[k];
    const std::string verdict = Verdict(r.outcome);
    ++counts[verdict];
    const std::string where = suite + "/" + cases[k];
    if (verdict == "wrong" || verdict == "crash") {
      ADD_FAILURE() << where << ": " << r.outcome << ": " << r.detail;
    } else if (filtered) {
      std::printf("%s: %s  (%s)\n", where.c_str(), r.outcome.c_str(), r.detail.c_str());
    }
    if (filtered) continue;
    auto it = expected.find(cases[k]);
    if (it == expected.end()) {
      ADD_FAILURE() << where << ": " << r.outcome << ", but " << ExpectationFile(suite)
                    << " has no line for it";
    } else if (it->second != r.outcome) {
      ADD_FAILURE() << where << ": " << r.outcome << ", expected " << it->second << " (" << r.detail
                    << ")";
    }
  }
  for (const auto& [name, outcome] : expected) {
    if (!std::binary_search(cases.begin(), cases.end(), name)) {
      ADD_FAILURE() << ExpectationFile(suite) << " names " << name << ", which " << dir
                    << " does not have";
    }
  }
  std::printf("%s: %zu cases: %d pass, %d refused, %d wrong, %d crash\n", suite.c_str(),
              cases.size(), counts["pass"], counts["refused"], counts["wrong"], counts["crash"]);
}

TEST(OnnxBackendSuite, NodeCasesHaveTheirExpectedOutcomes) { CheckSuite("node"); }
TEST(OnnxBackendSuite, PytorchConvertedCasesHaveTheirExpectedOutcomes) {
  CheckSuite("pytorch-converted");
}
TEST(OnnxBackendSuite, PytorchOperatorCasesHaveTheirExpectedOutcomes) {
  CheckSuite("pytorch-operator");
}
TEST(OnnxBackendSuite, SimpleCasesHaveTheirExpectedOutcomes) { CheckSuite("simple"); }

}  // namespace
}  // namespace fusor::conformance
