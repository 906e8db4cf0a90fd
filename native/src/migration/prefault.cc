#include "migration/prefault.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace kvmts::migration {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kChunkShift = 21;  // 2 MiB: one transparent huge page on x86-64
constexpr uint64_t kChunk = uint64_t{1} << kChunkShift;

}  // namespace

void Prefaulter::Hint(const std::vector<PageRange>& ranges) {
  if (started_ || !options_.enabled) return;
  for (const PageRange& r : ranges) {
    hinted_.push_back(r);
    stats_.hinted_bytes += r.length;
  }
}

void Prefaulter::Start() {
  if (started_ || !options_.enabled) return;
  started_ = true;
  Plan();
  for (const Piece& run : small_page_runs_) {
    // SAFETY: run lies inside one guest RAM mapping (Plan clips to regions); madvise only changes the THP policy.
    madvise(run.hva, run.len, MADV_NOHUGEPAGE);
  }
  if (!pieces_.empty()) helper_ = std::thread([this] { Run(); });
}

// Cuts the hinted ranges into pieces per 2 MiB host chunk: a dense chunk is one piece (one huge page fault), a
// sparse one keeps its hinted ranges and, where its region asked for huge pages, is marked for small pages.
void Prefaulter::Plan() {
  std::sort(hinted_.begin(), hinted_.end(), [](const PageRange& a, const PageRange& b) { return a.gpa < b.gpa; });
  for (const RamRegion& region : ram_.regions()) {
    const uint64_t lo = reinterpret_cast<uint64_t>(region.hva), hi = lo + region.size;
    uint64_t chunk = UINT64_MAX, chunk_bytes = 0;
    std::vector<Piece> parts;
    auto flush = [&]() {
      if (chunk == UINT64_MAX) return;
      uint64_t c_lo = chunk << kChunkShift, c_hi = c_lo + kChunk;
      bool whole = c_lo >= lo && c_hi <= hi;
      if (whole && chunk_bytes / kPage >= options_.dense_pages) {
        pieces_.push_back({region.gpa + (c_lo - lo), kChunk, reinterpret_cast<uint8_t*>(c_lo)});
      } else {
        pieces_.insert(pieces_.end(), parts.begin(), parts.end());
        if (whole && region.huge_pages) {
          stats_.small_page_bytes += chunk_bytes;
          if (!small_page_runs_.empty() && small_page_runs_.back().hva + small_page_runs_.back().len ==
                                                reinterpret_cast<uint8_t*>(c_lo)) {
            small_page_runs_.back().len += kChunk;
          } else {
            small_page_runs_.push_back({region.gpa + (c_lo - lo), kChunk, reinterpret_cast<uint8_t*>(c_lo)});
          }
        }
      }
      parts.clear();
      chunk_bytes = 0;
    };
    for (const PageRange& r : hinted_) {
      // Clip to the region (hints were checked against the RAM's extent, not against the MMIO hole).
      uint64_t a = std::max(r.gpa, region.gpa), b = std::min(r.gpa + r.length, region.gpa + region.size);
      while (a < b) {
        uint64_t h = lo + (a - region.gpa);
        uint64_t c = h >> kChunkShift;
        uint64_t n = std::min(b - a, ((c + 1) << kChunkShift) - h);
        if (c != chunk) {
          flush();
          chunk = c;
        }
        parts.push_back({a, n, reinterpret_cast<uint8_t*>(h)});
        chunk_bytes += n;
        a += n;
      }
    }
    flush();
  }
}

void Prefaulter::Run() {
  for (size_t i = pieces_.size(); i-- > 0;) {
    const Piece& p = pieces_[i];
    if (stop_.load(std::memory_order_relaxed) || p.gpa < frontier_.load(std::memory_order_relaxed)) return;
    // SAFETY: the piece lies inside a guest RAM mapping that outlives this thread (Finish joins before the
    // IncomingMigration that owns both goes away); MADV_POPULATE_WRITE never changes page contents.
    if (madvise(p.hva, p.len, MADV_POPULATE_WRITE) != 0) {
      if (errno == EINVAL) return;  // kernel older than 5.14: the receiver faults everything itself
      continue;                     // e.g. ENOMEM under memory pressure: the receiver will fault this piece
    }
    populated_.fetch_add(p.len, std::memory_order_relaxed);
  }
}

void Prefaulter::Finish() {
  if (finished_) return;
  finished_ = true;
  stop_.store(true);
  if (helper_.joinable()) helper_.join();
  for (const Piece& run : small_page_runs_) {
    // SAFETY: as in Start(); gives the chunks the huge-page policy their region was created with.
    madvise(run.hva, run.len, MADV_HUGEPAGE);
  }
  stats_.populated_bytes = populated_.load();
}

}  // namespace kvmts::migration
