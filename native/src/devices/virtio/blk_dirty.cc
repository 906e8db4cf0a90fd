// BlockDirtyMap: see blk_dirty.h.
#include "devices/virtio/blk_dirty.h"

namespace kvmts::devices::virtio {

BlockDirtyMap::BlockDirtyMap(uint64_t disk_bytes)
    : disk_bytes_(disk_bytes),
      granules_((disk_bytes + kGranuleBytes - 1) / kGranuleBytes),
      word_count_(static_cast<size_t>((granules_ + 63) / 64)),
      words_(new std::atomic<uint64_t>[word_count_ == 0 ? 1 : word_count_]) {
  for (size_t i = 0; i < word_count_; i++) words_[i].store(0, std::memory_order_relaxed);
}

void BlockDirtyMap::Start() {
  for (size_t i = 0; i < word_count_; i++) words_[i].store(0, std::memory_order_relaxed);
  active_.store(true, std::memory_order_release);
}

void BlockDirtyMap::Stop() { active_.store(false, std::memory_order_release); }

void BlockDirtyMap::Mark(uint64_t offset, uint64_t len) {
  if (len == 0 || offset >= disk_bytes_ || !active()) return;
  uint64_t end = len > disk_bytes_ - offset ? disk_bytes_ : offset + len;
  for (uint64_t g = offset / kGranuleBytes; g <= (end - 1) / kGranuleBytes; g++) {
    // Release: the pwrite before this mark is visible to whoever takes the bit (and reads the granule after).
    words_[g / 64].fetch_or(uint64_t{1} << (g % 64), std::memory_order_release);
  }
}

std::vector<uint64_t> BlockDirtyMap::TakeAndClear() {
  std::vector<uint64_t> out(word_count_);
  for (size_t i = 0; i < word_count_; i++) out[i] = words_[i].exchange(0, std::memory_order_acq_rel);
  return out;
}

uint64_t BlockDirtyMap::Count(const std::vector<uint64_t>& words) {
  uint64_t n = 0;
  for (uint64_t w : words) n += static_cast<uint64_t>(__builtin_popcountll(w));
  return n;
}

}  // namespace kvmts::devices::virtio
