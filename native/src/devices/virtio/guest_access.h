// GuestAccess: the guest-memory view a virtio device needs, as an interface, so the queue and request code is pure
// (no KVM, no napi) and its tests and fuzz target run on a plain byte vector.
//
//   SplitQueue / blk requests --HostPtr(gpa, len)--> host pointer or nullptr (range not inside one RAM region)
//                             --MarkDirty(gpa, len)-> the VMM dirty bitmap (migration resends the pages)
//
//   GuestMemoryAccess  adapts memory::GuestMemory (the machine's RAM; MarkDirty feeds Machine::CollectDirty)
//   FlatGuestMemory    one byte vector at GPA 0 (tests, fuzz), records the dirtied ranges
//
// Every write a device makes into guest RAM goes through WriteGuest() or is followed by MarkDirty(), so live
// migration sees it (STYLE section 4, dirty log).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "memory/guest_memory.h"

namespace kvmts::devices::virtio {

// One RAM region: guest-physical base, size and where the VMM maps it (vhost's memory table).
struct GuestRegion {
  uint64_t gpa = 0, size = 0;
  uint8_t* host = nullptr;
};

class GuestAccess {
 public:
  virtual ~GuestAccess() = default;
  // Host address of [gpa, gpa+len) when it lies in one RAM region, else nullptr. len 0 is valid inside RAM.
  virtual uint8_t* HostPtr(uint64_t gpa, uint64_t len) const = 0;
  // Records that the device wrote [gpa, gpa+len) (through a HostPtr pointer).
  virtual void MarkDirty(uint64_t gpa, uint64_t len) = 0;
  // Every RAM region (an in-kernel data path maps guest addresses itself); empty where there is no such list.
  virtual std::vector<GuestRegion> Regions() const { return {}; }
};

// Copies len bytes of guest memory at gpa into dst; false when the range is not RAM.
inline bool ReadGuest(const GuestAccess& mem, uint64_t gpa, void* dst, uint64_t len) {
  const uint8_t* p = mem.HostPtr(gpa, len);
  if (p == nullptr) return false;
  // SAFETY: HostPtr checked that [gpa, gpa+len) lies inside one mapped region.
  std::memcpy(dst, p, len);
  return true;
}

// Copies src into guest memory at gpa and marks the pages dirty; false when the range is not RAM.
inline bool WriteGuest(GuestAccess& mem, uint64_t gpa, const void* src, uint64_t len) {
  uint8_t* p = mem.HostPtr(gpa, len);
  if (p == nullptr) return false;
  // SAFETY: HostPtr checked that [gpa, gpa+len) lies inside one mapped region.
  std::memcpy(p, src, len);
  mem.MarkDirty(gpa, len);
  return true;
}

// The machine's RAM. The GuestMemory must outlive this adapter.
class GuestMemoryAccess : public GuestAccess {
 public:
  explicit GuestMemoryAccess(memory::GuestMemory* mem) : mem_(mem) {}
  uint8_t* HostPtr(uint64_t gpa, uint64_t len) const override { return mem_->HostPtr(memory::Gpa(gpa), len); }
  void MarkDirty(uint64_t gpa, uint64_t len) override { mem_->MarkDirty(memory::Gpa(gpa), len); }
  std::vector<GuestRegion> Regions() const override {
    std::vector<GuestRegion> out;
    for (const auto& r : mem_->regions()) out.push_back({r.base.value, r.size_bytes, r.host});
    return out;
  }

 private:
  memory::GuestMemory* mem_;
};

// A flat RAM of `size` bytes at GPA 0 (tests and the fuzz target). dirty() lists every MarkDirty range.
class FlatGuestMemory : public GuestAccess {
 public:
  explicit FlatGuestMemory(size_t size) : bytes_(size, 0) {}
  uint8_t* HostPtr(uint64_t gpa, uint64_t len) const override {
    if (gpa > bytes_.size() || len > bytes_.size() - gpa) return nullptr;
    return const_cast<uint8_t*>(bytes_.data()) + gpa;
  }
  void MarkDirty(uint64_t gpa, uint64_t len) override { dirty_.emplace_back(gpa, len); }
  std::vector<GuestRegion> Regions() const override {
    return {{0, bytes_.size(), const_cast<uint8_t*>(bytes_.data())}};
  }
  std::vector<uint8_t>& bytes() { return bytes_; }
  const std::vector<std::pair<uint64_t, uint64_t>>& dirty() const { return dirty_; }
  void ClearDirty() { dirty_.clear(); }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<std::pair<uint64_t, uint64_t>> dirty_;
};

}  // namespace kvmts::devices::virtio
