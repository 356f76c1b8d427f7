// Embedding Fusor's engine (docs/embedding.md): load a model with its weights and a tuned plan,
// compile once, run several times, read the outputs. The plan comes from a plan JSON, or from a
// tuning database or deployment snapshot (by the model's graph hash and this CPU's target).
//
//   embed_engine MODEL.onnx [PLAN.json | --db DATABASE]
#include <fusor/engine.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  fusor::EngineOptions options;
  if (argc == 4 && std::string(argv[2]) == "--db") {
    options.plan_database_path = argv[3];
  } else if (argc == 3) {
    options.plan_json_path = argv[2];
  } else if (argc != 2) {
    std::fprintf(stderr, "usage: embed_engine MODEL.onnx [PLAN.json | --db DATABASE]\n");
    return 2;
  }
  auto engine = fusor::Engine::Load(argv[1], options);
  if (!engine.ok()) {
    std::fprintf(stderr, "embed_engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  std::printf("plan: %s\n", (*engine)->plan_source().c_str());
  // Every input filled with a ramp of values (a real application feeds its data here).
  std::vector<fusor::EngineTensor> inputs = (*engine)->inputs();
  for (auto& in : inputs) {
    int64_t n = 1;
    for (int64_t d : in.dims) n *= d;
    for (int64_t e = 0; e < n; ++e) {
      if (in.dtype == "float32")
        in.floats.push_back(static_cast<float>(e % 17) / 17.0f - 0.5f);
      else
        in.ints.push_back(0);
    }
  }
  for (int run = 0; run < 3; ++run) {
    auto outputs = (*engine)->Run(inputs);
    if (!outputs.ok()) {
      std::fprintf(stderr, "embed_engine: %s\n", outputs.status().ToString().c_str());
      return 1;
    }
    for (const auto& out : *outputs) {
      double sum = 0;
      for (float v : out.floats) sum += v;
      std::printf("run %d: output '%s' %zu values, sum %.6g\n", run, out.name.c_str(),
                  out.floats.size() + out.ints.size(), sum);
    }
  }
  return 0;
}
