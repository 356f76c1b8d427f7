#include "base/net_address.h"

#include <arpa/inet.h>

namespace fusor {

std::string HostOfAddress(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return address;
  size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

// A literal, parsed as one: a host name such as "127.example.com" resolves wherever its owner
// points it, so only an address that is loopback by its digits counts.
bool IsLoopbackAddress(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return true;
  const std::string host = HostOfAddress(address);
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace fusor
