// VirtioPciTransport: see virtio_pci.h for the BAR layout and the status state machine.
//
// Save blob (version 1, little-endian):
//   u8 version | u16 device type | u16 queue count | u64 offered features | 256 bytes PCI config space
//   | u8 status | u8 config generation | u8 needs_reset | u8 isr | u32 device feature select
//   | u32 driver feature select | u64 driver features | u16 queue select | u16 config vector
//   | per queue: u16 size | u8 ready | u64 desc | u64 avail | u64 used | u16 next_avail | u16 next_used
//                | u16 signalled_used | u8 signalled_valid | u16 vector
//   | u32 n + MSI-X table blob (msix.h) | u32 n + device blob (VirtioDevice::SaveState)
#include "devices/virtio/virtio_pci.h"

#include <cstring>


namespace kvmts::devices::virtio {

namespace {

constexpr uint16_t kPciCfgDataOffset = 16;  // pci_cfg_data inside the PCI-config-window capability

// A vendor capability body (after id and next): cap_len, cfg_type, bar, id, 2 padding, offset, length [, extra].
std::vector<uint8_t> VendorCap(uint8_t type, uint32_t offset, uint32_t length, bool extra_dword) {
  std::vector<uint8_t> b{static_cast<uint8_t>(extra_dword ? 20 : 16), type, 0, 0, 0, 0};
  for (uint32_t v : {offset, length}) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  if (extra_dword) b.insert(b.end(), 4, 0);
  return b;
}

uint64_t Load(const uint8_t* data, size_t len) {
  uint64_t v = 0;
  std::memcpy(&v, data, len);
  return v;
}

}  // namespace

VirtioPciTransport::VirtioPciTransport(VirtioDevice* device, GuestAccess* mem, MsiSink* msi, uint64_t bar_gpa)
    : device_(device),
      mem_(mem),
      msi_(msi),
      queue_count_(device->queue_count()),
      device_features_(device->device_features()),
      msix_(static_cast<uint16_t>(device->queue_count() + 1)),
      queue_vectors_(device->queue_count(), kMsixNoVector) {
  for (uint16_t q = 0; q < queue_count_; ++q) queues_.emplace_back(device->queue_max_size());
  queue_eventfds_.assign(queue_count_, -1);
  queue_routed_.assign(queue_count_, 0);
  BuildConfigSpace(bar_gpa);
}

VirtioPciTransport::~VirtioPciTransport() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_) device_->Reset();
}

void VirtioPciTransport::BuildConfigSpace(uint64_t bar_gpa) {
  uint16_t id = static_cast<uint16_t>(kVirtioPciDeviceBase + device_->device_type());
  config_.SetIdentity(kVirtioPciVendor, id, device_->pci_class_code(), 1, kVirtioPciVendor, id);
  config_.AddBar64(0, kVirtioBarSize, bar_gpa);
  config_.AddCapability(kPciCapVendor, VendorCap(kCapCommonCfg, kCommonCfgOffset, kCommonCfgBytes, false));
  std::vector<uint8_t> notify = VendorCap(kCapNotifyCfg, kNotifyOffset, kNotifyOffMultiplier * queue_count_, true);
  std::memcpy(notify.data() + 14, &kNotifyOffMultiplier, 4);
  config_.AddCapability(kPciCapVendor, notify);
  config_.AddCapability(kPciCapVendor, VendorCap(kCapIsrCfg, kIsrOffset, 1, false));
  config_.AddCapability(kPciCapVendor, VendorCap(kCapDeviceCfg, kDeviceCfgOffset, kDeviceCfgBytes, false));
  // The PCI-config window: bar, offset, length and data are writable by the driver.
  std::vector<uint8_t> window_mask(18, 0);
  window_mask[2] = 0xff;
  for (int i = 6; i < 18; ++i) window_mask[i] = 0xff;
  pci_cfg_cap_ = config_.AddCapability(kPciCapVendor, VendorCap(kCapPciCfg, 0, 0, true), window_mask);
  uint16_t table_size = static_cast<uint16_t>(msix_.size() - 1);
  std::vector<uint8_t> msix{static_cast<uint8_t>(table_size), static_cast<uint8_t>(table_size >> 8)};
  for (uint32_t v : {static_cast<uint32_t>(kMsixTableOffset), static_cast<uint32_t>(kMsixPbaOffset)}) {
    for (int i = 0; i < 4; ++i) msix.push_back(static_cast<uint8_t>(v >> (8 * i)));  // BIR 0 in the low bits
  }
  msix_cap_ = config_.AddCapability(kPciCapMsix, msix, {0, 0xc0});
}

// ---- config space -------------------------------------------------------------------------------------------

