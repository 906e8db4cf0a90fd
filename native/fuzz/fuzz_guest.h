// Shared by the fuzz target and its seed maker: a tiny two-region guest, a fixed secret, deterministic nonces, so a
// recorded source stream replays byte for byte against a fresh target (and mutations of it reach every frame kind).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

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

// A copied disk for the protocol 4 streams: 64 KiB in a memfd, disk index 0.
inline constexpr uint64_t kDiskBytes = 64 * 1024;
struct Disk {
  int fd = memfd_create("fuzz-disk", MFD_CLOEXEC);
  Disk() {
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(kDiskBytes)) != 0) {
      close(fd);
      fd = -1;
    }
  }
  ~Disk() {
    if (fd >= 0) close(fd);
  }
  std::vector<kvmts::migration::TargetDisk> Targets() const {
    if (fd < 0) return {};
    return {{0, fd, kDiskBytes}};
  }
};

}  // namespace fuzzguest
