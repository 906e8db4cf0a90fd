// VirtioPciTransport::Save / Restore; the blob layout is at the top of virtio_pci.cc.
#include <cerrno>
#include <cstring>

#include "devices/virtio/byte_io.h"
#include "devices/virtio/virtio_pci.h"

namespace kvmts::devices::virtio {

namespace {

constexpr uint8_t kSaveVersion = 1;

Error RestoreError(const char* why) { return Error{EINVAL, "virtio-restore", why}; }

struct SavedQueue {
  QueueState state;
  uint16_t vector = kMsixNoVector;
};

}  // namespace

void VirtioPciTransport::Quiesce() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ && !quiesced_) device_->Quiesce();  // in-flight requests complete; the workers park until Resume
  quiesced_ = true;
}

void VirtioPciTransport::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ && quiesced_) device_->Resume();
  quiesced_ = false;
}

std::vector<uint8_t> VirtioPciTransport::Save() {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_ && !quiesced_) device_->Quiesce();
  quiesced_ = true;
  ByteWriter w;
  w.U8(kSaveVersion);
  w.U16(device_->device_type());
  w.U16(queue_count_);
  w.U64(device_features_);
  w.Raw(config_.bytes(), kPciConfigBytes);
  w.U8(status_);
  w.U8(config_generation_);
  w.U8(needs_reset_ ? 1 : 0);
  std::lock_guard<std::mutex> irq_lock(msix_mu_);
  w.U8(isr_);
  w.U32(device_feature_select_);
  w.U32(driver_feature_select_);
  w.U64(driver_features_);
  w.U16(queue_select_);
  w.U16(config_vector_);
  for (uint16_t i = 0; i < queue_count_; ++i) {
    const QueueState& s = queues_[i].state();
    w.U16(s.size);
    w.U8(s.ready ? 1 : 0);
    w.U64(s.desc_gpa);
    w.U64(s.avail_gpa);
    w.U64(s.used_gpa);
    w.U16(s.next_avail);
    w.U16(s.next_used);
    w.U16(s.signalled_used);
    w.U8(s.signalled_valid ? 1 : 0);
    w.U16(queue_vectors_[i]);
  }
  w.Blob(msix_.Save());
  w.Blob(device_->SaveState());
  return w.Take();
}

Status VirtioPciTransport::Restore(const uint8_t* data, size_t len) {
  ByteReader r(data, len);
  if (r.U8() != kSaveVersion) return RestoreError("unsupported version");
  if (r.U16() != device_->device_type()) return RestoreError("device type differs");
  if (r.U16() != queue_count_) return RestoreError("queue count differs");
  if (r.U64() != device_features_) return RestoreError("offered features differ");
  const uint8_t* config = r.Raw(kPciConfigBytes);
  uint8_t status = r.U8();
  uint8_t generation = r.U8();
  bool needs_reset = r.U8() != 0;
  uint8_t isr = r.U8();
  uint32_t dev_select = r.U32(), drv_select = r.U32();
  uint64_t driver_features = r.U64();
  uint16_t queue_select = r.U16(), config_vector = r.U16();
  std::vector<SavedQueue> saved(queue_count_);
  for (SavedQueue& q : saved) {
    q.state.size = r.U16();
    q.state.ready = r.U8() != 0;
    q.state.desc_gpa = r.U64();
    q.state.avail_gpa = r.U64();
    q.state.used_gpa = r.U64();
    q.state.next_avail = r.U16();
    q.state.next_used = r.U16();
    q.state.signalled_used = r.U16();
    q.state.signalled_valid = r.U8() != 0;
    q.vector = r.U16();
  }
  size_t msix_len = 0, dev_len = 0;
  const uint8_t* msix_blob = r.Blob(&msix_len);
  const uint8_t* dev_blob = r.Blob(&dev_len);
  if (r.failed() || !r.at_end()) return RestoreError("truncated or oversized blob");
  // Before FEATURES_OK the driver's bits are only a proposal (any bits); once accepted they are a subset.
  if ((status & kStatusFeaturesOk) && (driver_features & ~device_features_) != 0) {
    return RestoreError("acked features not offered");
  }
  MsixTable msix(msix_.size());
  if (!msix.Restore(msix_blob, msix_len)) return RestoreError("bad MSI-X state");
  for (const SavedQueue& q : saved) {
    if (q.vector != kMsixNoVector && q.vector >= msix_.size()) return RestoreError("bad queue vector");
  }
  if (config_vector != kMsixNoVector && config_vector >= msix_.size()) return RestoreError("bad config vector");

  std::lock_guard<std::mutex> lock(mu_);
  if (active_) device_->Reset();
  active_ = false;
  if (!device_->RestoreState(dev_blob, dev_len)) {
    needs_reset_ = true;  // the device was reset above: it must not look live
    return RestoreError("bad device state");
  }
  config_.SetBytes(config);
  SyncNotifyLocked();  // the BAR and the command register came with the config space
  status_ = status;
  config_generation_ = generation;
  needs_reset_ = needs_reset;
  device_feature_select_ = dev_select;
  driver_feature_select_ = drv_select;
  driver_features_ = driver_features;
  queue_select_ = queue_select;
  {
    std::lock_guard<std::mutex> irq_lock(msix_mu_);
    isr_ = isr;
    config_vector_ = config_vector;
    msix_ = msix;
    for (uint16_t i = 0; i < queue_count_; ++i) {
      queues_[i].Reset();
      queues_[i].set_state(saved[i].state);
      queue_vectors_[i] = saved[i].vector;
    }
    SyncRoutesLocked();
  }
  if ((status_ & kStatusDriverOk) && !needs_reset_) {
    ActivateLocked();
    // Kicks that arrived while the machine was stopped are lost: look at every ready queue once.
    for (uint16_t i = 0; active_ && i < queue_count_; ++i) {
      if (queues_[i].state().ready) device_->QueueNotify(i);
    }
  }
  return OkStatus();
}

}  // namespace kvmts::devices::virtio
