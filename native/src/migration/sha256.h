// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104) for the migration handshake. Self-contained: the addon links no
// crypto library. Only the handshake uses it (a few hundred bytes per migration), so clarity beats speed here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvmts::migration {

/** A SHA-256 digest. */
using Digest = std::array<uint8_t, 32>;

/** Incremental SHA-256. */
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t len);
  Digest Final();

 private:
  void Block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/** One-shot SHA-256 of a buffer. */
Digest Sha256Of(const void* data, size_t len);

/** HMAC-SHA-256 of `msg` under `key` (any key length). */
Digest HmacSha256(const void* key, size_t key_len, const void* msg, size_t msg_len);

/** Compares two digests in constant time (no early exit on the first differing byte). */
bool DigestEqual(const Digest& a, const Digest& b);

}  // namespace kvmts::migration
