#include "migration/prefault.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

namespace kvmts::migration {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kChunkShift = 21;  // 2 MiB: one transparent huge page on x86-64
constexpr uint64_t kChunk = uint64_t{1} << kChunkShift;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

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
  dense_small_.assign(pieces_.size(), false);
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
        pieces_.push_back({region.gpa + (c_lo - lo), kChunk, reinterpret_cast<uint8_t*>(c_lo), region.huge_pages});
      } else {
        pieces_.insert(pieces_.end(), parts.begin(), parts.end());
        if (whole && region.huge_pages) {
          stats_.small_page_bytes += chunk_bytes;
          if (!small_page_runs_.empty() && small_page_runs_.back().hva + small_page_runs_.back().len ==
                                                reinterpret_cast<uint8_t*>(c_lo)) {
            small_page_runs_.back().len += kChunk;
          } else {
            small_page_runs_.push_back({region.gpa + (c_lo - lo), kChunk, reinterpret_cast<uint8_t*>(c_lo), false});
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
        parts.push_back({a, n, reinterpret_cast<uint8_t*>(h), false});
        chunk_bytes += n;
        a += n;
      }
    }
    flush();
  }
}

// Faults one piece in; false when the kernel cannot (older than 5.14: the receiver faults everything itself).
bool Prefaulter::Populate(const Piece& p) {
  // SAFETY: the piece lies inside a guest RAM mapping that outlives this thread (Finish joins before the
  // IncomingMigration that owns both goes away); MADV_POPULATE_WRITE never changes page contents.
  if (madvise(p.hva, p.len, MADV_POPULATE_WRITE) != 0) return errno != EINVAL;  // ENOMEM etc.: the receiver will
  populated_.fetch_add(p.len, std::memory_order_relaxed);
  return true;
}

// Sets the THP policy of pieces_[i] (a dense chunk): 4 KiB pages or huge pages.
void Prefaulter::SetPageSize(size_t i, bool small) {
  if (dense_small_[i] == small) return;
  // SAFETY: the chunk lies inside a guest RAM mapping (Plan clips to regions); only its THP policy changes. A chunk
  // the receiver is faulting in at the same moment may end up with either page size: both hold the same bytes.
  madvise(pieces_[i].hva, pieces_[i].len, small ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
  dense_small_[i] = small;
}

// The faster page size changed: the dense chunks between the receiver and the helper follow it before the receiver
// reaches them.
void Prefaulter::Remark(size_t below, bool small) {
  for (size_t i = below; i-- > 0;) {
    if (pieces_[i].gpa < frontier_.load(std::memory_order_relaxed)) break;
    if (pieces_[i].dense) SetPageSize(i, small);
  }
}

void Prefaulter::Run() {
  uint32_t samples[2] = {0, 0};  // [huge, small] dense chunks timed
  double cost[2] = {0, 0};       // moving average of ns per chunk
  bool small = false;            // the page size in use for dense chunks
  uint64_t dense_seen = 0;
  const uint32_t warmup = options_.calibration_chunks;
  for (size_t i = pieces_.size(); i-- > 0;) {
    const Piece& p = pieces_[i];
    if (stop_.load(std::memory_order_relaxed) || p.gpa < frontier_.load(std::memory_order_relaxed)) return;
    if (!p.dense || warmup == 0) {
      if (!Populate(p)) return;
      continue;
    }
    // Alternate until both sizes have `warmup` samples, then use the faster one and try the other every 8th chunk
    // (fresh memory is not uniform: the first huge pages are often recycled ones, later ones come from memory the
    // host has taken back).
    bool explore = samples[0] < warmup || samples[1] < warmup ? samples[1] < samples[0] : (dense_seen % 8 == 7);
    int kind = samples[0] < warmup || samples[1] < warmup ? (explore ? 1 : 0) : (explore ? !small : small);
    dense_seen++;
    SetPageSize(i, kind == 1);
    uint64_t t0 = NowNs();
    if (!Populate(p)) return;
    double ns = double(NowNs() - t0);
    cost[kind] = samples[kind] == 0 ? ns : 0.75 * cost[kind] + 0.25 * ns;
    samples[kind]++;
    if (samples[0] >= warmup && samples[1] >= warmup && (cost[1] < cost[0]) != small) {
      small = !small;
      Remark(i, small);
    }
  }
}

void Prefaulter::Finish() {
  if (finished_) return;
  finished_ = true;
  stop_.store(true);
  if (helper_.joinable()) helper_.join();
  for (size_t i = 0; i < pieces_.size(); i++) {
    if (dense_small_[i]) {
      stats_.dense_small_page_bytes += pieces_[i].len;
      small_page_runs_.push_back(pieces_[i]);
    }
  }
  for (const Piece& run : small_page_runs_) {
    // SAFETY: as in Start(); gives the chunks the huge-page policy their region was created with.
    madvise(run.hva, run.len, MADV_HUGEPAGE);
  }
  stats_.populated_bytes = populated_.load();
}

}  // namespace kvmts::migration
