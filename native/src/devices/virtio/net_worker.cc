// VirtioNet's worker thread: activation, kicks, both queues, quiesce/resume and reset (see net.h).
//
//   state     waits in                                        wakes on                then
//   idle      poll(ctl, rx kick, tx kick[, backend POLLIN])   a kick or a frame       busy = true, serves the queues
//   serving   -                                               -                       transmit until empty, receive
//                                                                                     until the backend or the ring
//                                                                                     runs dry (at most kRxBatch)
//   paused    poll(ctl) only                                  Resume                  idle, or serving at once when a
//                                                                                     batch was interrupted
//   stopped   -                                               -                       the thread has exited
// The locking is blk's (blk_worker.cc): pause_/stop_ change under mu_, the worker re-reads them under mu_ before it
// sets busy_, so Quiesce (pause_ = true, wait !busy_) returns only when no chain is in hand or will be taken.
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include "devices/virtio/eventfd.h"
#include "devices/virtio/net.h"

namespace kvmts::devices::virtio {

namespace {

// Frames moved into the guest per turn before the transmit side and the control eventfd get a look.
constexpr uint32_t kRxBatch = 256;

}  // namespace

Status VirtioNet::Activate(const ActivateContext& ctx) {
  if (worker_.joinable() || ctx.queues.size() != 2 || ctx.mem == nullptr || ctx.irq == nullptr) {
    return Error{EINVAL, "virtio-net", "activate"};
  }
  ctx_ = ctx;
  mrg_rxbuf_ = (ctx.acked_features & kNetFeatureMrgRxbuf) != 0;
  SetBackendOffloads(ctx.acked_features);
  busy_ = false;
  again_ = true;  // look at both queues once: a restored device has no kick for what was queued before
  stop_ = false;
  pause_ = ctx.paused;
  broken_ = false;
  rx_starved_ = false;
  vhost_failed_ = false;
  vhost_running_ = false;
  DrainEventfd(ctl_fd_);
  if (!ctx.paused && WantVhost()) {  // paused: Resume starts it
    Status err = OkStatus();
    if (!StartVhost(&err) && !err.ok()) {
      ctx_ = ActivateContext{};
      return err;
    }
  }
  if (!options_.inline_io) worker_ = std::thread([this] { WorkerLoop(); });
  return OkStatus();
}

bool VirtioNet::WantVhost() const {
  return options_.vhost != VhostMode::kOff && !options_.tap.empty() && !options_.inline_io && !vhost_failed_ &&
         !dirty_tracking_ && ctx_.mem != nullptr && !broken_;
}

bool VirtioNet::StartVhost(Status* err) {
  Status st = OkStatus();
  if (vhost_ == nullptr) {
    auto opened = VhostNet::Open();
    if (opened.ok()) {
      vhost_ = std::move(opened.value());
    } else {
      st = opened.error();
    }
  }
  if (vhost_ != nullptr) {
    // The guest now lives behind this tap (a restore): announce it before vhost takes the tap.
    if (announce_) {
      announce_ = false;
      Announce();
    }
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      vhost_base_ = ReadTapCounters(ifname_);
    }
    st = vhost_->Start(*ctx_.mem, ctx_.queues, ctx_.acked_features, kick_fd_, fd_);
  }
  if (!st.ok()) {
    vhost_failed_ = true;
    counters_.vhost_fallbacks++;
    if (options_.vhost == VhostMode::kOn) *err = st;
    return false;
  }
  if (pending_len_ != 0) {  // a frame the userspace path held for the guest: vhost reads the tap itself
    pending_len_ = 0;
    counters_.rx_dropped++;
  }
  // vhost's interrupts straight into KVM where the machine routes them (irqfd); the worker relays the rest.
  for (uint16_t q = 0; q < 2; ++q) ctx_.irq->BindQueueEventfd(q, vhost_->call_fd(q));
  // Look at both rings once: what the driver queued before vhost took them came with kicks vhost never saw.
  SignalEventfd(kick_fd_[kNetRxQueue]);
  SignalEventfd(kick_fd_[kNetTxQueue]);
  counters_.vhost_starts++;
  std::lock_guard<std::mutex> lock(mu_);
  vhost_running_ = true;
  return true;
}

void VirtioNet::SetDirtyTracking(bool on) {
  std::lock_guard<std::mutex> mode(mode_mu_);
  dirty_tracking_ = on;
  if (!worker_.joinable()) return;  // not active: Activate looks at the flag
  bool running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pause_) return;  // parked by the transport: Resume picks the path
    running = vhost_running_;
  }
  if (running == WantVhost()) return;
  QuiesceLocked();
  ResumeLocked();
}

