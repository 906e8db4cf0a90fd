// VhostNet: the in-kernel virtio-net data path (/dev/vhost-net) for VirtioNet, behind the same tap.
//
//   VirtioNet (net.h) stays the device the transport sees (features, config, save/restore); while vhost runs, the
//   kernel's vhost worker moves the frames between the tap and the rings, and the device's own worker only relays
//   interrupts:
//
//   vCPU notify -> KVM ioeventfd -> kick eventfd ---------------------> vhost (polls it; pops tx / fills rx)
//   tap <------------------------------------------------------------> vhost
//   vhost wants an interrupt (it honours EVENT_IDX / NO_INTERRUPT) -> call eventfd -> VirtioNet worker ->
//         VirtioInterrupt::SignalQueue (MSI-X, masking and the ISR as for the userspace path)
//   vhost meets a bad ring -> error eventfd -> VirtioNet worker -> MarkBroken("vhost")
//
//   Start(): SET_OWNER (once) | SET_FEATURES (the ring features the driver took; the tap keeps the 12-byte header)
//            | SET_MEM_TABLE (every RAM region) | per queue: NUM, BASE (next_avail), ADDR (host addresses of the
//            three rings), KICK, CALL, ERR | NET_SET_BACKEND (the tap)
//   Stop():  NET_SET_BACKEND(-1) per queue (vhost finishes the frame in hand and lets go of the tap), then
//            GET_VRING_BASE (where vhost stopped in the avail ring) -> the SplitQueue's next_avail; next_used is the
//            used ring's idx in guest memory. The SplitQueues then carry on with the userspace path, or are saved.
//
//   Guest pages vhost writes are not in KVM's dirty log, and vhost's own log (VHOST_F_LOG_ALL) is not used: while a
//   migration tracks dirty pages VirtioNet runs its userspace path instead (net.h, SetDirtyTracking).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "devices/virtio/guest_access.h"
#include "devices/virtio/split_queue.h"
#include "kvm/result.h"

namespace kvmts::devices::virtio {

// The in-kernel data path of a NIC: off (userspace only), auto (vhost-net where it can run), on (vhost-net or fail).
enum class VhostMode : uint8_t { kOff = 0, kAuto = 1, kOn = 2 };

// Ring features vhost-net takes over from the driver's; a driver feature outside this set and outside the
// device-specific offloads (which the tap implements) keeps the device on the userspace path.
uint64_t VhostRingFeatures();

// A tap's counters as /proc/net/dev shows them in the calling thread's network namespace (the kernel's view, which
// is all there is while vhost moves the frames). The tap's transmit side is what the guest received.
struct TapCounters {
  uint64_t rx_bytes = 0, rx_packets = 0, tx_bytes = 0, tx_packets = 0;
};
// Parses one /proc/net/dev text for `ifname` (pure: tests); false when the interface is not listed.
bool ParseProcNetDev(const char* text, const std::string& ifname, TapCounters* out);
// Reads /proc/net/dev; zeros when it cannot be read or the interface is gone.
TapCounters ReadTapCounters(const std::string& ifname);
// What vhost moved between two readings of a tap's counters, as the guest counts it: the tap's transmit side is what
// the guest received, its receive side what the guest sent.
struct GuestFrameCounts {
  uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
};
inline GuestFrameCounts GuestFramesBetween(const TapCounters& before, const TapCounters& after) {
  return {after.tx_packets - before.tx_packets, after.tx_bytes - before.tx_bytes,
          after.rx_packets - before.rx_packets, after.rx_bytes - before.rx_bytes};
}

class VhostNet {
 public:
  // Opens /dev/vhost-net and claims it for this process (SET_OWNER). Errors: {op: "open"|"VHOST_SET_OWNER"|
  // "VHOST_GET_FEATURES", errno}: ENOENT where the kernel has no vhost-net (the caller falls back).
  static Result<std::unique_ptr<VhostNet>> Open();
  ~VhostNet();
  VhostNet(const VhostNet&) = delete;
  VhostNet& operator=(const VhostNet&) = delete;

  // Starts the data path over `queues` (rx, tx) with the driver's `acked` features. kick_fds: the queues' kick
  // eventfds (the ones KVM signals). EOPNOTSUPP when the driver took a ring feature vhost lacks.
  Status Start(const GuestAccess& mem, const std::vector<SplitQueue*>& queues, uint64_t acked,
               const int* kick_fds, int tap_fd);
  // Stops it and writes vhost's progress back into the queues (above). Safe when not started.
  Status Stop(const GuestAccess& mem, const std::vector<SplitQueue*>& queues);

  bool started() const { return started_.load(); }  // any thread
  // Eventfds the device's worker polls: queue q wants an interrupt; vhost met a broken ring.
  int call_fd(uint16_t q) const { return q < 2 ? call_fd_[q] : -1; }
  int err_fd() const { return err_fd_; }

 private:
  VhostNet(int fd, int call_rx, int call_tx, int err, uint64_t features);
  int fd_;
  int call_fd_[2];
  int err_fd_;
  uint64_t features_;  // what the kernel offers (VHOST_GET_FEATURES)
  std::atomic<bool> started_{false};
};

}  // namespace kvmts::devices::virtio
