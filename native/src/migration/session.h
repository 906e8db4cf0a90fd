// Migration sessions over a live vmm::Machine: the source's rounds and switch-over, the target's accept/restore/
// resume. The napi layer runs each call on a worker thread; the policy (how many rounds, when to switch over,
// throttling) is libs/migration's, which calls these step by step.
//
//  source:  Connect (TCP, handshake, StartDirtyLog) -> SendBulk -> { Collect -> SendPending }* -> SwitchOver
//           SwitchOver = Pause -> Collect -> send pending (data CRC on) -> SaveState -> State -> Complete
//                        -> Resumed received: ok (the machine stays paused; the caller releases it)
//                        -> anything else: Resume() at once, error (the guest runs on untouched)
//           Cancel() (any thread) fails the step in flight; Close() stops the dirty log and the connection.
//  target:  Listen -> Accept (one connection: receive until Complete -> RestoreState -> Start -> Resumed)
//  copied disks (DiskConfig::copy_on_migrate): Connect opens each read-only and starts its dirty-block map; the bulk
//  pass sends them after the memory, each Collect takes their dirty blocks with the dirty pages, each SendPending
//  sends both; SwitchOver's Pause quiesces the disk workers, so its Collect takes the last blocks. The target opens
//  its own copies read-write (same index, same size, else Start fails) and fdatasyncs them before Resumed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvm/result.h"
#include "memory/dirty_bitmap.h"
#include "migration/channel.h"
#include "migration/disk_source.h"
#include "migration/outgoing.h"
#include "migration/tls.h"
#include "vmm/machine.h"

namespace kvmts::migration {

/** What one sending step did. */
struct RoundStats {
  uint64_t bytes_sent = 0;  // wire bytes of this step
  uint64_t data_pages = 0;
  uint64_t zero_pages = 0;
  uint64_t disk_bytes = 0;       // copied-disk bytes sent with data (included in bytes_sent)
  uint64_t disk_zero_bytes = 0;  // copied-disk bytes sent as zero markers
  double seconds = 0;
};

/** What Collect() found. */
struct CollectStats {
  uint64_t new_dirty_bytes = 0;  // pages (and copied-disk blocks) dirtied since the previous Collect
  uint64_t pending_bytes = 0;    // everything collected and not sent yet, memory and copied disks
  uint64_t disk_pending_bytes = 0;  // the copied disks' part of pending_bytes
  double seconds_since_last = 0;
};

/** The switch-over: downtime as the source saw it (paused -> Resumed received), and its phases (CH DowntimeContext):
 *  pause (vCPUs stopped), collect (final dirty log), send (final pages), save (machine state), resume (State +
 *  Complete sent -> Resumed: the target drains the socket, restores the state and starts its vCPUs). */
struct SwitchStats {
  RoundStats final_round;
  uint64_t state_bytes = 0;
  double downtime_ms = 0;
  double pause_ms = 0, collect_ms = 0, send_ms = 0, save_ms = 0, resume_ms = 0;
  std::string memory_digest;  // SHA-256 of all guest RAM once paused and sent (only when asked: tests)
};

class SourceSession {
 public:
  /** Connects to host:port, runs the TLS handshake (unless `tls` is empty: KubeVirt's migrations.disableTLS, and
   *  the target must agree), authenticates, sends Start and starts the dirty log. `io_timeout_ms` bounds every
   *  blocking send/receive (a hung peer is an error, not a hang). */
  static Result<std::unique_ptr<SourceSession>> Connect(std::shared_ptr<vmm::Machine> machine, const std::string& host,
                                                        uint16_t port,
                                                        const std::string& secret, uint32_t io_timeout_ms,
                                                        const std::optional<PinnedTls>& tls);
  ~SourceSession();
  Result<RoundStats> SendBulk(uint64_t bytes_per_sec);
  Result<CollectStats> Collect();
  Result<RoundStats> SendPending(uint64_t bytes_per_sec);
  Result<SwitchStats> SwitchOver(uint64_t bytes_per_sec, bool digest = false);
  /** Fails the step in flight and every later one. Any thread. */
  void Cancel();
  /** Stops the dirty log (if the migration failed) and closes the connection. */
  void Close();
  const OutgoingStats& totals() const { return out_->stats(); }
  /** What the TLS handshake settled (empty cipher: a plain stream). */
  const TlsInfo& tls() const { return ch_->info(); }

