// VirtioBlock: a virtio-blk device (type 2) over a host file or block device, for the shared virtio-pci transport.
//
//   features   VERSION_1, INDIRECT_DESC, EVENT_IDX, SIZE_MAX, SEG_MAX, BLK_SIZE, FLUSH, and DISCARD + WRITE_ZEROES when
//              writable, or RO when read-only
//   config     (virtio spec 5.2.4; offsets in bytes)
//     0 capacity (u64, 512-byte sectors)  8 size_max (u32, 1 MiB)  12 seg_max (u32)  20 blk_size (u32)
//     34 num_queues (u16, 1)
//     36 max_discard_sectors  40 max_discard_seg  44 discard_sector_alignment
//     48 max_write_zeroes_sectors (256 MiB)  52 max_write_zeroes_seg (1)  56 write_zeroes_may_unmap (u8)
//   one queue; I/O on one worker thread per device, never on a vCPU thread, under the default scheduling policy (not
//   SCHED_BATCH as virtio-net's: a kick must preempt a vCPU thread that halt-polls in KVM after the guest went idle,
//   or a QD1 request waits out the poll; measured in the nested lane, 23 -> 570-2650 us, docs/benchmarks/disk.md):
//
//   vCPU: notify -> QueueNotify(q): +1 on the queue's     worker: poll -> pop chains -> parse -> pread/pwrite/
//         kick eventfd (returns at once); or KVM signals          fdatasync/fallocate -> status -> used ring ->
//         that eventfd itself (ioeventfd: no exit at all)         interrupt if the driver wants one -> re-arm
//   Quiesce(): waits for the batch in hand to finish, then parks the worker (no request in flight: save is safe)
//   Reset(): stops and joins the worker; the queues belong to the transport again
//
// Guest pages the device writes (read data, GET_ID, status bytes, used ring) are marked dirty in GuestAccess.
// Disk blocks the guest changes (write, write-zeroes, discard) are marked in dirty_map() once the host call returned
// and before the status byte is written (blk_dirty.h), while a migration that copies the disk has it started.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/virtio/blk_dirty.h"
#include "devices/virtio/blk_overlay.h"
#include "devices/virtio/blk_request.h"
#include "devices/virtio/virtio_device.h"
#include "kvm/result.h"

namespace kvmts::devices::virtio {

// virtio-blk feature bits (virtio spec 5.2.3).
inline constexpr uint64_t kBlkFeatureSizeMax = 1ull << 1, kBlkFeatureSegMax = 1ull << 2, kBlkFeatureRo = 1ull << 5, kBlkFeatureBlkSize = 1ull << 6,
                          kBlkFeatureFlush = 1ull << 9, kBlkFeatureDiscard = 1ull << 13,
                          kBlkFeatureWriteZeroes = 1ull << 14;
// Config offsets.
inline constexpr uint64_t kBlkCfgCapacity = 0, kBlkCfgSizeMax = 8, kBlkCfgSegMax = 12, kBlkCfgBlkSize = 20, kBlkCfgNumQueues = 34,
                          kBlkCfgMaxDiscardSectors = 36, kBlkCfgMaxDiscardSeg = 40, kBlkCfgDiscardAlignment = 44,
                          kBlkCfgMaxWriteZeroesSectors = 48, kBlkCfgMaxWriteZeroesSeg = 52,
                          kBlkCfgWriteZeroesMayUnmap = 56, kBlkConfigBytes = 60;
inline constexpr uint32_t kBlkMaxDiscardSegments = 32;
inline constexpr uint32_t kBlkMaxDiscardSectors = 1u << 22;  // 2 GiB per segment
// The largest data segment (size_max) and, from it, the largest request the device runs: a bigger one is IOERR.
// Bounds the time one request holds the worker, so Quiesce (a pause, a migration's switch-over) stays short
// whatever the guest asks; Linux never exceeds seg_max x size_max.
inline constexpr uint32_t kBlkSizeMax = 1u << 20;
inline constexpr uint64_t kBlkMaxRequestBytes = 256ull << 20;
// WRITE_ZEROES may fall back to writing zeroes (no FALLOC_FL_ZERO_RANGE): at most this much per request, offered
// as max_write_zeroes_sectors with max_write_zeroes_seg 1 (DISCARD is a hint: 32 x 2 GiB).
inline constexpr uint32_t kBlkMaxWriteZeroesSectors = static_cast<uint32_t>(kBlkMaxRequestBytes / 512);
inline constexpr uint32_t kBlkPciClass = 0x010000;          // mass storage, SCSI (what Linux's lspci shows)

struct BlockOptions {
  std::string path;          // file or block device
  std::string base_path;     // non-empty: path is a copy-on-write overlay over this raw file or block device
                             // (blk_overlay.h), opened read-only and never written; the overlay a regular file of
                             // the base's size (BLKGETSIZE64 for a device); not read-only
  bool read_only = false;    // open O_RDONLY and offer RO
  std::string serial;        // GET_ID; more than 20 bytes is cut
  uint16_t queue_size = 256;
  uint32_t blk_size = 512;   // logical block size reported (a power of two >= 512)
};

// Counters (snapshot, any thread).
struct BlockStats {
  uint64_t requests = 0, read_bytes = 0, write_bytes = 0, flushes = 0, discards = 0, write_zeroes = 0;
  uint64_t batches = 0;       // turns of the worker that completed at least one request
  uint64_t interrupts = 0;    // queue interrupts raised (the driver asked for them)
  uint64_t io_errors = 0;     // answered IOERR
  uint64_t unsupported = 0;   // answered UNSUPP
  uint64_t broken = 0;        // chains that broke the protocol (device then NEEDS_RESET)
};

class VirtioBlock : public VirtioDevice {
 public:
  // Opens the backing file. Errors: {op: "open"|"fstat"|"BLKGETSIZE64", errno}; EINVAL for a bad option.
  static Result<std::unique_ptr<VirtioBlock>> Open(const BlockOptions& options);
  ~VirtioBlock() override;

