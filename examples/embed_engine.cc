// Embedding Fusor's engine (docs/embedding.md) through its C++ API (fusor/fusor_cxx_api.h, a
// header-only wrapper over the C API): load a model with its weights and a tuned plan, compile
// once, run several times with the inputs and outputs in this program's memory. The plan comes
// from a plan JSON, or from a tuning database or deployment snapshot (by the model's graph hash
// and this CPU's target).
//
//   embed_engine MODEL.onnx [PLAN.json | --db DATABASE]
#include <fusor/fusor_cxx_api.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  fusor::api::Options options;
  if (argc == 4 && std::string(argv[2]) == "--db") {
    options.SetPlanDatabase(argv[3]);
  } else if (argc == 3) {
    options.SetPlanJson(argv[2]);
  } else if (argc != 2) {
    std::fprintf(stderr, "usage: embed_engine MODEL.onnx [PLAN.json | --db DATABASE]\n");
    return 2;
  }
  try {
    fusor::api::Engine engine = fusor::api::Engine::Load(argv[1], options);
    std::printf("plan: %s\n", engine.plan_source().c_str());
    // Every input a ramp of float32 values, or zeros for an integer one (a real application
    // feeds its data here); every output a float32 buffer the engine writes into.
    std::vector<fusor::api::TensorInfo> in_info = engine.inputs(), out_info = engine.outputs();
    std::vector<std::vector<float>> floats(in_info.size());
    std::vector<std::vector<int64_t>> ints(in_info.size());
    std::vector<FusorTensor> inputs, outputs;
    for (size_t i = 0; i < in_info.size(); ++i) {
      const auto& in = in_info[i];
      if (in.dtype == FUSOR_FLOAT32) {
        for (int64_t e = 0; e < in.num_elements(); ++e)
          floats[i].push_back((e % 17) / 17.0f - 0.5f);
        inputs.push_back(fusor::api::TensorView(in.name.c_str(), std::span(floats[i]), in.dims));
      } else {
        ints[i].assign(in.num_elements(), 0);
        inputs.push_back(fusor::api::TensorView(in.name.c_str(), std::span(ints[i]), in.dims));
      }
    }
    std::vector<std::vector<float>> results(out_info.size());
    for (size_t o = 0; o < out_info.size(); ++o) {
      results[o].resize(out_info[o].num_elements());
      outputs.push_back(fusor::api::TensorView(out_info[o].name.c_str(), std::span(results[o]),
                                               out_info[o].dims));
    }
    for (int run = 0; run < 3; ++run) {
      engine.Run(inputs, outputs);
      for (size_t o = 0; o < out_info.size(); ++o) {
        double sum = 0;
        for (float v : results[o]) sum += v;
        std::printf("run %d: output '%s' %zu values, sum %.6g\n", run, out_info[o].name.c_str(),
                    results[o].size(), sum);
      }
    }
  } catch (const fusor::api::Error& e) {
    std::fprintf(stderr, "embed_engine: %s\n", e.what());
    return 1;
  }
  return 0;
}
