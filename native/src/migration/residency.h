// Which guest pages were ever populated on the host. A page the guest never touched reads as zeros without being
// read (reading it would fault in 4 KiB at a time: ~0.2 s per GiB), so the bulk pass sends it as a zero marker.
// Anonymous mappings: /proc/self/pagemap (present or swapped = populated). Shared (memfd) mappings: mincore() (page
// cache residency) OR pagemap. A probe that cannot answer says "populated" (the caller then reads the page).
#pragma once

#include <cstdint>
#include <vector>

namespace kvmts::migration {

class ResidencyProbe {
 public:
  ResidencyProbe();
  ~ResidencyProbe();
  ResidencyProbe(const ResidencyProbe&) = delete;
  ResidencyProbe& operator=(const ResidencyProbe&) = delete;
  /** Fills out[i] = true when page i of [hva, hva + pages*4096) may hold data. */
  void Populated(const uint8_t* hva, uint64_t pages, bool shared, std::vector<bool>* out);
  /** False when the kernel gives no answers (all pages then count as populated). */
  bool usable() const { return pagemap_fd_ >= 0; }

 private:
  int pagemap_fd_ = -1;
  bool swap_active_ = true;
};

}  // namespace kvmts::migration
