// DiskSource: see disk_source.h.
#include "migration/disk_source.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvmts::migration {
namespace {

Status Canceled(const std::atomic<bool>* cancel) {
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return Error{ECANCELED, "migration", "canceled"};
  return OkStatus();
}

// Eight bytes at a time, ORed four words per step (the compiler vectorizes it): a byte loop with an early exit runs
// ~8x slower over an allocated all-zero MiB (3.3 vs 27 GB/s here, 0.6 vs 6.8 GB/s in the nested lane's TCG).
bool AllZero(const uint8_t* p, uint64_t n) {
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, sizeof w);
    if ((w[0] | w[1] | w[2] | w[3]) != 0) return false;
  }
  for (; i < n; i++) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

Result<DiskSource> DiskSource::Open(uint32_t index, const std::string& path,
                                    std::shared_ptr<const devices::virtio::OverlayMap> overlay) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{errno, "open", path};
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Error e{errno, "fstat", path};
    close(fd);
    return e;
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &size) != 0) {
    Error e{errno, "BLKGETSIZE64", path};
    close(fd);
    return e;
  }
  if (overlay && overlay->disk_bytes() > size) {
    close(fd);
    return Error{EINVAL, "open", path + ": overlay smaller than its allocation map"};
  }
  return DiskSource(index, fd, size, std::move(overlay));
}

DiskSource::DiskSource(uint32_t index, int fd, uint64_t size,
                       std::shared_ptr<const devices::virtio::OverlayMap> overlay)
    : index_(index), fd_(fd), size_(size), pending_((size / kGranuleBytes + 64) / 64, 0), overlay_(std::move(overlay)) {
  if (overlay_) size_ = overlay_->disk_bytes();  // the guest's disk: whole sectors, as the map covers
}

DiskSource::DiskSource(DiskSource&& o) noexcept
    : index_(o.index_), fd_(o.fd_), size_(o.size_), pending_(std::move(o.pending_)), buf_(std::move(o.buf_)),
      overlay_(std::move(o.overlay_)) {
  o.fd_ = -1;
}

DiskSource::~DiskSource() {
  if (fd_ >= 0) close(fd_);
}

uint64_t DiskSource::GranuleBytes(uint64_t g) const {
  uint64_t start = g * kGranuleBytes;
  return start >= size_ ? 0 : std::min(kGranuleBytes, size_ - start);
}

Status DiskSource::SendRange(OutgoingMigration& out, uint64_t offset, uint64_t len) {
  buf_.resize(kChunkBytes);
  uint64_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd_, buf_.data() + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{errno, "pread", "copied disk " + std::to_string(index_)};
    if (n == 0) return Error{EIO, "pread", "copied disk " + std::to_string(index_) + " shrank"};
    done += static_cast<uint64_t>(n);
  }
  if (AllZero(buf_.data(), len)) return out.SendDiskZero(index_, offset, len);
  return out.SendDiskData(index_, offset, buf_.data(), len);
}

Status DiskSource::SendAllocated(OutgoingMigration& out, uint64_t bytes_per_sec, const std::atomic<bool>* cancel) {
  const uint64_t granules = (size_ + kGranuleBytes - 1) / kGranuleBytes;
  const uint64_t per_chunk = kChunkBytes / kGranuleBytes;
  for (uint64_t g = 0; g < granules;) {
    if (!overlay_->Allocated(g)) {
      g++;
      continue;
    }
    auto c = Canceled(cancel);
    if (!c.ok()) return c;
    uint64_t end = g + 1;
    while (end < granules && end - g < per_chunk && overlay_->Allocated(end)) end++;
    uint64_t offset = g * kGranuleBytes;
    auto r = SendRange(out, offset, std::min(end * kGranuleBytes, size_) - offset);
    if (!r.ok()) return r;
    out.Pace(bytes_per_sec);
    g = end;
  }
  return OkStatus();
}

