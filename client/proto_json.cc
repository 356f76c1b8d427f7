#include "client/proto_json.h"

#include <google/protobuf/util/json_util.h>

namespace fusor {
namespace {

google::protobuf::util::JsonPrintOptions SnakeCase(bool indent) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = indent;
  return options;
}

}  // namespace

std::string ProtoJsonText(const google::protobuf::Message& message) {
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(message, &text, SnakeCase(true));
  return text;
}

nlohmann::ordered_json ProtoJson(const google::protobuf::Message& message) {
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, SnakeCase(false)).ok()) {
    return nullptr;
  }
  return nlohmann::ordered_json::parse(text);
}

}  // namespace fusor
