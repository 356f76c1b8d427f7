// Embedding Fusor's engine (docs/embedding.md): load a model with its weights and a tuned plan,
// compile once, run several times, read the outputs.
//
//   embed_engine MODEL.onnx [PLAN.json]
#include <fusor/engine.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: embed_engine MODEL.onnx [PLAN.json]\n");
    return 2;
  }
  fusor::EngineOptions options;
  options.plan_json_path = argc > 2 ? argv[2] : "";
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
