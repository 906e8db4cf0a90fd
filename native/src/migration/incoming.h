// IncomingMigration: the target's half of the stream (protocol in stream.h). Reads frames, authenticates the
// source, writes pages straight into guest memory (readv into the host mapping, no staging buffer) and keeps the
// machine-state blob for the caller to restore. Runs on one thread; never touches KVM itself.
//
//   kAwaitHello -> kAwaitAuth -> kAwaitStart -> kStreaming --Complete--> kReceived --ConfirmResumed()--> kDone
//        \______________\______________\____________\___________________________\__ any error --> kFailed
//                                                                                   (Abandon sent, best effort)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "devices/virtio/blk_overlay.h"
#include "kvm/result.h"
#include "migration/channel.h"
#include "migration/prefault.h"
#include "migration/ram_layout.h"
#include "migration/residency.h"
#include "migration/stream.h"
#include "migration/xxh64.h"

namespace kvmts::migration {

/** Fills a buffer with unpredictable bytes (getrandom in production, a fixed pattern in golden tests). */
using RandomFn = std::function<void(uint8_t* out, size_t len)>;
/** getrandom(2)-backed RandomFn. */
void SystemRandom(uint8_t* out, size_t len);

/** Target-side counters. */
struct IncomingStats {
  uint16_t version = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;       // wire bytes read, headers included
  uint64_t data_pages = 0;  // pages written with data
  uint64_t zero_pages = 0;  // pages named by Zero frames
  uint64_t hinted_bytes = 0;      // bytes named by Populate hints (version 3)
  uint64_t prefaulted_bytes = 0;  // bytes the prefault helper faulted in before the data reached them
  uint64_t small_page_bytes = 0;  // sparse chunks' hinted bytes + dense chunks faulted in as 4 KiB pages
  uint64_t disk_bytes = 0;        // copied-disk bytes written (Disk frames)
  uint64_t disk_zero_bytes = 0;   // copied-disk bytes zeroed or punched (DiskZero frames)
};

/** A copied disk on the target: its index in the machine's disks, an fd opened read-write, its size. */
struct TargetDisk {
  uint32_t index = 0;
  int fd = -1;  // not owned
  uint64_t size_bytes = 0;
  // A copy-on-write disk's allocation map (not owned; null for a plain disk): every frame must cover whole granules,
  // which are then marked as held by the overlay.
  devices::virtio::OverlayMap* overlay = nullptr;
};

class IncomingMigration {
 public:
  enum class Phase { kAwaitHello, kAwaitAuth, kAwaitStart, kStreaming, kReceived, kDone, kFailed };

  /** `fresh_memory`: the guest RAM is still all zeros (a new buffer), so Zero ranges never written need no work.
   *  Otherwise pages the host never populated are skipped (ResidencyProbe) and the rest are checked and cleared. */
  IncomingMigration(Channel& channel, RamLayout ram, std::string secret, bool fresh_memory, RandomFn random);
  ~IncomingMigration();
  /** Acts on Populate hints (prefault.h); off by default (hints are then read, checked and ignored). Set before
   *  ReceiveUntilComplete(). */
  void EnablePrefault(PrefaultOptions options);
  /** The target's copied disks (before ReceiveUntilComplete). Start must name exactly these indexes with the same
   *  sizes (EINVAL "disk 1: ..." otherwise); Disk/DiskZero frames are written to them (incoming_disk.cc) and they
   *  are fdatasynced at each Sync and at Complete. */
  void SetDisks(std::vector<TargetDisk> disks) { disks_ = std::move(disks); }
  /** The channel authenticates every byte itself (TLS records, tls.h): a version 5 Disk frame may then check its
   *  extent only (stream.h). Without it (KubeVirt's migrations.disableTLS) such a frame is a protocol error below
   *  version 6; from 6 the disk frames' running digest must then arrive (DiskDigest) and match before Complete. */
  void SetEncrypted(bool encrypted) { encrypted_ = encrypted; }
  /** The highest protocol version this side offers (default kProtocolVersion; an older build's, in tests). */
  void SetMaxVersion(uint16_t version) { max_version_ = version; }

  /** Handshake, Start, then pages and state until Complete. On error: Abandon to the source, phase kFailed. */
  Status ReceiveUntilComplete();
  /** The machine state of the State frame (valid once ReceiveUntilComplete succeeded). */
  const std::vector<uint8_t>& state() const { return state_; }
  /** Tells the source the guest runs here now (Resumed). */
  Status ConfirmResumed();
  /** Gives up: sends Abandon{reason} (best effort) and fails. */
  void Abort(const std::string& reason);
  Phase phase() const { return phase_; }
  const IncomingStats& stats() const { return stats_; }

 private:
  Status Fail(Error e);
  Status ReadFrame(FrameHeader* h, std::vector<uint8_t>* payload);  // small frames only
  Status Handshake();
  Status OnMemory(const FrameHeader& h);
  Status OnZero(const FrameHeader& h, const std::vector<uint8_t>& payload);
  Status OnPopulate(const std::vector<uint8_t>& payload);
  Status CheckDisks(const Start& start) const;
  Status OnDisk(const std::vector<uint8_t>& payload);
  Status OnDiskZero(const std::vector<uint8_t>& payload);
  Status OnDiskDigest(const std::vector<uint8_t>& payload);
  bool DigestDisks() const;  // plaintext version >= 6: disk frames go into disk_digest_, checked before Complete
  Status SyncDisks();
  const TargetDisk* DiskOf(uint32_t index) const;
  void FinishPrefault();
  Status ReadTable(const FrameHeader& h, uint32_t* crc, std::vector<PageRange>* ranges);
  void MarkTouched(const PageRange& r);
  bool Touched(uint64_t page) const;

  Channel& ch_;
  RamLayout ram_;
  std::string secret_;
  bool encrypted_ = false;
  bool fresh_;
  RandomFn random_;
  Phase phase_ = Phase::kAwaitHello;
  uint64_t memory_end_ = 0;
  uint32_t page_size_ = 4096;
  ResidencyProbe probe_;
  std::vector<bool> populated_;
  std::vector<uint64_t> touched_;  // pages written by this migration (bit per page of [0, memory_end_))
  std::vector<uint8_t> state_;
  std::vector<TargetDisk> disks_;
  std::vector<DiskSpec> disk_specs_;  // what Start named (checked against disks_)
  uint16_t max_version_ = kProtocolVersion;
  ChainDigest disk_digest_;
  bool disk_digest_checked_ = false;  // a DiskDigest arrived and matched; no disk frame may follow it
  IncomingStats stats_;
  std::unique_ptr<Prefaulter> prefault_;  // null unless enabled
  bool hints_pending_ = false;            // Populate hints arrived, the helper not started yet
  uint64_t frontier_ = 0;                 // highest GPA the receiver has written up to (bulk pass)
};

}  // namespace kvmts::migration
