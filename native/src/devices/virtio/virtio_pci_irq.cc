// VirtioPciTransport, the paths around the register file (see virtio_pci.h): interrupts from the device's workers
// (ISR bits, MSI-X delivery or pending bits, NEEDS_RESET) and the binding of the notify addresses to the device's
// kick eventfds.
//
//   SignalQueue(q) / SignalConfig()  -> ISR |= bit -> MSI-X on and vector set? -> MsixTable::Signal (sent, or PBA)
//                                                    otherwise: counted as dropped (no INTx pin)
//   MarkBroken(why)                  -> NEEDS_RESET reads back set, why kept, config interrupt, listener told
//   BindQueueEventfd(q, fd) and every MSI-X change (enable/function mask, a table write, a queue's vector, reset,
//   restore) -> SyncRoutesLocked: fd attached to the router (irqfd: KVM raises the vector itself) while q's vector
//                                    is deliverable, detached while not (the device's relay then sees the signal
//                                    and SignalQueue leaves it pending)
//   command.MEM or BAR0 changes      -> NotifyRegistrar: remove old BAR0 + 0x6000 + 4 q, add the new one
#include "devices/virtio/virtio_pci.h"

namespace kvmts::devices::virtio {

void VirtioPciTransport::Deliver(uint16_t vector) {
  if (!msix_.enabled() || vector == kMsixNoVector) {
    stats_.interrupts_dropped++;  // no INTx pin: the ISR bit is all the driver can see
    return;
  }
  if (msix_.Signal(vector, msi_)) {
    stats_.interrupts++;
  } else {
    stats_.interrupts_masked++;
  }
}

void VirtioPciTransport::SignalQueue(uint16_t q) {
  if (q >= queue_count_) return;
  std::lock_guard<std::mutex> lock(msix_mu_);
  isr_ |= kIsrQueue;
  Deliver(queue_vectors_[q]);
}

void VirtioPciTransport::BindQueueEventfd(uint16_t q, int fd) {
  if (q >= queue_count_) return;
  std::lock_guard<std::mutex> lock(msix_mu_);
  if (queue_routed_[q] && queue_eventfds_[q] != fd) {
    router_->Detach(queue_eventfds_[q]);
    queue_routed_[q] = 0;
    device_->QueueEventfdRouted(q, false);
  }
  queue_eventfds_[q] = fd;
  SyncRoutesLocked();
}

void VirtioPciTransport::SyncRoutesLocked() {
  if (router_ == nullptr) return;
  for (uint16_t q = 0; q < queue_count_; ++q) {
    int fd = queue_eventfds_[q];
    if (fd < 0) continue;
    uint16_t v = queue_vectors_[q];
    uint8_t was = queue_routed_[q];
    if (v != kMsixNoVector && msix_.Deliverable(v)) {
      queue_routed_[q] = router_->Attach(fd, msix_.Address(v), msix_.Data(v)) ? 1 : 0;
    } else if (queue_routed_[q]) {
      router_->Detach(fd);
      queue_routed_[q] = 0;
    }
    if (queue_routed_[q] != was) device_->QueueEventfdRouted(q, queue_routed_[q] != 0);
  }
}

void VirtioPciTransport::SignalConfig() {
  std::lock_guard<std::mutex> lock(msix_mu_);
  isr_ |= kIsrConfig;
  Deliver(config_vector_);
}

void VirtioPciTransport::MarkBroken(const char* why) {
  stats_.broken++;
  broken_reason_ = why;
  needs_reset_ = true;
  SignalConfig();
  if (listener_ != nullptr) listener_->OnBroken(why);
}

void VirtioPciTransport::SetNotifyRegistrar(NotifyRegistrar* registrar) {
  std::lock_guard<std::mutex> lock(mu_);
  if (registrar_ != nullptr && notify_base_ != 0) {
    for (uint16_t q = 0; q < queue_count_; ++q) {
      int fd = device_->QueueKickFd(q);
      if (fd >= 0) registrar_->RemoveNotify(notify_base_ + kNotifyOffset + uint64_t{kNotifyOffMultiplier} * q, fd);
    }
  }
  notify_base_ = 0;
  registrar_ = registrar;
  SyncNotifyLocked();
}

void VirtioPciTransport::SyncNotifyLocked() {
  if (registrar_ == nullptr) return;
  uint64_t want = (config_.command() & kPciCommandMemory) ? config_.BarAddress(0) : 0;
  if (want == notify_base_) return;
  for (uint16_t q = 0; q < queue_count_; ++q) {
    int fd = device_->QueueKickFd(q);
    if (fd < 0) continue;
    uint64_t off = kNotifyOffset + uint64_t{kNotifyOffMultiplier} * q;
    if (notify_base_ != 0) registrar_->RemoveNotify(notify_base_ + off, fd);
    if (want != 0) registrar_->AddNotify(want + off, fd);
  }
  notify_base_ = want;
}

}  // namespace kvmts::devices::virtio
