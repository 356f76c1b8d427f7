#include "base/net_address.h"

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

bool IsLoopbackAddress(const std::string& address) {
  if (address.rfind("unix:", 0) == 0) return true;
  std::string host = HostOfAddress(address);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace fusor
