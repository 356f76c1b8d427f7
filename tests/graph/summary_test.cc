// `fusor inspect`'s text (graph/summary.h): byte amounts in binary units, as every other CLI
// output prints them (base/host_memory.h ByteString), not decimal megabytes.
#include "graph/summary.h"

#include <gtest/gtest.h>

#include "base/host_memory.h"
#include "graph/onnx_import.h"

namespace fusor {
namespace {

TEST(Summary, BytesReadInBinaryUnits) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/squeezenet1_1.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  GraphSummary s = Summarize(*g, {});
  ASSERT_GT(s.bytes_read, int64_t{1} << 20);
  ASSERT_GT(s.weight_bytes, int64_t{1} << 20);
  const std::string text = SummaryToText(s);
  EXPECT_NE(text.find("bytes (unfused) " + ByteString(s.bytes_read) + " read, " +
                      ByteString(s.bytes_written) + " written\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("weights         " + ByteString(s.weight_bytes)), std::string::npos) << text;
  EXPECT_NE(text.find(" MiB read"), std::string::npos) << text;
  EXPECT_EQ(text.find(" MB"), std::string::npos) << text;
}

}  // namespace
}  // namespace fusor
