// VirtioPciTransport: a modern-only (virtio 1.x, VERSION_1) virtio PCI function, shared by every device type. Pure
// code: no KVM; interrupts leave through an MsiSink, guest memory is a GuestAccess.
//
//   config space: 1af4:(1040 + type) rev 1, subsystem 1af4:(1040 + type), class from the device, no INTx pin
//     BAR0/1  64-bit memory BAR, 512 KiB, at the address the machine pre-programs (the guest may move it)
//     capabilities 0x40..: vendor (0x09) common / notify / ISR / device / PCI-config window, then MSI-X (0x11)
//
//   BAR0 offset   size        what
//   0x00000       0x38        common configuration (kCommon* offsets below)
//   0x02000       1           ISR status (read clears; bit 0 queue, bit 1 config)
//   0x04000       0x1000      device configuration (VirtioDevice::ReadConfig/WriteConfig)
//   0x06000       4 x queues  notify: a write at 0x6000 + 4 q kicks queue q (notify_off_multiplier 4)
//   0x08000       16 x vecs   MSI-X table (vectors = queues + 1)
//   0x48000       8 x ...     MSI-X PBA
//
//   status state machine (writes to device_status)
//     0                    -> reset: device Reset() (workers idle), queues, features, vectors back to power-on
//     ACKNOWLEDGE, DRIVER  -> recorded (a write that clears a set bit is ignored)
//     FEATURES_OK          -> kept only if VERSION_1 is acked, acked is a subset of offered and the device
//                             accepts it; otherwise left clear (the driver re-reads status and gives up)
//     DRIVER_OK            -> every enabled queue validated, device Activate(); any failure: NEEDS_RESET
//     after DRIVER_OK      -> feature and queue registers are read-only; notifies reach the device
//                             (a NotifyRegistrar binds BAR0 + 0x6000 + 4 q to the device's kick eventfds, so
//                             with KVM ioeventfds the kick never reaches this code)
//     MarkBroken (worker)  -> NEEDS_RESET reads back set, a config interrupt, the device ignores notifies
//
// Locking: mu_ guards the registers and config space (vCPU threads); msix_mu_ guards the MSI-X table, vectors and
// ISR (also worker threads). mu_ may be held while taking msix_mu_, never the reverse; the device's Reset and
// Quiesce wait for its workers, which only ever take msix_mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "devices/virtio/msix.h"
#include "devices/virtio/pci.h"
#include "devices/virtio/virtio_device.h"

namespace kvmts::devices::virtio {

inline constexpr uint16_t kVirtioPciVendor = 0x1af4, kVirtioPciDeviceBase = 0x1040;
inline constexpr uint64_t kVirtioBarSize = 0x80000;
inline constexpr uint64_t kCommonCfgOffset = 0x0, kCommonCfgBytes = 0x38, kIsrOffset = 0x2000,
                          kDeviceCfgOffset = 0x4000, kDeviceCfgBytes = 0x1000, kNotifyOffset = 0x6000,
                          kMsixTableOffset = 0x8000, kMsixPbaOffset = 0x48000;
inline constexpr uint32_t kNotifyOffMultiplier = 4;
// Common configuration registers (virtio spec 4.1.4.3).
inline constexpr uint64_t kCommonDeviceFeatureSelect = 0x00, kCommonDeviceFeature = 0x04,
                          kCommonDriverFeatureSelect = 0x08, kCommonDriverFeature = 0x0c, kCommonMsixConfig = 0x10,
                          kCommonNumQueues = 0x12, kCommonDeviceStatus = 0x14, kCommonConfigGeneration = 0x15,
                          kCommonQueueSelect = 0x16, kCommonQueueSize = 0x18, kCommonQueueMsixVector = 0x1a,
                          kCommonQueueEnable = 0x1c, kCommonQueueNotifyOff = 0x1e, kCommonQueueDesc = 0x20,
                          kCommonQueueDriver = 0x28, kCommonQueueDevice = 0x30;
// Vendor capability cfg_type values.
inline constexpr uint8_t kCapCommonCfg = 1, kCapNotifyCfg = 2, kCapIsrCfg = 3, kCapDeviceCfg = 4, kCapPciCfg = 5;
inline constexpr uint8_t kPciCapVendor = 0x09, kPciCapMsix = 0x11;
inline constexpr uint8_t kIsrQueue = 1, kIsrConfig = 2;

// Counters (any thread reads a snapshot).
struct TransportStats {
  uint64_t notifies = 0;            // queue kicks passed to the device
  uint64_t interrupts = 0;          // MSI-X messages sent
  uint64_t interrupts_masked = 0;   // left pending in the PBA
  uint64_t interrupts_dropped = 0;  // no MSI-X (disabled, or NO_VECTOR): only the ISR bit was set
  uint64_t features_refused = 0;    // FEATURES_OK refused
  uint64_t activate_failed = 0;     // DRIVER_OK with a bad queue, or the device refused
  uint64_t broken = 0;              // MarkBroken calls (a bad chain or request)
  uint64_t bad_accesses = 0;        // register writes of a wrong width/offset or at the wrong time
};

// Where the notify addresses go so kicks skip the exit path: the machine binds each (gpa, eventfd) with
// KVM_IOEVENTFD. Called under the transport's lock from the thread that changed the BAR or the command register.
class NotifyRegistrar {
 public:
  virtual ~NotifyRegistrar() = default;
  virtual void AddNotify(uint64_t gpa, int fd) = 0;
  virtual void RemoveNotify(uint64_t gpa, int fd) = 0;
};

// Told when the device stops because the driver broke the protocol (a bad chain or request, a bad queue at
// DRIVER_OK): the machine turns it into an event. Any thread (the device's worker or a vCPU); must not block.
class TransportListener {
 public:
  virtual ~TransportListener() = default;
  virtual void OnBroken(const char* why) = 0;
};

class VirtioPciTransport : public PciDevice, public VirtioInterrupt {
 public:
  // device, mem and msi must outlive the transport. bar_gpa: where BAR0 starts (512 KiB aligned, in the MMIO hole).
  VirtioPciTransport(VirtioDevice* device, GuestAccess* mem, MsiSink* msi, uint64_t bar_gpa);
  ~VirtioPciTransport() override;
  VirtioPciTransport(const VirtioPciTransport&) = delete;
  VirtioPciTransport& operator=(const VirtioPciTransport&) = delete;