void VirtioNet::QueueNotify(uint16_t q) {
  if (!options_.inline_io) {
    if (q < 2) SignalEventfd(kick_fd_[q]);
    return;
  }
  if (ctx_.mem == nullptr || pause_ || q >= 2) return;  // not active, or parked: the driver's next kick serves it
  if (announce_) {
    announce_ = false;
    Announce();
  }
  if (q == kNetTxQueue) {
    ProcessTx();
  } else {
    rx_starved_ = false;
    ProcessRx();
  }
}

void VirtioNet::Reset() {
  // The next driver may take no offloads: plain frames from here on (a frame already read keeps its header).
  if (ctx_.mem != nullptr) SetBackendOffloads(0);
  if (!worker_.joinable()) {
    ctx_ = ActivateContext{};  // inline mode (or never activated): nothing runs
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  SignalEventfd(ctl_fd_);
  worker_.join();
  if (vhost_ != nullptr && vhost_->started()) {
    for (uint16_t q = 0; q < 2; ++q) ctx_.irq->BindQueueEventfd(q, -1);
    (void)vhost_->Stop(*ctx_.mem, ctx_.queues);  // the rings are reset anyway
    FoldVhostCounters();
  }
  vhost_running_ = false;
  ctx_ = ActivateContext{};
  pause_ = false;
  DrainEventfd(kick_fd_[0]);
  DrainEventfd(kick_fd_[1]);
}

void VirtioNet::Quiesce() {
  std::lock_guard<std::mutex> mode(mode_mu_);
  QuiesceLocked();
}

void VirtioNet::Resume() {
  std::lock_guard<std::mutex> mode(mode_mu_);
  ResumeLocked();
}

void VirtioNet::QuiesceLocked() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    pause_ = true;
    SignalEventfd(ctl_fd_);
    idle_cv_.wait(lock, [this] { return !busy_; });
    if (!vhost_running_) return;
    vhost_running_ = false;
  }
  // Take the rings back from vhost (their positions land in the SplitQueues), then pass on the interrupts it asked
  // for and the worker had not relayed yet: the driver must not wait for a completion it was never told of.
  for (uint16_t q = 0; q < 2; ++q) ctx_.irq->BindQueueEventfd(q, -1);
  if (!vhost_->Stop(*ctx_.mem, ctx_.queues).ok()) counters_.vhost_fallbacks++;
  FoldVhostCounters();
  for (uint16_t q = 0; q < 2; ++q) {
    if (DrainEventfd(vhost_->call_fd(q))) ctx_.irq->SignalQueue(q);
  }
  again_ = true;  // kicks vhost consumed are gone: the userspace path (or the next vhost start) looks once
}

void VirtioNet::ResumeLocked() {
  if (worker_.joinable() && !vhost_running_ && WantVhost()) {
    Status err = OkStatus();
    (void)StartVhost(&err);  // a failure leaves the userspace path (kOn included: the device is running already)
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pause_ = false;
  }
  SignalEventfd(ctl_fd_);
}

void VirtioNet::QueueEventfdRouted(uint16_t q, bool routed) {
  if (q >= 2) return;
  irq_routed_[q] = routed;
  SignalEventfd(ctl_fd_);  // the relay polls what is not routed: let it look again
}

void VirtioNet::RelayVhost(bool paused) {
  // A routed call eventfd is KVM's (it consumes each signal): polling it too would only wake this thread for
  // nothing. -1 entries are skipped by poll.
  int call0 = irq_routed_[0] ? -1 : vhost_->call_fd(0), call1 = irq_routed_[1] ? -1 : vhost_->call_fd(1);
  pollfd fds[4] = {{ctl_fd_, POLLIN, 0}, {call0, POLLIN, 0}, {call1, POLLIN, 0}, {vhost_->err_fd(), POLLIN, 0}};
  int n = poll(fds, paused ? 1 : 4, -1);
  if (n <= 0) return;  // EINTR; anything else cannot happen with valid fds
  if (fds[0].revents & POLLIN) DrainEventfd(ctl_fd_);
  if (paused) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || pause_ || !vhost_running_) return;  // Quiesce relays what is left
    busy_ = true;
  }
  for (uint16_t q = 0; q < 2; ++q) {
    if ((fds[1 + q].revents & POLLIN) && DrainEventfd(vhost_->call_fd(q))) ctx_.irq->SignalQueue(q);
  }
  if ((fds[3].revents & POLLIN) && DrainEventfd(vhost_->err_fd()) && !broken_) Broken("vhost");  // a ring vhost refused
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  idle_cv_.notify_all();
}

