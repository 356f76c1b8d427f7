// Every file a person names reaches Fusor through ReadInputFile: anything but a regular file
// within the limit is one clear error naming the path, never a hang or an exception.
#include "base/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace fusor {
namespace {

namespace fs = std::filesystem;

class InputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fusor_input_file_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(InputFile, ARegularFileWithinTheLimitIsReadWhole) {
  auto bytes = ReadInputFile(Write("a.json", std::string("{\0}", 3)), "plan file", 3);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, std::string("{\0}", 3));
}

TEST_F(InputFile, AMissingFileIsNotFoundNamingIt) {
  const std::string path = (dir_ / "none.onnx").string();
  auto bytes = ReadInputFile(path, "model file", 100);
  EXPECT_EQ(bytes.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(bytes.status().message(), "model file '" + path + "' does not exist");
}

TEST_F(InputFile, ADirectoryIsAnErrorNotAnException) {
  auto bytes = ReadInputFile(dir_.string(), "plan file", 100);
  EXPECT_EQ(bytes.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(bytes.status().message(),
            "plan file '" + dir_.string() + "' is a directory, not a regular file");
}

TEST_F(InputFile, AFifoWithNoWriterIsAnErrorNotAHang) {
  const std::string path = (dir_ / "fifo.npy").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto bytes = ReadInputFile(path, "tensor file", 100);
  EXPECT_EQ(bytes.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(bytes.status().message().find("is a FIFO, not a regular file"), std::string::npos);
}

TEST_F(InputFile, ADeviceIsAnError) {
  auto bytes = ReadInputFile("/dev/zero", "model file", 100);
  EXPECT_EQ(bytes.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(bytes.status().message().find("'/dev/zero' is a device"), std::string::npos);
}

TEST_F(InputFile, AFileOverTheLimitIsRefusedBeforeItIsRead) {
  const std::string path = (dir_ / "huge.onnx").string();
  std::ofstream(path).close();
  fs::resize_file(path, int64_t{5} << 30);  // Sparse: 5 GiB that take no disk.
  auto bytes = ReadInputFile(path, "model file", int64_t{2} << 30);
  EXPECT_EQ(bytes.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(bytes.status().message(),
            "model file '" + path + "' is 5368709120 bytes; the limit is 2147483648");
}

TEST_F(InputFile, ARangePastTheEndIsAnErrorAndARangeWithinIsRead) {
  const std::string path = Write("w.bin", "0123456789");
  auto part = ReadInputFileRange(path, "external data file", 2, 3);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(*part, "234");
  auto past = ReadInputFileRange(path, "external data file", 8, 3);
  EXPECT_EQ(past.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(past.status().message().find("holds 10 bytes; offset 8 plus 3 bytes pass its end"),
            std::string::npos)
      << past.status().message();
  auto overflow = ReadInputFileRange(path, "external data file", INT64_MAX, 3);
  EXPECT_EQ(overflow.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace fusor
