// VirtioBlock: see blk.h for the features, the config layout and the worker.
#include "devices/virtio/blk.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "devices/virtio/blk_overlay.h"
#include "devices/virtio/byte_io.h"
#include "devices/virtio/eventfd.h"

namespace kvmts::devices::virtio {

namespace {

constexpr uint8_t kBlkSaveVersion = 1;

// Host iovecs for the request's data segments; false when one is not RAM.
bool DataIovecs(const GuestAccess& mem, const BlkRequest& req, std::vector<iovec>* out) {
  for (const DescBuffer& b : req.data) {
    uint8_t* p = mem.HostPtr(b.gpa, b.len);
    if (p == nullptr) return false;
    out->push_back(iovec{p, b.len});
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<VirtioBlock>> VirtioBlock::Open(const BlockOptions& options) {
  uint32_t bs = options.blk_size;
  uint16_t qs = options.queue_size;
  if (bs < kSectorBytes || bs > 65536 || (bs & (bs - 1)) != 0 || qs < 2 || qs > kQueueSizeLimit || (qs & (qs - 1))) {
    return Error{EINVAL, "virtio-blk", "blk_size or queue_size"};
  }
  int fd = open(options.path.c_str(), (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", options.path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Error e = ErrnoError("fstat", options.path);
    close(fd);
    return e;
  }
  uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &bytes) != 0) {
    Error e = ErrnoError("BLKGETSIZE64", options.path);
    close(fd);
    return e;
  }
  int base = -1;
  if (!options.base_path.empty()) {
    // A copy-on-write disk: the base (a raw file, or a block device: an ephemeral volume over a Block claim) is
    // opened read-only and must be as large as the overlay, a regular file the launcher makes at the base's size.
    struct stat bst {};
    uint64_t base_bytes = 0;
    base = options.read_only ? -1 : open(options.base_path.c_str(), O_RDONLY | O_CLOEXEC);
    bool sized = base >= 0 && fstat(base, &bst) == 0 &&
                 (S_ISREG(bst.st_mode) ? (base_bytes = static_cast<uint64_t>(bst.st_size), true)
                                       : S_ISBLK(bst.st_mode) && ioctl(base, BLKGETSIZE64, &base_bytes) == 0);
    if (!sized || !S_ISREG(st.st_mode) || base_bytes != bytes) {
      Error e = base < 0 && !options.read_only
                    ? ErrnoError("open", options.base_path)
                    : Error{EINVAL, "virtio-blk", "base " + options.base_path +
                                                      " is not a regular file or block device of the overlay's size "
                                                      "under a writable regular-file overlay"};
      if (base >= 0) close(base);
      close(fd);
      return e;
    }
  }
  int efd[2];  // kick, ctl
  if (Status st = OpenEventfds(efd, 2); !st.ok()) {
    if (base >= 0) close(base);
    close(fd);
    return st.error();
  }
  return std::unique_ptr<VirtioBlock>(new VirtioBlock(options, fd, base, efd[0], efd[1], bytes / kSectorBytes));
}

VirtioBlock::VirtioBlock(const BlockOptions& options, int fd, int base_fd, int kick_fd, int ctl_fd,
                         uint64_t capacity_sectors)
    : options_(options), fd_(fd), base_fd_(base_fd), kick_fd_(kick_fd), ctl_fd_(ctl_fd),
      capacity_sectors_(capacity_sectors), dirty_(capacity_sectors * kSectorBytes) {
  std::memcpy(serial_, options.serial.data(), std::min<size_t>(options.serial.size(), kBlkIdBytes));
  if (base_fd_ >= 0) overlay_ = std::make_unique<BlockOverlay>(fd_, base_fd_, capacity_sectors * kSectorBytes);
}

std::shared_ptr<OverlayMap> VirtioBlock::overlay_map() const {
  return overlay_ ? overlay_->map() : nullptr;
}

VirtioBlock::~VirtioBlock() {
  Reset();
  close(ctl_fd_);
  close(kick_fd_);
  overlay_.reset();
  if (base_fd_ >= 0) close(base_fd_);
  close(fd_);
}

uint64_t VirtioBlock::device_features() const {
  uint64_t f = kFeatureVersion1 | kFeatureIndirectDesc | kFeatureEventIdx | kBlkFeatureSizeMax | kBlkFeatureSegMax |
               kBlkFeatureBlkSize | kBlkFeatureFlush;
  return options_.read_only ? f | kBlkFeatureRo : f | kBlkFeatureDiscard | kBlkFeatureWriteZeroes;
}

void VirtioBlock::ReadConfig(uint64_t offset, uint8_t* data, size_t len) const {
  uint8_t cfg[kBlkConfigBytes] = {};
  auto put = [&cfg](uint64_t at, uint64_t v, size_t n) { std::memcpy(cfg + at, &v, n); };
  put(kBlkCfgCapacity, capacity_sectors_, 8);
  put(kBlkCfgSizeMax, kBlkSizeMax, 4);
  put(kBlkCfgSegMax, options_.queue_size - 2u, 4);  // the header and the status take two descriptors
  put(kBlkCfgBlkSize, options_.blk_size, 4);
  put(kBlkCfgNumQueues, 1, 2);
  put(kBlkCfgMaxDiscardSectors, kBlkMaxDiscardSectors, 4);
  put(kBlkCfgMaxDiscardSeg, kBlkMaxDiscardSegments, 4);
  put(kBlkCfgDiscardAlignment, options_.blk_size / kSectorBytes, 4);
  put(kBlkCfgMaxWriteZeroesSectors, kBlkMaxWriteZeroesSectors, 4);
  put(kBlkCfgMaxWriteZeroesSeg, 1, 4);
  put(kBlkCfgWriteZeroesMayUnmap, 1, 1);
  for (size_t i = 0; i < len; ++i) data[i] = offset + i < kBlkConfigBytes ? cfg[offset + i] : 0;
}

void VirtioBlock::WriteConfig(uint64_t, const uint8_t*, size_t) {}  // nothing writable (no CONFIG_WCE)

// ---- requests -------------------------------------------------------------------------------------------------

bool VirtioBlock::HandleChain(GuestAccess& mem, const DescriptorChain& chain, uint64_t acked, uint32_t* used_len) {
  BlkRequest req;
  if (ParseBlkRequest(mem, chain, &req) != BlkParseError::kNone) return false;
  uint32_t written = 0;
  uint8_t status = Execute(mem, req, acked, &written);
  if (status == kBlkStatusIoErr) counters_.io_errors++;
  if (status == kBlkStatusUnsupp) counters_.unsupported++;
  if (!WriteGuest(mem, req.status_gpa, &status, 1)) return false;
  counters_.requests++;
  *used_len = written + 1;
  return true;
}

uint8_t VirtioBlock::Execute(GuestAccess& mem, const BlkRequest& req, uint64_t acked, uint32_t* written) {
  switch (req.type) {
    case kBlkTypeIn: return DoRead(mem, req, written);
    case kBlkTypeOut: return options_.read_only ? kBlkStatusIoErr : DoWrite(mem, req);
    case kBlkTypeFlush:
      counters_.flushes++;
      return options_.read_only || fdatasync(fd_) == 0 ? kBlkStatusOk : kBlkStatusIoErr;
    case kBlkTypeGetId: return DoGetId(mem, req, written);
    case kBlkTypeDiscard:
      if (!(acked & kBlkFeatureDiscard)) return kBlkStatusUnsupp;
      return DoRanges(mem, req);
    case kBlkTypeWriteZeroes:
      if (!(acked & kBlkFeatureWriteZeroes)) return kBlkStatusUnsupp;
      return DoRanges(mem, req);
    default: return kBlkStatusUnsupp;
  }
}

bool VirtioBlock::DataRangeOk(const BlkRequest& req) const {
  uint64_t sectors = req.data_bytes / kSectorBytes;
  return req.data_bytes % kSectorBytes == 0 && req.data_bytes <= kBlkMaxRequestBytes &&
         SectorRangeOk(req.sector, sectors, capacity_sectors_);
}

uint8_t VirtioBlock::DoRead(GuestAccess& mem, const BlkRequest& req, uint32_t* written) {
  if (!DataRangeOk(req)) return kBlkStatusIoErr;
  std::vector<iovec> iov;
  if (!DataIovecs(mem, req, &iov)) return kBlkStatusIoErr;
  // SAFETY: every iovec was bounds-checked by HostPtr; the guest may race on the buffers, which only hurts it.
  bool ok = overlay_ ? overlay_->Read(iov, req.sector * kSectorBytes, req.data_bytes)
                     : FullIo(fd_, iov, req.sector * kSectorBytes, false);
  for (const DescBuffer& b : req.data) mem.MarkDirty(b.gpa, b.len);  // even a partial read changed the pages
  if (!ok) return kBlkStatusIoErr;
  counters_.read_bytes += req.data_bytes;
  *written = static_cast<uint32_t>(std::min<uint64_t>(req.data_bytes, UINT32_MAX - 1));
  return kBlkStatusOk;
}

uint8_t VirtioBlock::DoWrite(GuestAccess& mem, const BlkRequest& req) {
  if (!DataRangeOk(req)) return kBlkStatusIoErr;
  std::vector<iovec> iov;
  if (!DataIovecs(mem, req, &iov)) return kBlkStatusIoErr;
  // SAFETY: every iovec was bounds-checked by HostPtr.
  bool ok = overlay_ ? overlay_->Write(iov, req.sector * kSectorBytes, req.data_bytes)
                     : FullIo(fd_, iov, req.sector * kSectorBytes, true);
  dirty_.Mark(req.sector * kSectorBytes, req.data_bytes);  // even a failed write may have changed blocks
  if (!ok) return kBlkStatusIoErr;
  counters_.write_bytes += req.data_bytes;
  return kBlkStatusOk;
}

uint8_t VirtioBlock::DoGetId(GuestAccess& mem, const BlkRequest& req, uint32_t* written) {
  uint64_t at = 0;
  for (const DescBuffer& b : req.data) {
    if (at >= kBlkIdBytes) break;
    uint64_t n = std::min<uint64_t>(b.len, kBlkIdBytes - at);
    if (!WriteGuest(mem, b.gpa, serial_ + at, n)) return kBlkStatusIoErr;
    at += n;
  }
  *written = static_cast<uint32_t>(at);
  return kBlkStatusOk;
}

uint8_t VirtioBlock::DoRanges(GuestAccess& mem, const BlkRequest& req) {
  bool zeroes = req.type == kBlkTypeWriteZeroes;
  std::vector<BlkSegment> segments;
  if (!ReadBlkSegments(mem, req, kBlkMaxDiscardSegments, &segments)) return kBlkStatusUnsupp;
  uint64_t zero_sectors = 0;  // WRITE_ZEROES may fall back to writing them: bounded like a write
  for (const BlkSegment& s : segments) {
    uint32_t allowed_flags = zeroes ? kBlkSegmentUnmap : 0;
    if (s.flags & ~allowed_flags) return kBlkStatusUnsupp;
    zero_sectors += zeroes ? s.num_sectors : 0;
    if (zero_sectors > kBlkMaxWriteZeroesSectors) return kBlkStatusIoErr;
    if (s.num_sectors > kBlkMaxDiscardSectors || !SectorRangeOk(s.sector, s.num_sectors, capacity_sectors_)) {
      return kBlkStatusIoErr;
    }
  }
  if (overlay_ && !zeroes) {
    counters_.discards++;  // a hint, ignored: a hole in the overlay would show the base's blocks again
    return kBlkStatusOk;
  }
  // The blocks of every validated segment may change from here on: marked once the calls returned, on every path.
  struct MarkOnExit {
    BlockDirtyMap& map;
    const std::vector<BlkSegment>& segments;
    ~MarkOnExit() {
      for (const BlkSegment& s : segments) map.Mark(s.sector * kSectorBytes, uint64_t{s.num_sectors} * kSectorBytes);
    }
  } mark{dirty_, segments};
  for (const BlkSegment& s : segments) {
    auto off = static_cast<off_t>(s.sector * kSectorBytes);
    auto len = static_cast<off_t>(uint64_t{s.num_sectors} * kSectorBytes);
    if (len == 0) continue;
    if (overlay_) {
      if (!overlay_->WriteZeroes(static_cast<uint64_t>(off), static_cast<uint64_t>(len))) return kBlkStatusIoErr;
      counters_.write_zeroes++;
      continue;
    }
    if (!zeroes) {
      // Discard is a hint: a file system without hole punching still answers OK.
      if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) != 0 && errno != EOPNOTSUPP) {
        return kBlkStatusIoErr;
      }
      counters_.discards++;
      continue;
    }
    int mode = (s.flags & kBlkSegmentUnmap) ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                                            : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
    if (fallocate(fd_, mode, off, len) != 0) {
      if (errno != EOPNOTSUPP) return kBlkStatusIoErr;
      std::vector<uint8_t> zero(static_cast<size_t>(std::min<off_t>(len, 1 << 20)), 0);
      for (off_t done = 0; done < len;) {
        size_t n = static_cast<size_t>(std::min<off_t>(len - done, static_cast<off_t>(zero.size())));
        if (!FullIo(fd_, {iovec{zero.data(), n}}, static_cast<uint64_t>(off + done), true)) return kBlkStatusIoErr;
        done += static_cast<off_t>(n);
      }
    }
    counters_.write_zeroes++;
  }
  return kBlkStatusOk;
}

BlockStats VirtioBlock::stats() const {
  BlockStats s;
  s.requests = counters_.requests;
  s.read_bytes = counters_.read_bytes;
  s.write_bytes = counters_.write_bytes;
  s.flushes = counters_.flushes;
  s.discards = counters_.discards;
  s.write_zeroes = counters_.write_zeroes;
  s.batches = counters_.batches;
  s.interrupts = counters_.interrupts;
  s.io_errors = counters_.io_errors;
  s.unsupported = counters_.unsupported;
  s.broken = counters_.broken;
  return s;
}

std::vector<uint8_t> VirtioBlock::SaveState() const {
  ByteWriter w;
  w.U8(kBlkSaveVersion);
  w.U64(capacity_sectors_);
  w.U8(options_.read_only ? 1 : 0);
  w.Raw(reinterpret_cast<const uint8_t*>(serial_), kBlkIdBytes);
  return w.Take();
}

bool VirtioBlock::RestoreState(const uint8_t* data, size_t len) {
  ByteReader r(data, len);
  if (r.U8() != kBlkSaveVersion) return false;
  uint64_t capacity = r.U64();
  bool ro = r.U8() != 0;
  const uint8_t* serial = r.Raw(kBlkIdBytes);
  if (r.failed() || !r.at_end() || capacity != capacity_sectors_ || ro != options_.read_only) return false;
  std::memcpy(serial_, serial, kBlkIdBytes);  // the guest saw this serial; keep it
  return true;
}

}  // namespace kvmts::devices::virtio
