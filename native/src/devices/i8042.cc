#include "devices/i8042.h"

namespace kvmts::devices {

void I8042::Read(uint16_t, uint8_t* data, size_t len) {
  for (size_t i = 0; i < len; ++i) data[i] = 0;
}

void I8042::Write(uint16_t offset, const uint8_t* data, size_t len) {
  if (offset == kI8042CommandOffset && len >= 1 && data[0] == kI8042ResetCommand) {
    resets_++;
    sink_->OnReset();
  }
}

}  // namespace kvmts::devices
