// Reading weight data for execution: raw_data, typed fields and external data files, each error
// naming the tensor; import with weights gives the same graph (and hash) as import without; tensor
// files (.pb, .npy) read back what was written.
#include "graph/initializer_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "graph/canonical.h"
#include "graph/narrow_float.h"
#include "graph/onnx_import.h"
#include "graph/tensor_file.h"
#include "tests/graph/onnx_builder.h"

namespace fusor {
namespace {

namespace fs = std::filesystem;
using testing::OnnxBuilder;

class InitializerData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fusor-initializer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& rel, const std::string& bytes) {
    fs::path p = dir_ / rel;
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }

  // y = x @ Transpose(w) + Unsqueeze(b): import folds the Transpose and the Unsqueeze (weight-only
  // nodes).
  static OnnxBuilder MatMulModel() {
    OnnxBuilder b(13);
    b.Input("x", {2, 3}).Int64Constant("axes", {0});
    b.Node("Transpose", {"w"}, {"wt"});
    b.Node("MatMul", {"x", "wt"}, {"xw"});
    b.Node("Unsqueeze", {"b", "axes"}, {"b2"});
    b.Node("Add", {"xw", "b2"}, {"y"});
    b.Output("y");
    return b;
  }

  static onnx::TensorProto* AddFloat(OnnxBuilder& b, const std::string& name, Shape dims) {
    auto* t = b.model().mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }

  static std::string FloatBytes(const std::vector<float>& v) {
    std::string s(v.size() * 4, '\0');
    std::memcpy(s.data(), v.data(), s.size());
    return s;
  }

  static void External(onnx::TensorProto* t, const std::string& location, int64_t offset) {
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    kv = t->add_external_data();
    kv->set_key("offset");
    kv->set_value(std::to_string(offset));
  }

  fs::path dir_;
};

const std::vector<float> kW = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 4x3

TEST_F(InitializerData, RawTypedAndExternalDataAreReadAndFoldedWeightsComeFromThem) {
  OnnxBuilder b = MatMulModel();
  External(AddFloat(b, "w", {4, 3}), "data/w.bin", 8);
  auto* bias = AddFloat(b, "b", {4});
  for (float v : {0.5f, -1.f, 2.f, 0.f}) bias->add_float_data(v);
  fs::create_directories(dir_ / "model/data");
  Write("model/data/w.bin", std::string(8, 'x') + FloatBytes(kW));
  std::string path = Write("model/m.onnx", b.Serialize());

  auto m = ImportOnnxFileWithWeights(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto plain = ImportOnnxFile(path);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(CanonicalHash(m->graph), CanonicalHash(*plain));
  // The Transpose and the Unsqueeze left the graph; their outputs are weights the load-time graph
  // computes from w and b (weight data never feeds import's own folding, so the graph is the same
  // whether the data is there or not).
  EXPECT_EQ(m->graph.num_nodes(), 2u);
  ASSERT_EQ(m->weights.load_time.num_nodes(), 2u);
  EXPECT_EQ(m->weights.load_time.outputs().size(), 2u);
  ASSERT_EQ(m->weights.initializers.size(), 2u);
  EXPECT_EQ(m->weights.initializers.at("w").f, kW);
  EXPECT_EQ(m->weights.initializers.at("w").dims, (Shape{4, 3}));
  EXPECT_EQ(m->weights.initializers.at("b").f, (std::vector<float>{0.5f, -1.f, 2.f, 0.f}));
}

TEST_F(InitializerData, RawDataOfEveryIntegerWidthReads) {
  onnx::TensorProto t;
  t.set_name("idx");
  t.set_data_type(onnx::TensorProto::INT32);
  t.add_dims(3);
  int32_t v[3] = {-7, 0, 42};
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v), sizeof(v)));
  auto d = ReadTensorProtoData(t, "");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->i, (std::vector<int64_t>{-7, 0, 42}));
  EXPECT_EQ(d->dtype, DType::kInt32);
}