void VirtioNet::WorkerLoop() {
  // SCHED_BATCH: a kick, a frame or vhost's interrupt wakes the worker without preempting a running vCPU thread on
  // the same CPU (net.h; relaying vhost's interrupts at once cost a quarter of guest -> host in the nested lane).
  // Refused (a sandbox without sched_setscheduler): the worker stays SCHED_OTHER and merely batches less.
  sched_param normal{};
  (void)sched_setscheduler(0, SCHED_BATCH, &normal);
  for (;;) {
    bool paused, again, relay;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      paused = pause_;
      again = again_ && !paused;
      relay = vhost_running_;
    }
    if (relay) {
      RelayVhost(paused);
      continue;
    }
    bool tx = again, rx = again;
    if (!again) {
      bool want_frames = !paused && !rx_starved_ && !backend_dead_ && !broken_;
      pollfd fds[4] = {{ctl_fd_, POLLIN, 0}, {kick_fd_[0], POLLIN, 0}, {kick_fd_[1], POLLIN, 0}, {fd_, POLLIN, 0}};
      int n = poll(fds, paused ? 1 : (want_frames ? 4 : 3), -1);
      if (n < 0 && errno != EINTR) return;  // cannot happen with valid fds; Reset still joins
      if (n > 0 && (fds[0].revents & POLLIN)) DrainEventfd(ctl_fd_);
      if (!paused && n > 0) {
        if ((fds[1].revents & POLLIN) && DrainEventfd(kick_fd_[0])) {
          rx = true;
          rx_starved_ = false;
        }
        tx = (fds[2].revents & POLLIN) && DrainEventfd(kick_fd_[1]);
        if (want_frames && (fds[3].revents & POLLIN)) rx = true;
        if (want_frames && (fds[3].revents & (POLLERR | POLLHUP | POLLNVAL)) && !(fds[3].revents & POLLIN)) {
          backend_dead_ = true;  // a peer that hung up would wake poll forever
        }
      }
    }
    if (!tx && !rx) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      if (pause_) {  // a pause raced the wake: keep it for Resume
        again_ = true;
        continue;
      }
      busy_ = true;
      again_ = false;
    }
    if (announce_) {
      announce_ = false;
      Announce();
    }
    bool interrupted = tx && ProcessTx();
    if (!interrupted && rx) interrupted = ProcessRx();
    {
      std::lock_guard<std::mutex> lock(mu_);
      again_ = again_ || interrupted;
      busy_ = false;
    }
    idle_cv_.notify_all();
  }
}

bool VirtioNet::ProcessTx() {
  SplitQueue& queue = *ctx_.queues[kNetTxQueue];
  GuestAccess& mem = *ctx_.mem;
  if (!queue.state().ready || broken_) return false;
  std::vector<iovec> iov;
  for (;;) {
    DescriptorChain chain;
    QueueError err = QueueError::kNone;
    uint32_t added = 0;
    bool interrupted = false;
    const char* why = nullptr;
    while (!(interrupted = stop_ || pause_) && queue.Pop(mem, &chain, &err)) {
      uint64_t bytes = 0;
      if (NetChainError e = TxPacketIovecs(mem, chain, &iov, &bytes); e != NetChainError::kNone) {
        why = NetChainErrorName(e);
        break;
      }
      if (!options_.vnet_hdr) SkipIovecBytes(&iov, kNetHdrBytes);
      ssize_t n = -1;
      if (!backend_dead_ && iov.size() <= IOV_MAX) {
        // SAFETY: every iovec was bounds-checked by HostPtr; the guest may race on the buffers, which only hurts it.
        do n = writev(fd_, iov.data(), static_cast<int>(iov.size()));
        while (n < 0 && errno == EINTR);
      }
      if (n < 0) {
        counters_.tx_errors++;  // dropped, as a full or refusing link drops: the guest's stack retransmits
      } else {
        counters_.tx_frames++;
        counters_.tx_bytes += bytes - kNetHdrBytes;
      }
      if (QueueError e = queue.AddUsed(mem, chain.head, 0); e != QueueError::kNone) {
        why = QueueErrorName(e);
        break;
      }
      added++;
    }
    if (why == nullptr && err != QueueError::kNone) why = QueueErrorName(err);
    if (added > 0 && queue.NeedsNotification(mem)) ctx_.irq->SignalQueue(kNetTxQueue);
    if (why != nullptr) {
      Broken(why);
      return false;
    }
    if (interrupted) return true;
    if (!queue.EnableNotification(mem)) return false;
  }
}

bool VirtioNet::ReadFrame() {
  if (backend_dead_) return false;
  // Frames shorter than a virtio header (a backend without vnet headers never sends one) are skipped; a few per
  // turn at most, so a misbehaving backend cannot hold the worker.
  for (int tries = 0; tries < 8; ++tries) {
    size_t off = options_.vnet_hdr ? 0 : kNetHdrBytes;
    ssize_t n;
    do n = read(fd_, pending_.data() + off, pending_.size() - off);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) backend_dead_ = true;
      return false;
    }
    if (n == 0) {  // end of file: a socket's peer is gone (a tap never reads 0 bytes); polling it would spin
      backend_dead_ = true;
      return false;
    }
    size_t len = off + static_cast<size_t>(n);
    if (len < kNetHdrBytes) continue;
    if (!options_.vnet_hdr) std::fill(pending_.begin(), pending_.begin() + kNetHdrBytes, 0);
    pending_[kNetHdrNumBuffersOffset] = 1;  // le16 num_buffers = 1: one chain per packet (no MRG_RXBUF)
    pending_[kNetHdrNumBuffersOffset + 1] = 0;
    pending_len_ = len;
    return true;
  }
  return false;
}

