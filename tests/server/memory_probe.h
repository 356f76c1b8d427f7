// The memory-cost probe of docs/reliability.md: many concurrent calls of the largest request
// fusord accepts, each on its own connection, and the growth of fusord's peak resident memory
// (VmHWM in /proc/PID/status) they cause. The request is the worst a client can send for parsing:
// a Tune whose graph is nothing but empty nodes, 2 bytes each on the wire and one object each
// once parsed. Used by the integration test and by memory_probe_main (figures for the docs).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "base/status.h"

namespace fusor::testing {

// fusord's peak resident memory so far, bytes; IOError when /proc/PID/status cannot be read.
StatusOr<int64_t> PeakRssBytes(pid_t pid);

// A serialised fusor.v1.TuneRequest of `bytes` bytes (an odd remainder padded into the graph's
// model name) whose graph holds (bytes - 8) / 2 empty nodes.
std::string EmptyNodesTuneRequest(size_t bytes);

struct ProbeResult {
  int64_t peak_before_bytes = 0;
  int64_t peak_after_bytes = 0;
  std::vector<grpc::Status> statuses;  // One per call.
};

// Sends `calls` Tune calls of `request` at once to `address`, each on its own connection, with
// `token` ("" for none), and reads fusord's (`pid`) peak memory before and after.
StatusOr<ProbeResult> ProbeTuneMemory(const std::string& address, pid_t pid, int calls,
                                      const std::string& request, const std::string& token);

}  // namespace fusor::testing
