// Fuzz harness: fusord's token file (AccessTokens::Parse) and the `authorization` metadata of a
// request (Authenticate, which every call reaches before it is admitted). The same bytes feed
// both: as a token file, and as the metadata value checked against a fixed token file.
// Accepted: the file parsed; then it holds at least one token, and authenticating a token of it
// ("Bearer TOKEN", TOKEN the first field of its first token line) succeeds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/access_tokens.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const fusor::AccessTokens& FixedTokens() {
  static const fusor::AccessTokens tokens = [] {
    auto t = fusor::AccessTokens::Parse(
        "0123456789abcdef0123456789abcdef admin ops\n"
        "fedcba9876543210fedcba9876543210 read,tune ci\n",
        "fixed");
    FUZZ_CHECK(t.ok(), "the fixed token file is refused: " + t.status().ToString());
    return *std::move(t);
  }();
  return tokens;
}

// The first whitespace-separated field of the first line that has one, comments removed.
std::string_view FirstToken(std::string_view text) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    line = line.substr(0, line.find('#'));
    size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos) continue;
    line.remove_prefix(start);
    return line.substr(0, line.find_first_of(" \t"));
  }
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusor::fuzz::Accepted() = false;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto who = FixedTokens().Authenticate(text);
  FUZZ_CHECK(
      who.ok() || who.status().code() == fusor::Status::Code::kUnauthenticated,
      "Authenticate failed with a code other than UNAUTHENTICATED: " + who.status().ToString());
  auto tokens = fusor::AccessTokens::Parse(text, "fuzz");
  if (!tokens.ok()) {
    FUZZ_CHECK(!tokens.status().message().empty(), "a token file error without a message");
    return 0;
  }
  FUZZ_CHECK(tokens->size() >= 1, "an accepted token file holds no token");
  const std::string header = "Bearer " + std::string(FirstToken(text));
  auto first = tokens->Authenticate(header);
  FUZZ_CHECK(first.ok(), "the first token of an accepted file does not authenticate: " +
                             first.status().ToString());
  fusor::fuzz::Accepted() = true;
  return 0;
}
