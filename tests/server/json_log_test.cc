// server/json_log.h: a log event as one JSON line, with the fields of the event on this thread.
#include "server/json_log.h"

#include <gtest/gtest.h>

namespace fusor {
namespace {

spdlog::details::log_msg Message(std::string_view text, spdlog::level::level_enum level) {
  return spdlog::details::log_msg("fusord", level, text);
}

TEST(JsonLog, ALineIsOneObjectWithTimeLevelMessageAndTheThreadsFields) {
  nlohmann::json fields = {{"request_id", 42}, {"method", "GetPlan"}, {"message", "not this"}};
  std::string line;
  {
    ScopedLogFields scoped(&fields);
    line = JsonLogLine(Message("rpc id=42 method=GetPlan", spdlog::level::warn));
  }
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line";
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["request_id"], 42);
  EXPECT_EQ(j["method"], "GetPlan");
  EXPECT_EQ(j["message"], "rpc id=42 method=GetPlan") << "a field never replaces the message";
  EXPECT_EQ(j["level"], "warning");
  EXPECT_EQ(j["time"].get<std::string>().size(), std::string("2026-11-26T10:54:20.541Z").size());
  EXPECT_EQ(j["time"].get<std::string>().back(), 'Z');

  auto after = nlohmann::json::parse(JsonLogLine(Message("later", spdlog::level::info)));
  EXPECT_FALSE(after.contains("request_id")) << "the fields end with their scope";
}

TEST(JsonLog, NewlinesQuotesAndBytesThatAreNotUtf8StillMakeOneParsableLine) {
  std::string line = JsonLogLine(Message("a\nb\"c\xff\xfe", spdlog::level::info));
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  auto j = nlohmann::json::parse(line, nullptr, false);
  ASSERT_TRUE(j.is_object()) << line;
  EXPECT_EQ(j["message"].get<std::string>().substr(0, 5), "a\nb\"c");
}

}  // namespace
}  // namespace fusor