  uint16_t device_type() const override { return kDeviceTypeBlock; }
  uint32_t pci_class_code() const override { return kBlkPciClass; }
  uint64_t device_features() const override;
  uint16_t queue_count() const override { return 1; }
  uint16_t queue_max_size() const override { return options_.queue_size; }
  void ReadConfig(uint64_t offset, uint8_t* data, size_t len) const override;
  void WriteConfig(uint64_t offset, const uint8_t* data, size_t len) override;
  Status Activate(const ActivateContext& ctx) override;
  void QueueNotify(uint16_t q) override;
  int QueueKickFd(uint16_t q) const override { return q == 0 ? kick_fd_ : -1; }
  void Reset() override;
  void Quiesce() override;
  void Resume() override;
  // Persist: u8 version (1) | u64 capacity sectors | u8 read-only | 20 bytes serial. Restore refuses a disk of
  // another size or mode (the target must open the same disk).
  std::vector<uint8_t> SaveState() const override;
  bool RestoreState(const uint8_t* data, size_t len) override;

  uint64_t capacity_sectors() const { return capacity_sectors_; }
  BlockStats stats() const;
  // The disk's dirty-block map (inactive unless a migration that copies the disk started it). Any thread.
  BlockDirtyMap& dirty_map() { return dirty_; }
  // A copy-on-write disk's allocation map (which granules the overlay holds), or null for a plain disk. Any thread.
  std::shared_ptr<OverlayMap> overlay_map() const;
  // The overlay's I/O, or null for a plain disk (tests; the migration target marks through overlay_map's owner).
  BlockOverlay* overlay() { return overlay_.get(); }

  // One chain, synchronously (the worker's step; public for tests): parses, runs the I/O, writes the status.
  // Returns the used length, or false when the chain cannot be answered (the caller marks the device broken).
  bool HandleChain(GuestAccess& mem, const DescriptorChain& chain, uint64_t acked, uint32_t* used_len);

 private:
  VirtioBlock(const BlockOptions& options, int fd, int base_fd, int kick_fd, int ctl_fd, uint64_t capacity_sectors);
  uint8_t Execute(GuestAccess& mem, const BlkRequest& req, uint64_t acked, uint32_t* written);
  // Whole sectors, inside the disk.
  bool DataRangeOk(const BlkRequest& req) const;
  uint8_t DoRead(GuestAccess& mem, const BlkRequest& req, uint32_t* written);
  uint8_t DoWrite(GuestAccess& mem, const BlkRequest& req);
  uint8_t DoGetId(GuestAccess& mem, const BlkRequest& req, uint32_t* written);
  uint8_t DoRanges(GuestAccess& mem, const BlkRequest& req);
  void WorkerLoop();
  // Serves queue q until it is empty (false) or a pause/stop was asked for (true: the rest waits in the ring).
  bool ProcessQueue(uint16_t q);

  BlockOptions options_;
  int fd_;
  int base_fd_;  // -1 for a plain disk
  std::unique_ptr<BlockOverlay> overlay_;
  int kick_fd_;  // eventfd: queue 0 was kicked (QueueNotify, or KVM through an ioeventfd)
  int ctl_fd_;   // eventfd: stop or pause/resume changed (wakes the worker's poll)
  uint64_t capacity_sectors_;
  char serial_[kBlkIdBytes] = {};
  BlockDirtyMap dirty_;

  // Set by Activate, cleared by Reset; the worker reads them only between the two.
  ActivateContext ctx_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  bool again_ = false;    // a pause interrupted the queue: serve it on resume without a new kick
  bool busy_ = false;     // the worker holds a batch
  std::atomic<bool> stop_{false}, pause_{false};  // written under mu_, polled by the worker between chains
  std::atomic<bool> broken_{false};

  struct Counters {
    std::atomic<uint64_t> requests{0}, read_bytes{0}, write_bytes{0}, flushes{0}, discards{0}, write_zeroes{0},
        batches{0}, interrupts{0}, io_errors{0}, unsupported{0}, broken{0};
  } counters_;
};

}  // namespace kvmts::devices::virtio
