// TestPort: how the test guest reports to and paces itself with the VMM, at I/O port 0xf4 (4 ports).
// The write side is QEMU's isa-debug-exit (iobase=0xf4, iosize=4), so the same guest binary ends QEMU the same way.
//
//   write 0xf4 (1, 2 or 4 bytes) value v  -> ExitSink::OnGuestExit(v)      (QEMU: process exit status (v<<1)|1)
//   write 0xf6 (4 bytes) value us         -> idle: the vCPU thread sleeps up to min(us, 1 s) microseconds, or until
//                                            the VMM kicks it (pause, save, stop, throttle)  (QEMU: exits; the guest
//                                            only writes it after reading the signature below)
//   read  0xf4 (4 bytes)                  -> host monotonic clock, microseconds, low 32 bits (QEMU: no device)
//   read  0xf4 (1 byte)                   -> 0x4b ('K'): "this is the kubevirt-ts VMM" (QEMU: never 0x4b)
//
// The idle write is the test guest's HLT: it has no interrupts to wake it, so it asks for a timed sleep instead and
// the host core stays free while it has nothing to do. The sleep runs on the vCPU thread (port writes are handled
// there) and ends early when the thread is kicked: VcpuThread::Kick() sends SIGRTMIN to a handler installed without
// SA_RESTART, and the sleep blocks that signal, then waits in ppoll() with it unblocked, so a kick that arrives
// once the sleep began (pending while blocked, or during the wait) ends it at once (EINTR). A kick in the few
// instructions between KVM_RUN returning and the block is seen when the sleep ends: never more than 1 s late.
#pragma once

#include <cstdint>

#include "devices/bus.h"

namespace kvmts::devices {

inline constexpr uint16_t kTestPortBase = 0xf4;
inline constexpr uint16_t kTestPortLen = 4;
inline constexpr uint8_t kTestPortSignature = 0x4b;
inline constexpr uint16_t kTestPortIdleOffset = 2;
inline constexpr uint32_t kTestPortMaxIdleMicros = 1000000;

class ExitSink {
 public:
  virtual ~ExitSink() = default;
  virtual void OnGuestExit(uint32_t code) = 0;
};

// Sleeps the calling vCPU thread for up to `us` microseconds, returning early when the thread is kicked (SIGRTMIN).
void SleepUntilKicked(uint32_t us);

class TestPort : public PioDevice {
 public:
  // now_us: a clock; idle: the sleep (both injected so the device stays pure and testable).
  TestPort(ExitSink* sink, uint64_t (*now_us)(), void (*idle)(uint32_t us) = &SleepUntilKicked)
      : sink_(sink), now_us_(now_us), idle_(idle) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  uint64_t exits() const { return exits_; }
  // Idle requests served, and the microseconds asked for (after the cap) in total.
  uint64_t idles() const { return idles_; }
  uint64_t idle_micros_requested() const { return idle_micros_; }

 private:
  ExitSink* sink_;
  uint64_t (*now_us_)();
  void (*idle_)(uint32_t us);
  uint64_t exits_ = 0;
  uint64_t idles_ = 0;
  uint64_t idle_micros_ = 0;
};

}  // namespace kvmts::devices
