// The op registry's list of reference ops (HasReferenceKernel, graph/op_registry.h) against the
// reference interpreter's kernels, on ONNX's own node cases (libonnx-testdata): one case of every
// op the cases cover, as a one-node graph. An op the registry lists reaches a kernel; an op it
// does not list has none in the dispatch either (RunReferenceKernel, without the registry's
// check). So an op added to the list without a kernel, or given a kernel without being listed,
// fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "graph/op_registry.h"
#include "runtime/reference.h"
#include "tests/conformance/backend_case.h"

namespace fusor::conformance {
namespace {

namespace fs = std::filesystem;

constexpr char kNoKernel[] = "op is not supported by the runtime";

// The first case (by name) of each op whose case imports as a single node of that op.
std::map<std::string, LoadedCase> OneCasePerOp() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(fs::path(FUSOR_ONNX_TESTDATA_DIR) / "node")) {
    if (fs::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::map<std::string, LoadedCase> cases;
  for (const fs::path& dir : dirs) {
    StatusOr<LoadedCase> loaded = LoadBackendCase(dir.string());
    if (!loaded.ok() || loaded->graph.num_nodes() != 1) continue;
    const Node& n = loaded->graph.node(0);
    if (!n.domain.empty() && n.domain != "ai.onnx") continue;
    cases.try_emplace(n.op_type, *std::move(loaded));
  }
  return cases;
}

TEST(ReferenceRegistry, TheOpsWithAReferenceKernelAreTheOpsTheRegistryLists) {
  if (!fs::exists(fs::path(FUSOR_ONNX_TESTDATA_DIR) / "node")) {
    GTEST_SKIP() << "no ONNX test data at " << FUSOR_ONNX_TESTDATA_DIR;
  }
  std::map<std::string, LoadedCase> cases = OneCasePerOp();
  int listed = 0, unlisted = 0;
  for (auto& [op, c] : cases) {
    TensorValues values = c.leaves;
    if (HasReferenceKernel("", op)) {
      ++listed;
      Status s = RunReferenceNode(c.graph, 0, &values);
      EXPECT_EQ(s.message().find(kNoKernel), std::string::npos)
          << op
          << " is listed in graph/op_registry.cc but has no reference kernel: " << s.ToString();
    } else {
      ++unlisted;
      EXPECT_EQ(CheckReferenceKernel(c.graph, 0).code(), Status::Code::kUnimplemented) << op;
      Status s = RunReferenceKernel(c.graph, 0, &values);
      EXPECT_NE(s.message().find(kNoKernel), std::string::npos)
          << op << " has a reference kernel but is not listed in graph/op_registry.cc ("
          << (s.ok() ? "it ran" : s.ToString()) << ")";
    }
  }
  // Both sides are exercised: most listed ops have a case, and some ops have no kernel.
  EXPECT_GT(listed, static_cast<int>(ReferenceKernelOps().size()) / 2);
  EXPECT_GT(unlisted, 0);
}

TEST(ReferenceRegistry, EveryOpTheFusionRegistryKnowsHasAReferenceKernel) {
  for (std::string_view op : KnownOps()) EXPECT_TRUE(HasReferenceKernel("", op)) << op;
  EXPECT_FALSE(HasReferenceKernel("com.microsoft", "Add"));
  EXPECT_TRUE(ReferenceKernelWritesIntegers("Gather"));
  EXPECT_FALSE(ReferenceKernelWritesIntegers("Relu"));
}

}  // namespace
}  // namespace fusor::conformance