// float16 and bfloat16 weights read as float32, from raw_data and from int32_data's bit
// patterns (ONNX's typed field for them): 1, -2, 65504 (float16's largest), 2^-24 (its smallest
// subnormal), infinity.
TEST_F(InitializerData, Float16AndBFloat16WeightsReadAsFloat32FromRawAndTypedData) {
  const std::vector<float> want = {1.f, -2.f, 65504.f, 5.9604645e-08f, INFINITY};
  const uint16_t half[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00};
  onnx::TensorProto t;
  t.set_name("h");
  t.set_data_type(onnx::TensorProto::FLOAT16);
  t.add_dims(5);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(half), sizeof(half)));
  auto raw = ReadTensorProtoData(t, "");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->f, want);
  t.clear_raw_data();
  for (uint16_t b : half) t.add_int32_data(b);
  auto typed = ReadTensorProtoData(t, "");
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(typed->f, want);
  EXPECT_EQ(typed->dtype, DType::kFloat16);

  const uint16_t bf16[] = {0x3F80, 0xC000, 0x4780};  // 1, -2, 65536.
  t.set_data_type(onnx::TensorProto::BFLOAT16);
  t.clear_int32_data();
  t.clear_dims();
  t.add_dims(3);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(bf16), sizeof(bf16)));
  auto b = ReadTensorProtoData(t, "");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->f, (std::vector<float>{1.f, -2.f, 65536.f}));
}

// Rounding to a narrow float is to nearest, ties to even, as ONNX's Cast does: 1 + 2^-11 lies
// halfway between float16's 1 and 1 + 2^-10 and goes to the even 1; 65520 overflows to infinity.
TEST(NarrowFloat, RoundingIsToNearestTiesToEvenAndOverflowsToInfinity) {
  EXPECT_EQ(RoundToDType(1.0f + 0x1p-11f, DType::kFloat16), 1.0f);
  EXPECT_EQ(RoundToDType(1.0f + 0x1p-11f + 0x1p-20f, DType::kFloat16), 1.0f + 0x1p-10f);
  EXPECT_EQ(RoundToDType(1.0f + 3 * 0x1p-11f, DType::kFloat16), 1.0f + 0x1p-9f);
  EXPECT_EQ(RoundToDType(65519.f, DType::kFloat16), 65504.f);
  EXPECT_EQ(RoundToDType(65520.f, DType::kFloat16), INFINITY);
  EXPECT_EQ(RoundToDType(-3e-8f, DType::kFloat16), -5.9604645e-08f);
  EXPECT_TRUE(std::isnan(RoundToDType(NAN, DType::kFloat16)));
  EXPECT_EQ(RoundToDType(1.0f + 0x1p-8f, DType::kBFloat16), 1.0f);
  EXPECT_EQ(RoundToDType(1.0f + 3 * 0x1p-8f, DType::kBFloat16), 1.0f + 0x1p-6f);
  EXPECT_TRUE(std::isnan(RoundToDType(NAN, DType::kBFloat16)));
  EXPECT_EQ(RoundToDType(0.1f, DType::kFloat64), 0.1f);
}

TEST_F(InitializerData, LocationOutsideTheModelDirectoryIsRefusedNamingTheTensor) {
  Write("secret.bin", FloatBytes(kW));
  for (const std::string& location :
       std::vector<std::string>{"../secret.bin", (dir_ / "secret.bin").string()}) {
    OnnxBuilder b = MatMulModel();
    External(AddFloat(b, "w", {4, 3}), location, 0);
    auto* bias = AddFloat(b, "b", {4});
    for (int i = 0; i < 4; ++i) bias->add_float_data(1);
    std::string path = Write("model/m.onnx", b.Serialize());
    auto m = ImportOnnxFileWithWeights(path);
    ASSERT_FALSE(m.ok()) << location;
    EXPECT_NE(m.status().message().find("initializer 'w'"), std::string::npos)
        << m.status().message();
    EXPECT_NE(m.status().message().find("leaves the model's directory"), std::string::npos)
        << m.status().message();
  }
}

