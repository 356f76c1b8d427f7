// fusord's JSON log lines: each log event as one JSON object on one line (time in ISO 8601 UTC,
// level, message), plus the structured fields of the event being logged on this thread, if it
// set any with ScopedLogFields (the request log sets request_id, method, principal, status, ...).
// Text logs ignore the fields: the message alone already carries them as key=value.
//
// ScopedLogFields belongs to one thread and must outlive the spdlog calls it covers; spdlog's
// sinks run synchronously on the logging thread, which is what lets them see it. JsonLogLine is
// thread-safe.
#pragma once

#include <spdlog/details/log_msg.h>

#include <nlohmann/json.hpp>
#include <string>

namespace fusor {

class ScopedLogFields {
 public:
  // `fields` (a JSON object) is borrowed and must outlive this.
  explicit ScopedLogFields(const nlohmann::json* fields);
  ~ScopedLogFields();
  ScopedLogFields(const ScopedLogFields&) = delete;
  ScopedLogFields& operator=(const ScopedLogFields&) = delete;

  // The innermost fields set on this thread, or null.
  static const nlohmann::json* Current();

 private:
  const nlohmann::json* previous_;
};

// `msg` as one JSON line ending in '\n', with this thread's current fields. Bytes that are not
// UTF-8 become U+FFFD, so a line always parses.
std::string JsonLogLine(const spdlog::details::log_msg& msg);

}  // namespace fusor
