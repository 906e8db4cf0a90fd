// Shared by the virtio-pci fuzz target and its seed maker: the op encoding.
//
//   input: op*   op = u8 kind | u8 size code | u24 offset | u64 value   (13 bytes, little-endian)
//   kind % 7:  0 config read    1 config write   (offset % 256, 1 << (size % 3) bytes)
//              2 BAR read       3 BAR write      (offset % 512 KiB from the BAR's current address, 1 << (size % 4))
//              4 guest RAM write (offset % 64 KiB, 8 bytes of value)
//              5 device events: value % 3 = SignalQueue(0), SignalConfig, MarkBroken
//              6 save, restore into a fresh transport, save again: the two blobs must be equal
#pragma once

#include <cstdint>

namespace pcifuzz {

inline constexpr size_t kOpBytes = 13;
inline constexpr uint64_t kMemBytes = 64 * 1024;
inline constexpr uint64_t kDiskBytes = 64 * 1024;
inline constexpr uint64_t kBar = 0xe0000000;
enum Kind : uint8_t { kCfgRead, kCfgWrite, kBarRead, kBarWrite, kRamWrite, kEvent, kSaveRestore, kKinds };

}  // namespace pcifuzz
