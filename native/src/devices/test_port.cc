#include "devices/test_port.h"

namespace kvmts::devices {

void TestPort::Read(uint16_t offset, uint8_t* data, size_t len) {
  if (offset == 0 && len == 4) {
    uint32_t t = static_cast<uint32_t>(now_us_());
    for (size_t i = 0; i < 4; ++i) data[i] = static_cast<uint8_t>(t >> (8 * i));
    return;
  }
  for (size_t i = 0; i < len; ++i) data[i] = (offset == 0 && i == 0) ? kTestPortSignature : 0;
}

void TestPort::Write(uint16_t offset, const uint8_t* data, size_t len) {
  if (offset != 0) return;
  uint32_t v = 0;
  for (size_t i = 0; i < len && i < 4; ++i) v |= static_cast<uint32_t>(data[i]) << (8 * i);
  exits_++;
  sink_->OnGuestExit(v);
}

}  // namespace kvmts::devices
