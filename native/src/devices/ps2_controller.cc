#include "devices/ps2_controller.h"

namespace kvmts::devices {
namespace {

constexpr uint8_t kAck = 0xfa;
// Scancode set 2: Ctrl, Alt, Del (extended) pressed, then released in reverse order.
constexpr uint8_t kCtrlAltDel[] = {0x14, 0x11, 0xe0, 0x71, 0xe0, 0xf0, 0x71, 0xf0, 0x11, 0xf0, 0x14};

}  // namespace

void Ps2Controller::Push(uint8_t b) {
  if (out_.size() >= kPs2OutputBytes) return;  // a full buffer drops, as a real controller would
  bool was_empty = out_.empty();
  out_.push_back(b);
  status_ |= kPs2StatusObf;
  if (was_empty && (ctr_ & kPs2CtrKbdInt)) irq_->Trigger();
}

void Ps2Controller::Read(uint16_t offset, uint8_t* data, size_t len) {
  if (len == 0) return;
  for (size_t i = 1; i < len; ++i) data[i] = 0;
  if (offset == kI8042CommandOffset) {
    data[0] = status_;
    return;
  }
  if (offset != kI8042DataOffset) {
    data[0] = 0xff;
    return;
  }
  if (out_.empty()) {
    data[0] = 0;
    return;
  }
  data[0] = out_.front();
  out_.pop_front();
  if (out_.empty()) {
    status_ &= static_cast<uint8_t>(~kPs2StatusObf);
  } else if (ctr_ & kPs2CtrKbdInt) {
    irq_->Trigger();  // one byte per interrupt: the next one gets its own edge
  }
}

void Ps2Controller::Write(uint16_t offset, const uint8_t* data, size_t len) {
  if (len == 0) return;
  if (offset == kI8042CommandOffset) {
    status_ |= kPs2StatusCmd;
    ControllerCommand(data[0]);
  } else if (offset == kI8042DataOffset) {
    status_ &= static_cast<uint8_t>(~kPs2StatusCmd);
    Data(data[0]);
  }
}

void Ps2Controller::ControllerCommand(uint8_t cmd) {
  pending_cmd_ = 0;
  switch (cmd) {
    case 0x20: Push(ctr_); return;                          // read CTR
    case 0x60: case 0xd2: case 0xd3: pending_cmd_ = cmd; return;  // write CTR / kbd output / aux loop
    case 0xa7: case 0xa8: return;                           // aux disable/enable: no aux port
    case 0xa9: Push(0x01); return;                          // aux interface test: clock stuck = no mouse
    case 0xaa: Push(0x55); return;                          // controller self-test passed
    case 0xab: Push(0x00); return;                          // keyboard interface test passed
    case 0xad: ctr_ |= kPs2CtrKbdDisabled; return;
    case 0xae: ctr_ &= static_cast<uint8_t>(~kPs2CtrKbdDisabled); return;
    case kI8042ResetCommand:
      resets_++;
      reset_->OnReset();
      return;
    default: return;
  }
}

void Ps2Controller::Data(uint8_t b) {
  uint8_t cmd = pending_cmd_;
  pending_cmd_ = 0;
  switch (cmd) {
    case 0x60: ctr_ = b; return;
    case 0xd2: Push(b); return;     // as if the keyboard sent it
    case 0xd3: Push(0x00); return;  // aux loopback fails: there is no aux port
    default: break;
  }
  uint8_t kbd = pending_kbd_cmd_;
  pending_kbd_cmd_ = 0;
  if (kbd == 0xf0) {
    Push(kAck);
    if (b == 0) Push(0x02);  // current scancode set: 2
    return;
  }
  if (kbd == 0xed || kbd == 0xf3) {
    Push(kAck);
    return;
  }
  KeyboardCommand(b);
}

void Ps2Controller::KeyboardCommand(uint8_t cmd) {
  switch (cmd) {
    case 0xff: Push(kAck); Push(0xaa); return;               // reset: ACK, self-test passed
    case 0xf2: Push(kAck); Push(0xab); Push(0x83); return;   // get ID: MF2 keyboard
    case 0xed: case 0xf0: case 0xf3: pending_kbd_cmd_ = cmd; Push(kAck); return;
    case 0xee: Push(0xee); return;                           // echo
    default: Push(kAck); return;                             // enable, disable, defaults, ...
  }
}

std::vector<uint8_t> Ps2Controller::Save() const {
  std::vector<uint8_t> out;
  out.reserve(6 + out_.size());
  for (uint8_t b : {uint8_t{1}, ctr_, status_, pending_cmd_, pending_kbd_cmd_, static_cast<uint8_t>(out_.size())}) {
    out.push_back(b);
  }
  for (uint8_t b : out_) out.push_back(b);
  return out;
}

bool Ps2Controller::Restore(const uint8_t* data, size_t len) {
  if (len < 6 || data[0] != 1 || data[5] > kPs2OutputBytes || len != 6u + data[5]) return false;
  ctr_ = data[1];
  status_ = data[2];
  pending_cmd_ = data[3];
  pending_kbd_cmd_ = data[4];
  out_.assign(data + 6, data + len);
  return true;
}

bool Ps2Controller::InjectCtrlAltDel() {
  if ((ctr_ & kPs2CtrKbdDisabled) || !(ctr_ & kPs2CtrKbdInt)) return false;
  for (uint8_t b : kCtrlAltDel) Push(b);
  return true;
}

}  // namespace kvmts::devices
