// Shared by the fuzz harnesses (tests/fuzz/*_fuzz.cc) and the replay driver that runs them in the
// normal test suite. A harness is one LLVMFuzzerTestOneInput: it feeds its input to one parser,
// and when the parser accepts it, checks properties that must hold for every accepted input (a
// round trip reproduces it, the result re-validates). A broken property aborts, which libFuzzer
// and the replay driver both report as a failure. `Accepted()` tells the replay driver whether the
// last input was accepted, so seeds that must parse ("ok-*" files) are checked to parse.
// Single-threaded, as libFuzzer calls harnesses.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fusor::fuzz {

inline bool& Accepted() {
  static bool accepted = false;
  return accepted;
}

[[noreturn]] inline void Fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: fuzz property broken: %s\n", file, line, what.c_str());
  std::abort();
}

}  // namespace fusor::fuzz

// Aborts with `what` (a std::string expression) unless `cond` holds.
#define FUZZ_CHECK(cond, what)                                    \
  do {                                                            \
    if (!(cond)) ::fusor::fuzz::Fail(__FILE__, __LINE__, (what)); \
  } while (false)
