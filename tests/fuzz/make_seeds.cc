// Writes the generated part of the fuzz seed corpora (tests/fuzz/corpus/): ONNX models converted to
// fusor.v1.Graph, a small synthetic transformer graph, plans of the plan harness's graph as JSON,
// a hardware profile as JSON, the agent protos of that profile and graph, and tensor files. Every
// file it writes must be accepted, so each is named "ok-*". Usage: fuzz_make_seeds CORPUS_DIR
// MODEL.onnx...
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
#include "graph/tensor_file.h"
#include "lowering/plan_legality.h"
#include "proto/tuner.pb.h"

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

  // The agent harness (agent_protos_fuzz.cc): a kind byte, then the message.
  fusor::v1::RegisterAgentRequest agent;
  fusor::ProfileToProto(profile, agent.mutable_profile());
  agent.set_name("agent-host");
  Write(out / "agent_protos" / "ok-register.bin", std::string(1, '\0') + agent.SerializeAsString());
  fusor::v1::LeaseMeasurementJobResponse lease;
  lease.set_leased(true);
  fusor::v1::MeasurementJob* job = lease.mutable_job();
  job->set_job_id(7);
  *job->mutable_graph() = fusor::ToProto(*transformer);
  job->set_graph_hash(fusor::CanonicalHash(*transformer));
  fusor::PlanToProto(fusor::MaxFusionPlan(*transformer), job->add_plans());
  fusor::PlanToProto(fusor::UnfusedPlan(*transformer), job->add_plans());
  Write(out / "agent_protos" / "ok-lease.bin", std::string(1, '\1') + lease.SerializeAsString());

  // The tensor file harness (tensor_file_fuzz.cc): each tensor as .npy and .pb.
  const fusor::TensorData tensors[] = {
      {"logits", fusor::DType::kFloat32, {2, 3}, {1.5f, -2, 0, 3, 4, 5}, {}},
      {"ids", fusor::DType::kInt64, {4}, {}, {1, -2, 300000000000, 4}},
      {"mask", fusor::DType::kBool, {}, {}, {1}},
      {"scale", fusor::DType::kFloat64, {1, 2}, {0.25f, 8}, {}}};
  for (const fusor::TensorData& t : tensors) {
    for (const char* ext : {".npy", ".pb"}) {
      auto bytes = fusor::TensorFileBytes(t, t.name + ext);
      if (!bytes.ok()) return Die(bytes.status());
      Write(out / "tensor_file" / ("ok-" + t.name + ext), *bytes);
    }
  }
  return 0;
}
