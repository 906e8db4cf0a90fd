#include "migration/crc32c.h"

#include <cstring>

namespace kvmts::migration {
namespace {

struct Table {
  uint32_t t[256];
  Table() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
  }
};

const Table& GetTable() {
  static const Table table;
  return table;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cHw(uint32_t crc, const uint8_t* p, size_t len) {
  uint64_t c = ~crc;
  while (len > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = __builtin_ia32_crc32qi(static_cast<uint32_t>(c), *p++);
    len--;
  }
  while (len >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
    p += 8;
    len -= 8;
  }
  while (len > 0) {
    c = __builtin_ia32_crc32qi(static_cast<uint32_t>(c), *p++);
    len--;
  }
  return ~static_cast<uint32_t>(c);
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const Table& table = GetTable();
  uint32_t c = ~crc;
  for (size_t i = 0; i < len; i++) c = table.t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t Crc32c(uint32_t crc, const void* data, size_t len) {
#if defined(__x86_64__)
  if (HasSse42()) return Crc32cHw(crc, static_cast<const uint8_t*>(data), len);
#endif
  return Crc32cPortable(crc, data, len);
}

}  // namespace kvmts::migration
