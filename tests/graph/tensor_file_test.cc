// The .npy header reader: numpy's forms are read, anything else (a header past numpy's 10000-byte
// cap, a malformed dictionary) is an error naming the file, never a crash.
#include "graph/tensor_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fusor {
namespace {

namespace fs = std::filesystem;

class NpyHeader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fusor_npy_header_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A version 2 .npy file (4-byte header length) with `header` and `data`.
  StatusOr<TensorData> Read(const std::string& header, const std::string& data) {
    std::string bytes = std::string("\x93NUMPY\x02\x00", 8);
    for (int b = 0; b < 4; ++b) bytes += static_cast<char>((header.size() >> (8 * b)) & 0xff);
    bytes += header + data;
    const std::string path = (dir_ / "t.npy").string();
    std::ofstream(path, std::ios::binary) << bytes;
    return ReadTensorFile(path);
  }
  std::string Error(const std::string& header, const std::string& data = "") {
    auto t = Read(header, data);
    return t.ok() ? "accepted" : t.status().message();
  }
  fs::path dir_;
};

TEST_F(NpyHeader, AThirtyKilobyteHeaderIsAnErrorNotAStackOverflow) {
  std::string shape;
  for (int i = 0; i < 10000; ++i) shape += "1, ";
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  ASSERT_GT(header.size(), 30000u);
  EXPECT_NE(Error(header, std::string(4, '\0')).find("is 30055 bytes; numpy's limit is 10000"),
            std::string::npos)
      << Error(header, std::string(4, '\0'));
}

TEST_F(NpyHeader, TheFormsNumpyWritesAreRead) {
  auto t = Read("{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (2L, 1L), }   \n",
                std::string(16, '\x01'));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->dims, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(t->i[0], 0x0101010101010101);
  auto scalar = Read("{'descr': '|b1', 'fortran_order': False, 'shape': ()}", std::string(1, 1));
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_TRUE(scalar->dims.empty());
  auto vector = Read("{'shape': (3,), 'fortran_order': False, 'descr': '<u2'}", std::string(6, 0));
  ASSERT_TRUE(vector.ok()) << vector.status().ToString();
  EXPECT_EQ(vector->dims, (std::vector<int64_t>{3}));
}

TEST_F(NpyHeader, MalformedHeadersAreErrorsNamingWhatIsWrong) {
  EXPECT_NE(Error("{'descr': '<f4', 'shape': ()}").find("needs the keys"), std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'descr': '<f4'}").find("'descr' is unknown or repeated"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4, 'fortran_order': False, 'shape': ()}").find("expected"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}")
                .find("a non-negative integer expected"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}")
                .find("a dim is too large"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': 'f4', 'fortran_order': False, 'shape': ()}").find("byte order"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'fortran_order': True, 'shape': ()}").find("Fortran order"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x").find("text follows"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, "
                  "4294967296)}")
                .find("needs more than 2^63"),
            std::string::npos);
  EXPECT_NE(Error("{'descr': '<f4', 'fortran_order': Fal").find("True or False expected"),
            std::string::npos);
}

TEST_F(NpyHeader, AHeaderLengthPastTheFileEndIsAnError) {
  std::string bytes = std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{}";
  const std::string path = (dir_ / "t.npy").string();
  std::ofstream(path, std::ios::binary) << bytes;
  auto t = ReadTensorFile(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("passes the end of the file"), std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace fusor
