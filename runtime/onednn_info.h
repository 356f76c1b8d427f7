// What oneDNN reports about this machine and itself: the ISA it dispatches to and its version.
// These two strings enter the target fingerprint. Thread-safe.
#pragma once

#include <string>

namespace fusor {

std::string OneDnnIsa();      // "avx2", "avx512_core", ... as oneDNN's effective CPU ISA.
std::string OneDnnVersion();  // "3.7.2".

}  // namespace fusor
