#include "migration/crc32c.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace kvmts::migration {
namespace {

// t[0] is the byte table; t[k][b] is byte b's CRC followed by k zero bytes (slicing-by-8: eight lookups per word).
struct Table {
  uint32_t t[8][256];
  Table() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; k++) {
      for (uint32_t i = 0; i < 256; i++) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
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
  for (size_t i = 0; i < len; i++) c = table.t[0][(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t Crc32cSlice8(uint32_t crc, const void* data, size_t len) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const auto& t = GetTable().t;
  uint32_t c = ~crc;
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= c;
    c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
        t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
  }
  for (; len > 0; p++, len--) c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return ~c;
}

namespace {

using CrcFn = uint32_t (*)(uint32_t, const void*, size_t);

#if defined(__x86_64__)
uint32_t Crc32cHwFn(uint32_t crc, const void* data, size_t len) {
  return Crc32cHw(crc, static_cast<const uint8_t*>(data), len);
}

// The faster of the two on this CPU, timed once (best of three 64 KiB runs each, interleaved, ~1 ms under
// emulation): the crc32 instruction where the CPU runs it (GiB/s), the tables where it is emulated.
CrcFn Choose() {
  if (!HasSse42()) return Crc32cSlice8;
  std::vector<uint8_t> buf(64 << 10);
  for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
  auto time = [&buf](CrcFn f) {
    auto t0 = std::chrono::steady_clock::now();
    volatile uint32_t sink = f(0, buf.data(), buf.size());
    (void)sink;
    return std::chrono::steady_clock::now() - t0;
  };
  auto hw = std::chrono::steady_clock::duration::max(), sw = hw;
  for (int rep = 0; rep < 3; rep++) {
    hw = std::min(hw, time(Crc32cHwFn));
    sw = std::min(sw, time(Crc32cSlice8));
  }
  return sw < hw ? Crc32cSlice8 : Crc32cHwFn;
}
#endif

CrcFn Chosen() {
#if defined(__x86_64__)
  static const CrcFn fn = Choose();
#else
  static const CrcFn fn = Crc32cSlice8;
#endif
  return fn;
}

}  // namespace

const char* Crc32cImplementation() { return Chosen() == Crc32cSlice8 ? "slice-by-8" : "sse4.2"; }

uint32_t Crc32c(uint32_t crc, const void* data, size_t len) { return Chosen()(crc, data, len); }

}  // namespace kvmts::migration
