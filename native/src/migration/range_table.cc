#include "migration/range_table.h"

#include <cstring>

namespace kvmts::migration {

void RangeTable::Append(PageRange r) {
  if (r.length == 0) return;
  bytes_ += r.length;
  if (!ranges_.empty()) {
    PageRange& last = ranges_.back();
    if (last.gpa + last.length == r.gpa) {
      last.length += r.length;
      return;
    }
  }
  ranges_.push_back(r);
}

void RangeTable::AppendBitmap(const uint64_t* bitmap, uint64_t bits, uint64_t base_gpa, uint64_t page_size) {
  uint64_t words = (bits + 63) / 64;
  uint64_t run_start = 0;
  bool in_run = false;
  for (uint64_t w = 0; w < words; w++) {
    uint64_t word = bitmap[w];
    if (w == words - 1 && bits % 64 != 0) word &= (uint64_t{1} << (bits % 64)) - 1;
    if (!in_run && word == 0) continue;
    if (in_run && word == ~uint64_t{0}) continue;
    for (int b = 0; b < 64; b++) {
      bool set = (word >> b) & 1;
      uint64_t page = w * 64 + b;
      if (set && !in_run) {
        in_run = true;
        run_start = page;
      } else if (!set && in_run) {
        in_run = false;
        Append({base_gpa + run_start * page_size, (page - run_start) * page_size});
      }
    }
  }
  if (in_run) Append({base_gpa + run_start * page_size, (bits - run_start) * page_size});
}

std::vector<Batch> SplitIntoBatches(const std::vector<PageRange>& table, uint64_t max_bytes, size_t max_ranges,
                                    uint64_t page_size) {
  std::vector<Batch> out;
  if (max_bytes < page_size) max_bytes = page_size;
  max_bytes -= max_bytes % page_size;
  if (max_ranges == 0) max_ranges = 1;
  Batch cur;
  for (PageRange r : table) {
    while (r.length > 0) {
      if (cur.ranges.size() == max_ranges || cur.bytes == max_bytes) {
        out.push_back(std::move(cur));
        cur = Batch{};
      }
      uint64_t room = max_bytes - cur.bytes;
      uint64_t take = r.length < room ? r.length : room;
      cur.ranges.push_back({r.gpa, take});
      cur.bytes += take;
      r.gpa += take;
      r.length -= take;
    }
  }
  if (!cur.ranges.empty()) out.push_back(std::move(cur));
  return out;
}

bool IsZeroPage(const uint8_t* p, uint64_t page_size) {
  // Data pages are the common case and rarely start with 64 zero bytes: one cache line decides most of them.
  uint64_t head[8];
  std::memcpy(head, p, 64);
  if ((head[0] | head[1] | head[2] | head[3] | head[4] | head[5] | head[6] | head[7]) != 0) return false;
  uint64_t acc = 0;
  for (uint64_t i = 64; i < page_size; i += 64) {
    uint64_t v[8];
    std::memcpy(v, p + i, 64);
    acc |= v[0] | v[1] | v[2] | v[3] | v[4] | v[5] | v[6] | v[7];
    if ((i & 1023) == 960 && acc != 0) return false;
  }
  return acc == 0;
}

void ClassifyZeroPages(const uint8_t* hva, PageRange range, uint64_t page_size, RangeTable* data,
                       RangeTable* zeros) {
  for (uint64_t off = 0; off < range.length; off += page_size) {
    PageRange page{range.gpa + off, page_size};
    if (IsZeroPage(hva + off, page_size)) {
      zeros->Append(page);
    } else {
      data->Append(page);
    }
  }
}

}  // namespace kvmts::migration
