// VirtioNet: a virtio-net device (type 1) over a TAP device, for the shared virtio-pci transport.
//
//   features   VERSION_1, INDIRECT_DESC, EVENT_IDX, MAC, STATUS; with a vnet-header backend (a tap) also the
//              offloads both ways: CSUM, HOST_TSO4 and HOST_TSO6 (the guest sends partially checksummed 64 KiB TCP
//              segments and the host kernel finishes them; the header passes to the tap unchanged), and GUEST_CSUM,
//              GUEST_TSO4, GUEST_TSO6 with MRG_RXBUF (Activate sets the tap's TUNSETOFFLOAD to what the driver took:
//              the kernel then hands over unchecksummed and up to 64 KiB TCP frames, header included, which the
//              device spreads over as many of the driver's receive buffers as they need). The guest's network
//              stack then handles one frame per 64 KiB instead of one per MTU (measured in the nested lane: see
//              docs/benchmarks/network.md).
//   config     (virtio spec 5.1.4)  0 mac[6]  6 status (u16, LINK_UP 1)  8 max_virtqueue_pairs (u16, 1)
//   queues     0 receive, 1 transmit (one pair; no control queue)
//   backend    a tap opened by name (/dev/net/tun, TUNSETIFF IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, TUNSETVNETHDRSZ 12;
//              an existing persistent tap is attached, otherwise the kernel creates one that lives as long as the fd)
//              or any packet fd handed over (one read or write = one frame; tests use a SOCK_SEQPACKET pair);
//              vnet_hdr says whether the fd carries the 12-byte virtio header before each frame
//
//   one worker thread per device, never the vCPU threads, scheduled SCHED_BATCH: its wake-ups (a kick, a frame)
//   do not preempt a vCPU thread running on the same CPU, so the guest queues frames until it waits (HLT) or its
//   slice ends, and the worker then takes them in one turn, with one interrupt. With the default policy, every kick
//   preempted the guest at once on a busy CPU: one 64 KiB frame per kick and per interrupt (measured in the nested
//   lane's single-CPU L1: 5 frames a kick with it, guest -> host 0.29 -> 0.9-1.5 Gbit/s, the round trip unchanged;
//   docs/benchmarks/network.md). A CPU left idle runs the worker at once either way.
//     poll(ctl eventfd, rx kick, tx kick, backend POLLIN while a frame can be taken)
//     tx kick      -> pop every transmit chain -> writev(hdr? + frame) to the backend -> used (len 0) -> interrupt
//     backend      -> read one frame into the bounce buffer -> pop a receive chain (MRG_RXBUF: as many as the
//                     frame needs) -> copy -> used -> interrupt; too few receive buffers: the frame waits in the
//                     bounce buffer (chains taken are given back) and the backend is not polled until the driver
//                     kicks the receive queue (the kernel queues or drops meanwhile, as on a NIC)
//   Quiesce(): the worker finishes the batch in hand and parks; a frame waiting in the bounce buffer is kept and
//              travels in SaveState, so a live migration delivers it on the target.
//   RestoreState(): the first time the worker runs afterwards it sends one RARP frame from the guest's MAC into the
//              backend (as QEMU announces a migrated guest), so bridges and switches learn the MAC's new port at
//              once instead of when the guest next speaks.
//   Reset(): stops and joins the worker; the queues belong to the transport again.
//   vhost (NetOptions::vhost, a tap backend): Activate hands the rings and the tap to the kernel's vhost-net
//              (vhost_net.h) and the worker only relays its interrupts; Quiesce stops vhost and takes its ring
//              positions back, Resume starts it again. While a migration tracks dirty pages (SetDirtyTracking)
//              the device runs the userspace path above, whose writes into guest memory are marked dirty; vhost's
//              are not. kAuto falls back to the userspace path where /dev/vhost-net cannot be opened or lacks a
//              ring feature the driver took; kOn makes that an activation error. The vhost worker and the relaying
//              worker both run SCHED_BATCH for the reason above: without it on vhost's, guest -> host ran 8x slower
//              in the nested lane; with the relay preempting the guest for every completion, 0.75x the userspace
//              path, and batched 1.03x (host -> guest 1.17x; docs/benchmarks/network.md).
//   A bad chain (net_frame.h) -> MarkBroken: NEEDS_RESET and an event; the worker then ignores the queues.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/virtio/net_frame.h"
#include "devices/virtio/vhost_net.h"
#include "devices/virtio/virtio_device.h"
#include "kvm/result.h"

