// VirtioBlock's worker thread: activation, kicks, the queue loop, quiesce/resume and reset (see blk.h).
//
//   state            wakes on                         does
//   waiting          QueueNotify (pending), Resume    takes the pending bits, busy = true, serves each queue
//   serving          -                                pops, runs and completes chains until the ring is empty,
//                                                     a pause or stop is asked, or a chain breaks the protocol
//   paused           Resume                           nothing; pending kicks wait (Quiesce returns once !busy)
//   stopped          -                                the thread has exited (Reset joined it)
#include <cerrno>

#include "devices/virtio/blk.h"

namespace kvmts::devices::virtio {

Status VirtioBlock::Activate(const ActivateContext& ctx) {
  if (worker_.joinable() || ctx.queues.size() != 1 || ctx.mem == nullptr || ctx.irq == nullptr) {
    return Error{EINVAL, "virtio-blk", "activate"};
  }
  ctx_ = ctx;
  pending_ = 0;
  busy_ = false;
  stop_ = false;
  pause_ = false;
  broken_ = false;
  worker_ = std::thread([this] { WorkerLoop(); });
  return OkStatus();
}

void VirtioBlock::QueueNotify(uint16_t q) {
  if (q >= 64) return;
  std::lock_guard<std::mutex> lock(mu_);
  pending_ |= 1ull << q;
  wake_cv_.notify_one();
}

void VirtioBlock::Reset() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    wake_cv_.notify_one();
  }
  worker_.join();
  ctx_ = ActivateContext{};
  pending_ = 0;
  pause_ = false;
}

void VirtioBlock::Quiesce() {
  std::unique_lock<std::mutex> lock(mu_);
  pause_ = true;
  idle_cv_.wait(lock, [this] { return !busy_; });
}

void VirtioBlock::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  pause_ = false;
  wake_cv_.notify_one();
}

void VirtioBlock::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_cv_.wait(lock, [this] { return stop_ || (pending_ != 0 && !pause_); });
    if (stop_) break;
    uint64_t kicked = pending_;
    pending_ = 0;
    busy_ = true;
    lock.unlock();
    uint64_t again = 0;
    for (uint16_t q = 0; q < ctx_.queues.size(); ++q) {
      if ((kicked & (1ull << q)) && ProcessQueue(q)) again |= 1ull << q;
    }
    lock.lock();
    pending_ |= again;  // interrupted by a pause: served after Resume
    busy_ = false;
    idle_cv_.notify_all();
  }
  busy_ = false;
  idle_cv_.notify_all();
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
    }
    if (broken_why == nullptr && err != QueueError::kNone) broken_why = QueueErrorName(err);
    if (added > 0 && queue.NeedsNotification(mem)) ctx_.irq->SignalQueue(q);
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
