#include "base/untrusted_text.h"

#include <cstdio>

namespace fusor {
namespace {

bool Plain(unsigned char c) {
  return c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '=' && c != '\'';
}

bool PlainInQuotes(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }

std::string Escaped(std::string_view text, size_t max_bytes, bool (*plain)(unsigned char)) {
  std::string_view kept = text.substr(0, max_bytes);
  std::string out;
  out.reserve(kept.size());
  for (unsigned char c : kept) {
    if (plain(c)) {
      out += static_cast<char>(c);
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > kept.size()) {
    out += "...(+" + std::to_string(text.size() - kept.size()) + "B)";
  }
  return out;
}

}  // namespace

std::string LogField(std::string_view text, size_t max_bytes) {
  return text.empty() ? "-" : Escaped(text, max_bytes, Plain);
}

std::string EscapedText(std::string_view text, size_t max_bytes) {
  return Escaped(text, max_bytes, PlainInQuotes);
}

std::string LogQuoted(std::string_view text, size_t max_bytes) {
  return "\"" + EscapedText(text, max_bytes) + "\"";
}

}  // namespace fusor
