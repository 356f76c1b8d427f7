#include "db/staleness.h"

#include <ctime>

#include <spdlog/fmt/fmt.h>

namespace fusor::db {

std::string UtcText(int64_t unix_ms) {
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string_view EffectiveCostModelVersion(std::string_view current_cost_model_version,
                                           const v1::HardwareProfile& target) {
  if (!current_cost_model_version.empty()) return current_cost_model_version;
  return target.cost_model_version();
}

std::string StaleReason(const v1::Plan& plan, std::string_view current_cost_model_version,
                        const v1::HardwareProfile& target) {
  std::string_view current = EffectiveCostModelVersion(current_cost_model_version, target);
  if (plan.cost_model_version() != current) {
    return fmt::format("scored by cost model '{}', current is '{}'", plan.cost_model_version(),
                       current);
  }
  if (plan.created_unix_ms() < target.calibrated_unix_ms()) {
    return fmt::format("created {}, before target '{}' was recalibrated {}",
                       UtcText(plan.created_unix_ms()), plan.target_id(),
                       UtcText(target.calibrated_unix_ms()));
  }
  return "";
}

}  // namespace fusor::db
