// IncomingMigration's copied disks (protocol >= 4, stream.h): Start's disk table checked against the target's own
// copies, Disk frames pwrite()n and DiskZero ranges punched (or zeroed) in them, fdatasync at Sync and Complete; in a
// plaintext version 6 stream every disk frame goes into a running digest, compared with the source's DiskDigest.
#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>

#include "migration/incoming.h"

namespace kvmts::migration {
namespace {

Status WriteFull(int fd, const uint8_t* data, uint64_t len, uint64_t offset) {
  while (len > 0) {
    ssize_t n = pwrite(fd, data, len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error{n < 0 ? errno : EIO, "pwrite", "copied disk"};
    data += n;
    len -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return OkStatus();
}

// An overlay disk takes whole granules only (the tail granule may be short): a partial one would hide the rest of
// the base's granule behind the overlay's zeroes.
Status CheckOverlayExtent(const TargetDisk& d, uint64_t offset, uint64_t length) {
  if (d.overlay == nullptr) return OkStatus();
  constexpr uint64_t G = devices::virtio::OverlayMap::kGranuleBytes;
  uint64_t end = offset + length;
  if (offset % G == 0 && (end % G == 0 || end == d.overlay->disk_bytes())) return OkStatus();
  return ProtocolError("disk frame of a copy-on-write disk does not cover whole granules");
}

}  // namespace

const TargetDisk* IncomingMigration::DiskOf(uint32_t index) const {
  for (const TargetDisk& d : disks_) {
    if (d.index == index) return &d;
  }
  return nullptr;
}

Status IncomingMigration::CheckDisks(const Start& start) const {
  if (!start.disks.empty() && stats_.version < kDiskProtocolVersion) {
    return ProtocolError("Start names disks in a version " + std::to_string(stats_.version) + " stream");
  }
  for (const DiskSpec& s : start.disks) {
    const TargetDisk* d = DiskOf(s.index);
    if (d == nullptr) {
      return Error{EINVAL, "migration start",
                   "disk " + std::to_string(s.index) + " is copied by the source but is not a copied disk here"};
    }
    if (((s.flags & kDiskFlagOverlay) != 0) != (d->overlay != nullptr)) {
      return Error{EINVAL, "migration start",
                   "disk " + std::to_string(s.index) + " is " + (d->overlay ? "" : "not ") +
                       "a copy-on-write overlay here but the source's " + (d->overlay ? "is not" : "is")};
    }
    if (d->size_bytes != s.size_bytes) {
      return Error{EINVAL, "migration start",
                   "disk " + std::to_string(s.index) + " size mismatch: source has " + std::to_string(s.size_bytes) +
                       " bytes, target " + std::to_string(d->size_bytes)};
    }
  }
  for (const TargetDisk& d : disks_) {
    bool named = std::any_of(start.disks.begin(), start.disks.end(), [&d](const DiskSpec& s) { return s.index == d.index; });
    if (!named) {
      return Error{EINVAL, "migration start",
                   "disk " + std::to_string(d.index) + " is a copied disk here but the source does not send it" +
                       (stats_.version < kDiskProtocolVersion ? " (the source speaks protocol " +
                                                                    std::to_string(stats_.version) + ")"
                                                              : "")};
    }
  }
  return OkStatus();
}

Status IncomingMigration::OnDisk(const std::vector<uint8_t>& payload) {
  if (stats_.version < kDiskProtocolVersion) return ProtocolError("Disk frame in a version < 4 stream");
  if (payload.size() < kDiskExtentBytes) return ProtocolError("Disk frame truncated");
  auto e = DecodeDiskExtent(payload.data(), disk_specs_, kMaxDiskFrameBytes);
  if (!e.ok()) return e.error();
  if (payload.size() != kDiskExtentBytes + e.value().length) {
    return ProtocolError("Disk frame length disagrees with its extent");
  }
  const TargetDisk* d = DiskOf(e.value().disk);
  if (d == nullptr) return ProtocolError("Disk frame for a disk not copied here");
  auto w = CheckOverlayExtent(*d, e.value().offset, e.value().length);
  if (!w.ok()) return w;
  if (DigestDisks()) {
    if (disk_digest_checked_) return ProtocolError("Disk frame after the DiskDigest");
    disk_digest_.Add(payload.data(), kDiskExtentBytes);
    disk_digest_.Add(payload.data() + kDiskExtentBytes, e.value().length);
  }
  auto r = WriteFull(d->fd, payload.data() + kDiskExtentBytes, e.value().length, e.value().offset);
  if (!r.ok()) return r;
  if (d->overlay != nullptr) d->overlay->MarkAllocated(e.value().offset, e.value().length);
  stats_.disk_bytes += e.value().length;
  return OkStatus();
}

Status IncomingMigration::OnDiskZero(const std::vector<uint8_t>& payload) {
  if (stats_.version < kDiskProtocolVersion) return ProtocolError("DiskZero frame in a version < 4 stream");
  if (payload.size() != kDiskExtentBytes) return ProtocolError("DiskZero frame: bad length");
  auto e = DecodeDiskExtent(payload.data(), disk_specs_, UINT64_MAX);
  if (!e.ok()) return e.error();
  const TargetDisk* d = DiskOf(e.value().disk);
  if (d == nullptr) return ProtocolError("DiskZero frame for a disk not copied here");
  auto w = CheckOverlayExtent(*d, e.value().offset, e.value().length);
  if (!w.ok()) return w;
  if (DigestDisks()) {
    if (disk_digest_checked_) return ProtocolError("DiskZero frame after the DiskDigest");
    disk_digest_.Add(payload.data(), kDiskExtentBytes);
  }
  auto off = static_cast<off_t>(e.value().offset);
  auto len = static_cast<off_t>(e.value().length);
  // A hole on a fresh sparse copy costs nothing; a block device or a file system without holes gets zeros.
  if (fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) != 0 &&
      fallocate(d->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, len) != 0) {
    std::vector<uint8_t> zero(static_cast<size_t>(std::min<uint64_t>(e.value().length, uint64_t{1} << 20)), 0);
    for (uint64_t done = 0; done < e.value().length;) {
      uint64_t n = std::min<uint64_t>(zero.size(), e.value().length - done);
      auto r = WriteFull(d->fd, zero.data(), n, e.value().offset + done);
      if (!r.ok()) return r;
      done += n;
    }
  }
  if (d->overlay != nullptr) d->overlay->MarkAllocated(e.value().offset, e.value().length);
  stats_.disk_zero_bytes += e.value().length;
  return OkStatus();
}

bool IncomingMigration::DigestDisks() const { return !encrypted_ && stats_.version >= kDiskDigestProtocolVersion; }

// The source's digest of every disk frame against this side's, before Complete: a mismatch means some disk byte
// written here is not the source's (corrupted past TCP's checksum), so the guest must not run here.
Status IncomingMigration::OnDiskDigest(const std::vector<uint8_t>& payload) {
  if (!DigestDisks()) {
    return ProtocolError("DiskDigest frame in a" + std::string(encrypted_ ? "n encrypted" : " version " +
                                                                                std::to_string(stats_.version)) +
                         " stream");
  }
  if (disk_digest_checked_) return ProtocolError("a second DiskDigest frame");
  auto m = DecodeDiskDigest(payload.data(), payload.size());
  if (!m.ok()) return m.error();
  if (m.value().bytes != stats_.disk_bytes || m.value().digest != disk_digest_.value()) {
    char detail[256];
    std::snprintf(detail, sizeof(detail),
                  "copied disk data corrupted in transit: the source's digest of its disk frames is %016llx over "
                  "%llu bytes, this side received %016llx over %llu; the guest stays on the source",
                  static_cast<unsigned long long>(m.value().digest), static_cast<unsigned long long>(m.value().bytes),
                  static_cast<unsigned long long>(disk_digest_.value()),
                  static_cast<unsigned long long>(stats_.disk_bytes));
    return Error{EBADMSG, "migration", detail};
  }
  disk_digest_checked_ = true;
  return OkStatus();
}

Status IncomingMigration::SyncDisks() {
  for (const TargetDisk& d : disks_) {
    if (fdatasync(d.fd) != 0) return Error{errno, "fdatasync", "copied disk " + std::to_string(d.index)};
  }
  return OkStatus();
}

}  // namespace kvmts::migration
