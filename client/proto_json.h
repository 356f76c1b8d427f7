// Protobuf messages as the CLI's `--json` prints them: field names as the .proto spells them
// (snake_case, as every other `--json` key), so one script reads `tune --json`, `plan show
// --json` and `db show --json` alike (docs/decisions.md, "JSON keys"). Pure; thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>

namespace fusor {

// The message as indented JSON text, snake_case keys.
std::string ProtoJsonText(const google::protobuf::Message& message);

// The same as a JSON value, to nest in a larger document; null when the message cannot be printed.
nlohmann::ordered_json ProtoJson(const google::protobuf::Message& message);

}  // namespace fusor