void VirtioPciTransport::ConfigRead(uint16_t offset, uint8_t* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  uint16_t window = static_cast<uint16_t>(pci_cfg_cap_ + kPciCfgDataOffset);
  if (offset >= window && offset + len <= window + 4u) {
    // The window reads `length` bytes of a BAR at `offset` (virtio spec 4.1.4.9).
    uint32_t bar_off = config_.Get32(static_cast<uint16_t>(pci_cfg_cap_ + 8));
    uint32_t length = config_.Get32(static_cast<uint16_t>(pci_cfg_cap_ + 12));
    uint8_t buf[4] = {};
    if (config_.bytes()[pci_cfg_cap_ + 4] == 0 && (length == 1 || length == 2 || length == 4) &&
        bar_off < kVirtioBarSize && length <= kVirtioBarSize - bar_off) {
      BarReadLocked(bar_off, buf, length);
    }
    std::memcpy(data, buf + (offset - window), len);
    return;
  }
  config_.Read(offset, data, len);
}

void VirtioPciTransport::ConfigWrite(uint16_t offset, const uint8_t* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  config_.Write(offset, data, len);
  uint16_t window = static_cast<uint16_t>(pci_cfg_cap_ + kPciCfgDataOffset);
  if (offset >= window && offset + len <= window + 4u) {
    uint32_t bar_off = config_.Get32(static_cast<uint16_t>(pci_cfg_cap_ + 8));
    uint32_t length = config_.Get32(static_cast<uint16_t>(pci_cfg_cap_ + 12));
    if (config_.bytes()[pci_cfg_cap_ + 4] == 0 && (length == 1 || length == 2 || length == 4) &&
        bar_off < kVirtioBarSize && length <= kVirtioBarSize - bar_off) {
      BarWriteLocked(bar_off, config_.bytes() + window, length);
    }
  }
  if (offset < msix_cap_ + 4 && offset + len > msix_cap_ + 2u) SyncMsixControlLocked();
  if (offset < kPciBar0Offset + 8 && offset + len > kPciCommandOffset) SyncNotifyLocked();
}

void VirtioPciTransport::SyncMsixControlLocked() {
  uint16_t control = config_.Get16(static_cast<uint16_t>(msix_cap_ + 2));
  std::lock_guard<std::mutex> lock(msix_mu_);
  stats_.interrupts += msix_.SetControl((control & kMsixControlEnable) != 0,
                                        (control & kMsixControlFunctionMask) != 0, msi_);
  SyncRoutesLocked();
}

// ---- BAR0 -----------------------------------------------------------------------------------------------------

bool VirtioPciTransport::BarOffset(uint64_t addr, size_t len, uint64_t* off) {
  if (!(config_.command() & kPciCommandMemory)) return false;
  uint64_t base = config_.BarAddress(0);
  if (addr < base || addr - base >= kVirtioBarSize || len > kVirtioBarSize - (addr - base)) return false;
  *off = addr - base;
  return true;
}

bool VirtioPciTransport::MmioRead(uint64_t addr, uint8_t* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t off = 0;
  if (!BarOffset(addr, len, &off)) return false;
  BarReadLocked(off, data, len);
  return true;
}

bool VirtioPciTransport::MmioWrite(uint64_t addr, const uint8_t* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t off = 0;
  if (!BarOffset(addr, len, &off)) return false;
  BarWriteLocked(off, data, len);
  return true;
}

void VirtioPciTransport::BarReadLocked(uint64_t off, uint8_t* data, size_t len) {
  std::memset(data, 0, len);
  if (len == 0 || len > 8) return;
  if (off + len <= kCommonCfgBytes) {
    CommonRead(off, data, len);
  } else if (off == kIsrOffset && len == 1) {
    std::lock_guard<std::mutex> lock(msix_mu_);
    data[0] = isr_;
    isr_ = 0;  // reading the ISR acknowledges it
  } else if (off >= kDeviceCfgOffset && off + len <= kDeviceCfgOffset + kDeviceCfgBytes) {
    device_->ReadConfig(off - kDeviceCfgOffset, data, len);
  } else if (off >= kMsixTableOffset && off < kMsixPbaOffset) {
    std::lock_guard<std::mutex> lock(msix_mu_);
    msix_.TableRead(off - kMsixTableOffset, data, len);
  } else if (off >= kMsixPbaOffset) {
    std::lock_guard<std::mutex> lock(msix_mu_);
    msix_.PbaRead(off - kMsixPbaOffset, data, len);
  }
}

