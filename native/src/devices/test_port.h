// TestPort: how the test guest reports to and paces itself with the VMM, at I/O port 0xf4 (4 ports).
// The write side is QEMU's isa-debug-exit (iobase=0xf4, iosize=4), so the same guest binary ends QEMU the same way.
//
//   write 0xf4 (1, 2 or 4 bytes) value v  -> ExitSink::OnGuestExit(v)      (QEMU: process exit status (v<<1)|1)
//   read  0xf4 (4 bytes)                  -> host monotonic clock, microseconds, low 32 bits (QEMU: no device)
//   read  0xf4 (1 byte)                   -> 0x4b ('K'): "this is the kubevirt-ts VMM" (QEMU reads 0xff)
#pragma once

#include <cstdint>

#include "devices/bus.h"

namespace kvmts::devices {

inline constexpr uint16_t kTestPortBase = 0xf4;
inline constexpr uint16_t kTestPortLen = 4;
inline constexpr uint8_t kTestPortSignature = 0x4b;

class ExitSink {
 public:
  virtual ~ExitSink() = default;
  virtual void OnGuestExit(uint32_t code) = 0;
};

class TestPort : public PioDevice {
 public:
  // now_us: a clock (injected so the device stays pure and testable).
  TestPort(ExitSink* sink, uint64_t (*now_us)()) : sink_(sink), now_us_(now_us) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  uint64_t exits() const { return exits_; }

 private:
  ExitSink* sink_;
  uint64_t (*now_us_)();
  uint64_t exits_ = 0;
};

}  // namespace kvmts::devices
