// BlockDirtyMap: which parts of a disk the guest changed while a migration copies it (QEMU's dirty bitmaps,
// one bit per 64 KiB granule). virtio-blk marks a granule when a write, write-zeroes or discard that touches it has
// completed on the host file and before the guest sees the completion; the migration source takes and clears the
// map once per round and re-sends the marked granules (reading them after the take).
//
//   Start() --(worker)--> Mark(offset, len) ... --(migration)--> TakeAndClear() -> words ... --> Stop()
//
// Why that order loses nothing: a write's mark follows its pwrite; the source's read of a granule follows the take
// that cleared it. A write whose data a read missed completed after that read began, so its mark comes after the
// take and the next round sends it. Lock-free (atomic words); any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvmts::devices::virtio {

class BlockDirtyMap {
 public:
  static constexpr uint64_t kGranuleBytes = uint64_t{64} << 10;

  explicit BlockDirtyMap(uint64_t disk_bytes);
  // Clears the map and starts marking. Writes that complete from here on are marked.
  void Start();
  // Stops marking (the map keeps its bits until the next Start or TakeAndClear).
  void Stop();
  bool active() const { return active_.load(std::memory_order_acquire); }
  // Marks every granule that [offset, offset + len) touches (clipped to the disk); a no-op when not active.
  void Mark(uint64_t offset, uint64_t len);
  // Returns the marked granules (bit g of word g / 64 = granule g) and clears them.
  std::vector<uint64_t> TakeAndClear();
  uint64_t granules() const { return granules_; }
  uint64_t disk_bytes() const { return disk_bytes_; }
  // Set bits of `words`.
  static uint64_t Count(const std::vector<uint64_t>& words);

 private:
  uint64_t disk_bytes_;
  uint64_t granules_;
  size_t word_count_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
  std::atomic<bool> active_{false};
};

}  // namespace kvmts::devices::virtio