void VirtioPciTransport::BarWriteLocked(uint64_t off, const uint8_t* data, size_t len) {
  if (len == 0 || len > 8) return;
  if (off + len <= kCommonCfgBytes) {
    CommonWrite(off, data, len);
  } else if (off >= kDeviceCfgOffset && off + len <= kDeviceCfgOffset + kDeviceCfgBytes) {
    if (!needs_reset_) device_->WriteConfig(off - kDeviceCfgOffset, data, len);
  } else if (off >= kNotifyOffset && off < kNotifyOffset + uint64_t{kNotifyOffMultiplier} * queue_count_) {
    uint16_t q = static_cast<uint16_t>((off - kNotifyOffset) / kNotifyOffMultiplier);
    if (active_ && !needs_reset_ && queues_[q].state().ready) {
      stats_.notifies++;
      device_->QueueNotify(q);
    }
  } else if (off >= kMsixTableOffset && off < kMsixPbaOffset) {
    std::lock_guard<std::mutex> lock(msix_mu_);
    stats_.interrupts += msix_.TableWrite(off - kMsixTableOffset, data, len, msi_);
    SyncRoutesLocked();
  } else {
    stats_.bad_accesses++;  // ISR, PBA and the gaps are read-only
  }
}

// ---- common configuration -----------------------------------------------------------------------------------

void VirtioPciTransport::CommonRead(uint64_t off, uint8_t* data, size_t len) {
  uint8_t r[kCommonCfgBytes] = {};
  auto put = [&r](uint64_t at, uint64_t v, size_t n) { std::memcpy(r + at, &v, n); };
  put(kCommonDeviceFeatureSelect, device_feature_select_, 4);
  put(kCommonDeviceFeature, device_feature_select_ < 2 ? device_features_ >> (32 * device_feature_select_) : 0, 4);
  put(kCommonDriverFeatureSelect, driver_feature_select_, 4);
  put(kCommonDriverFeature, driver_feature_select_ < 2 ? driver_features_ >> (32 * driver_feature_select_) : 0, 4);
  put(kCommonNumQueues, queue_count_, 2);
  put(kCommonDeviceStatus, status_ | (needs_reset_ ? kStatusNeedsReset : 0), 1);
  put(kCommonConfigGeneration, config_generation_, 1);
  put(kCommonQueueSelect, queue_select_, 2);
  {
    std::lock_guard<std::mutex> lock(msix_mu_);
    put(kCommonMsixConfig, config_vector_, 2);
    if (queue_select_ < queue_count_) put(kCommonQueueMsixVector, queue_vectors_[queue_select_], 2);
  }
  if (queue_select_ < queue_count_) {
    const QueueState& s = queues_[queue_select_].state();
    put(kCommonQueueSize, s.size, 2);
    put(kCommonQueueEnable, s.ready ? 1 : 0, 2);
    put(kCommonQueueNotifyOff, queue_select_, 2);
    put(kCommonQueueDesc, s.desc_gpa, 8);
    put(kCommonQueueDriver, s.avail_gpa, 8);
    put(kCommonQueueDevice, s.used_gpa, 8);
  }
  std::memcpy(data, r + off, len);
}

void VirtioPciTransport::CommonWrite(uint64_t off, const uint8_t* data, size_t len) {
  uint64_t v = Load(data, len);
  bool configurable = !(status_ & kStatusDriverOk) && !needs_reset_;
  SplitQueue* q = queue_select_ < queue_count_ ? &queues_[queue_select_] : nullptr;
  auto set_half = [&](uint64_t* field, uint64_t base) {
    if (len == 8 && off == base) *field = v;
    else if (len == 4 && off == base) *field = (*field & ~0xffffffffull) | v;
    else if (len == 4 && off == base + 4) *field = (*field & 0xffffffffull) | v << 32;
    else stats_.bad_accesses++;
  };
  if (off == kCommonDeviceFeatureSelect && len == 4) {
    device_feature_select_ = static_cast<uint32_t>(v);
  } else if (off == kCommonDriverFeatureSelect && len == 4) {
    driver_feature_select_ = static_cast<uint32_t>(v);
  } else if (off == kCommonDriverFeature && len == 4) {
    if ((status_ & kStatusFeaturesOk) || driver_feature_select_ >= 2) {
      stats_.bad_accesses++;
      return;
    }
    int shift = 32 * static_cast<int>(driver_feature_select_);
    driver_features_ = (driver_features_ & ~(0xffffffffull << shift)) | v << shift;
  } else if (off == kCommonMsixConfig && len == 2) {
    std::lock_guard<std::mutex> lock(msix_mu_);
    config_vector_ = v < msix_.size() ? static_cast<uint16_t>(v) : kMsixNoVector;
  } else if (off == kCommonDeviceStatus && len == 1) {
    WriteStatus(static_cast<uint8_t>(v));
  } else if (off == kCommonQueueSelect && len == 2) {
    queue_select_ = static_cast<uint16_t>(v);
  } else if (off == kCommonQueueMsixVector && len == 2) {
    if (q == nullptr) return;
    std::lock_guard<std::mutex> lock(msix_mu_);
    queue_vectors_[queue_select_] = v < msix_.size() ? static_cast<uint16_t>(v) : kMsixNoVector;
    SyncRoutesLocked();
  } else if (q == nullptr || !configurable) {
    stats_.bad_accesses++;  // per-queue registers need a valid queue_select and a device not yet live
  } else if (off == kCommonQueueSize && len == 2) {
    q->state().size = static_cast<uint16_t>(v);  // validated at DRIVER_OK
  } else if (off == kCommonQueueEnable && len == 2) {
    if (v == 1) q->state().ready = true;
  } else if (off >= kCommonQueueDesc && off < kCommonQueueDriver) {
    set_half(&q->state().desc_gpa, kCommonQueueDesc);
  } else if (off >= kCommonQueueDriver && off < kCommonQueueDevice) {
    set_half(&q->state().avail_gpa, kCommonQueueDriver);
  } else if (off >= kCommonQueueDevice && off < kCommonCfgBytes) {
    set_half(&q->state().used_gpa, kCommonQueueDevice);
  } else {
    stats_.bad_accesses++;
  }
}

