// RamLayout: the migration code's view of guest RAM (GPA ranges and their host mappings), decoupled from
// memory::GuestMemory so the protocol is testable on plain buffers. session.cc builds one from a Machine.
#pragma once

#include <cstdint>
#include <vector>

namespace kvmts::migration {

/** One mapped RAM region. `shared` = a MAP_SHARED (memfd) mapping, which changes how residency is probed;
 *  `huge_pages` = the mapping asked for transparent huge pages (MADV_HUGEPAGE), which the target keeps. */
struct RamRegion {
  uint64_t gpa = 0;
  uint64_t size = 0;
  uint8_t* hva = nullptr;
  bool shared = false;
  bool huge_pages = false;
};

/** GPA -> host translation over a few regions. */
class RamLayout {
 public:
  RamLayout() = default;
  explicit RamLayout(std::vector<RamRegion> regions) : regions_(std::move(regions)) {}
  /** Host pointer of [gpa, gpa+len) when it lies inside one region, else nullptr. */
  uint8_t* Translate(uint64_t gpa, uint64_t len) const {
    for (const RamRegion& r : regions_) {
      if (gpa >= r.gpa && len <= r.size && gpa - r.gpa <= r.size - len) return r.hva + (gpa - r.gpa);
    }
    return nullptr;
  }
  /** The region holding gpa, or nullptr. */
  const RamRegion* RegionOf(uint64_t gpa) const {
    for (const RamRegion& r : regions_) {
      if (gpa >= r.gpa && gpa - r.gpa < r.size) return &r;
    }
    return nullptr;
  }
  /** One past the highest GPA of RAM. */
  uint64_t end() const {
    uint64_t e = 0;
    for (const RamRegion& r : regions_) e = r.gpa + r.size > e ? r.gpa + r.size : e;
    return e;
  }
  /** Total RAM bytes. */
  uint64_t total() const {
    uint64_t t = 0;
    for (const RamRegion& r : regions_) t += r.size;
    return t;
  }
  const std::vector<RamRegion>& regions() const { return regions_; }

 private:
  std::vector<RamRegion> regions_;
};

}  // namespace kvmts::migration
