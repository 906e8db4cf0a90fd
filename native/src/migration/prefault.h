// Prefaulter: the target's helper thread that faults guest RAM in ahead of the data (protocol version 3's Populate
// hint, stream.h). Receiving into fresh memory is bound by first touch, not by the copy: every new page is a page
// fault, and on a nested or memory-overcommitted host a fresh page also costs the host a fault. So while the
// receive thread writes the bulk pass bottom up (GPA order), this thread populates the hinted pages top down
// (MADV_POPULATE_WRITE: faults pages in writable without changing their contents, so it can never clobber received
// data) until it meets the receive frontier. Two threads take the faults instead of one.
//
// Page size per 2 MiB chunk: a chunk the hint fills at least `dense_pages` of 512 pages keeps transparent huge pages
// (one fault, and the guest's TLB likes it); a sparser chunk is marked MADV_NOHUGEPAGE for the transfer, so its few
// pages cost a few 4 KiB faults instead of zeroing (and, on such hosts, faulting in) a whole 2 MiB page.
// Dense chunks are measured, not assumed: the helper faults its first dense chunks in alternately as one huge page
// and as 4 KiB pages (`calibration_chunks` each), then uses the faster size (moving average of the time per chunk)
// and tries the other one every 8th chunk; when the winner changes, the dense chunks between the receiver and the
// helper switch too. On bare metal huge pages win (one fault, one 2 MiB clear); in a VM whose host reclaims freed
// guest memory (free page reporting, balloons) a fresh huge page also costs the host 512 faults, while 4 KiB pages
// come from memory the guest freed recently and the host still backs, so small pages can be several times faster
// there. Finish() gives the chunks marked for small pages MADV_HUGEPAGE back (khugepaged may collapse them later).
//
//   Start(hint) --> helper: pieces from the top down, each skipped once below the frontier --> done
//   SetFrontier(gpa) from the receive thread; Finish() (any thread but the helper) stops, joins, restores THP.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "migration/ram_layout.h"
#include "migration/range_table.h"

namespace kvmts::migration {

/** How the target faults memory in ahead of the data. */
struct PrefaultOptions {
  bool enabled = true;
  uint32_t dense_pages = 256;      // of 512 pages in a 2 MiB chunk: at least this many hinted = dense
  uint32_t calibration_chunks = 2; // dense chunks timed per page size before choosing (0 = always huge pages)
};

/** What the prefaulter did (for stats and tests). */
struct PrefaultStats {
  uint64_t hinted_bytes = 0;     // bytes named by Populate hints
  uint64_t populated_bytes = 0;  // bytes the helper faulted in before the receiver got there
  uint64_t small_page_bytes = 0;        // hinted bytes of sparse chunks (4 KiB pages)
  uint64_t dense_small_page_bytes = 0;  // dense chunks marked for 4 KiB pages when the pass ended
};

class Prefaulter {
 public:
  Prefaulter(const RamLayout& ram, PrefaultOptions options) : ram_(ram), options_(options) {}
  ~Prefaulter() { Finish(); }
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  /** Adds hinted ranges (validated: page aligned, inside RAM). Call Start() once all hints of the pass arrived. */
  void Hint(const std::vector<PageRange>& ranges);
  /** Marks sparse chunks for small pages and starts the helper over everything hinted so far. Once. */
  void Start();
  /** The receive thread has reached `gpa` (it writes everything below itself): the helper stops there. */
  void SetFrontier(uint64_t gpa) { frontier_.store(gpa, std::memory_order_relaxed); }
  /** Stops and joins the helper, gives huge pages back to the regions that had them. Idempotent. */
  void Finish();
  bool started() const { return started_; }
  /** Valid after Finish(). */
  const PrefaultStats& stats() const { return stats_; }

 private:
  struct Piece {
    uint64_t gpa;
    uint64_t len;
    uint8_t* hva;
    bool dense = false;  // a whole 2 MiB chunk of a huge-page region
  };
  void Plan();
  void Run();
  bool Populate(const Piece& p);
  void SetPageSize(size_t i, bool small);
  void Remark(size_t below, bool small);

  RamLayout ram_;
  PrefaultOptions options_;
  std::vector<PageRange> hinted_;
  std::vector<Piece> pieces_;           // GPA order; the helper walks it backwards
  std::vector<Piece> small_page_runs_;  // sparse chunks marked MADV_NOHUGEPAGE (restored by Finish)
  std::vector<bool> dense_small_;       // per piece: a dense chunk marked MADV_NOHUGEPAGE (helper-owned until the join)
  std::atomic<uint64_t> frontier_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> populated_{0};
  std::thread helper_;
  bool started_ = false;
  bool finished_ = false;
  PrefaultStats stats_;
};

}  // namespace kvmts::migration
