// A command line that cannot work as given exits 2 (usage), with a message naming what would
// work, in every verb: the real `fusor` and `fusord` binaries, as a person runs them.
#include <gtest/gtest.h>

#include "tests/server/fusord_process.h"
#include "tests/server/test_tokens.h"

namespace fusor::testing {
namespace {

constexpr int kExitStartFailed = 1;
constexpr int kExitUsage = 2;

void ExpectUsageError(const std::vector<std::string>& args, const std::string& says) {
  std::vector<std::string> argv = {FusorBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, kExitUsage) << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
}

TEST(UsageErrors, AnAgentWithoutServerIsAUsageError) {
  ExpectUsageError({"agent"}, "fusor agent needs --server");
}

TEST(UsageErrors, AModelFileGivenToDbShowIsAUsageErrorPointingAtPlanShow) {
  ExpectUsageError({"db", "show", "model.onnx"}, "fusor plan show MODEL.onnx");
}

TEST(UsageErrors, ServerGivenToAFileOnlyDbVerbNamesDbQuery) {
  ExpectUsageError({"db", "stats", "--server", "127.0.0.1:1"}, "`fusor db query --server`");
  ExpectUsageError({"db", "show", "abc", "--server", "127.0.0.1:1"}, "reads database files");
}

TEST(UsageErrors, LocalOnlyQueryFiltersWithServerAreAUsageError) {
  ExpectUsageError({"db", "query", "--server", "127.0.0.1:1", "--current"},
                   "for local databases, not with --server");
}

TEST(UsageErrors, AClientCertificateWithoutItsKeyIsAUsageError) {
  ExpectUsageError({"targets", "list", "--server", "127.0.0.1:1", "--tls-cert", "c.pem"},
                   "--tls-key");
}

// The metrics listener's loopback rule stops fusord at start (exit 1), as the gRPC listen
// address's rule does; deploy/README.md's exit-code table says so.
TEST(UsageErrors, MetricsBeyondLoopbackStopFusordAtStartWithExitOne) {
  auto dir = TempDir("usage-errors");
  CommandResult r = RunCommand({FusordBinary(), "--db", (dir / "t.db").string(), "--listen",
                                "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, kExitStartFailed) << r.output;
  EXPECT_NE(r.output.find("refusing to serve metrics on 0.0.0.0:0"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace fusor::testing
