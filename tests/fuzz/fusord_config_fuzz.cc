// Fuzz harness: the text of fusord's JSON config file -> ApplyConfigJson, then the value checks
// ApplyConfigFile runs, as `fusord --config FILE` starts. Accepted: every integer setting the file
// gave holds exactly the file's value (a value that does not fit its setting is refused, never
// wrapped), and so does every string setting.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "server/fusord_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// fusord's flags, parsed from an empty command line once: building the App's options is most of
// an input's time under ASan. Each input starts from a default config at the address the flags
// write to.
struct NoFlags {
  NoFlags() {
    fusor::AddFusordFlags(&app, &config);
    app.parse(std::vector<std::string>{});
  }
  fusor::FusordConfig config;
  CLI::App app{"fusord"};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusor::fuzz::Accepted() = false;
  static NoFlags& flags = *new NoFlags;
  flags.config = fusor::FusordConfig();
  const CLI::App& app = flags.app;
  fusor::FusordConfig& config = flags.config;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fusor::Status s = fusor::ApplyConfigJson(text, "fuzz.json", app, &config);
  if (s.ok()) s = fusor::ApplyConfigFile(app, &config);
  if (!s.ok()) {
    FUZZ_CHECK(!s.message().empty(), "a config error without a message");
    return 0;
  }
  const nlohmann::json j = nlohmann::json::parse(text);
  const std::map<std::string, int64_t> integers = {
      {"worker_threads", config.server.worker_threads},
      {"queue_size", config.server.queue_size},
      {"max_rpc_threads", config.server.max_rpc_threads},
      {"max_message_bytes", config.server.max_message_bytes},
      {"max_nodes", config.server.limits.max_nodes},
      {"max_tensor_elements", config.server.limits.max_tensor_elements},
      {"measure_threads", config.tuning.measure_threads},
      {"default_measure_budget", config.tuning.default_measure_budget},
  };
  for (const auto& [key, value] : integers) {
    if (!j.contains(key)) continue;
    const nlohmann::json& v = j.at(key);
    FUZZ_CHECK(v.is_number_integer(), "a non-integer '" + key + "' was accepted: " + v.dump());
    const bool same = v.is_number_unsigned()
                          ? v.get<uint64_t>() == static_cast<uint64_t>(value) && value >= 0
                          : v.get<int64_t>() == value;
    FUZZ_CHECK(same, "'" + key + "': " + v.dump() + " became " + std::to_string(value));
  }
  const std::map<std::string, std::string> strings = {
      {"listen", config.server.listen},         {"db_path", config.tuning.db_location},
      {"tls_cert", config.server.tls_cert},     {"tls_key", config.server.tls_key},
      {"token_file", config.server.token_file}, {"log_level", config.log_level},
  };
  for (const auto& [key, value] : strings) {
    if (j.contains(key)) {
      FUZZ_CHECK(j.at(key) == value, "'" + key + "': " + j.at(key).dump() + " became " + value);
    }
  }
  fusor::fuzz::Accepted() = true;
  return 0;
}
