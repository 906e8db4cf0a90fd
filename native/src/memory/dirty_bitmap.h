// DirtyBitmap: one bit per 4 KiB guest page of one memory region (bit i of word w = page w*64+i), the same layout
// KVM_GET_DIRTY_LOG uses, so a KVM log can be OR-ed in word by word. Pure: includes neither <linux/kvm.h> nor napi.h.
//
//   vCPU / device threads         migration (any one thread)
//   ---------------------         --------------------------
//   Set(page) / SetRange()  --->  TakeInto(dst)   atomically moves every set bit into dst and clears it here
//   (atomic fetch_or)             OrWords(kvm)    merges a KVM dirty log
//                                 ForEachRun()    visits runs of consecutive dirty pages, in order
//
// Set/SetRange/TakeInto are safe against each other from any threads (word-level atomics); the other members are
// for a bitmap owned by one thread (a collected snapshot).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvmts::memory {

// Size of a guest page as KVM tracks dirtiness.
inline constexpr uint64_t kPageSize = 4096;
inline constexpr unsigned kPageShift = 12;

class DirtyBitmap {
 public:
  DirtyBitmap() = default;
  // A bitmap of `pages` pages, all clean.
  explicit DirtyBitmap(uint64_t pages);

  uint64_t pages() const { return pages_; }
  // The words, 64 pages each, for KVM_GET_DIRTY_LOG / KVM_CLEAR_DIRTY_LOG (which take a u64-aligned buffer).
  uint64_t* words() { return words_.data(); }
  const uint64_t* words() const { return words_.data(); }
  size_t word_count() const { return words_.size(); }

  // Marks one page (atomic; any thread). Out-of-range pages are ignored.
  void Set(uint64_t page);
  // Marks pages [first, first+count) (atomic; any thread), clipped to the bitmap.
  void SetRange(uint64_t first, uint64_t count);
  bool Test(uint64_t page) const;
  // Marks every page (a migration's first pass: everything must be sent).
  void SetAll();
  void Clear();
  // ORs `count` words (e.g. a KVM dirty log of the same region) into this bitmap.
  void OrWords(const uint64_t* words, size_t count);
  // Atomically moves every set bit of this bitmap into `dst` (OR) and clears it here. dst must be as large.
  void TakeInto(DirtyBitmap& dst);
  // Number of dirty pages.
  uint64_t Count() const;
  bool Any() const;

  // Calls f(first_page, page_count) for each maximal run of dirty pages, in increasing order.
  template <typename F>
  void ForEachRun(F&& f) const {
    uint64_t run_start = 0, run_len = 0;
    for (size_t w = 0; w < words_.size(); ++w) {
      uint64_t word = words_[w];
      if (word == 0 && run_len == 0) continue;
      if (word == ~uint64_t{0}) {
        if (run_len == 0) run_start = w * 64;
        run_len += 64;
        continue;
      }
      for (unsigned b = 0; b < 64; ++b) {
        if (word & (uint64_t{1} << b)) {
          if (run_len == 0) run_start = w * 64 + b;
          ++run_len;
        } else if (run_len) {
          f(run_start, run_len);
          run_len = 0;
        }
      }
    }
    if (run_len) f(run_start, run_len);
  }

 private:
  uint64_t pages_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace kvmts::memory
