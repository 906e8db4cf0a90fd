// TestPort's idle request (port 0xf6): the guest's timed HLT. The device part is pure (an injected sleep); the real
// sleep is checked on a thread: it lasts as asked when nothing happens, and a kick (SIGRTMIN, as VcpuThread::Kick
// sends) ends it at once, also when the kick arrived before the sleep began but after it blocked the signal.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "check.h"
#include "devices/test_port.h"

using namespace kvmts::devices;

namespace {

struct Exits : ExitSink {
  std::vector<uint32_t> codes;
  void OnGuestExit(uint32_t code) override { codes.push_back(code); }
};
uint64_t Clock() { return 0; }
std::vector<uint32_t>& Slept() {
  static std::vector<uint32_t> s;
  return s;
}
void FakeSleep(uint32_t us) { Slept().push_back(us); }
void NoOp(int) {}
void InstallKick() {
  struct sigaction sa {};
  sa.sa_handler = NoOp;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // as VcpuThread::InstallKickHandler: no SA_RESTART
  sigaction(SIGRTMIN, &sa, nullptr);
}
double MillisSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST(test_port_idle_write_sleeps_capped_and_never_exits) {
  Exits e;
  Slept().clear();
  TestPort port(&e, &Clock, &FakeSleep);
  uint32_t us = 25000;
  port.Write(kTestPortIdleOffset, reinterpret_cast<uint8_t*>(&us), 4);
  uint32_t huge = 0xffffffffu;
  port.Write(kTestPortIdleOffset, reinterpret_cast<uint8_t*>(&huge), 4);
  uint8_t one = 7;
  port.Write(kTestPortIdleOffset, &one, 1);  // not a 4-byte write: ignored
  CHECK_EQ(Slept().size(), 2u);
  CHECK_EQ(Slept()[0], 25000u);
  CHECK_EQ(Slept()[1], kTestPortMaxIdleMicros);
  CHECK_EQ(port.idles(), 2u);
  CHECK_EQ(port.idle_micros_requested(), 25000u + kTestPortMaxIdleMicros);
  CHECK_EQ(e.codes.size(), 0u);
  CHECK_EQ(port.exits(), 0u);
  uint8_t code = 0;
  port.Write(0, &code, 1);
  CHECK_EQ(e.codes.size(), 1u);
}

TEST(test_port_idle_sleep_lasts_as_asked_without_a_kick) {
  InstallKick();
  auto t = std::chrono::steady_clock::now();
  SleepUntilKicked(30000);
  double ms = MillisSince(t);
  CHECK(ms >= 29.0);
  CHECK(ms < 1000.0);
}

TEST(test_port_idle_sleep_ends_when_the_thread_is_kicked) {
  InstallKick();
  std::atomic<bool> sleeping{false};
  double ms = 0;
  std::thread vcpu([&] {
    sleeping = true;
    auto t = std::chrono::steady_clock::now();
    SleepUntilKicked(kTestPortMaxIdleMicros);
    ms = MillisSince(t);
  });
  while (!sleeping) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pthread_kill(vcpu.native_handle(), SIGRTMIN);
  vcpu.join();
  CHECK(ms >= 40.0);
  CHECK(ms < 500.0);  // not the full second
}

TEST(test_port_idle_sleep_sees_a_kick_that_was_pending_before_it_began) {
  InstallKick();
  double ms = 0;
  std::thread vcpu([&] {
    sigset_t kick, old;
    sigemptyset(&kick);
    sigaddset(&kick, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &kick, &old);
    pthread_kill(pthread_self(), SIGRTMIN);  // pending while blocked, as when it lands after the sleep blocked it
    auto t = std::chrono::steady_clock::now();
    SleepUntilKicked(kTestPortMaxIdleMicros);
    ms = MillisSince(t);
    // The sleep restored this thread's mask: still blocked; the kick was consumed by the sleep.
    sigset_t now;
    pthread_sigmask(SIG_SETMASK, nullptr, &now);
    CHECK(sigismember(&now, SIGRTMIN) == 1);
    sigset_t pending;
    sigpending(&pending);
    CHECK(sigismember(&pending, SIGRTMIN) == 0);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  });
  vcpu.join();
  CHECK(ms < 500.0);
}
