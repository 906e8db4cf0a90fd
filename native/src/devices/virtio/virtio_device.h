// VirtioDevice: what a device type (blk now, net later) gives the shared virtio-pci transport, and
// VirtioInterrupt: what the transport gives back to the device's worker threads.
//
//   transport (vCPU threads, under its lock)            device
//   ------------------------------------------          ------------------------------------------------------
//   features / num queues / max size at creation  -->   device_features(), queue_count(), queue_max_size()
//   device config region reads and writes         -->   ReadConfig(), WriteConfig()
//   FEATURES_OK                                    -->   AcceptFeatures(acked)   (false: FEATURES_OK refused)
//   DRIVER_OK (queues validated)                   -->   Activate(ctx)           (error: NEEDS_RESET)
//   notify register write for queue q              -->   QueueNotify(q)          (never blocks on I/O)
//   (or KVM signals QueueKickFd(q) directly: an ioeventfd on the notify address)
//   status 0 (reset)                               -->   Reset()                 (returns with the workers idle)
//   save: Quiesce(), SaveState(), Resume()         -->   drains in-flight requests and parks the workers
//   restore: RestoreState(), then Activate + QueueNotify on every queue (kicks during downtime are lost)
//
//   worker thread                                  -->   transport
//   used buffers published on queue q                    irq->SignalQueue(q)
//   a malformed chain or request                         irq->MarkBroken(reason): NEEDS_RESET + config interrupt
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "devices/virtio/guest_access.h"
#include "devices/virtio/split_queue.h"
#include "kvm/result.h"

namespace kvmts::devices::virtio {

// Device status bits (virtio spec 2.1).
inline constexpr uint8_t kStatusAcknowledge = 1, kStatusDriver = 2, kStatusDriverOk = 4, kStatusFeaturesOk = 8,
                         kStatusNeedsReset = 64, kStatusFailed = 128;
// Transport feature bits (virtio spec 6).
inline constexpr uint64_t kFeatureIndirectDesc = 1ull << 28, kFeatureEventIdx = 1ull << 29,
                          kFeatureVersion1 = 1ull << 32;
// Device types (virtio spec 5).
inline constexpr uint16_t kDeviceTypeNet = 1, kDeviceTypeBlock = 2;

class VirtioInterrupt {
 public:
  virtual ~VirtioInterrupt() = default;
  // The device published used buffers on queue q (it already asked the queue whether the driver wants one).
  virtual void SignalQueue(uint16_t q) = 0;
  // The device's configuration changed.
  virtual void SignalConfig() = 0;
  // The driver broke the protocol: the device stops and reports NEEDS_RESET. why: a stable short name.
  virtual void MarkBroken(const char* why) = 0;
  // An eventfd whose signal means SignalQueue(q) (vhost's call eventfd), for the transport to route into KVM while
  // the queue's vector is deliverable (MsiRouter, irqfd); -1 takes it back. The device keeps watching it and calls
  // SignalQueue for what it sees (nothing while routed: KVM consumes the signal). Default: not routed.
  virtual void BindQueueEventfd(uint16_t /*q*/, int /*fd*/) {}
};

// What Activate hands the device: guest memory, its queues (validated, owned by the transport, used only by the
// device until Reset), the acked features and where interrupts go.
struct ActivateContext {
  GuestAccess* mem = nullptr;
  std::vector<SplitQueue*> queues;
  uint64_t acked_features = 0;
  VirtioInterrupt* irq = nullptr;
  // The machine is paused (a restore before Resume): the device starts parked, as if Quiesce had run, and touches
  // no queue until Resume (a migration target that never starts sends nothing the source already sent).
  bool paused = false;
};

class VirtioDevice {
 public:
  virtual ~VirtioDevice() = default;
  virtual uint16_t device_type() const = 0;
  // The 24-bit PCI class code (class << 16 | subclass << 8 | prog-if).
  virtual uint32_t pci_class_code() const = 0;
  // Every feature the device offers, transport bits included (VERSION_1 is required by the transport).
  virtual uint64_t device_features() const = 0;
  virtual uint16_t queue_count() const = 0;
  virtual uint16_t queue_max_size() const = 0;
  // The device-specific configuration structure; bytes past its end read 0, writes there are dropped.
  virtual void ReadConfig(uint64_t offset, uint8_t* data, size_t len) const = 0;
  virtual void WriteConfig(uint64_t offset, const uint8_t* data, size_t len) = 0;
  // Extra device checks of the driver's features at FEATURES_OK (the transport already checked the subset).
  virtual bool AcceptFeatures(uint64_t /*acked*/) { return true; }
  virtual Status Activate(const ActivateContext& ctx) = 0;
  virtual void QueueNotify(uint16_t q) = 0;
  // An eventfd whose signal means the same as QueueNotify(q) (the machine binds it to the notify address with
  // KVM_IOEVENTFD, so a kick needs no exit), or -1 when the device has none. Valid for the device's lifetime.
  virtual int QueueKickFd(uint16_t /*q*/) const { return -1; }
  virtual void Reset() = 0;
  // The transport started (true) or stopped (false) routing queue q's bound eventfd into KVM (BindQueueEventfd):
  // while routed the device need not watch it. Called with the transport's MSI-X lock held: no blocking.
  virtual void QueueEventfdRouted(uint16_t /*q*/, bool /*routed*/) {}
  virtual void Quiesce() = 0;
  virtual void Resume() = 0;
  virtual std::vector<uint8_t> SaveState() const = 0;
  virtual bool RestoreState(const uint8_t* data, size_t len) = 0;
};

}  // namespace kvmts::devices::virtio
