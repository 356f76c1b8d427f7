// Text a caller sent (a request field, an agent's error message) made safe to put in a log line
// or in a message to another principal: bytes that could end a line, forge a field or confuse a
// terminal are escaped as \xNN, and the length is capped with a note of how much was left out.
// The one place this escaping lives: the request log, the agent dispatch and anything else that
// repeats untrusted text read it from here. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fusor {

// `text` as one token of a log line: bytes other than printable ASCII, and space, quote,
// backslash and '=', become \xNN; more than `max_bytes` of input keeps the first `max_bytes` and
// says how many bytes were left out. "-" for an empty string.
std::string LogField(std::string_view text, size_t max_bytes = 128);

// `text` as free text (an error message): spaces kept; double quotes, backslashes and bytes
// other than printable ASCII escaped; capped as LogField. Empty stays empty.
std::string EscapedText(std::string_view text, size_t max_bytes = 1024);

// EscapedText in double quotes, for a log line.
std::string LogQuoted(std::string_view text, size_t max_bytes = 1024);

}  // namespace fusor
