// BlockOverlay: a copy-on-write disk for virtio-blk: a read-only raw base (a containerDisk's image, shared by every
// VMI on the node and never written) under a private sparse overlay file of the same size, with an allocation map of
// 64 KiB granules (the size of qcow2's default cluster and of the migration dirty map's granule, blk_dirty.h).
// docs/decisions/0011-containerdisk-overlay.md says why this and not qcow2.
//
//   read  [off, off+len):  each run of granules -> allocated: preadv(overlay)   unallocated: preadv(base)
//   write [off, off+len):  allocated or wholly covered granules -> pwritev(overlay), then marked allocated
//                          a partly covered unallocated granule -> read it from the base, merge, pwrite(overlay),
//                          then marked allocated (at most the first and the last granule of a request)
//   write-zeroes:          the same, with zeroes (whole granules: a hole punched or zero-range in the overlay)
//   discard:               ignored (a hint; QEMU's default discard=ignore): the base would show through a hole
//
// A granule is marked allocated only after its data is in the overlay, so a reader that sees the bit (the
// migration source, on another thread) reads complete data. The map lives in memory: like KubeVirt's containerDisk
// and ephemeral writes, the overlay lives as long as its launcher (a fresh one at every start). A live migration
// copies the allocated granules only (migration/disk_source.h); the target marks what it receives.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace kvmts::devices::virtio {

// Which granules of a copy-on-write disk live in the overlay. Lock-free (atomic words); any thread.
class OverlayMap {
 public:
  static constexpr uint64_t kGranuleBytes = uint64_t{64} << 10;

  explicit OverlayMap(uint64_t disk_bytes);
  bool Allocated(uint64_t granule) const;
  // Marks every granule that [offset, offset + len) touches (clipped to the disk).
  void MarkAllocated(uint64_t offset, uint64_t len);
  // The map's words (bit g of word g / 64 = granule g), a snapshot.
  std::vector<uint64_t> Snapshot() const;
  uint64_t allocated_granules() const;
  uint64_t granules() const { return granules_; }
  uint64_t disk_bytes() const { return disk_bytes_; }
  // Bytes of granule g (the last one may be short); 0 past the end.
  uint64_t GranuleBytes(uint64_t g) const;

 private:
  uint64_t disk_bytes_;
  uint64_t granules_;
  size_t word_count_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
};

// The I/O of a copy-on-write disk. Not thread-safe for writes (one virtio-blk worker writes); reads of the map from
// other threads are safe. Every call returns false on an I/O error (errno set); a partial write may have reached
// the overlay but marks nothing it did not finish.
class BlockOverlay {
 public:
  // overlay_fd: read-write, the disk's size; base_fd: read-only, the same size. Neither is owned.
  BlockOverlay(int overlay_fd, int base_fd, uint64_t disk_bytes);

  bool Read(const std::vector<iovec>& iov, uint64_t offset, uint64_t len);
  bool Write(const std::vector<iovec>& iov, uint64_t offset, uint64_t len);
  bool WriteZeroes(uint64_t offset, uint64_t len);
  const std::shared_ptr<OverlayMap>& map() const { return map_; }
  // Granules copied up from the base for a partial write (a counter for tests and benchmarks).
  uint64_t copy_ups() const { return copy_ups_; }

 private:
  // Granule g partly covered by [offset, offset+len) and not allocated: base granule + the covered bytes (from
  // `iov` at byte `skip` of the request, or zeroes when iov is null) -> overlay.
  bool CopyUp(uint64_t g, const std::vector<iovec>* iov, uint64_t skip, uint64_t offset, uint64_t len);
  // [offset, offset+len) straight to the overlay: from iov (request bytes at `skip`) or zeroes.
  bool WriteThrough(const std::vector<iovec>* iov, uint64_t skip, uint64_t offset, uint64_t len);

  int overlay_fd_;
  int base_fd_;
  uint64_t disk_bytes_;
  std::shared_ptr<OverlayMap> map_;
  std::vector<uint8_t> granule_buf_;
  uint64_t copy_ups_ = 0;
};

// iovec helpers shared with virtio-blk.
// The sub-list of `iov` for bytes [skip, skip + len) of the whole list.
std::vector<iovec> SliceIovecs(const std::vector<iovec>& iov, uint64_t skip, uint64_t len);
// Full positioned vector I/O: retries EINTR and short transfers; false on an error or end of file.
bool FullIo(int fd, std::vector<iovec> iov, uint64_t offset, bool write);

}  // namespace kvmts::devices::virtio
