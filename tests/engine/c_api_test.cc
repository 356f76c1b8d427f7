// The engine through its C API and the header-only C++ wrapper (include/fusor/), on SqueezeNet
// filled by tools/fill_weights.py: an IO binding reads the caller's input and writes the caller's
// output in place (no copy: the engine counts what it copies, and values written into the input
// after binding are what the next run sees), eight threads on one loaded engine give the
// single-threaded outputs bit for bit, other dtypes convert, a set cancel flag stops a run, a
// model loads from a buffer, and bad tensors are errors naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "fusor/fusor_c_api.h"
#include "fusor/fusor_cxx_api.h"
#include "graph/narrow_float.h"

namespace fusor::api {
namespace {

std::string FilledModel() { return std::string(FUSOR_FILLED_DIR) + "/squeezenet1_1.onnx"; }

// Values in [-0.5, 0.5) that differ with `seed`.
std::vector<float> Ramp(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) v[e] = static_cast<float>((e + seed * 7) % 13) / 13.0f - 0.5f;
  return v;
}

class CApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = new Engine(
        Engine::Load(FilledModel(), Options().SetMaxConcurrentRuns(8).SetThreadBinding(false)));
  }
  static void TearDownTestSuite() { delete engine_; }

  TensorInfo in() const { return engine_->inputs()[0]; }
  TensorInfo out() const { return engine_->outputs()[0]; }
  // The engine's outputs for `x` through the copying Run.
  std::vector<float> RunCopying(std::vector<float>& x) {
    std::vector<float> y(out().num_elements());
    TensorInfo i = in(), o = out();
    FusorTensor inputs[] = {TensorView(i.name.c_str(), std::span(x), i.dims)};
    FusorTensor outputs[] = {TensorView(o.name.c_str(), std::span(y), o.dims)};
    engine_->Run(inputs, outputs);
    return y;
  }

  static Engine* engine_;
};
Engine* CApiTest::engine_ = nullptr;

TEST_F(CApiTest, ABindingReadsAndWritesTheCallersMemoryWithoutCopies) {
  TensorInfo i = in(), o = out();
  std::vector<float> x = Ramp(i.num_elements(), 1);
  std::vector<float> y(o.num_elements(), std::nanf(""));
  FusorTensor inputs[] = {TensorView(i.name.c_str(), std::span(x), i.dims)};
  FusorTensor outputs[] = {TensorView(o.name.c_str(), std::span(y), o.dims)};
  Binding binding = engine_->Bind(inputs, outputs);
  binding.Run();
  EXPECT_EQ(binding.copied_bytes(), 0);
  std::vector<float> x_before = x;
  EXPECT_EQ(y, RunCopying(x_before));
  EXPECT_EQ(x, x_before) << "the engine wrote into the caller's input";
  // New values in the same memory, no rebinding: the run reads them where the caller put them.
  std::vector<float> first = y;
  std::vector<float> next = Ramp(i.num_elements(), 2);
  std::copy(next.begin(), next.end(), x.begin());  // Into the bound memory, not a new vector.
  std::fill(y.begin(), y.end(), std::nanf(""));
  binding.Run();
  EXPECT_EQ(binding.copied_bytes(), 0);
  std::vector<float> x2 = x;
  EXPECT_EQ(y, RunCopying(x2));
  EXPECT_NE(y, first);
}

TEST_F(CApiTest, EightThreadsOnOneEngineGiveTheSingleThreadedOutputs) {
  constexpr int kThreads = 8;
  TensorInfo i = in(), o = out();
  std::vector<std::vector<float>> expected;
  for (int t = 0; t < kThreads; ++t) {
    std::vector<float> x = Ramp(i.num_elements(), t);
    expected.push_back(RunCopying(x));
  }
  std::vector<std::vector<float>> copied(kThreads), bound(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<float> x = Ramp(i.num_elements(), t);
        for (int run = 0; run < 3; ++run) copied[t] = RunCopying(x);
        bound[t].assign(o.num_elements(), 0.0f);
        FusorTensor inputs[] = {TensorView(i.name.c_str(), std::span(x), i.dims)};
        FusorTensor outputs[] = {TensorView(o.name.c_str(), std::span(bound[t]), o.dims)};
        Binding binding = engine_->Bind(inputs, outputs);
        for (int run = 0; run < 3; ++run) binding.Run();
      } catch (const Error& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "");
    EXPECT_EQ(copied[t], expected[t]) << "thread " << t;
    EXPECT_EQ(bound[t], expected[t]) << "thread " << t;
  }
  EXPECT_NE(expected[0], expected[1]) << "the inputs must give different outputs";
}

