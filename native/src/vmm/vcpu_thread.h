// VcpuThread: one vCPU on its own thread, driven by acknowledged commands (Firecracker `Vcpu` + `VcpuHandle`).
//
//                  kResume                      KVM_RUN exit handled -> back to Running
//        +-------------------------+          +-----+
//        v                         |          v     |
//   [ Paused ] <----- kPause ---- [ Running ] ------+
//        |                           |
//        | kFinish                   +-- fatal exit / guest shutdown --> [ Finished ]
//        v                           | kFinish
//   [ Finished ] <-------------------+
//
// A command is queued under the mutex, then the thread is kicked: run->immediate_exit = 1, a full fence, and
// pthread_kill(SIGRTMIN) (a no-op handler installed without SA_RESTART), so KVM_RUN returns -EINTR promptly whether
// the vCPU is inside KVM_RUN or about to enter it. Each command is acknowledged once the thread reached the state;
// before acknowledging a pause after an I/O or MMIO exit, the thread re-enters KVM_RUN with immediate_exit set so
// KVM completes the instruction (the state a pause exposes is always at an instruction boundary).
// The thread never touches JS; it reports through Peripherals (vmm/exit_handler.h).
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "kvm/vcpu.h"
#include "vmm/exit_handler.h"

namespace kvmts::vmm {

enum class VcpuState { kPaused, kRunning, kFinished };
enum class VcpuCommand { kPause, kResume, kFinish };

class VcpuThread {
 public:
  VcpuThread(kvm::VcpuFd* vcpu, Peripherals* peripherals);
  ~VcpuThread();  // Finish() + join
  VcpuThread(const VcpuThread&) = delete;
  VcpuThread& operator=(const VcpuThread&) = delete;

  // Installs the kick signal handler (once per process).
  static void InstallKickHandler();

  // Starts the thread, initially Paused.
  void Spawn();
  // Queues a command and kicks; does not wait.
  void Post(VcpuCommand cmd);
  // Waits until the thread reached the state of the last posted command (or finished). false on timeout.
  bool WaitAck(int timeout_ms);
  // Finish + join (idempotent).
  void Join();
  VcpuState state() const { return state_.load(); }
  // Throttle: sleep `percent` of each 10 ms slice (the machine's throttle timer kicks; see Machine::SetCpuThrottle).
  void SetThrottle(uint32_t percent) { throttle_.store(percent); }
  void Kick();
  const ExitCounters& counters() const { return counters_; }
  uint64_t exits() const { return exits_.load(std::memory_order_relaxed); }
  uint64_t kicks() const { return kicks_.load(std::memory_order_relaxed); }
  // CPU time the vCPU thread has used (guest + VMM work on that thread), seconds; 0 before Spawn or after Join.
  double CpuSeconds() const;

 private:
  void Run();
  VcpuState Running();
  VcpuState Paused();
  // Applies pending commands; returns the new state (or `current` when none).
  VcpuState DrainCommands(VcpuState current);
  void Ack(VcpuState s);

  kvm::VcpuFd* vcpu_;
  Peripherals* peripherals_;
  std::thread thread_;
  pthread_t tid_{};
  std::atomic<bool> started_{false};
  std::mutex mu_;
  std::condition_variable cv_;       // commands arrive
  std::condition_variable ack_cv_;   // state reached
  std::deque<VcpuCommand> commands_;
  std::atomic<bool> has_command_{false};
  uint64_t posted_ = 0, acked_ = 0;
  std::atomic<VcpuState> state_{VcpuState::kPaused};
  std::atomic<uint32_t> throttle_{0};
  bool pending_io_ = false;  // the last exit was I/O or MMIO: KVM completes it on the next KVM_RUN
  std::atomic<uint64_t> exits_{0}, kicks_{0};
  std::atomic<double> finished_cpu_seconds_{0};
  ExitCounters counters_;
};

}  // namespace kvmts::vmm
