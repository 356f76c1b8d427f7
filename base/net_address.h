// Which gRPC addresses only this machine can reach. fusord uses it to decide what a listen
// address exposes, and the CLI to decide whether a token may travel in plaintext: one rule, read
// by both. Pure functions; thread-safe.
#pragma once

#include <string>

namespace fusor {

// The host part of "host:port", "[v6]:port" (brackets removed) or "unix:PATH" (unchanged).
std::string HostOfAddress(const std::string& address);

// True for `localhost`, an IPv4 literal in 127.0.0.0/8 (dotted quad), the IPv6 literal ::1 and
// unix sockets: addresses no other machine can reach. A host name is never loopback, even one
// that starts with "127." (it resolves wherever DNS says).
bool IsLoopbackAddress(const std::string& address);

}  // namespace fusor
