// I8042: just enough of the PS/2 controller for a guest to reset the machine (Firecracker `I8042Device`).
//
//   port 0x64 write 0xfe (pulse the CPU reset line)  -> ResetSink::OnReset()
//   port 0x64 read  -> status 0 (output buffer empty)    port 0x60 read -> 0
// Registered at 0x60 with length 5 (offset 0 = data port 0x60, offset 4 = command/status port 0x64).
#pragma once

#include <cstdint>

#include "devices/bus.h"

namespace kvmts::devices {

inline constexpr uint16_t kI8042Base = 0x60;
inline constexpr uint16_t kI8042DataOffset = 0, kI8042CommandOffset = 4;
inline constexpr uint8_t kI8042ResetCommand = 0xfe;

class ResetSink {
 public:
  virtual ~ResetSink() = default;
  virtual void OnReset() = 0;
};

class I8042 : public PioDevice {
 public:
  explicit I8042(ResetSink* sink) : sink_(sink) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  uint64_t resets() const { return resets_; }

 private:
  ResetSink* sink_;
  uint64_t resets_ = 0;
};

}  // namespace kvmts::devices
