#include "client/time_text.h"

#include <ctime>

namespace fusor {

std::string LocalIsoTime(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &tm);
  const std::string out = text;  // %z is +hhmm; ISO 8601's extended form is +hh:mm.
  const size_t minutes = out.size() - 2;
  return out.substr(0, minutes) + ":" + out.substr(minutes);
}

}  // namespace fusor
