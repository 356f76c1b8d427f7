#include "base/sha256.h"

#include <openssl/evp.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace fusor {
namespace {

// OpenSSL fails here only when it cannot allocate; nothing sensible can continue.
void Check(int ok, const char* what) {
  if (ok == 1) return;
  std::fprintf(stderr, "fusor: OpenSSL %s failed (out of memory?)\n", what);
  std::abort();
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  Check(ctx_ != nullptr, "EVP_MD_CTX_new");
  Check(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

Sha256::Sha256(Sha256&& other) noexcept
    : ctx_(std::exchange(other.ctx_, nullptr)),
      buffer_(other.buffer_),
      buffered_(std::exchange(other.buffered_, 0)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = std::exchange(other.ctx_, nullptr);
    buffer_ = other.buffer_;
    buffered_ = std::exchange(other.buffered_, 0);
  }
  return *this;
}

void Sha256::Flush() {
  if (buffered_ == 0) return;
  Check(EVP_DigestUpdate(ctx_, buffer_.data(), buffered_), "EVP_DigestUpdate");
  buffered_ = 0;
}

void Sha256::Update(const void* data, size_t size) {
  if (size > buffer_.size() - buffered_) {
    Flush();
    if (size >= buffer_.size()) {
      Check(EVP_DigestUpdate(ctx_, data, size), "EVP_DigestUpdate");
      return;
    }
  }
  std::memcpy(buffer_.data() + buffered_, data, size);
  buffered_ += size;
}

void Sha256::UpdateU64(uint64_t v) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
  Update(bytes, sizeof(bytes));
}

void Sha256::UpdateString(std::string_view s) {
  UpdateU64(s.size());
  Update(s);
}

void Sha256::UpdateDouble(double v) {
  if (v == 0.0) v = 0.0;  // -0.0 and 0.0 compute the same; hash them the same.
  UpdateU64(std::bit_cast<uint64_t>(v));
}

std::array<uint8_t, 32> Sha256::Finish() {
  Flush();
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  Check(EVP_DigestFinal_ex(ctx_, digest.data(), &size), "EVP_DigestFinal_ex");
  Check(size == digest.size(), "EVP_DigestFinal_ex (digest size)");
  return digest;
}

std::string Sha256::FinishHex() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : Finish()) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 15]);
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.FinishHex();
}

}  // namespace fusor
