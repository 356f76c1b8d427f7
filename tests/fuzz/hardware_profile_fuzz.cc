// Fuzz harness: hardware profile JSON text -> ProfileFromJsonText, as `fusor targets register
// PROFILE.json` reads a profile. Accepted: the profile is plausible, and survives JSON and proto
// round trips unchanged.
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "costmodel/hardware_profile.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusor::fuzz::Accepted() = false;
  auto p = fusor::ProfileFromJsonText(std::string(reinterpret_cast<const char*>(data), size));
  if (!p.ok()) {
    FUZZ_CHECK(!p.status().message().empty(), "a profile error without a message");
    return 0;
  }
  FUZZ_CHECK(fusor::CheckPlausible(*p).ok(), "an accepted profile is not plausible");
  const nlohmann::json j = fusor::ProfileToJson(*p);
  auto back = fusor::ProfileFromJson(j);
  FUZZ_CHECK(back.ok(),
             "ProfileToJson of an accepted profile is refused: " + back.status().ToString());
  FUZZ_CHECK(fusor::ProfileToJson(*back) == j, "the profile changed over a JSON round trip");
  fusor::v1::HardwareProfile wire;
  fusor::ProfileToProto(*p, &wire);
  auto from_wire = fusor::ProfileFromProto(wire);
  FUZZ_CHECK(from_wire.ok(),
             "ProfileToProto of an accepted profile is refused: " + from_wire.status().ToString());
  FUZZ_CHECK(fusor::ProfileToJson(*from_wire) == j, "the profile changed over a proto round trip");
  fusor::fuzz::Accepted() = true;
  return 0;
}