namespace kvmts::devices::virtio {

// virtio-net feature bits (virtio spec 5.1.3).
inline constexpr uint64_t kNetFeatureCsum = 1ull << 0, kNetFeatureGuestCsum = 1ull << 1, kNetFeatureMac = 1ull << 5,
                          kNetFeatureGuestTso4 = 1ull << 7, kNetFeatureGuestTso6 = 1ull << 8,
                          kNetFeatureHostTso4 = 1ull << 11, kNetFeatureHostTso6 = 1ull << 12,
                          kNetFeatureMrgRxbuf = 1ull << 15, kNetFeatureStatus = 1ull << 16;
inline constexpr uint16_t kNetStatusLinkUp = 1;
inline constexpr uint64_t kNetCfgMac = 0, kNetCfgStatus = 6, kNetCfgMaxPairs = 8, kNetConfigBytes = 10;
inline constexpr uint16_t kNetRxQueue = 0, kNetTxQueue = 1;
inline constexpr uint32_t kNetPciClass = 0x020000;  // network, Ethernet
inline constexpr size_t kMacBytes = 6;

struct NetOptions {
  std::string tap;                  // tap name (IFNAMSIZ - 1 bytes at most); empty: use fd
  int fd = -1;                      // a packet fd the device takes ownership of (when tap is empty)
  bool vnet_hdr = true;             // fd frames carry the virtio header (always true for a tap opened by name)
  uint8_t mac[kMacBytes] = {};      // unicast, what the guest reads as its address
  uint16_t queue_size = 256;
  // No worker thread: QueueNotify(q) serves queue q on the caller's thread (a fuzz target drives the transport and
  // the device deterministically this way). Never for a machine: a vCPU thread must not do packet I/O.
  bool inline_io = false;
  VhostMode vhost = VhostMode::kOff;  // only for a tap opened by name
};

// Counters (snapshot, any thread).
struct NetStats {
  uint64_t rx_frames = 0, rx_bytes = 0;  // delivered to the guest (bytes without the virtio header)
  uint64_t tx_frames = 0, tx_bytes = 0;  // written to the backend
  uint64_t rx_truncated = 0;             // cut to fit a receive chain
  uint64_t tx_errors = 0;                // the backend refused a frame (dropped, the chain still completes)
  uint64_t announces = 0;                // RARP frames sent after a restore
  uint64_t broken = 0;                   // chains that broke the protocol (device then NEEDS_RESET)
  uint64_t rx_dropped = 0;               // frames held for the guest when the data path moved to vhost
  uint64_t vhost_starts = 0;             // times vhost-net took the data path
  uint64_t vhost_fallbacks = 0;          // times it could not (kAuto: the userspace path ran instead)
  bool vhost_active = false;             // vhost-net carries the frames now
};

class VirtioNet : public VirtioDevice {
 public:
  // Opens the tap (or adopts options.fd). Errors: {op: "open"|"TUNSETIFF"|"TUNSETVNETHDRSZ", errno}; EINVAL for a
  // bad option (name too long, multicast MAC, queue size not a power of two in 2..32768).
  static Result<std::unique_ptr<VirtioNet>> Open(const NetOptions& options);
  ~VirtioNet() override;

  uint16_t device_type() const override { return kDeviceTypeNet; }
  uint32_t pci_class_code() const override { return kNetPciClass; }
  uint64_t device_features() const override;
  uint16_t queue_count() const override { return 2; }
  uint16_t queue_max_size() const override { return options_.queue_size; }
  void ReadConfig(uint64_t offset, uint8_t* data, size_t len) const override;
  void WriteConfig(uint64_t offset, const uint8_t* data, size_t len) override;  // nothing writable (no CTRL_MAC)
  // Refuses HOST_TSO4/6 without CSUM and GUEST_TSO4/6 without GUEST_CSUM (virtio spec 5.1.3.1).
  bool AcceptFeatures(uint64_t acked) override;
  Status Activate(const ActivateContext& ctx) override;
  void QueueNotify(uint16_t q) override;
  void QueueEventfdRouted(uint16_t q, bool routed) override;
  int QueueKickFd(uint16_t q) const override { return q < 2 ? kick_fd_[q] : -1; }
  void Reset() override;
  void Quiesce() override;
  void Resume() override;
  // Persist: u8 version (1) | mac[6] | u16 link status | u32 length + bytes of the frame waiting for a receive
  // buffer (0: none). Restore refuses another MAC (the target must be configured like the source).
  std::vector<uint8_t> SaveState() const override;
  bool RestoreState(const uint8_t* data, size_t len) override;

  NetStats stats() const;
  // A migration started (true) or stopped (false) tracking dirty guest pages: the data path moves to userspace
  // (whose writes are marked dirty) for its duration, and back to vhost after. Any thread but the worker.
  void SetDirtyTracking(bool on);
  // The tap's interface name as the kernel gave it (empty for an adopted fd).
  const std::string& ifname() const { return ifname_; }

