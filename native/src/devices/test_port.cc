#include "devices/test_port.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>

namespace kvmts::devices {

void SleepUntilKicked(uint32_t us) {
  if (us == 0) return;
  sigset_t kick, old;
  sigemptyset(&kick);
  sigaddset(&kick, SIGRTMIN);
  if (pthread_sigmask(SIG_BLOCK, &kick, &old) != 0) return;
  sigset_t during = old;
  sigdelset(&during, SIGRTMIN);
  timespec ts{static_cast<time_t>(us / 1000000u), static_cast<long>(us % 1000000u) * 1000L};
  ppoll(nullptr, 0, &ts, &during);  // 0 on timeout, -1/EINTR when kicked: either way the sleep is over
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void TestPort::Read(uint16_t offset, uint8_t* data, size_t len) {
  if (offset == 0 && len == 4) {
    uint32_t t = static_cast<uint32_t>(now_us_());
    for (size_t i = 0; i < 4; ++i) data[i] = static_cast<uint8_t>(t >> (8 * i));
    return;
  }
  for (size_t i = 0; i < len; ++i) data[i] = (offset == 0 && i == 0) ? kTestPortSignature : 0;
}

void TestPort::Write(uint16_t offset, const uint8_t* data, size_t len) {
  uint32_t v = 0;
  for (size_t i = 0; i < len && i < 4; ++i) v |= static_cast<uint32_t>(data[i]) << (8 * i);
  if (offset == kTestPortIdleOffset && len == 4) {
    uint32_t us = v < kTestPortMaxIdleMicros ? v : kTestPortMaxIdleMicros;
    idles_++;
    idle_micros_ += us;
    idle_(us);
    return;
  }
  if (offset != 0) return;
  exits_++;
  sink_->OnGuestExit(v);
}

}  // namespace kvmts::devices
