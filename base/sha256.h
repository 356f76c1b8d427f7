// SHA-256 (FIPS 180-4), used for canonical graph hashes and target ids: those key cached plans, so
// a collision would serve a wrong plan, which rules out a short non-cryptographic hash. A Sha256
// object accumulates bytes; it is not safe to share between threads while updating.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fusor {

class Sha256 {
 public:
  Sha256();

  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // Feeds fixed-width little-endian integers, so the digest does not depend on the host's
  // endianness.
  void UpdateU64(uint64_t v);
  void UpdateI64(int64_t v) { UpdateU64(static_cast<uint64_t>(v)); }
  // Feeds the length first, so ("ab","c") and ("a","bc") differ.
  void UpdateString(std::string_view s);
  void UpdateDouble(double v);

  // Finishes and returns the 32-byte digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> Finish();
  // Finish() as 64 lowercase hex characters.
  std::string FinishHex();

 private:
  void Compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string Sha256Hex(std::string_view data);

}  // namespace fusor
