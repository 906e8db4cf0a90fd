// Shared by the fuzz target and its seed maker: a tiny two-region guest, a fixed secret, deterministic nonces, so a
// recorded source stream replays byte for byte against a fresh target (and mutations of it reach every frame kind).
#pragma once

#include <cstring>
#include <vector>

#include "migration/incoming.h"
#include "migration/ram_layout.h"

namespace fuzzguest {

inline constexpr char kSecret[] = "fuzz-secret";
inline constexpr uint64_t kRegionBytes = 16 * 4096;

inline void FixedRandom(uint8_t* out, size_t len) {
  for (size_t i = 0; i < len; i++) out[i] = static_cast<uint8_t>(0xA0 + i);
}

struct Guest {
  std::vector<uint8_t> low = std::vector<uint8_t>(kRegionBytes), high = std::vector<uint8_t>(kRegionBytes);
  kvmts::migration::RamLayout Layout() {
    return kvmts::migration::RamLayout(
        {{0, kRegionBytes, low.data(), false}, {uint64_t{1} << 32, kRegionBytes, high.data(), false}});
  }
};

}  // namespace fuzzguest
