// Fuzz harness: fusor.v1.Graph bytes -> FromProto (IR conversion, linking, Validate) and the
// canonical hash, as fusord runs them on every GetPlan and Tune request before anything else
// sees the graph. Accepted: the graph converts back to the proto it came from up to FromProto's
// normal form (ToProto(FromProto(ToProto(g))) == ToProto(g)), and its canonical hash is stable.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>

#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/same_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Mutated inputs fail to parse all the time; protobuf's log line for each would swamp the run.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  fusor::fuzz::Accepted() = false;
  fusor::v1::Graph p;
  if (!p.ParseFromArray(data, static_cast<int>(size))) return 0;
  const fusor::ValidationLimits limits;  // fusord's defaults.
  auto g = fusor::FromProto(p, limits);
  if (!g.ok()) {
    FUZZ_CHECK(!g.status().message().empty(), "a FromProto error without a message");
    return 0;
  }
  const std::string hash = fusor::CanonicalHash(*g);
  fusor::v1::Graph wire = fusor::ToProto(*g);
  auto back = fusor::FromProto(wire, limits);
  FUZZ_CHECK(back.ok(),
             "ToProto of an accepted graph fails FromProto: " + back.status().ToString());
  const std::string diff = fusor::fuzz::ProtoDifferences(fusor::ToProto(*back), wire);
  FUZZ_CHECK(diff.empty(), "ToProto(FromProto(ToProto(g))) differs from ToProto(g): " + diff);
  FUZZ_CHECK(fusor::CanonicalHash(*back) == hash, "the canonical hash changed over a round trip");
  fusor::fuzz::Accepted() = true;
  return 0;
}