 private:
  SourceSession(std::shared_ptr<vmm::Machine> machine, std::unique_ptr<TlsChannel> ch, RamLayout ram,
                const std::string& secret);
  Status Check() const;
  // Sends memory ranges, then every copied disk whole (`bulk`) or its pending blocks.
  Result<RoundStats> SendRangesTimed(const std::vector<PageRange>& ranges, const SendOptions& o, bool bulk);
  // Runs `send` (memory ranges, then the copied disks) and measures what it put on the wire.
  template <typename F>
  Result<RoundStats> Timed(F send);

  // Shared with the JS Vm: a guest that exits (or a Vm closed) mid-migration leaves a stopped machine here, whose
  // memory the step in flight still reads, never a freed one.
  std::shared_ptr<vmm::Machine> machine_;
  std::unique_ptr<TlsChannel> ch_;  // plain unless the TLS handshake ran
  RamLayout ram_;
  std::unique_ptr<OutgoingMigration> out_;
  std::vector<memory::DirtyBitmap> pending_;
  std::vector<DiskSource> disks_;  // the machine's copied disks (DiskConfig::copy_on_migrate)
  std::vector<uint64_t> region_base_;
  std::atomic<bool> cancel_{false};
  bool closed_ = false;
  bool released_ = false;
  uint64_t last_collect_ns_ = 0;
};

/** Target-side results. */
struct TargetStats {
  IncomingStats stream;
  double receive_seconds = 0;
  double restore_ms = 0;      // RestoreState + Start
  uint64_t huge_page_bytes = 0;  // guest RAM backed by transparent huge pages after the transfer
  std::string memory_digest;     // SHA-256 of all guest RAM before the vCPUs start (only when asked: tests)
};

class TargetSession {
 public:
  /** Binds and listens on host:port (port 0 = any free port). */
  static Result<std::unique_ptr<TargetSession>> Listen(std::shared_ptr<vmm::Machine> machine, const std::string& host,
                                                       uint16_t port);
  ~TargetSession();
  uint16_t port() const { return port_; }
  /** Waits for one source, runs the TLS handshake as `tls` (empty: a plain stream, KubeVirt's
   *  migrations.disableTLS; the source must agree), receives the guest, restores it and starts it, then confirms. The
   *  machine is started only when everything arrived intact; otherwise it is left untouched in kCreated. With TLS,
   *  the source must present the certificate given to TrustPeer() before it connected; a connection that comes
   *  before any certificate is not the source and is closed unread (the wait for the source goes on). */
  Result<TargetStats> Accept(const std::string& secret, uint32_t io_timeout_ms, bool digest,
                             const std::optional<TlsIdentity>& tls);
  /** The source's certificate (PEM), the only one the TLS handshake accepts; may come after Accept started, and
   *  replaces an earlier one until a source connects. Any thread. */
  Status TrustPeer(const std::string& pem);
  /** Fails a pending or running Accept. Any thread. */
  void Cancel();

 private:
  TargetSession(std::shared_ptr<vmm::Machine> machine, int listen_fd, uint16_t port)
      : machine_(std::move(machine)), listen_fd_(listen_fd), port_(port) {}
  std::shared_ptr<vmm::Machine> machine_;  // shared with the JS Vm, as the source's
  int listen_fd_;
  uint16_t port_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  int conn_fd_ = -1;
  std::string peer_pem_;  // guarded by mu_
  bool connected_ = false;  // guarded by mu_: a source connected, the pinned certificate is in use
};

/** Guest RAM of a machine as the stream sees it. */
RamLayout LayoutOf(vmm::Machine* machine);

/** Hex SHA-256 over all RAM regions in GPA order. */
std::string MemoryDigest(const RamLayout& ram);

/** Bytes of [hva, hva+len) mappings backed by huge pages (AnonHugePages + ShmemPmdMapped in /proc/self/smaps). */
uint64_t HugePageBytes(const RamLayout& ram);

}  // namespace kvmts::migration
