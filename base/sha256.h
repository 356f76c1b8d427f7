// SHA-256 (FIPS 180-4), used for canonical graph hashes, target ids and token digests: those key
// cached plans, so a collision would serve a wrong plan, which rules out a short
// non-cryptographic hash. The digest is OpenSSL's (libcrypto's EVP interface, already linked
// through gRPC); Sha256 adds the typed, endian-independent updates the hashes are built from and
// buffers small updates. A Sha256 object owns its digest context, is movable but not copyable,
// and is not safe to share between threads while updating.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX.

namespace fusor {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

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
  void Flush();

  evp_md_ctx_st* ctx_;               // Owned.
  std::array<uint8_t, 256> buffer_;  // Small updates gather here before they reach OpenSSL.
  size_t buffered_ = 0;
};

std::string Sha256Hex(std::string_view data);

}  // namespace fusor
