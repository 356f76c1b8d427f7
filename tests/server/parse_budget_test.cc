// The parse budget (server/parse_budget.h): a request is priced from its wire bytes at no less
// than what parsing it builds, malformed bytes are refused, and holds return their bytes.
#include "server/parse_budget.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include "proto/tuner.pb.h"
#include "tests/server/memory_probe.h"
#include "tests/server/test_graphs.h"

namespace fusor {
namespace {

StatusOr<int64_t> Estimate(const std::string& wire) {
  google::protobuf::io::ArrayInputStream in(wire.data(), static_cast<int>(wire.size()));
  return EstimateParsedBytes(*v1::TuneRequest::descriptor(), &in);
}

int64_t ParsedBytes(const std::string& wire) {
  v1::TuneRequest parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire));
  return static_cast<int64_t>(parsed.SpaceUsedLong());
}

TEST(EstimateParsedBytes, IsAtLeastWhatParsingARealGraphBuilds) {
  const std::string wire =
      testing::TuneRequestFor(testing::ChainGraph(64, 1024, "chain64")).SerializeAsString();
  auto estimate = Estimate(wire);
  ASSERT_TRUE(estimate.ok()) << estimate.status().ToString();
  EXPECT_GE(*estimate, ParsedBytes(wire));
}

TEST(EstimateParsedBytes, IsAtLeastWhatParsingTinyNestedMessagesBuilds) {
  const std::string wire = testing::EmptyNodesTuneRequest(64 << 10);
  auto estimate = Estimate(wire);
  ASSERT_TRUE(estimate.ok()) << estimate.status().ToString();
  EXPECT_GE(*estimate, ParsedBytes(wire));
  EXPECT_GT(*estimate, 10 * static_cast<int64_t>(wire.size()))
      << "2 wire bytes a node become an object a node";
}

TEST(EstimateParsedBytes, RefusesMalformedBytes) {
  std::string wire = testing::TuneRequestFor(testing::ChainGraph(4, 16, "c")).SerializeAsString();
  auto truncated = Estimate(wire.substr(0, wire.size() - 3));
  EXPECT_EQ(truncated.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(truncated.status().message().find("fusor.v1.TuneRequest"), std::string::npos);
  EXPECT_EQ(Estimate("\x0b").status().code(), Status::Code::kInvalidArgument) << "a group";
}

TEST(ParseBudget, RefusesWhatDoesNotFitAndTakesBackWhatHoldsReturn) {
  ParseBudget budget(100 << 20);
  auto first = budget.Reserve(60 << 20, "the request, parsed,");
  ASSERT_TRUE(first.ok());
  auto second = budget.Reserve(60 << 20, "the request, parsed,");
  EXPECT_EQ(second.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(second.status().message().find("parse budget of 100 MiB"), std::string::npos)
      << second.status().message();
  { ParseBudget::Hold released = std::move(first).value(); }
  EXPECT_EQ(budget.held(), 0);
  EXPECT_TRUE(budget.Reserve(60 << 20, "the request, parsed,").ok());
  EXPECT_EQ(budget.held(), 0) << "the hold was a temporary";
}

}  // namespace
}  // namespace fusor
