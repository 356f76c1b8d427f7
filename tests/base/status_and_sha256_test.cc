#include <gtest/gtest.h>

#include "base/sha256.h"
#include "base/status.h"

namespace fusor {
namespace {

// FIPS 180-4 example vectors.
TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionAs) {
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  Sha256 h;
  for (size_t i = 0; i < data.size(); i += 7)
    h.Update(data.data() + i, std::min<size_t>(7, data.size() - i));
  EXPECT_EQ(h.FinishHex(), Sha256Hex(data));
}

TEST(Sha256, LengthPrefixedStringsDoNotCollide) {
  Sha256 a, b;
  a.UpdateString("ab");
  a.UpdateString("c");
  b.UpdateString("a");
  b.UpdateString("bc");
  EXPECT_NE(a.FinishHex(), b.FinishHex());
}

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  FUSOR_ASSIGN_OR_RETURN(int h, Half(x));
  FUSOR_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, EarlyReturnsCarryTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd 3");
  EXPECT_EQ(s.WithContext("model.onnx").ToString(), "InvalidArgument: model.onnx: odd 3");
}

}  // namespace
}  // namespace fusor
