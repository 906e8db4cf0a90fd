// VirtioBlock's worker thread: activation, kicks, the queue loop, quiesce/resume and reset (see blk.h).
//
//   state     waits in                          wakes on                      then
//   idle      poll(kick eventfd, ctl eventfd)   a kick (QueueNotify or KVM)   busy = true, serves the queue
//   serving   -                                 -                             pops, runs and completes chains (an
//                                                                             interrupt per completion the driver
//                                                                             asked for) until the ring is empty, a
//                                                                             pause or stop is asked, or a chain
//                                                                             breaks the protocol
//   paused    poll(ctl eventfd) only            Resume (kicks accumulate in   idle (a pending kick or an interrupted
//                                               the eventfd counter)          batch is served at once)
//   stopped   -                                 -                             the thread has exited (Reset joined it)
// pause_/stop_ change under mu_ and are followed by a ctl signal; the worker re-reads them under mu_ before it
// sets busy_, so Quiesce (pause_ = true, wait !busy_) returns only when no chain is in hand or will be taken.
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "devices/virtio/blk.h"
#include "devices/virtio/eventfd.h"

namespace kvmts::devices::virtio {

Status VirtioBlock::Activate(const ActivateContext& ctx) {
  if (worker_.joinable() || ctx.queues.size() != 1 || ctx.mem == nullptr || ctx.irq == nullptr) {
    return Error{EINVAL, "virtio-blk", "activate"};
  }
  ctx_ = ctx;
  busy_ = false;
  again_ = false;
  stop_ = false;
  pause_ = ctx.paused;
  broken_ = false;
  DrainEventfd(ctl_fd_);
  worker_ = std::thread([this] { WorkerLoop(); });
  return OkStatus();
}

void VirtioBlock::QueueNotify(uint16_t q) {
  if (q == 0) SignalEventfd(kick_fd_);
}

void VirtioBlock::Reset() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  SignalEventfd(ctl_fd_);
  worker_.join();
  ctx_ = ActivateContext{};
  pause_ = false;
  DrainEventfd(kick_fd_);  // kicks of the old driver session mean nothing to the next one
}

void VirtioBlock::Quiesce() {
  std::unique_lock<std::mutex> lock(mu_);
  pause_ = true;
  SignalEventfd(ctl_fd_);
  idle_cv_.wait(lock, [this] { return !busy_; });
}

void VirtioBlock::Resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pause_ = false;
  }
  SignalEventfd(ctl_fd_);
}

void VirtioBlock::WorkerLoop() {
  for (;;) {
    bool paused, again;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      paused = pause_;
      again = again_ && !paused;
    }
    bool kicked = again;
    if (!again) {
      pollfd fds[2] = {{ctl_fd_, POLLIN, 0}, {kick_fd_, POLLIN, 0}};
      int n = poll(fds, paused ? 1 : 2, -1);
      if (n < 0 && errno != EINTR) return;  // cannot happen with valid fds; Reset still joins
      if (n > 0 && (fds[0].revents & POLLIN)) DrainEventfd(ctl_fd_);
      if (!paused && n > 0 && (fds[1].revents & POLLIN)) kicked = DrainEventfd(kick_fd_);
    }
    if (!kicked) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      if (pause_) {  // a pause raced the kick: keep it for Resume
        again_ = true;
        continue;
      }
      busy_ = true;
      again_ = false;
    }
    bool interrupted = ProcessQueue(0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      again_ = again_ || interrupted;
      busy_ = false;
    }
    idle_cv_.notify_all();
  }
}

bool VirtioBlock::ProcessQueue(uint16_t q) {
  SplitQueue& queue = *ctx_.queues[q];
  GuestAccess& mem = *ctx_.mem;
  if (!queue.state().ready || broken_) return false;
  for (;;) {
    DescriptorChain chain;
    QueueError err = QueueError::kNone;
    uint32_t added = 0;
    bool interrupted = false;
    const char* broken_why = nullptr;
    while (!(interrupted = stop_ || pause_) && queue.Pop(mem, &chain, &err)) {
      uint32_t used_len = 0;
      if (!HandleChain(mem, chain, ctx_.acked_features, &used_len)) {
        broken_why = "blk-request";
        break;
      }
      if (QueueError e = queue.AddUsed(mem, chain.head, used_len); e != QueueError::kNone) {
        broken_why = QueueErrorName(e);
        break;
      }
      added++;
      // Each completion is offered to the driver at once, not at the end of the batch: with a vCPU free to take
      // it, the guest completes and resubmits while this thread runs the next request (a QD32 batch of 1 MiB
      // reads otherwise leaves the device idle while the guest turns the whole batch around). EVENT_IDX keeps it
      // to one interrupt until the driver has caught up (used_event), so a busy queue still batches.
      if (queue.NeedsNotification(mem)) {
        counters_.interrupts++;
        ctx_.irq->SignalQueue(q);
      }
    }
    if (broken_why == nullptr && err != QueueError::kNone) broken_why = QueueErrorName(err);
    if (added > 0) counters_.batches++;
    if (broken_why != nullptr) {
      broken_ = true;
      counters_.broken++;
      ctx_.irq->MarkBroken(broken_why);
      return false;
    }
    if (interrupted) return true;
    // Empty: re-arm kicks, then look once more (a buffer added before the re-arm would get no kick).
    if (!queue.EnableNotification(mem)) return false;
  }
}

}  // namespace kvmts::devices::virtio
