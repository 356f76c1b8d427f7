// Fuzz harness: ONNX ModelProto bytes -> ImportOnnxBytes (parse, shape inference, folding, IR,
// validation, nodes over constants evaluated by the reference interpreter, canonical order), as
// `fusor tune MODEL.onnx` runs it on a file it was handed. The libFuzzer binary (clang 14) keeps
// nodes over constants instead of evaluating them (FUSOR_FUZZ_WITHOUT_RUNTIME).
// Accepted: the imported graph survives the wire form (FromProto(ToProto(g)) validates and
// converts back to the same proto).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "graph/graph_proto.h"
#include "graph/onnx_import.h"
#ifndef FUSOR_FUZZ_WITHOUT_RUNTIME
#include "runtime/constant_evaluator.h"
#endif
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/same_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Mutated inputs fail to parse all the time; protobuf's log line for each would swamp the run.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  fusor::fuzz::Accepted() = false;
#ifndef FUSOR_FUZZ_WITHOUT_RUNTIME
  static const fusor::ImportOptions options = fusor::WithConstantFolding({});  // As the CLI.
#else
  // runtime/ does not build with clang 14 (tests/fuzz/CMakeLists.txt): nodes over constants stay.
  static const fusor::ImportOptions options = [] {
    fusor::ImportOptions o;
    o.keep_constant_nodes = true;
    return o;
  }();
#endif
  auto g =
      fusor::ImportOnnxBytes(std::string_view(reinterpret_cast<const char*>(data), size), options);
  if (!g.ok()) {
    FUZZ_CHECK(!g.status().message().empty(), "an import error without a message");
    return 0;
  }
  fusor::v1::Graph wire = fusor::ToProto(*g);
  auto back = fusor::FromProto(wire, options.limits);
  FUZZ_CHECK(back.ok(), "an imported graph fails FromProto: " + back.status().ToString());
  const std::string diff = fusor::fuzz::ProtoDifferences(fusor::ToProto(*back), wire);
  FUZZ_CHECK(diff.empty(), "ToProto(FromProto(ToProto(imported))) differs: " + diff);
  fusor::fuzz::Accepted() = true;
  return 0;
}
