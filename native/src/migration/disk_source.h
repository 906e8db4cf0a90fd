// DiskSource: one copied disk on the migration source (DiskConfig::copy_on_migrate): its own read-only fd on the
// disk file, its size, and the 64 KiB granules (devices/virtio/blk_dirty.h) collected but not sent yet.
//
//   SendAll (bulk pass): SEEK_DATA/SEEK_HOLE walk; holes -> DiskZero; data read in 1 MiB chunks, an all-zero chunk
//                        -> DiskZero, else -> Disk. Runs after the dirty map started, so a block written during the
//                        pass is marked and goes again in a round.
//   AddDirty (Collect):  ORs the granules the machine took into the pending set.
//   SendPending (round): each run of pending granules, read now and sent (zero runs as DiskZero), then cleared.
//   A copy-on-write disk (an overlay map given): only allocated granules are ever sent (the target's overlay sits over
//   its own copy of the base): the bulk pass walks the map instead of SEEK_DATA, and a round skips a marked granule
//   the overlay does not hold (a failed write's mark). Frames then cover whole granules, which the target checks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/virtio/blk_overlay.h"
#include "kvm/result.h"
#include "migration/outgoing.h"

namespace kvmts::migration {

class DiskSource {
 public:
  static constexpr uint64_t kGranuleBytes = uint64_t{64} << 10;  // = devices::virtio::BlockDirtyMap::kGranuleBytes
  static constexpr uint64_t kChunkBytes = uint64_t{1} << 20;    // read and frame size

  /** Opens `path` read-only. Errors: {op "open"/"fstat"/"BLKGETSIZE64", errno}. */
  static Result<DiskSource> Open(uint32_t index, const std::string& path,
                                 std::shared_ptr<const devices::virtio::OverlayMap> overlay = nullptr);
  DiskSource() = default;  // an empty placeholder (Result<T> needs one); Open makes real ones
  DiskSource(DiskSource&& o) noexcept;
  DiskSource& operator=(DiskSource&&) = delete;
  DiskSource(const DiskSource&) = delete;
  ~DiskSource();

  uint32_t index() const { return index_; }
  uint64_t size_bytes() const { return size_; }
  Status SendAll(OutgoingMigration& out, uint64_t bytes_per_sec, const std::atomic<bool>* cancel);
  /** ORs `words` (bit g = granule g) into the pending set; returns the bytes newly named (clipped to the disk). */
  uint64_t AddDirty(const std::vector<uint64_t>& words);
  uint64_t pending_bytes() const;
  Status SendPending(OutgoingMigration& out, uint64_t bytes_per_sec, const std::atomic<bool>* cancel);

 private:
  DiskSource(uint32_t index, int fd, uint64_t size, std::shared_ptr<const devices::virtio::OverlayMap> overlay);
  Status SendAllocated(OutgoingMigration& out, uint64_t bytes_per_sec, const std::atomic<bool>* cancel);
  // Reads [offset, offset + len) (len <= kChunkBytes) and sends it as Disk, or DiskZero when it is all zeros.
  Status SendRange(OutgoingMigration& out, uint64_t offset, uint64_t len);
  uint64_t GranuleBytes(uint64_t g) const;

  uint32_t index_ = 0;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<uint64_t> pending_;
  std::vector<uint8_t> buf_;
  std::shared_ptr<const devices::virtio::OverlayMap> overlay_;
};

}  // namespace kvmts::migration