 private:
  VirtioNet(const NetOptions& options, int fd, int kick_rx, int kick_tx, int ctl, std::string ifname);
  void WorkerLoop();
  // Serves the transmit queue until it is empty (false) or a pause/stop was asked for (true).
  bool ProcessTx();
  // Moves frames from the backend into receive chains until either runs dry (false) or a pause/stop (true).
  bool ProcessRx();
  // MRG_RXBUF: pops receive chains into rx_chains_ until they hold `need` bytes (or a whole ring of them does not).
  // kWait: too few are posted (every chain taken is given back); kBroken: *why says how the driver broke the ring.
  enum class RxTake { kReady, kWait, kBroken };
  RxTake TakeRxChains(SplitQueue& queue, GuestAccess& mem, size_t need, const char** why);
  // Places pending_ into the receive queue: 1 (placed), 0 (no room yet), -1 (broken: *why set).
  int PlaceFrame(SplitQueue& queue, GuestAccess& mem, const char** why);
  // The tap's offloads (TUNSETOFFLOAD) for the driver's features: what it may be handed unchecksummed or unsegmented.
  void SetBackendOffloads(uint64_t acked);
  // Reads one frame from the backend into pending_ (with its virtio header); false when none is waiting.
  bool ReadFrame();
  void Broken(const char* why);
  // Writes a broadcast RARP frame (ethertype 0x8035) with the guest's MAC as source to the backend.
  void Announce();
  // Adds what vhost moved since it started (the tap's counters) to the frame counters; restarts the count.
  void FoldVhostCounters();
  // Quiesce/Resume without mode_mu_ (the caller holds it).
  void QuiesceLocked();
  void ResumeLocked();
  // Whether vhost should carry the frames now: wanted, not given up on, and no dirty tracking.
  bool WantVhost() const;
  // Starts vhost over the active queues (the worker is parked or not running); false: the userspace path goes on
  // (counted), or with kOn the error in *err.
  bool StartVhost(Status* err);
  // The vhost branch of the worker: relays interrupts and errors until the mode or the pause changes.
  void RelayVhost(bool paused);

  NetOptions options_;
  int fd_;
  int kick_fd_[2];  // eventfds: queue q was kicked (QueueNotify, or KVM through an ioeventfd)
  int ctl_fd_;      // eventfd: stop or pause/resume changed
  std::string ifname_;
  uint16_t link_status_ = kNetStatusLinkUp;

  // The frame read from the backend and not yet delivered (virtio header included); the worker's, or the
  // caller's of SaveState/RestoreState while the worker is parked or gone.
  std::vector<uint8_t> pending_;
  size_t pending_len_ = 0;
  bool rx_starved_ = false;    // no receive chain: do not poll the backend until the driver kicks queue 0
  bool backend_dead_ = false;  // the backend hung up or failed: not polled any more (transmit drops)
  bool announce_ = false;      // set by RestoreState: send the RARP announcement before serving the queues
  bool mrg_rxbuf_ = false;     // the driver took MRG_RXBUF: a frame may span receive chains
  std::vector<DescriptorChain> rx_chains_;  // the worker's: chains taken for the frame being placed
  std::vector<uint32_t> rx_used_;
  uint16_t rx_posted_ = 0;  // avail.idx when the receive buffers last ran short for a frame (MRG_RXBUF)

  ActivateContext ctx_;
  std::unique_ptr<VhostNet> vhost_;  // opened at the first Activate that wants it, kept until destruction
  std::mutex mode_mu_;               // serialises Quiesce, Resume and SetDirtyTracking
  bool dirty_tracking_ = false;
  bool vhost_failed_ = false;        // kAuto gave up on vhost for this driver session
  bool vhost_running_ = false;       // under mu_: the worker relays instead of serving the queues
  std::atomic<bool> irq_routed_[2] = {false, false};  // KVM raises queue q's interrupt from vhost itself (irqfd)
  TapCounters vhost_base_;           // the tap's counters when vhost last started (frames it moved: the delta)
  mutable std::mutex stats_mu_;      // vhost_base_ against stats()
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  bool again_ = false;  // a pause interrupted the work: serve both queues on resume without a new kick
  bool busy_ = false;
  std::atomic<bool> stop_{false}, pause_{false};
  std::atomic<bool> broken_{false};

  struct Counters {
    std::atomic<uint64_t> rx_frames{0}, rx_bytes{0}, tx_frames{0}, tx_bytes{0}, rx_truncated{0}, tx_errors{0},
        broken{0}, announces{0}, rx_dropped{0}, vhost_starts{0}, vhost_fallbacks{0};
  } counters_;
};

}  // namespace kvmts::devices::virtio
