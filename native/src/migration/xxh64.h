// XXH64 (xxHash's 64-bit hash, Yann Collet; the algorithm as its specification doc/xxhash_spec.md defines it): the
// end-to-end digest of a plaintext version 6 stream's copied-disk data (stream.h). Four lanes of multiply-rotate per
// 32 bytes: no table lookups and no vector instructions, which is what runs fast under an emulated CPU (the nested
// lane's TCG L1). Measured under TCG (qemu-x86_64 user mode, 64 MiB in 4 MiB calls): XXH64 2.3-2.7 GB/s, XXH3 88 MB/s
// with SSE2 and 424 MB/s scalar, memcpy 0.9-1.1 GB/s; CRC-32C by slicing-by-8 ~340 MB/s in L1 (crc32c.h).
// Written here, not taken from Debian's libxxhash-dev, because the native build uses no -dev package (OpenSSL is
// dlopened for the same reason): the header would have to be fetched at build time on every build machine and image.
// Checked against libxxhash 0.8.1's XXH64 (test vectors in test/migration/tests.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvmts::migration {

/** XXH64 of `len` bytes with `seed`. Equal to libxxhash's XXH64(data, len, seed). */
uint64_t Xxh64(const void* data, size_t len, uint64_t seed);

/** A running digest of a sequence of buffers: each Add chains the previous value in as the seed,
 *  value = XXH64(buffer, value). Order matters, and so do the buffers' boundaries. */
class ChainDigest {
 public:
  void Add(const void* data, size_t len) { value_ = Xxh64(data, len, value_); }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_ = 0;
};

}  // namespace kvmts::migration
