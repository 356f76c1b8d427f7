// The CLI's model options: several values of a symbolic dim give one bound graph per value, each
// with its own hash, and the verbs that take one graph refuse several.
#include "client/model_options.h"

#include <gtest/gtest.h>

#include <set>

#include "graph/canonical.h"

namespace fusor {
namespace {

ModelOptions ResNetWithBatches(std::vector<std::string> dims) {
  ModelOptions o;
  o.path = std::string(FUSOR_MODELS_DIR) + "/resnet18_dynamic_batch.onnx";
  o.dims = std::move(dims);
  return o;
}

TEST(ModelOptions, SeveralValuesOfADimGiveOneGraphPerBinding) {
  auto bound = ResNetWithBatches({"batch=1,2,4"}).ImportEach();
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  ASSERT_EQ(bound->size(), 3u);
  std::set<std::string> hashes;
  const char* labels[] = {"batch=1", "batch=2", "batch=4"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*bound)[i].label, labels[i]);
    const Graph& g = (*bound)[i].graph;
    EXPECT_EQ(g.tensor(g.inputs()[0]).dims[0], int64_t{1} << i);
    hashes.insert(CanonicalHash(g));
  }
  EXPECT_EQ(hashes.size(), 3u);
}

TEST(ModelOptions, OneGraphVerbsRefuseSeveralBindings) {
  auto g = ResNetWithBatches({"batch=1,8"}).Import();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("2 bindings"), std::string::npos) << g.status().message();
  EXPECT_TRUE(ResNetWithBatches({"batch=8"}).Import().ok());
}

TEST(ModelOptions, ABadValueInTheListNamesIt) {
  auto bound = ResNetWithBatches({"batch=1,x"}).ImportEach();
  ASSERT_FALSE(bound.ok());
  EXPECT_NE(bound.status().message().find("'x'"), std::string::npos) << bound.status().message();
}

}  // namespace
}  // namespace fusor
