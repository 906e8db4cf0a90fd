// GuestMemory: the guest's RAM as host mappings (rust-vmm vm-memory's GuestMemoryMmap, reduced).
//
//   GPA 0 ............................ 3 GiB   (MMIO hole)   4 GiB ............ 4 GiB + rest
//   [ region 0: min(size, 3 GiB)         ]                   [ region 1: size - 3 GiB     ]
//     host mapping, anonymous or memfd                         only when size > 3 GiB
//
// Every region is one private (anonymous) or shared (memfd) mapping sized by the caller, with transparent huge
// pages requested. Access is bounds-checked by GPA: HostPtr() hands out a pointer only for a range that lies in one
// region. Pages the VMM itself writes (Write(), MarkDirty()) are recorded in a per-region DirtyBitmap that the
// machine's dirty log merges with KVM's (vmm/machine.h, CollectDirty).
//
// How migration uses it:
//   source: Machine::CollectDirty() gives per-region bitmaps; read the pages with HostPtr(region.base + page*4096,
//           len) (or region(i).host + offset) and send them; never write guest memory on the source.
//   target: a Machine created but not started; write received pages through HostPtr() (memcpy or recv into it
//           directly: no dirty marking is needed before start), or use region(i).fd (memfd backing) for splice.
// Thread safety: the mappings live as long as the GuestMemory; reading and writing guest pages from any thread is
// allowed (the guest may change them concurrently while it runs, which is what the dirty log is for).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvm/result.h"
#include "memory/dirty_bitmap.h"

namespace kvmts::memory {

// A guest physical address. Explicit so a host pointer or a length never passes for one.
struct Gpa {
  uint64_t value = 0;
  constexpr Gpa() = default;
  constexpr explicit Gpa(uint64_t v) : value(v) {}
  constexpr Gpa operator+(uint64_t off) const { return Gpa(value + off); }
  constexpr bool operator==(Gpa o) const { return value == o.value; }
  constexpr bool operator!=(Gpa o) const { return value != o.value; }
  constexpr bool operator<(Gpa o) const { return value < o.value; }
};

// Start and end of the 32-bit MMIO hole; RAM above 3 GiB is placed from 4 GiB on.
inline constexpr uint64_t kMmioHoleStart = 3ull << 30;
inline constexpr uint64_t kMmioHoleEnd = 4ull << 30;

// How the RAM is mapped. Memfd gives each region an fd (shareable, spliceable); anonymous is MAP_PRIVATE.
enum class Backing { kAnonymous, kMemfd };

struct GuestMemoryOptions {
  uint64_t size_bytes = 0;  // total RAM; a multiple of 4 KiB, > 0
  Backing backing = Backing::kAnonymous;
  bool huge_pages = true;   // madvise(MADV_HUGEPAGE)
};

// One contiguous range of guest RAM and its host mapping. slot = the KVM memory slot number (= region index).
struct MemoryRegion {
  Gpa base;
  uint64_t size_bytes = 0;
  uint8_t* host = nullptr;
  int fd = -1;              // memfd, or -1 for anonymous backing
  uint32_t slot = 0;
  uint64_t pages() const { return size_bytes >> kPageShift; }
  bool Contains(Gpa gpa, uint64_t len) const {
    return gpa.value >= base.value && len <= size_bytes && gpa.value - base.value <= size_bytes - len;
  }
};

class GuestMemory {
 public:
  // Maps the RAM (see the layout above). Errors: {op: "mmap"|"memfd_create"|"ftruncate", errno}; EINVAL for a bad size.
  static Result<std::unique_ptr<GuestMemory>> Create(const GuestMemoryOptions& options);
  ~GuestMemory();
  GuestMemory(const GuestMemory&) = delete;
  GuestMemory& operator=(const GuestMemory&) = delete;

  uint64_t size_bytes() const { return size_bytes_; }
  Backing backing() const { return backing_; }
  // Whether the mappings asked for transparent huge pages (GuestMemoryOptions::huge_pages).
  bool huge_pages() const { return huge_pages_; }
  size_t region_count() const { return regions_.size(); }
  const MemoryRegion& region(size_t i) const { return regions_[i]; }
  const std::vector<MemoryRegion>& regions() const { return regions_; }
  // Calls f(const MemoryRegion&) for every region, in GPA order.
  template <typename F>
  void ForEachRegion(F&& f) const {
    for (const auto& r : regions_) f(r);
  }

  // Host address of [gpa, gpa+len) when the range lies inside one region, else nullptr. Does not mark dirty.
  uint8_t* HostPtr(Gpa gpa, uint64_t len) const;
  // Index of the region holding gpa, or -1.
  int RegionIndex(Gpa gpa) const;

  // Bounds-checked copies (may span regions only if the regions are adjacent in GPA; else EFAULT, op "guest-memory").
  Status Read(Gpa gpa, void* dst, uint64_t len) const;
  // Writes and marks the pages dirty in the VMM bitmap (device DMA, loader, VMM-side writes while logging).
  Status Write(Gpa gpa, const void* src, uint64_t len);
  // Records that the VMM wrote [gpa, gpa+len) through a HostPtr() pointer. No-op outside RAM.
  void MarkDirty(Gpa gpa, uint64_t len);
  // The VMM-written-pages bitmap of region i; Machine::CollectDirty takes and clears it.
  DirtyBitmap& vmm_dirty(size_t i) { return vmm_dirty_[i]; }

 private:
  GuestMemory() = default;
  uint64_t size_bytes_ = 0;
  Backing backing_ = Backing::kAnonymous;
  bool huge_pages_ = false;
  std::vector<MemoryRegion> regions_;
  std::vector<DirtyBitmap> vmm_dirty_;
};

}  // namespace kvmts::memory
