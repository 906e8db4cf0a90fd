// BlockOverlay and OverlayMap: see blk_overlay.h.
#include "devices/virtio/blk_overlay.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kvmts::devices::virtio {

// ---- iovec helpers ------------------------------------------------------------------------------------------------

std::vector<iovec> SliceIovecs(const std::vector<iovec>& iov, uint64_t skip, uint64_t len) {
  std::vector<iovec> out;
  for (const iovec& v : iov) {
    if (len == 0) break;
    if (skip >= v.iov_len) {
      skip -= v.iov_len;
      continue;
    }
    uint64_t n = std::min<uint64_t>(v.iov_len - skip, len);
    out.push_back(iovec{static_cast<uint8_t*>(v.iov_base) + skip, n});
    len -= n;
    skip = 0;
  }
  return out;
}

bool FullIo(int fd, std::vector<iovec> iov, uint64_t offset, bool write) {
  size_t first = 0;
  while (first < iov.size()) {
    int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    ssize_t n = write ? pwritev(fd, &iov[first], count, static_cast<off_t>(offset))
                      : preadv(fd, &iov[first], count, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) return false;
    offset += static_cast<uint64_t>(n);
    auto left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return true;
}

namespace {

// Copies bytes [skip, skip + len) of the whole iovec list to dst.
void GatherIovecs(const std::vector<iovec>& iov, uint64_t skip, uint8_t* dst, uint64_t len) {
  for (const iovec& v : SliceIovecs(iov, skip, len)) {
    // SAFETY: the slices lie inside the request's iovecs, which the caller bounds-checked.
    std::memcpy(dst, v.iov_base, v.iov_len);
    dst += v.iov_len;
  }
}

}  // namespace

// ---- OverlayMap ---------------------------------------------------------------------------------------------------

OverlayMap::OverlayMap(uint64_t disk_bytes)
    : disk_bytes_(disk_bytes),
      granules_((disk_bytes + kGranuleBytes - 1) / kGranuleBytes),
      word_count_(static_cast<size_t>((granules_ + 63) / 64)),
      words_(new std::atomic<uint64_t>[word_count_ == 0 ? 1 : word_count_]) {
  for (size_t i = 0; i < (word_count_ == 0 ? 1 : word_count_); ++i) words_[i].store(0, std::memory_order_relaxed);
}

bool OverlayMap::Allocated(uint64_t g) const {
  return g < granules_ && ((words_[g / 64].load(std::memory_order_acquire) >> (g % 64)) & 1) != 0;
}

void OverlayMap::MarkAllocated(uint64_t offset, uint64_t len) {
  if (len == 0 || offset >= disk_bytes_) return;
  uint64_t end = std::min(disk_bytes_, offset + std::min(len, disk_bytes_ - offset));
  for (uint64_t g = offset / kGranuleBytes; g * kGranuleBytes < end; ++g) {
    words_[g / 64].fetch_or(uint64_t{1} << (g % 64), std::memory_order_release);
  }
}

std::vector<uint64_t> OverlayMap::Snapshot() const {
  std::vector<uint64_t> out(word_count_);
  for (size_t i = 0; i < word_count_; ++i) out[i] = words_[i].load(std::memory_order_acquire);
  return out;
}

uint64_t OverlayMap::allocated_granules() const {
  uint64_t n = 0;
  for (size_t i = 0; i < word_count_; ++i) n += static_cast<uint64_t>(__builtin_popcountll(words_[i].load()));
  return n;
}

uint64_t OverlayMap::GranuleBytes(uint64_t g) const {
  uint64_t start = g * kGranuleBytes;
  return start >= disk_bytes_ ? 0 : std::min(kGranuleBytes, disk_bytes_ - start);
}

// ---- BlockOverlay -------------------------------------------------------------------------------------------------

BlockOverlay::BlockOverlay(int overlay_fd, int base_fd, uint64_t disk_bytes)
    : overlay_fd_(overlay_fd), base_fd_(base_fd), disk_bytes_(disk_bytes),
      map_(std::make_shared<OverlayMap>(disk_bytes)) {}

bool BlockOverlay::Read(const std::vector<iovec>& iov, uint64_t offset, uint64_t len) {
  constexpr uint64_t G = OverlayMap::kGranuleBytes;
  uint64_t at = offset;
  const uint64_t end = offset + len;
  while (at < end) {
    // The run of granules that share at's state.
    bool allocated = map_->Allocated(at / G);
    uint64_t run_end = std::min(end, (at / G + 1) * G);
    while (run_end < end && map_->Allocated(run_end / G) == allocated) run_end = std::min(end, run_end + G);
    if (!FullIo(allocated ? overlay_fd_ : base_fd_, SliceIovecs(iov, at - offset, run_end - at), at, false)) {
      return false;
    }
    at = run_end;
  }
  return true;
}

bool BlockOverlay::WriteThrough(const std::vector<iovec>* iov, uint64_t skip, uint64_t offset, uint64_t len) {
  if (iov != nullptr) return FullIo(overlay_fd_, SliceIovecs(*iov, skip, len), offset, true);
  // Zeroes: a hole (or zero range) where the file system can, else written.
  auto off = static_cast<off_t>(offset);
  auto n = static_cast<off_t>(len);
  if (fallocate(overlay_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, n) == 0) return true;
  if (fallocate(overlay_fd_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, n) == 0) return true;
  std::vector<uint8_t> zero(static_cast<size_t>(std::min<uint64_t>(len, uint64_t{1} << 20)), 0);
  for (uint64_t done = 0; done < len;) {
    uint64_t k = std::min<uint64_t>(zero.size(), len - done);
    if (!FullIo(overlay_fd_, {iovec{zero.data(), k}}, offset + done, true)) return false;
    done += k;
  }
  return true;
}

bool BlockOverlay::CopyUp(uint64_t g, const std::vector<iovec>* iov, uint64_t skip, uint64_t offset, uint64_t len) {
  constexpr uint64_t G = OverlayMap::kGranuleBytes;
  uint64_t start = g * G;
  uint64_t bytes = map_->GranuleBytes(g);
  granule_buf_.resize(G);
  if (!FullIo(base_fd_, {iovec{granule_buf_.data(), bytes}}, start, false)) return false;
  if (iov != nullptr) {
    GatherIovecs(*iov, skip, granule_buf_.data() + (offset - start), len);
  } else {
    std::memset(granule_buf_.data() + (offset - start), 0, len);
  }
  if (!FullIo(overlay_fd_, {iovec{granule_buf_.data(), bytes}}, start, true)) return false;
  map_->MarkAllocated(start, bytes);
  copy_ups_++;
  return true;
}

namespace {

// The shared walk of Write and WriteZeroes: direct runs (allocated or wholly covered granules) go straight to the
// overlay, partly covered unallocated granules are copied up.
template <typename Direct, typename Partial>
bool WalkWrite(const OverlayMap& map, uint64_t offset, uint64_t len, Direct direct, Partial partial) {
  constexpr uint64_t G = OverlayMap::kGranuleBytes;
  const uint64_t end = offset + len;
  uint64_t run = offset;  // start of the pending direct run
  uint64_t at = offset;
  while (at < end) {
    uint64_t g = at / G;
    uint64_t g_end = std::min(end, g * G + map.GranuleBytes(g));
    bool whole = at == g * G && g_end == g * G + map.GranuleBytes(g);
    if (!whole && !map.Allocated(g)) {
      if (at > run && !direct(run, at - run)) return false;
      if (!partial(g, at, g_end - at)) return false;
      run = g_end;
    }
    at = g_end;
  }
  return end <= run || direct(run, end - run);
}

}  // namespace

bool BlockOverlay::Write(const std::vector<iovec>& iov, uint64_t offset, uint64_t len) {
  return WalkWrite(
      *map_, offset, len,
      [&](uint64_t at, uint64_t n) {
        if (!WriteThrough(&iov, at - offset, at, n)) return false;
        map_->MarkAllocated(at, n);
        return true;
      },
      [&](uint64_t g, uint64_t at, uint64_t n) { return CopyUp(g, &iov, at - offset, at, n); });
}

bool BlockOverlay::WriteZeroes(uint64_t offset, uint64_t len) {
  return WalkWrite(
      *map_, offset, len,
      [&](uint64_t at, uint64_t n) {
        if (!WriteThrough(nullptr, 0, at, n)) return false;
        map_->MarkAllocated(at, n);
        return true;
      },
      [&](uint64_t g, uint64_t at, uint64_t n) { return CopyUp(g, nullptr, 0, at, n); });
}

}  // namespace kvmts::devices::virtio