TEST_F(CApiTest, Float16InputsAndFloat64OutputsConvert) {
  TensorInfo i = in(), o = out();
  std::vector<float> x = Ramp(i.num_elements(), 3);
  std::vector<uint16_t> half;
  for (float& v : x) {
    half.push_back(FloatToHalf(v));
    v = HalfToFloat(half.back());
  }
  std::vector<double> y(o.num_elements());
  FusorTensor inputs[] = {
      {i.name.c_str(), FUSOR_FLOAT16, i.dims.data(), i.dims.size(), half.data(), half.size() * 2}};
  FusorTensor outputs[] = {TensorView(o.name.c_str(), std::span(y), o.dims)};
  Binding binding = engine_->Bind(inputs, outputs);
  binding.Run();
  EXPECT_EQ(binding.copied_bytes(), static_cast<int64_t>(half.size() * 2 + y.size() * 8));
  // The float32 run on the values the float16 ones stand for.
  std::vector<float> expected = RunCopying(x);
  for (size_t e = 0; e < y.size(); ++e) ASSERT_EQ(y[e], static_cast<double>(expected[e])) << e;
}

TEST_F(CApiTest, ASetCancelFlagStopsTheRun) {
  TensorInfo i = in(), o = out();
  std::vector<float> x = Ramp(i.num_elements(), 1), y(o.num_elements());
  FusorTensor inputs[] = {TensorView(i.name.c_str(), std::span(x), i.dims)};
  FusorTensor outputs[] = {TensorView(o.name.c_str(), std::span(y), o.dims)};
  RunOptions run;
  run.Cancel();
  try {
    engine_->Run(inputs, outputs, &run);
    FAIL() << "a cancelled run returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), FUSOR_CANCELLED);
    EXPECT_NE(std::string(e.what()).find("cancel flag"), std::string::npos) << e.what();
  }
  run.Cancel(false);
  run.SetThreads(1);
  engine_->Run(inputs, outputs, &run);
  std::vector<float> x2 = x;
  EXPECT_EQ(y, RunCopying(x2));
}

TEST_F(CApiTest, AModelLoadedFromABufferRunsAsFromItsFile) {
  std::ifstream file(FilledModel(), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), {});
  Engine from_buffer = Engine::LoadFromBuffer(std::as_bytes(std::span(bytes)));
  bytes.clear();  // The engine keeps nothing of the buffer.
  EXPECT_EQ(from_buffer.plan_source(), engine_->plan_source());
  TensorInfo i = in(), o = out();
  std::vector<float> x = Ramp(i.num_elements(), 4), y(o.num_elements());
  FusorTensor inputs[] = {TensorView(i.name.c_str(), std::span(x), i.dims)};
  FusorTensor outputs[] = {TensorView(o.name.c_str(), std::span(y), o.dims)};
  from_buffer.Run(inputs, outputs);
  EXPECT_EQ(y, RunCopying(x));
}

TEST_F(CApiTest, BadTensorsAreErrorsNamingThem) {
  TensorInfo i = in(), o = out();
  std::vector<float> x = Ramp(i.num_elements(), 1), y(o.num_elements());
  std::vector<int64_t> ints(x.size());
  auto message = [&](std::vector<FusorTensor> inputs, std::vector<FusorTensor> outputs) {
    FusorStatus* s = fusor_engine_run(engine_->get(), nullptr, inputs.data(), inputs.size(),
                                      outputs.data(), outputs.size());
    std::string m = fusor_status_message(s);
    EXPECT_EQ(fusor_status_code(s), FUSOR_INVALID_ARGUMENT) << m;
    fusor_status_release(s);
    return m;
  };
  FusorTensor good_out = TensorView(o.name.c_str(), std::span(y), o.dims);
  EXPECT_EQ(message({}, {good_out}), "input '" + i.name + "' is not given");
  EXPECT_NE(message({TensorView("image", std::span(x), i.dims)}, {good_out})
                .find("'image' is not an input of the model (its inputs: '" + i.name + "')"),
            std::string::npos);
  EXPECT_EQ(message({TensorView(i.name.c_str(), std::span(ints), i.dims)}, {good_out}),
            "input '" + i.name +
                "' needs float32[1x3x224x224] (or another floating-point type), "
                "got int64[1x3x224x224]");
  FusorTensor short_x = TensorView(i.name.c_str(), std::span(x), i.dims);
  short_x.bytes -= 4;
  EXPECT_EQ(message({short_x}, {good_out}),
            "input '" + i.name + "' is given 602108 bytes; float32[1x3x224x224] needs 602112");
}

}  // namespace
}  // namespace fusor::api
