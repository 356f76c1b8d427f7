// Writes the generated part of the fuzz seed corpora (tests/fuzz/corpus/): ONNX models converted to
// fusor.v1.Graph, a small synthetic transformer graph, plans of the plan harness's graph as JSON,
// and a hardware profile as JSON. Every file it writes must be accepted, so each is named "ok-*".
// Usage: fuzz_make_seeds CORPUS_DIR MODEL.onnx...
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "costmodel/hardware_profile.h"
#include "graph/canonical.h"
#include "graph/graph_proto.h"
#include "graph/onnx_import.h"
#include "graph/plan.h"
#include "graph/plan_json.h"
#include "graph/synthetic.h"

namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

int Die(const fusor::Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR MODEL.onnx...\n");
    return 2;
  }
  const fs::path out = argv[1];
  for (int i = 2; i < argc; ++i) {
    auto g = fusor::ImportOnnxFile(argv[i]);
    if (!g.ok()) return Die(g.status());
    Write(out / "graph_proto" / ("ok-" + fs::path(argv[i]).stem().string() + ".pb"),
          fusor::ToProto(*g).SerializeAsString());
  }
  auto transformer =
      fusor::SyntheticTransformer({.layers = 1, .sequence = 4, .hidden = 8, .heads = 2});
  if (!transformer.ok()) return Die(transformer.status());
  Write(out / "graph_proto" / "ok-transformer.pb",
        fusor::ToProto(*transformer).SerializeAsString());

  // The plan harness's graph (plan_json_fuzz.cc).
  auto g = fusor::ImportOnnxFile(FUSOR_MODELS_DIR "/squeezenet1_1.onnx");
  if (!g.ok()) return Die(g.status());
  const fs::path plans = out / "plan_json";
  const fusor::PlanOrigin origin{fusor::CanonicalHash(*g), ""};
  Write(plans / "ok-unfused.json", fusor::PlanToJson(fusor::UnfusedPlan(*g), origin).dump());
  Write(plans / "ok-max-fusion.json", fusor::PlanToJson(fusor::MaxFusionPlan(*g), origin).dump(1));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    Write(plans / ("ok-random-" + std::to_string(seed) + ".json"),
          fusor::PlanToJson(fusor::RandomLegalPlan(*g, seed), origin).dump());
  }

  fusor::HardwareProfile profile;
  profile.target.cpu_model = "Intel(R) Xeon(R) Platinum 8480+";
  profile.target.isa = "avx512_core_amx";
  profile.target.cores = 2;
  profile.target.onednn_version = "3.0.0";
  profile.calibrated_unix_ms = 1795000000000;
  profile.matmul_gflops = {412.5, 0.08, 12};
  Write(out / "hardware_profile" / "ok-profile.json", fusor::ProfileToJson(profile).dump(2));
  return 0;
}
