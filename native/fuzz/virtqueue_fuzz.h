// Shared by the virtqueue fuzz target and its seed maker: how an input maps onto a small guest.
//
//   input:  u8 log2 queue size (mod 9: 1..256) | u8 flags (bit 0 EVENT_IDX; bits 7..1 n: the net receive packet is
//           12 + 23 n bytes) | le16 next_avail | memory image...
//   memory: 16 KiB flat RAM at GPA 0 = the image, zero-padded (or cut)
//           0x0000 descriptor table   0x1000 available ring   0x1400 used ring   0x2000.. buffers, indirect tables
#pragma once

#include <cstdint>

namespace vqfuzz {

inline constexpr uint64_t kMemBytes = 16 * 1024;
inline constexpr uint64_t kDesc = 0x0000, kAvail = 0x1000, kUsed = 0x1400, kBuffers = 0x2000;
inline constexpr size_t kHeaderBytes = 4;

}  // namespace vqfuzz
