// One case of ONNX's backend test suite (libonnx-testdata: a directory with model.onnx and
// test_data_set_0/{input,output}_K.pb) run the way `fusor run --weights --input ...` runs it: the
// import with the CLI's constant folding and the inputs' shapes bound, then the reference
// interpreter, the executor under the unfused plan and the executor under the rules plan, each
// compared with the expected outputs at the ONNX test runner's tolerance (rtol 1e-3, atol 1e-5).
// Stateless; a case may crash the process (that is what the caller's forked child is for).
#pragma once

#include <string>

#include "base/status.h"
#include "graph/graph.h"
#include "runtime/host_tensor.h"

namespace fusor::conformance {

enum class Verdict { kPass, kRefused, kWrong, kCrash };

struct CaseOutcome {
  Verdict verdict = Verdict::kPass;
  // For kRefused: a short, stable category ("opset 9", "dtype float16", "op LogSoftmax"); for
  // kWrong: which run was wrong. Never contains a tab or a newline.
  std::string category;
  std::string detail;  // The full message, for the test's log.
};

// Runs the case in directory `dir`.
CaseOutcome RunBackendCase(const std::string& dir);

// A case imported as RunBackendCase imports it (its inputs' shapes bound, an input the import asks
// for fixed at import), with the values of every leaf: for tests that run its nodes one by one.
struct LoadedCase {
  Graph graph;
  TensorValues leaves;
};
StatusOr<LoadedCase> LoadBackendCase(const std::string& dir);

// "pass", "refused <category>", "wrong <category>", "crash <category>": the expectation file's
// form of an outcome.
std::string OutcomeText(const CaseOutcome& o);

}  // namespace fusor::conformance
