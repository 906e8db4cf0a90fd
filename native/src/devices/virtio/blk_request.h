// Block request parsing (virtio spec 5.2.6), pure: a popped DescriptorChain becomes a BlkRequest whose data
// segments are plain guest ranges. No fd, no threads; the device (blk.h) executes it.
//
//   chain bytes, in order:  [ header 16 B, device-readable ][ data ... ][ status 1 B, device-writable ]
//   header: le32 type | le32 reserved | le64 sector (512-byte units, whatever blk_size says)
//   the header may span descriptors and the status byte is the last byte of the last (writable) buffer: no
//   framing is assumed (VERSION_1 implies ANY_LAYOUT).
//
//   type            data                                        status / used length
//   IN 0            writable, multiple of 512                   OK: data bytes + 1
//   OUT 1           readable, multiple of 512                   RO device: IOERR, nothing written
//   FLUSH 4         none                                        fdatasync
//   GET_ID 8        writable, up to 20 bytes of serial          the serial, NUL-padded, not terminated at 20
//   DISCARD 11      readable, n x {le64 sector, le32 num_sectors, le32 flags (bit 0 unmap)}
//   WRITE_ZEROES 13 same segments; unmap allowed
//   other           -                                           UNSUPP
//
// Parse errors (no header, no writable status byte) cannot be answered: the device marks itself broken.
// Semantic errors (a range past the end, a bad length, RO) are answered with IOERR or UNSUPP.
#pragma once

#include <cstdint>
#include <vector>

#include "devices/virtio/guest_access.h"
#include "devices/virtio/split_queue.h"

namespace kvmts::devices::virtio {

inline constexpr uint32_t kBlkTypeIn = 0, kBlkTypeOut = 1, kBlkTypeFlush = 4, kBlkTypeGetId = 8,
                          kBlkTypeDiscard = 11, kBlkTypeWriteZeroes = 13;
inline constexpr uint8_t kBlkStatusOk = 0, kBlkStatusIoErr = 1, kBlkStatusUnsupp = 2;
inline constexpr uint64_t kBlkHeaderBytes = 16, kSectorBytes = 512, kBlkIdBytes = 20, kBlkSegmentBytes = 16;
inline constexpr uint32_t kBlkSegmentUnmap = 1;

enum class BlkParseError : uint8_t {
  kNone = 0,
  kNoHeader,  // fewer than 16 device-readable bytes at the start
  kNoStatus,  // the last buffer is not device-writable (or empty)
};

const char* BlkParseErrorName(BlkParseError e);

// One DISCARD / WRITE_ZEROES range.
struct BlkSegment {
  uint64_t sector = 0;
  uint32_t num_sectors = 0;
  uint32_t flags = 0;
};

struct BlkRequest {
  uint32_t type = 0;
  uint64_t sector = 0;
  // The data part: device-readable bytes after the header (OUT, DISCARD, WRITE_ZEROES), or device-writable bytes
  // before the status byte (IN, GET_ID). Empty for the other types.
  std::vector<DescBuffer> data;
  uint64_t data_bytes = 0;
  uint64_t status_gpa = 0;
};

// Splits chain into header, data and status. Reads the header (and nothing else) from guest memory.
BlkParseError ParseBlkRequest(const GuestAccess& mem, const DescriptorChain& chain, BlkRequest* out);

// Reads the DISCARD / WRITE_ZEROES segments of req (data_bytes must be a multiple of 16, at most max_segments of
// them): false when the length or count is wrong or the memory is unreadable.
bool ReadBlkSegments(const GuestAccess& mem, const BlkRequest& req, uint32_t max_segments,
                     std::vector<BlkSegment>* out);

// Whether [sector, sector + sectors) lies inside a disk of capacity_sectors (overflow-safe).
inline bool SectorRangeOk(uint64_t sector, uint64_t sectors, uint64_t capacity_sectors) {
  return sector <= capacity_sectors && sectors <= capacity_sectors - sector;
}

}  // namespace kvmts::devices::virtio
