// SMBIOS tables for direct Linux boot (vmm/smbios.h): the entry point as Linux's dmi_smbios3_present() checks it,
// the structures as dmi_decode() walks them, the system UUID in SMBIOS byte order.
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "vmm/smbios.h"

using namespace kvmts::vmm;

namespace {

template <typename T>
T GetAt(const std::vector<uint8_t>& b, size_t off) {
  T v{};
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// The strings of the structure at `at` (formatted area of length b[at+1]).
std::vector<std::string> StringsOf(const std::vector<uint8_t>& b, size_t at, size_t* next) {
  std::vector<std::string> out;
  size_t p = at + b[at + 1];
  if (b[p] == 0) {
    *next = p + 2;
    return out;
  }
  while (b[p] != 0) {
    std::string s(reinterpret_cast<const char*>(b.data() + p));
    out.push_back(s);
    p += s.size() + 1;
  }
  *next = p + 1;
  return out;
}

}  // namespace

TEST(smbios_uuid_is_parsed_into_smbios_byte_order) {
  auto u = ParseUuid("5d307ca9-b3ef-428c-8861-06e72d69f223");
  CHECK(u.has_value());
  if (!u) return;
  const uint8_t want[16] = {0xa9, 0x7c, 0x30, 0x5d, 0xef, 0xb3, 0x8c, 0x42,
                            0x88, 0x61, 0x06, 0xe7, 0x2d, 0x69, 0xf2, 0x23};
  CHECK(std::memcmp(u->data(), want, 16) == 0);
  CHECK(ParseUuid("5D307CA9-B3EF-428C-8861-06E72D69F223") == u);
  CHECK(!ParseUuid("5d307ca9b3ef428c886106e72d69f223").has_value());
  CHECK(!ParseUuid("5d307ca9-b3ef-428c-8861-06e72d69f22g").has_value());
  CHECK(!ParseUuid("5d307ca9-b3ef-428c-8861_06e72d69f223").has_value());
  CHECK(!ParseUuid("").has_value());
}

TEST(smbios_entry_point_and_tables_are_what_linux_dmi_scan_reads) {
  SmbiosInfo info;
  info.uuid = *ParseUuid("5d307ca9-b3ef-428c-8861-06e72d69f223");
  info.serial = "SN-1";
  std::vector<uint8_t> b = BuildSmbiosTables(info);
  CHECK(b.size() < kSmbiosMaxBytes);
  // Entry point: anchor, length, checksum over its length, version 3.0, table address and maximum size.
  CHECK(std::memcmp(b.data(), "_SM3_", 5) == 0);
  CHECK_EQ(b[6], kSmbiosEntryBytes);
  uint8_t sum = 0;
  for (size_t i = 0; i < b[6]; ++i) sum = static_cast<uint8_t>(sum + b[i]);
  CHECK_EQ(sum, 0);
  CHECK_EQ(b[7], 3);
  CHECK_EQ(b[10], 1);
  CHECK_EQ(GetAt<uint64_t>(b, 16), kSmbiosTableAddr);
  size_t table = kSmbiosTableAddr - kSmbiosAddr;
  CHECK_EQ(GetAt<uint32_t>(b, 12), b.size() - table);
  CHECK_EQ(kSmbiosAddr % 16, 0u);

  // Type 0, then type 1 with its strings and UUID, then type 127; handles are distinct.
  size_t next = 0;
  CHECK_EQ(b[table], 0);
  auto bios = StringsOf(b, table, &next);
  CHECK_EQ(bios.size(), 2u);
  CHECK_EQ(bios[0], std::string("kubevirt-ts"));
  size_t sys = next;
  CHECK_EQ(b[sys], 1);
  CHECK_EQ(b[sys + 1], 0x1b);
  CHECK(GetAt<uint16_t>(b, sys + 2) != GetAt<uint16_t>(b, table + 2));
  CHECK(std::memcmp(b.data() + sys + 8, info.uuid.data(), 16) == 0);
  auto strings = StringsOf(b, sys, &next);
  CHECK_EQ(strings.size(), 4u);
  auto str = [&](size_t field) { return b[sys + field] ? strings.at(b[sys + field] - 1u) : std::string(); };
  CHECK_EQ(str(4), std::string("KubeVirt"));
  CHECK_EQ(str(5), std::string("None"));
  CHECK_EQ(str(6), std::string());  // no version string
  CHECK_EQ(str(7), std::string("SN-1"));
  CHECK_EQ(str(0x1a), std::string("KubeVirt"));
  CHECK_EQ(b[next], 127);
  CHECK_EQ(b[next + 1], 4);
  CHECK_EQ(b[next + 4], 0);
  CHECK_EQ(b[next + 5], 0);
  CHECK_EQ(next + 6, b.size());
}

TEST(smbios_without_a_serial_leaves_the_string_out) {
  SmbiosInfo info;
  std::vector<uint8_t> b = BuildSmbiosTables(info);
  size_t table = kSmbiosTableAddr - kSmbiosAddr, next = 0;
  StringsOf(b, table, &next);
  CHECK_EQ(b[next], 1);
  CHECK_EQ(b[next + 7], 0);  // serial: "no string"
  CHECK_EQ(StringsOf(b, next, &next).size(), 3u);
}