void VirtioPciTransport::WriteStatus(uint8_t value) {
  if (value == 0) {
    ResetLocked();
    return;
  }
  if ((status_ & ~value) != 0) {  // only a reset may clear bits
    stats_.bad_accesses++;
    return;
  }
  uint8_t added = static_cast<uint8_t>(value & ~status_);
  if (added & kStatusFeaturesOk) {
    bool ok = (driver_features_ & kFeatureVersion1) && (driver_features_ & ~device_features_) == 0 &&
              device_->AcceptFeatures(driver_features_);
    if (!ok) {
      stats_.features_refused++;
      value = static_cast<uint8_t>(value & ~kStatusFeaturesOk);
    }
  }
  status_ = value;
  if ((added & kStatusDriverOk) && !needs_reset_) ActivateLocked();
}

void VirtioPciTransport::ActivateLocked() {
  const char* why = nullptr;
  if (!(status_ & kStatusFeaturesOk)) why = "driver-ok-without-features-ok";
  ActivateContext ctx;
  ctx.mem = mem_;
  ctx.acked_features = driver_features_;
  ctx.irq = this;
  ctx.paused = quiesced_;
  for (SplitQueue& q : queues_) {
    q.set_event_idx((driver_features_ & kFeatureEventIdx) != 0);
    QueueError e = q.state().ready ? q.Validate(*mem_) : QueueError::kNone;
    if (why == nullptr && e != QueueError::kNone) why = QueueErrorName(e);
    ctx.queues.push_back(&q);
  }
  if (why == nullptr && !device_->Activate(ctx).ok()) why = "device-activate";
  if (why != nullptr) {
    stats_.activate_failed++;
    broken_reason_ = why;
    needs_reset_ = true;
    if (listener_ != nullptr) listener_->OnBroken(why);
    return;
  }
  active_ = true;
  if (quiesced_) device_->Quiesce();  // a paused machine (a restore before Resume): requests wait
}

void VirtioPciTransport::ResetLocked() {
  if (active_) device_->Reset();  // returns with the workers idle: nothing touches the queues any more
  active_ = false;
  for (SplitQueue& q : queues_) q.Reset();
  status_ = 0;
  device_feature_select_ = driver_feature_select_ = 0;
  driver_features_ = 0;
  queue_select_ = 0;
  needs_reset_ = false;
  broken_reason_ = "";
  std::lock_guard<std::mutex> lock(msix_mu_);
  config_vector_ = kMsixNoVector;
  for (uint16_t& v : queue_vectors_) v = kMsixNoVector;
  isr_ = 0;
  SyncRoutesLocked();
}

uint64_t VirtioPciTransport::bar_address() {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.BarAddress(0);
}

uint8_t VirtioPciTransport::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint8_t>(status_ | (needs_reset_ ? kStatusNeedsReset : 0));
}

uint64_t VirtioPciTransport::acked_features() {
  std::lock_guard<std::mutex> lock(mu_);
  return driver_features_;
}

TransportStats VirtioPciTransport::stats() const {
  TransportStats s;
  s.notifies = stats_.notifies;
  s.interrupts = stats_.interrupts;
  s.interrupts_masked = stats_.interrupts_masked;
  s.interrupts_dropped = stats_.interrupts_dropped;
  s.features_refused = stats_.features_refused;
  s.activate_failed = stats_.activate_failed;
  s.broken = stats_.broken;
  s.bad_accesses = stats_.bad_accesses;
  return s;
}

}  // namespace kvmts::devices::virtio