Status DiskSource::SendAll(OutgoingMigration& out, uint64_t bytes_per_sec, const std::atomic<bool>* cancel) {
  if (overlay_) return SendAllocated(out, bytes_per_sec, cancel);
  uint64_t at = 0;
  while (at < size_) {
    auto c = Canceled(cancel);
    if (!c.ok()) return c;
    // The next data extent; a file system without SEEK_DATA (EINVAL) or a block device: everything is data.
    off_t data = lseek(fd_, static_cast<off_t>(at), SEEK_DATA);
    uint64_t data_at = at;
    if (data < 0 && errno == ENXIO) {
      data_at = size_;  // only a hole up to the end
    } else if (data >= 0) {
      data_at = std::min(size_, static_cast<uint64_t>(data));
    }
    if (data_at > at) {
      auto r = out.SendDiskZero(index_, at, data_at - at);
      if (!r.ok()) return r;
      at = data_at;
      if (at >= size_) break;
    }
    off_t hole = lseek(fd_, static_cast<off_t>(at), SEEK_HOLE);
    uint64_t data_end = hole < 0 ? size_ : std::min(size_, static_cast<uint64_t>(hole));
    if (data_end <= at) data_end = std::min(size_, at + kChunkBytes);  // cannot happen; never loop forever
    for (; at < data_end;) {
      auto cc = Canceled(cancel);
      if (!cc.ok()) return cc;
      uint64_t len = std::min(kChunkBytes, data_end - at);
      auto r = SendRange(out, at, len);
      if (!r.ok()) return r;
      at += len;
      out.Pace(bytes_per_sec);
    }
  }
  return OkStatus();
}

uint64_t DiskSource::AddDirty(const std::vector<uint64_t>& words) {
  uint64_t bytes = 0;
  for (size_t w = 0; w < words.size() && w < pending_.size(); w++) {
    uint64_t bits = words[w];
    pending_[w] |= bits;
    while (bits != 0) {
      bytes += GranuleBytes(w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits)));
      bits &= bits - 1;
    }
  }
  return bytes;
}

uint64_t DiskSource::pending_bytes() const {
  uint64_t bytes = 0;
  for (size_t w = 0; w < pending_.size(); w++) {
    for (uint64_t bits = pending_[w]; bits != 0; bits &= bits - 1) {
      bytes += GranuleBytes(w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits)));
    }
  }
  return bytes;
}

Status DiskSource::SendPending(OutgoingMigration& out, uint64_t bytes_per_sec, const std::atomic<bool>* cancel) {
  const uint64_t granules = (size_ + kGranuleBytes - 1) / kGranuleBytes;
  const uint64_t per_chunk = kChunkBytes / kGranuleBytes;
  auto set = [this](uint64_t g) { return (pending_[g / 64] >> (g % 64)) & 1; };
  // A copy-on-write disk sends what its overlay holds: a marked granule it does not hold is the base's (unchanged).
  auto held = [this](uint64_t g) { return !overlay_ || overlay_->Allocated(g); };
  for (uint64_t g = 0; g < granules;) {
    if (!set(g) || !held(g)) {
      pending_[g / 64] &= ~(uint64_t{1} << (g % 64));
      g++;
      continue;
    }
    auto c = Canceled(cancel);
    if (!c.ok()) return c;
    uint64_t end = g + 1;
    while (end < granules && end - g < per_chunk && set(end) && held(end)) end++;
    uint64_t offset = g * kGranuleBytes;
    uint64_t len = std::min(end * kGranuleBytes, size_) - offset;
    // Cleared before the read: a write after this point is marked in the machine's map and comes next round.
    for (uint64_t k = g; k < end; k++) pending_[k / 64] &= ~(uint64_t{1} << (k % 64));
    auto r = SendRange(out, offset, len);
    if (!r.ok()) return r;
    out.Pace(bytes_per_sec);
    g = end;
  }
  return OkStatus();
}

}  // namespace kvmts::migration
