#include "vmm/vcpu_thread.h"

#include <errno.h>
#include <signal.h>

#include <time.h>

#include <chrono>

namespace kvmts::vmm {
namespace {

void KickHandler(int) {}

}  // namespace

void VcpuThread::InstallKickHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = KickHandler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: KVM_RUN must return -EINTR
    sigaction(SIGRTMIN, &sa, nullptr);
  });
}

VcpuThread::VcpuThread(kvm::VcpuFd* vcpu, Peripherals* peripherals) : vcpu_(vcpu), peripherals_(peripherals) {}

VcpuThread::~VcpuThread() { Join(); }

void VcpuThread::Spawn() {
  InstallKickHandler();
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  tid_ = thread_.native_handle();
}

void VcpuThread::Post(VcpuCommand cmd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(cmd);
    posted_++;
    has_command_.store(true);
  }
  cv_.notify_one();
  Kick();
}

void VcpuThread::Kick() {
  if (!started_) return;
  __atomic_store_n(&vcpu_->run()->immediate_exit, 1, __ATOMIC_SEQ_CST);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  kicks_.fetch_add(1, std::memory_order_relaxed);
  if (state_.load() != VcpuState::kFinished) pthread_kill(tid_, SIGRTMIN);
}

bool VcpuThread::WaitAck(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return ack_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                          [this] { return acked_ >= posted_ || state_.load() == VcpuState::kFinished; });
}

double VcpuThread::CpuSeconds() const {
  if (!started_ || state_.load() == VcpuState::kFinished) return finished_cpu_seconds_.load();
  clockid_t cid;
  timespec ts;
  if (pthread_getcpuclockid(tid_, &cid) != 0 || clock_gettime(cid, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void VcpuThread::Join() {
  if (!started_) return;
  if (thread_.joinable()) {
    Post(VcpuCommand::kFinish);
    thread_.join();
  }
}

void VcpuThread::Ack(VcpuState s) {
  state_.store(s);
  ack_cv_.notify_all();
}

VcpuState VcpuThread::DrainCommands(VcpuState current) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!commands_.empty()) {
    VcpuCommand cmd = commands_.front();
    commands_.pop_front();
    if (current != VcpuState::kFinished) {
      if (cmd == VcpuCommand::kPause) current = VcpuState::kPaused;
      if (cmd == VcpuCommand::kResume) current = VcpuState::kRunning;
      if (cmd == VcpuCommand::kFinish) current = VcpuState::kFinished;
    }
    acked_++;
  }
  has_command_.store(false);
  if (current == VcpuState::kPaused) vcpu_->KvmclockCtrl();
  state_.store(current);
  ack_cv_.notify_all();
  return current;
}

void VcpuThread::Run() {
  // The creating thread (maybe the JS thread) may block signals; the kick must get through here.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGRTMIN);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);

  VcpuState state = DrainCommands(VcpuState::kPaused);
  while (state != VcpuState::kFinished) {
    state = (state == VcpuState::kRunning) ? Running() : Paused();
  }
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    finished_cpu_seconds_.store(static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9);
  }
  Ack(VcpuState::kFinished);
}

VcpuState VcpuThread::Paused() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !commands_.empty(); });
  lock.unlock();
  return DrainCommands(VcpuState::kPaused);
}

VcpuState VcpuThread::Running() {
  if (has_command_.load()) {
    if (pending_io_) {
      // An I/O or MMIO exit is only complete (registers, RIP, string-op progress) once KVM_RUN is re-entered.
      // Re-enter with immediate_exit set: KVM finishes the operation and returns -EINTR without running the
      // guest, so a pause, save or migration never sees a half-done instruction.
      __atomic_store_n(&vcpu_->run()->immediate_exit, 1, __ATOMIC_SEQ_CST);
      vcpu_->Run();
      __atomic_store_n(&vcpu_->run()->immediate_exit, 0, __ATOMIC_SEQ_CST);
      pending_io_ = false;
    }
    VcpuState next = DrainCommands(VcpuState::kRunning);
    if (next != VcpuState::kRunning) return next;
  }
  int r = vcpu_->Run();
  exits_.fetch_add(1, std::memory_order_relaxed);
  if (r == -EINTR || r == -EAGAIN) {
    pending_io_ = false;  // KVM completed any pending operation before returning
    __atomic_store_n(&vcpu_->run()->immediate_exit, 0, __ATOMIC_SEQ_CST);
    uint32_t pct = throttle_.load();
    if (pct && !has_command_.load()) {
      // Auto-converge: the machine kicks every 10 ms; give up pct% of the slice, waking early for a command.
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::microseconds(100 * pct), [this] { return !commands_.empty(); });
      }
      // Throttle kicks that landed while asleep must not cut the next run short; a command posted meanwhile is
      // seen by Running()'s has_command_ check before KVM_RUN.
      __atomic_store_n(&vcpu_->run()->immediate_exit, 0, __ATOMIC_SEQ_CST);
    }
    return VcpuState::kRunning;
  }
  if (r < 0) {
    peripherals_->ReportExit(vcpu_->id(), "KVM_RUN: errno " + std::to_string(-r), true);
    peripherals_->RequestShutdown(ShutdownReason::kFatalExit, static_cast<uint32_t>(-r));
    return VcpuState::kFinished;
  }
  uint32_t reason = vcpu_->run()->exit_reason;
  pending_io_ = reason == KVM_EXIT_IO || reason == KVM_EXIT_MMIO;
  ExitAction action = HandleExit(vcpu_->id(), vcpu_->run(), *peripherals_, counters_);
  if (action == ExitAction::kContinue) return VcpuState::kRunning;
  return VcpuState::kFinished;
}

}  // namespace kvmts::vmm
