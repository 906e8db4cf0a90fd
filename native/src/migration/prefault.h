// Prefaulter: the target's helper thread that faults guest RAM in ahead of the data (protocol version 3's Populate
// hint, stream.h). Receiving into fresh memory is bound by first touch, not by the copy: every new page is a page
// fault, and on a nested or memory-overcommitted host a fresh page also costs the host a fault. So while the
// receive thread writes the bulk pass bottom up (GPA order), this thread populates the hinted pages top down
// (MADV_POPULATE_WRITE: faults pages in writable without changing their contents, so it can never clobber received
// data) until it meets the receive frontier. Two threads take the faults instead of one.
//
// Page size per 2 MiB chunk: a chunk the hint fills at least `dense_pages` of 512 pages keeps transparent huge pages
// (one fault, and the guest's TLB likes it); a sparser chunk is marked MADV_NOHUGEPAGE for the transfer, so its few
// pages cost a few 4 KiB faults instead of zeroing (and, on such hosts, faulting in) a whole 2 MiB page. Finish()
// gives the regions that asked for huge pages MADV_HUGEPAGE back (khugepaged may collapse the sparse chunks later).
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
  uint32_t dense_pages = 256;  // of 512 pages in a 2 MiB chunk: at least this many hinted = keep huge pages
};

/** What the prefaulter did (for stats and tests). */
struct PrefaultStats {
  uint64_t hinted_bytes = 0;     // bytes named by Populate hints
  uint64_t populated_bytes = 0;  // bytes the helper faulted in before the receiver got there
  uint64_t small_page_bytes = 0; // hinted bytes in chunks marked MADV_NOHUGEPAGE (sparse)
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
  };
  void Plan();
  void Run();

  RamLayout ram_;
  PrefaultOptions options_;
  std::vector<PageRange> hinted_;
  std::vector<Piece> pieces_;           // GPA order; the helper walks it backwards
  std::vector<Piece> small_page_runs_;  // host ranges marked MADV_NOHUGEPAGE (restored by Finish)
  std::atomic<uint64_t> frontier_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> populated_{0};
  std::thread helper_;
  bool started_ = false;
  bool finished_ = false;
  PrefaultStats stats_;
};

}  // namespace kvmts::migration
