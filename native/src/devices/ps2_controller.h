// Ps2Controller: an 8042 keyboard controller with a PS/2 keyboard behind it, enough for Linux's i8042 + atkbd
// drivers to bind (so the host can send Ctrl-Alt-Del) and for the guest to reset the machine (Firecracker
// `I8042Device`, extended with the keyboard's command replies). Pure: no KVM; interrupts go to an IrqTrigger.
//
//   port 0x64 read  -> status: OBF (0x01) when the output buffer has a byte, SYS (0x04), CMD (0x08), unlocked (0x10)
//   port 0x64 write -> controller command:
//        0x20 read CTR -> out      0x60 write CTR <- next data byte     0xaa self-test -> 0x55
//        0xab kbd test -> 0x00     0xa9 aux test -> 0x01 (no mouse)     0xd3 aux loop <- byte -> 0x00 (no aux)
//        0xad/0xae disable/enable kbd (CTR bit 4)   0xa7/0xa8 (aux, ignored)   0xfe pulse reset -> ResetSink
//   port 0x60 read  -> pops the output buffer (and raises IRQ 1 again while bytes remain and CTR.KBDINT is set)
//   port 0x60 write -> the pending controller command's parameter, else a keyboard command:
//        0xff reset -> fa aa   0xf2 get id -> fa ab 83   0xf0 scancode set <- n -> fa (n=0: fa 02)
//        0xed LEDs / 0xf3 typematic <- n -> fa fa      anything else -> fa
//   InjectCtrlAltDel(): set-2 make and break codes of Ctrl, Alt, Del into the output buffer, IRQ 1.
//   Save()/Restore(): u8 version (1) | CTR | status | pending controller cmd | pending keyboard cmd | u8 n | n bytes
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "devices/bus.h"
#include "devices/i8042.h"
#include "devices/serial_16550.h"

namespace kvmts::devices {

inline constexpr uint8_t kPs2StatusObf = 0x01, kPs2StatusSys = 0x04, kPs2StatusCmd = 0x08,
                         kPs2StatusUnlocked = 0x10;
inline constexpr uint8_t kPs2CtrKbdInt = 0x01, kPs2CtrSys = 0x04, kPs2CtrKbdDisabled = 0x10;
inline constexpr size_t kPs2OutputBytes = 16;

class Ps2Controller : public PioDevice {
 public:
  Ps2Controller(ResetSink* reset, IrqTrigger* kbd_irq) : reset_(reset), irq_(kbd_irq) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  // Queues Ctrl-Alt-Del key presses and releases (the guest's init decides what it means). False when the
  // keyboard is disabled or its interrupt is off (the guest driver is not bound).
  bool InjectCtrlAltDel();
  uint64_t resets() const { return resets_; }
  uint8_t control() const { return ctr_; }

  // Persist (Firecracker `Persist`): the registers, the half-done commands and the output buffer. Restore
  // returns false (changing nothing) on a malformed blob.
  std::vector<uint8_t> Save() const;
  bool Restore(const uint8_t* data, size_t len);
  // True when the output buffer holds a byte and its interrupt is enabled: the guest expects IRQ 1 for it (the
  // machine pulses the line again after a restore; a duplicate edge finds the buffer drained, as on a PC).
  bool InterruptPending() const { return !out_.empty() && (ctr_ & kPs2CtrKbdInt); }

 private:
  void Push(uint8_t b);
  void ControllerCommand(uint8_t cmd);
  void KeyboardCommand(uint8_t cmd);
  void Data(uint8_t b);

  ResetSink* reset_;
  IrqTrigger* irq_;
  uint8_t ctr_ = kPs2CtrKbdInt | kPs2CtrSys;
  uint8_t status_ = kPs2StatusSys | kPs2StatusUnlocked;
  uint8_t pending_cmd_ = 0;      // controller command waiting for its data byte (0x60, 0xd3, 0xd2)
  uint8_t pending_kbd_cmd_ = 0;  // keyboard command waiting for its parameter (0xed, 0xf0, 0xf3)
  std::deque<uint8_t> out_;
  uint64_t resets_ = 0;
};

}  // namespace kvmts::devices
