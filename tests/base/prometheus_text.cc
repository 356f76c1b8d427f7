#include "tests/base/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace fusor::testing {
namespace {

bool NameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

// Reads a metric or label name at `at`.
std::string ReadName(const std::string& line, size_t* at) {
  size_t start = *at;
  while (*at < line.size() && NameChar(line[*at], *at == start)) ++*at;
  return line.substr(start, *at - start);
}

StatusOr<double> ReadValue(const std::string& text) {
  if (text == "+Inf") return HUGE_VAL;
  if (text == "-Inf") return -HUGE_VAL;
  if (text == "NaN") return NAN;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) {
    return Status::InvalidArgument("'" + text + "' is not a number");
  }
  return v;
}

// `{a="x",b="y"}` at `at` into sorted name -> unescaped value.
StatusOr<std::map<std::string, std::string>> ReadLabels(const std::string& line, size_t* at) {
  std::map<std::string, std::string> labels;
  if (*at >= line.size() || line[*at] != '{') return labels;
  ++*at;
  while (*at < line.size() && line[*at] != '}') {
    std::string name = ReadName(line, at);
    if (name.empty() || *at + 1 >= line.size() || line[*at] != '=' || line[*at + 1] != '"') {
      return Status::InvalidArgument("bad label at column " + std::to_string(*at));
    }
    *at += 2;
    std::string value;
    while (*at < line.size() && line[*at] != '"') {
      char c = line[(*at)++];
      if (c == '\\') {
        if (*at >= line.size()) return Status::InvalidArgument("escape at end of line");
        char e = line[(*at)++];
        if (e == 'n') {
          value += '\n';
        } else if (e == '\\' || e == '"') {
          value += e;
        } else {
          return Status::InvalidArgument(std::string("unknown escape \\") + e);
        }
      } else {
        value += c;
      }
    }
    if (*at >= line.size()) return Status::InvalidArgument("unterminated label value");
    ++*at;  // Closing quote.
    if (!labels.emplace(name, value).second) {
      return Status::InvalidArgument("label '" + name + "' given twice");
    }
    if (*at < line.size() && line[*at] == ',') ++*at;
  }
  if (*at >= line.size()) return Status::InvalidArgument("unterminated label set");
  ++*at;  // '}'
  return labels;
}

std::string SeriesKey(const std::string& name, const std::map<std::string, std::string>& labels) {
  if (labels.empty()) return name;
  std::string out = name + "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    out += (first ? "" : ",") + k + "=\"" + v + "\"";
    first = false;
  }
  return out + "}";
}

// The family a sample name belongs to, given the declared types; empty when none.
std::string FamilyOf(const std::string& sample, const std::map<std::string, std::string>& types) {
  if (types.count(sample)) return sample;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s(suffix);
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      std::string family = sample.substr(0, sample.size() - s.size());
      auto it = types.find(family);
      if (it != types.end() && (it->second == "histogram" || it->second == "summary")) {
        return family;
      }
    }
  }
  return "";
}

Status ReadComment(const std::string& line, Exposition* out) {
  std::istringstream in(line);
  std::string hash, kind, name;
  in >> hash >> kind >> name;
  if (kind != "HELP" && kind != "TYPE") return Status::Ok();  // Other comments are allowed.
  std::string rest;
  std::getline(in, rest);
  if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
  if (kind == "TYPE") {
    if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" &&
        rest != "untyped") {
      return Status::InvalidArgument("unknown type '" + rest + "'");
    }
    if (!out->types.emplace(name, rest).second) {
      return Status::InvalidArgument("family " + name + " declared twice");
    }
  } else {
    out->help[name] = rest;
  }
  return Status::Ok();
}

Status ReadSample(const std::string& line, Exposition* out) {
  size_t at = 0;
  std::string name = ReadName(line, &at);
  if (name.empty()) return Status::InvalidArgument("no metric name");
  FUSOR_ASSIGN_OR_RETURN(auto labels, ReadLabels(line, &at));
  if (at >= line.size() || line[at] != ' ') return Status::InvalidArgument("no value");
  std::string value_text = line.substr(at + 1);
  if (size_t space = value_text.find(' '); space != std::string::npos) {
    value_text.resize(space);  // A timestamp may follow.
  }
  FUSOR_ASSIGN_OR_RETURN(double value, ReadValue(value_text));
  if (FamilyOf(name, out->types).empty()) {
    return Status::InvalidArgument("sample " + name + " belongs to no family declared before it");
  }
  if (!out->samples.emplace(SeriesKey(name, labels), value).second) {
    return Status::InvalidArgument("series " + SeriesKey(name, labels) + " given twice");
  }
  return Status::Ok();
}

}  // namespace

double Exposition::Value(const std::string& series) const {
  auto it = samples.find(series);
  return it == samples.end() ? 0 : it->second;
}

StatusOr<Exposition> ParseExposition(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    Status s = line[0] == '#' ? ReadComment(line, &out) : ReadSample(line, &out);
    if (!s.ok()) {
      return Status::InvalidArgument("line " + std::to_string(number) + " '" + line +
                                     "': " + s.message());
    }
  }
  if (!text.empty() && text.back() != '\n') {
    return Status::InvalidArgument("the exposition does not end with a newline");
  }
  return out;
}

}  // namespace fusor::testing