VirtioNet::RxTake VirtioNet::TakeRxChains(SplitQueue& queue, GuestAccess& mem, size_t need, const char** why) {
  rx_chains_.clear();
  uint64_t room = 0;
  while (room < need && rx_chains_.size() < queue.state().size) {
    DescriptorChain chain;
    QueueError err = QueueError::kNone;
    if (!queue.Pop(mem, &chain, &err)) {
      if (err != QueueError::kNone) {
        *why = QueueErrorName(err);
        return RxTake::kBroken;
      }
      // Too few buffers for this frame yet: give them back and wait for the driver to post more than these.
      rx_posted_ = queue.state().next_avail;  // = avail.idx as Pop just read it
      queue.Unpop(static_cast<uint16_t>(rx_chains_.size()));
      rx_chains_.clear();
      return RxTake::kWait;
    }
    room += chain.writable_bytes;
    rx_chains_.push_back(std::move(chain));
  }
  return RxTake::kReady;  // enough room, or a whole ring that is not: the frame is cut (counted)
}

int VirtioNet::PlaceFrame(SplitQueue& queue, GuestAccess& mem, const char** why) {
  bool truncated = false;
  rx_used_.clear();
  if (mrg_rxbuf_) {
    RxTake take = TakeRxChains(queue, mem, pending_len_, why);
    if (take != RxTake::kReady) return take == RxTake::kWait ? 0 : -1;
    if (NetChainError e = WriteRxPacketMergeable(mem, rx_chains_, pending_.data(), pending_len_, &rx_used_, &truncated);
        e != NetChainError::kNone) {
      *why = NetChainErrorName(e);
      return -1;
    }
    queue.Unpop(static_cast<uint16_t>(rx_chains_.size() - rx_used_.size()));  // taken, then not needed
  } else {
    DescriptorChain chain;
    QueueError err = QueueError::kNone;
    if (!queue.Pop(mem, &chain, &err)) {
      *why = err != QueueError::kNone ? QueueErrorName(err) : nullptr;
      return err != QueueError::kNone ? -1 : 0;
    }
    uint32_t used = 0;
    if (NetChainError e = WriteRxPacket(mem, chain, pending_.data(), pending_len_, &used, &truncated);
        e != NetChainError::kNone) {
      *why = NetChainErrorName(e);
      return -1;
    }
    rx_chains_.assign(1, std::move(chain));
    rx_used_.assign(1, used);
  }
  for (size_t i = 0; i < rx_used_.size(); ++i) {
    if (QueueError e = queue.AddUsed(mem, rx_chains_[i].head, rx_used_[i]); e != QueueError::kNone) {
      *why = QueueErrorName(e);
      return -1;
    }
  }
  counters_.rx_frames++;
  counters_.rx_bytes += pending_len_ - kNetHdrBytes;
  if (truncated) counters_.rx_truncated++;
  pending_len_ = 0;
  return 1;
}

bool VirtioNet::ProcessRx() {
  SplitQueue& queue = *ctx_.queues[kNetRxQueue];
  GuestAccess& mem = *ctx_.mem;
  if (!queue.state().ready || broken_) {
    rx_starved_ = true;  // nowhere to put frames: leave them with the kernel until the driver kicks
    return false;
  }
  uint32_t added = 0;
  bool interrupted = false;
  const char* why = nullptr;
  for (;;) {
    if (stop_ || pause_ || added == kRxBatch) {
      interrupted = true;
      break;
    }
    if (pending_len_ == 0 && !ReadFrame()) break;
    int placed = PlaceFrame(queue, mem, &why);
    if (placed < 0) break;
    if (placed == 0) {
      // Re-arm kicks for more buffers (MRG_RXBUF: past those posted, which are too few); some arrived meanwhile:
      // try again.
      if (mrg_rxbuf_ ? queue.EnableNotificationAfter(mem, rx_posted_) : queue.EnableNotification(mem)) continue;
      rx_starved_ = true;
      break;
    }
    added++;
  }
  if (added > 0 && queue.NeedsNotification(mem)) ctx_.irq->SignalQueue(kNetRxQueue);
  if (why != nullptr) {
    Broken(why);
    return false;
  }
  return interrupted;
}

}  // namespace kvmts::devices::virtio
