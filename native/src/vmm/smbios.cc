#include "vmm/smbios.h"

#include <cstring>

namespace kvmts::vmm {
namespace {

constexpr uint8_t kTypeBios = 0, kTypeSystem = 1, kTypeEnd = 127;
constexpr uint8_t kBiosLength = 0x18, kSystemLength = 0x1b, kEndLength = 4;
constexpr uint8_t kWakeUpPowerSwitch = 6;
constexpr uint64_t kBiosCharacteristicsNotSupported = 1ull << 3;
constexpr uint8_t kBiosCharExtVirtualMachine = 1u << 4;  // extension byte 2, bit 4: "SMBIOS table describes a VM"

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void Put16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void Put32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void Put64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// One structure: the formatted area (`length` bytes, header filled in here) then its strings, each NUL-terminated,
// and the NUL that ends the set (two NULs when there is no string). Returns the formatted area's offset.
class TableWriter {
 public:
  size_t Begin(uint8_t type, uint8_t length) {
    size_t at = buf_.size();
    buf_.resize(at + length, 0);
    buf_[at] = type;
    buf_[at + 1] = length;
    Put16(buf_, at + 2, handle_++);
    strings_ = 0;
    return at;
  }
  // Appends a string and returns its number (1-based), or 0 for an empty one (SMBIOS: "no string").
  uint8_t String(const std::string& s) {
    if (s.empty()) return 0;
    buf_.insert(buf_.end(), s.begin(), s.end());
    buf_.push_back(0);
    return ++strings_;
  }
  void End() {
    if (strings_ == 0) buf_.push_back(0);
    buf_.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
  uint16_t handle_ = 0;
  uint8_t strings_ = 0;
};

}  // namespace

std::optional<std::array<uint8_t, 16>> ParseUuid(const std::string& text) {
  if (text.size() != 36) return std::nullopt;
  std::array<uint8_t, 16> raw{};
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return std::nullopt;
      continue;
    }
    int hi = HexValue(text[i]), lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw[n++] = static_cast<uint8_t>(hi << 4 | lo);
    ++i;
  }
  // time_low (4), time_mid (2), time_hi_and_version (2) are little-endian in SMBIOS 2.6+.
  std::array<uint8_t, 16> out = raw;
  for (int i = 0; i < 4; ++i) out[i] = raw[3 - i];
  out[4] = raw[5];
  out[5] = raw[4];
  out[6] = raw[7];
  out[7] = raw[6];
  return out;
}

std::vector<uint8_t> BuildSmbiosTables(const SmbiosInfo& info) {
  TableWriter t;
  size_t bios = t.Begin(kTypeBios, kBiosLength);
  t.bytes()[bios + 4] = t.String("kubevirt-ts");  // vendor
  t.bytes()[bios + 5] = t.String("0");            // BIOS version
  Put16(t.bytes(), bios + 6, 0xe800);             // starting address segment (no real BIOS code)
  Put64(t.bytes(), bios + 0x0a, kBiosCharacteristicsNotSupported);
  t.bytes()[bios + 0x13] = kBiosCharExtVirtualMachine;
  t.bytes()[bios + 0x16] = 0xff;  // no embedded controller
  t.bytes()[bios + 0x17] = 0xff;
  t.End();

  size_t sys = t.Begin(kTypeSystem, kSystemLength);
  t.bytes()[sys + 4] = t.String("KubeVirt");  // manufacturer
  t.bytes()[sys + 5] = t.String("None");      // product name
  t.bytes()[sys + 7] = t.String(info.serial);
  std::memcpy(t.bytes().data() + sys + 8, info.uuid.data(), info.uuid.size());
  t.bytes()[sys + 0x18] = kWakeUpPowerSwitch;
  t.bytes()[sys + 0x1a] = t.String("KubeVirt");  // family
  t.End();

  t.Begin(kTypeEnd, kEndLength);
  t.End();

  const std::vector<uint8_t>& table = t.bytes();
  constexpr size_t kTableOffset = kSmbiosTableAddr - kSmbiosAddr;
  std::vector<uint8_t> out(kTableOffset + table.size(), 0);
  std::memcpy(out.data(), "_SM3_", 5);
  out[6] = kSmbiosEntryBytes;
  out[7] = 3;  // SMBIOS 3.0.0
  out[8] = 0;
  out[9] = 0;
  out[10] = 1;  // entry point revision: 3.0
  Put32(out, 12, static_cast<uint32_t>(table.size()));
  Put64(out, 16, kSmbiosTableAddr);
  uint8_t sum = 0;
  for (size_t i = 0; i < kSmbiosEntryBytes; ++i) sum = static_cast<uint8_t>(sum + out[i]);
  out[5] = static_cast<uint8_t>(-sum);
  std::memcpy(out.data() + kTableOffset, table.data(), table.size());
  return out;
}

}  // namespace kvmts::vmm