TEST_F(InitializerData, MissingFileShortFileAndWrongSizeAreErrorsNamingTheTensor) {
  auto import_with = [&](const std::function<void(OnnxBuilder&)>& weight) {
    OnnxBuilder b = MatMulModel();
    weight(b);
    auto* bias = AddFloat(b, "b", {4});
    for (int i = 0; i < 4; ++i) bias->add_float_data(1);
    return ImportOnnxFileWithWeights(Write("model/m.onnx", b.Serialize()));
  };
  auto missing = import_with([](OnnxBuilder& b) {
    External(AddFloat(b, "w", {4, 3}), "no.bin", 0);
  });
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'w'"), std::string::npos);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);

  Write("model/short.bin", FloatBytes({1, 2, 3}));
  auto short_file = import_with([](OnnxBuilder& b) {
    External(AddFloat(b, "w", {4, 3}), "short.bin", 0);
  });
  ASSERT_FALSE(short_file.ok());
  EXPECT_NE(short_file.status().message().find("initializer 'w' (4x3)"), std::string::npos)
      << short_file.status().message();

  auto raw = import_with([](OnnxBuilder& b) {
    AddFloat(b, "w", {4, 3})->set_raw_data(FloatBytes({1, 2, 3, 4, 5}));
  });
  ASSERT_FALSE(raw.ok());
  EXPECT_NE(raw.status().message().find("20 bytes of raw_data; its dims and type need 48"),
            std::string::npos)
      << raw.status().message();

  auto typed = import_with([](OnnxBuilder& b) { AddFloat(b, "w", {4, 3})->add_float_data(1); });
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("holds 1 values; its dims need 12"), std::string::npos)
      << typed.status().message();

  auto stripped = import_with([](OnnxBuilder& b) { AddFloat(b, "w", {4, 3}); });
  ASSERT_FALSE(stripped.ok());
  EXPECT_NE(stripped.status().message().find("'w' (4x3) carries no data"), std::string::npos)
      << stripped.status().message();
}

TEST_F(InitializerData, StrippedModelsStillImportWithoutWeights) {
  auto g = ImportOnnxFile(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto m = ImportOnnxFileWithWeights(std::string(FUSOR_MODELS_DIR) + "/resnet18.onnx");
  ASSERT_FALSE(m.ok());
  // The bundled models name an external data file that is not shipped.
  EXPECT_NE(m.status().message().find("resnet18.weights' does not exist"), std::string::npos)
      << m.status().message();
}

TEST_F(InitializerData, TensorFilesReadBackWhatWasWritten) {
  TensorData f{"logits", DType::kFloat32, {2, 3}, {1.5f, -2, 0, 3, 4, 5}, {}};
  TensorData i{"ids", DType::kInt64, {4}, {}, {1, -2, 300000000000, 4}};
  TensorData s{"flag", DType::kBool, {}, {}, {1}};
  TensorData h{"half", DType::kFloat16, {3}, {1.5f, -65504, 0x1.06p-10f}, {}};
  for (const TensorData& t : {f, i, s, h}) {
    for (const char* ext : {".pb", ".npy"}) {
      std::string path = (dir_ / (t.name + ext)).string();
      ASSERT_TRUE(WriteTensorFile(path, t).ok());
      auto back = ReadTensorFile(path);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->dtype, t.dtype) << path;
      EXPECT_EQ(back->dims, t.dims) << path;
      EXPECT_EQ(back->f, t.f) << path;
      EXPECT_EQ(back->i, t.i) << path;
      EXPECT_EQ(back->name, std::string(ext) == ".pb" ? t.name : "") << path;
    }
  }
}

TEST_F(InitializerData, BadTensorFilesAreClearErrors) {
  EXPECT_NE(ReadTensorFile((dir_ / "none.npy").string()).status().message().find("does not exist"),
            std::string::npos);
  EXPECT_NE(ReadTensorFile(Write("x.txt", "1 2 3")).status().message().find(".pb"),
            std::string::npos);
  EXPECT_NE(ReadTensorFile(Write("x.npy", "not numpy")).status().message().find("not a NumPy"),
            std::string::npos);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' +
                    header + std::string(8, '\0');
  auto short_npy = ReadTensorFile(Write("short.npy", npy));
  EXPECT_NE(short_npy.status().message().find("holds 8 data bytes; its shape 2x3 needs 24"),
            std::string::npos)
      << short_npy.status().message();
  EXPECT_NE(ReadTensorFile(Write("x.pb", "\xff\xff\xff")).status().message().find("TensorProto"),
            std::string::npos);
}

}  // namespace
}  // namespace fusor
