#include "server/json_log.h"

#include <chrono>
#include <ctime>

namespace fusor {
namespace {

thread_local const nlohmann::json* current_fields = nullptr;

// "2026-11-26T10:44:43.123Z".
std::string IsoUtc(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace

ScopedLogFields::ScopedLogFields(const nlohmann::json* fields) : previous_(current_fields) {
  current_fields = fields;
}

ScopedLogFields::~ScopedLogFields() { current_fields = previous_; }

const nlohmann::json* ScopedLogFields::Current() { return current_fields; }

std::string JsonLogLine(const spdlog::details::log_msg& msg) {
  nlohmann::json line = nlohmann::json::object();
  line["time"] = IsoUtc(msg.time);
  line["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size());
  line["message"] = std::string(msg.payload.data(), msg.payload.size());
  if (const nlohmann::json* fields = ScopedLogFields::Current(); fields && fields->is_object()) {
    for (const auto& [key, value] : fields->items()) {
      if (!line.contains(key)) line[key] = value;
    }
  }
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace fusor