  void ConfigRead(uint16_t offset, uint8_t* data, size_t len) override;
  void ConfigWrite(uint16_t offset, const uint8_t* data, size_t len) override;
  bool MmioRead(uint64_t addr, uint8_t* data, size_t len) override;
  bool MmioWrite(uint64_t addr, const uint8_t* data, size_t len) override;

  void SignalQueue(uint16_t q) override;
  void SignalConfig() override;
  void MarkBroken(const char* why) override;
  void BindQueueEventfd(uint16_t q, int fd) override;

  // Binds the notify address of every queue with a kick eventfd (VirtioDevice::QueueKickFd) while memory decoding
  // is on, following BAR moves; nullptr unbinds. Before the guest runs.
  void SetNotifyRegistrar(NotifyRegistrar* registrar);
  // Routes the device's queue eventfds into KVM (BindQueueEventfd); before the guest runs; nullptr for none.
  void SetMsiRouter(MsiRouter* router) { router_ = router; }
  // Before the guest runs; nullptr for none.
  void SetListener(TransportListener* listener) { listener_ = listener; }
  uint64_t bar_address();
  uint8_t status();
  uint64_t acked_features();
  TransportStats stats() const;
  const char* broken_reason() const { return broken_reason_.load(); }

  // Drains the device's in-flight requests and parks its workers: no guest-memory write happens until Resume().
  // The machine calls it when it pauses (before the final dirty-log collection of a migration). Idempotent.
  void Quiesce();
  // Lets a quiesced device run again (the machine resumes). No-op when not quiesced.
  void Resume();
  // Persist (see virtio_pci.cc for the layout). Quiesces first and leaves the device quiesced: a source that
  // goes on running calls Resume(); one that hands over to a target never does, so no request runs twice.
  std::vector<uint8_t> Save();
  // Validates the whole blob, then replaces this transport's and the device's state; a DRIVER_OK device is
  // activated again and every ready queue re-processed. Errors: EINVAL, op "virtio-restore", detail why.
  Status Restore(const uint8_t* data, size_t len);

 private:
  struct Stats {
    std::atomic<uint64_t> notifies{0}, interrupts{0}, interrupts_masked{0}, interrupts_dropped{0},
        features_refused{0}, activate_failed{0}, broken{0}, bad_accesses{0};
  };
  void BuildConfigSpace(uint64_t bar_gpa);
  bool BarOffset(uint64_t addr, size_t len, uint64_t* off);
  void BarReadLocked(uint64_t off, uint8_t* data, size_t len);
  void BarWriteLocked(uint64_t off, const uint8_t* data, size_t len);
  void CommonRead(uint64_t off, uint8_t* data, size_t len);
  void CommonWrite(uint64_t off, const uint8_t* data, size_t len);
  void WriteStatus(uint8_t value);
  void ResetLocked();
  void ActivateLocked();
  void SyncMsixControlLocked();
  void Deliver(uint16_t vector);  // msix_mu_ held
  void SyncRoutesLocked();        // msix_mu_ held: attaches/detaches the bound eventfds after an MSI-X change
  void SyncNotifyLocked();        // (re)binds the notify addresses after a BAR or command change

  VirtioDevice* device_;
  GuestAccess* mem_;
  MsiSink* msi_;
  const uint16_t queue_count_;
  const uint64_t device_features_;

  std::mutex mu_;
  PciConfig config_;
  uint16_t msix_cap_ = 0, pci_cfg_cap_ = 0;
  NotifyRegistrar* registrar_ = nullptr;
  TransportListener* listener_ = nullptr;
  uint64_t notify_base_ = 0;  // BAR address the notify eventfds are bound at; 0 = not bound
  uint8_t status_ = 0;
  uint8_t config_generation_ = 0;
  uint32_t device_feature_select_ = 0, driver_feature_select_ = 0;
  uint64_t driver_features_ = 0;
  uint16_t queue_select_ = 0;
  bool active_ = false;
  bool quiesced_ = false;
  std::vector<SplitQueue> queues_;

  std::mutex msix_mu_;
  MsixTable msix_;
  uint16_t config_vector_ = kMsixNoVector;
  std::vector<uint16_t> queue_vectors_;
  uint8_t isr_ = 0;
  MsiRouter* router_ = nullptr;
  std::vector<int> queue_eventfds_;   // BindQueueEventfd's, -1 when none
  std::vector<uint8_t> queue_routed_; // 1 while the router carries the queue's eventfd

  std::atomic<bool> needs_reset_{false};
  std::atomic<const char*> broken_reason_{""};
  Stats stats_;
};

}  // namespace kvmts::devices::virtio
