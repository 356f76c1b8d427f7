// memory_probe ADDRESS PID CALLS [TOKEN]: the memory-cost probe (memory_probe.h) against a
// running fusord, for the figures in docs/reliability.md. Prints fusord's peak resident memory
// before and after CALLS concurrent Tune calls of 8 MiB of empty nodes, and their status codes.
#include <iostream>
#include <map>
#include <string>

#include "tests/server/memory_probe.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: memory_probe ADDRESS PID CALLS [TOKEN]\n";
    return 2;
  }
  const std::string request = fusor::testing::EmptyNodesTuneRequest(8 << 20);
  auto probe = fusor::testing::ProbeTuneMemory(argv[1], std::stoi(argv[2]), std::stoi(argv[3]),
                                               request, argc > 4 ? argv[4] : "");
  if (!probe.ok()) {
    std::cerr << probe.status().ToString() << "\n";
    return 1;
  }
  std::map<int, int> codes;
  for (const grpc::Status& s : probe->statuses) ++codes[s.error_code()];
  std::cout << "VmHWM before " << (probe->peak_before_bytes >> 20) << " MiB, after "
            << (probe->peak_after_bytes >> 20) << " MiB; status codes:";
  for (auto [code, n] : codes) std::cout << " " << code << "x" << n;
  std::cout << "\n";
  return 0;
}
