// The page range table: turns a dirty bitmap (one bit per guest page, as KVM_GET_DIRTY_LOG returns it) into runs of
// contiguous pages, and cuts a list of runs into frame-sized batches. Pure, no I/O (Cloud Hypervisor MemoryRangeTable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvmts::migration {

/** A run of guest-physical bytes, page aligned: [gpa, gpa + length). */
struct PageRange {
  uint64_t gpa = 0;
  uint64_t length = 0;
  bool operator==(const PageRange& o) const { return gpa == o.gpa && length == o.length; }
};

/** An ordered list of non-overlapping ranges with helpers. */
class RangeTable {
 public:
  /** Appends the runs of set bits of `bitmap` (`bits` bits, LSB first per u64 word) for a slot at `base_gpa`.
   *  Adjacent runs, including one continuing the previous last range, merge. */
  void AppendBitmap(const uint64_t* bitmap, uint64_t bits, uint64_t base_gpa, uint64_t page_size);
  /** Appends one range, merging it into the last one when contiguous. Zero-length ranges are ignored. */
  void Append(PageRange r);
  /** Total bytes covered. */
  uint64_t Bytes() const { return bytes_; }
  const std::vector<PageRange>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }
  void Clear() {
    ranges_.clear();
    bytes_ = 0;
  }

 private:
  std::vector<PageRange> ranges_;
  uint64_t bytes_ = 0;
};

/** One frame's worth of ranges: at most `max_ranges` entries and `max_bytes` bytes (ranges split if needed). */
struct Batch {
  std::vector<PageRange> ranges;
  uint64_t bytes = 0;
};

/** Cuts `table` into batches. A range longer than `max_bytes` is split at page boundaries. */
std::vector<Batch> SplitIntoBatches(const std::vector<PageRange>& table, uint64_t max_bytes, size_t max_ranges,
                                    uint64_t page_size);

/** Splits `range` page by page into zero and non-zero runs by reading `hva` (the range's host mapping). */
void ClassifyZeroPages(const uint8_t* hva, PageRange range, uint64_t page_size, RangeTable* data,
                       RangeTable* zeros);

/** True when the page at `p` (page_size bytes, 8-byte aligned) is all zeros. */
bool IsZeroPage(const uint8_t* p, uint64_t page_size);

}  // namespace kvmts::migration
