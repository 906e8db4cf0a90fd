#include "memory/guest_memory.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kvmts::memory {

Result<std::unique_ptr<GuestMemory>> GuestMemory::Create(const GuestMemoryOptions& options) {
  if (options.size_bytes == 0 || options.size_bytes % kPageSize != 0) {
    return Error{EINVAL, "guest-memory", "size must be a positive multiple of 4096"};
  }
  std::unique_ptr<GuestMemory> mem(new GuestMemory());
  mem->size_bytes_ = options.size_bytes;
  mem->backing_ = options.backing;
  mem->huge_pages_ = options.huge_pages;
  uint64_t low = options.size_bytes < kMmioHoleStart ? options.size_bytes : kMmioHoleStart;
  std::vector<std::pair<uint64_t, uint64_t>> layout{{0, low}};
  if (options.size_bytes > low) layout.emplace_back(kMmioHoleEnd, options.size_bytes - low);

  for (const auto& [base, size] : layout) {
    MemoryRegion r;
    r.base = Gpa(base);
    r.size_bytes = size;
    r.slot = static_cast<uint32_t>(mem->regions_.size());
    int flags = MAP_NORESERVE;
    if (options.backing == Backing::kMemfd) {
      r.fd = memfd_create("kvt-guest-ram", MFD_CLOEXEC);
      if (r.fd < 0) return ErrnoError("memfd_create");
      if (ftruncate(r.fd, static_cast<off_t>(size)) != 0) {
        Error e = ErrnoError("ftruncate");
        close(r.fd);
        return e;
      }
      flags |= MAP_SHARED;
    } else {
      flags |= MAP_PRIVATE | MAP_ANONYMOUS;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, r.fd, 0);
    if (p == MAP_FAILED) {
      Error e = ErrnoError("mmap");
      if (r.fd >= 0) close(r.fd);
      return e;  // earlier regions are released by ~GuestMemory
    }
    r.host = static_cast<uint8_t*>(p);
    if (options.huge_pages) madvise(p, size, MADV_HUGEPAGE);  // advisory; ignore failure
    mem->regions_.push_back(r);
    mem->vmm_dirty_.emplace_back(r.pages());
  }
  return mem;
}

GuestMemory::~GuestMemory() {
  for (auto it = regions_.rbegin(); it != regions_.rend(); ++it) {
    if (it->host) munmap(it->host, it->size_bytes);
    if (it->fd >= 0) close(it->fd);
  }
}

int GuestMemory::RegionIndex(Gpa gpa) const {
  for (size_t i = 0; i < regions_.size(); ++i) {
    if (regions_[i].Contains(gpa, 1)) return static_cast<int>(i);
  }
  return -1;
}

uint8_t* GuestMemory::HostPtr(Gpa gpa, uint64_t len) const {
  for (const auto& r : regions_) {
    if (r.Contains(gpa, len)) return r.host + (gpa.value - r.base.value);
  }
  return nullptr;
}

Status GuestMemory::Read(Gpa gpa, void* dst, uint64_t len) const {
  auto* out = static_cast<uint8_t*>(dst);
  while (len) {
    int i = RegionIndex(gpa);
    if (i < 0) return Error{EFAULT, "guest-memory", "read outside RAM"};
    const auto& r = regions_[static_cast<size_t>(i)];
    uint64_t off = gpa.value - r.base.value;
    uint64_t n = r.size_bytes - off < len ? r.size_bytes - off : len;
    memcpy(out, r.host + off, n);
    out += n;
    len -= n;
    gpa = gpa + n;
  }
  return OkStatus();
}

Status GuestMemory::Write(Gpa gpa, const void* src, uint64_t len) {
  const auto* in = static_cast<const uint8_t*>(src);
  while (len) {
    int i = RegionIndex(gpa);
    if (i < 0) return Error{EFAULT, "guest-memory", "write outside RAM"};
    const auto& r = regions_[static_cast<size_t>(i)];
    uint64_t off = gpa.value - r.base.value;
    uint64_t n = r.size_bytes - off < len ? r.size_bytes - off : len;
    memcpy(r.host + off, in, n);
    MarkDirty(gpa, n);
    in += n;
    len -= n;
    gpa = gpa + n;
  }
  return OkStatus();
}

void GuestMemory::MarkDirty(Gpa gpa, uint64_t len) {
  if (len == 0) return;
  int i = RegionIndex(gpa);
  if (i < 0) return;
  const auto& r = regions_[static_cast<size_t>(i)];
  uint64_t off = gpa.value - r.base.value;
  uint64_t first = off >> kPageShift;
  uint64_t last = (off + len - 1) >> kPageShift;
  vmm_dirty_[static_cast<size_t>(i)].SetRange(first, last - first + 1);
}

}  // namespace kvmts::memory
