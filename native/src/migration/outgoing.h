// OutgoingMigration: the source's half of the stream (protocol in stream.h). Authenticates the target, then sends
// page ranges straight from guest memory (sendmsg with an iovec per range: the kernel copies from the guest mapping,
// no staging buffer), the machine state, and waits for the target's Resumed. Knows nothing of KVM or of policy:
// session.cc decides what to send when; libs/migration decides when to stop iterating.
//
//   Handshake() -> SendRanges()* -> SendState() -> Complete()  (Resumed received = the target owns the guest)
//   any error: the caller resumes its guest; Abandon() tells the target why (best effort)
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "kvm/result.h"
#include "migration/channel.h"
#include "migration/incoming.h"
#include "migration/ram_layout.h"
#include "migration/residency.h"
#include "migration/stream.h"
#include "migration/xxh64.h"

namespace kvmts::migration {

/** How one SendRanges() call behaves. */
struct SendOptions {
  bool detect_zero = true;       // zero pages go as Zero markers (protocol >= 2)
  bool check_data = false;       // CRC over page data too (only when the guest is paused)
  bool probe_residency = false;  // pages never populated on the host count as zero without being read
  bool populate_hint = false;    // bulk pass: classify everything first, tell the target which pages will come
                                 // with data (Populate, protocol >= 3), then send the zeros, then the data
  uint64_t bytes_per_sec = 0;    // bandwidth cap, 0 = none
  uint64_t max_frame_bytes = uint64_t{4} << 20;
  const std::atomic<bool>* cancel = nullptr;
};

/** Source-side counters. */
struct OutgoingStats {
  uint16_t version = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;       // wire bytes written, headers included
  uint64_t data_pages = 0;  // pages sent with data
  uint64_t zero_pages = 0;  // pages sent as markers
  uint64_t disk_bytes = 0;       // copied-disk bytes sent with data (Disk frames)
  uint64_t disk_zero_bytes = 0;  // copied-disk bytes sent as DiskZero markers
};

class OutgoingMigration {
 public:
  OutgoingMigration(Channel& channel, RamLayout ram, std::string secret, RandomFn random,
                    uint16_t max_version = kProtocolVersion);
  /** The copied disks Start announces (set before Handshake). Nonempty: the target must speak version >= 4, or the
   *  handshake stops with EPROTONOSUPPORT "the target cannot receive copied disks" (Abandon sent). */
  void SetDisks(std::vector<DiskSpec> disks) { disks_ = std::move(disks); }
  /** The channel authenticates every byte itself (TLS records, tls.h): Disk frames and the final round's pages then
   *  skip their data CRC (stream.h). Without it the stream is plain (KubeVirt's migrations.disableTLS): from version 6
   *  its Disk frames skip the data CRC too, and Complete() sends the DiskDigest of every disk frame first. */
  void SetEncrypted(bool encrypted) { encrypted_ = encrypted; }
  /** Hello, Challenge (verifies the target), Auth, AuthOk, Start (then, with copied disks, a Sync round trip: the
   *  target's refusal of Start, e.g. a disk size mismatch, fails the handshake with the target's reason). */
  Status Handshake();
  /** Sends `len` bytes of copied disk `disk` at `offset` (a Disk frame; len <= 4 MiB): the CRC covers the data too
   *  below version 5 (encrypted) or 6 (plaintext); a plaintext version 6 stream adds extent and data to the running
   *  digest instead. outgoing_disk.cc. */
  Status SendDiskData(uint32_t disk, uint64_t offset, const uint8_t* data, uint64_t len);
  /** Sends a DiskZero marker: [offset, offset + len) of copied disk `disk` reads as zeros. */
  Status SendDiskZero(uint32_t disk, uint64_t offset, uint64_t len);
  /** Sleeps as long as needed to keep everything sent so far under `bytes_per_sec` (0 = no cap). */
  void Pace(uint64_t bytes_per_sec);
  /** Sends the pages of `ranges` (each inside one RAM region). */
  Status SendRanges(const std::vector<PageRange>& ranges, const SendOptions& options);
  /** Waits until the target has taken in everything sent so far (Sync round trip; a no-op on version 1). */
  Status Sync();
  /** Sends the machine state blob. */
  Status SendState(const uint8_t* data, size_t len);
  /** Sends the DiskDigest (plaintext version 6 with copied disks), then Complete, and waits for Resumed. An Abandon
   *  from the target (a digest mismatch among others), or EOF, is an error. */
  Status Complete();
  /** `e` or, when `e` is a write that failed because the target closed (EPIPE, ECONNRESET), the reason of the
   *  Abandon the target sent before closing, if one is waiting to be read ("target abandoned: ..."). */
  Status WithPeerReason(Status e);
  /** Tells the target the migration is off (best effort). */
  void Abandon(const std::string& reason);
  const OutgoingStats& stats() const { return stats_; }

 private:
  Status SendFrame(Command c, const void* payload, size_t len);
  bool CheckDiskData() const;  // Disk frames' CRC covers their data
  bool DigestDisks() const;    // disk frames go into disk_digest_, sent before Complete
  Status ReadReply(Command expected, std::vector<uint8_t>* payload);
  Status SendBatch(const std::vector<PageRange>& data, bool checked);
  Status SendZeros(const std::vector<PageRange>& zeros);
  Status SendTables(Command c, const std::vector<PageRange>& ranges);
  Status SendClassifiedFirst(const std::vector<PageRange>& ranges, const SendOptions& o);
  Status Classify(const PageRange& r, const SendOptions& o, RangeTable* data, RangeTable* zeros);

  Channel& ch_;
  RamLayout ram_;
  std::string secret_;
  bool encrypted_ = false;
  RandomFn random_;
  uint16_t max_version_;
  std::vector<DiskSpec> disks_;
  ResidencyProbe probe_;
  OutgoingStats stats_;
  ChainDigest disk_digest_;
  uint64_t paced_bytes_ = 0;
  uint64_t pace_start_ns_ = 0;
};

}  // namespace kvmts::migration
