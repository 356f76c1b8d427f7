// Every `--json` of the CLI names its keys in snake_case: protobuf messages (tune --json, plan show
// --json) print their fields as the .proto spells them, as db query --json names its own.
#include "client/proto_json.h"

#include <gtest/gtest.h>

#include "proto/tuner.pb.h"

namespace fusor {
namespace {

TEST(ProtoJson, TuneResultKeysAreTheProtoFieldNamesInSnakeCase) {
  v1::TuneEvent::Result result;
  result.mutable_plan()->set_graph_hash("ab");
  result.mutable_plan()->set_predicted_ns(12.5);
  result.set_cache_hit(true);
  const std::string text = ProtoJsonText(result);
  EXPECT_NE(text.find("\"graph_hash\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"predicted_ns\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"cache_hit\""), std::string::npos) << text;
  EXPECT_EQ(text.find("graphHash"), std::string::npos) << text;
  EXPECT_EQ(ProtoJson(result)["plan"]["predicted_ns"], 12.5);
}

}  // namespace
}  // namespace fusor
