#include "vmm/linux_acpi.h"

#include <cstring>
#include <string>

namespace kvmts::vmm {
namespace {

template <typename T>
void Put(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

void Checksum(std::vector<uint8_t>& b, size_t off, size_t len, size_t at) {
  uint8_t sum = 0;
  b[off + at] = 0;
  for (size_t i = 0; i < len; ++i) sum = static_cast<uint8_t>(sum + b[off + i]);
  b[off + at] = static_cast<uint8_t>(-sum);
}

// The common 36-byte system description table header; the checksum is filled by Finish().
void Header(std::vector<uint8_t>& b, size_t off, const char* sig, uint32_t len, uint8_t rev) {
  std::memcpy(b.data() + off, sig, 4);
  Put<uint32_t>(b, off + 4, len);
  b[off + 8] = rev;
  std::memcpy(b.data() + off + 10, "KVTS  ", 6);
  std::memcpy(b.data() + off + 16, "KVTSVMM ", 8);
  Put<uint32_t>(b, off + 24, 1);
  std::memcpy(b.data() + off + 28, "KVTS", 4);
  Put<uint32_t>(b, off + 32, 1);
}

void Finish(std::vector<uint8_t>& b, size_t off) {
  uint32_t len;
  std::memcpy(&len, b.data() + off + 4, 4);
  Checksum(b, off, len, 9);
}

// A generic address structure in system I/O space.
void IoGas(std::vector<uint8_t>& b, size_t off, uint16_t port, uint8_t bits = 8) {
  b[off] = 1;  // SystemIO
  b[off + 1] = bits;
  b[off + 2] = 0;
  b[off + 3] = static_cast<uint8_t>(bits == 8 ? 1 : bits == 16 ? 2 : 3);  // access size
  Put<uint64_t>(b, off + 4, port);
}

constexpr uint32_t kFadtLen = 276;
constexpr uint32_t kFadtWbinvd = 1u << 0, kFadtPwrButton = 1u << 4, kFadtSlpButton = 1u << 5,
                   kFadtResetRegSup = 1u << 10;
constexpr uint16_t kSciIrq = 9;
constexpr uint16_t kBootArchLegacy = 0x1, kBootArch8042 = 0x2, kBootArchNoVga = 0x4, kBootArchNoCmos = 0x20;
// Name (_S5_, Package (4) {5, 0, 0, 0})
constexpr uint8_t kS5Aml[] = {0x08, '_', 'S', '5', '_', 0x12, 0x07, 0x04, 0x0a, 0x05, 0x00, 0x00, 0x00};

}  // namespace

std::vector<uint8_t> BuildAcpiTables(uint32_t vcpus) {
  uint32_t madt_len = 44 + 8 * vcpus + 12;
  std::vector<uint8_t> b(kMadtOffset + madt_len, 0);

  // DSDT
  uint32_t dsdt_len = 36 + sizeof kS5Aml;
  Header(b, kDsdtOffset, "DSDT", dsdt_len, 2);
  std::memcpy(b.data() + kDsdtOffset + 36, kS5Aml, sizeof kS5Aml);
  Finish(b, kDsdtOffset);

  // FACS: signature, length, no waking vector, version 2 (no checksum)
  std::memcpy(b.data() + kFacsOffset, "FACS", 4);
  Put<uint32_t>(b, kFacsOffset + 4, 64);
  b[kFacsOffset + 32] = 2;

  // FADT
  Header(b, kFadtOffset, "FACP", kFadtLen, 6);
  Put<uint32_t>(b, kFadtOffset + 36, static_cast<uint32_t>(kAcpiTablesAddr + kFacsOffset));
  Put<uint32_t>(b, kFadtOffset + 40, static_cast<uint32_t>(kAcpiTablesAddr + kDsdtOffset));
  Put<uint16_t>(b, kFadtOffset + 46, kSciIrq);
  Put<uint32_t>(b, kFadtOffset + 56, kAcpiPmPort);                      // PM1a_EVT_BLK
  Put<uint32_t>(b, kFadtOffset + 64, kAcpiPmPort + kAcpiPm1CntOffset);  // PM1a_CNT_BLK
  b[kFadtOffset + 88] = 4;                                              // PM1_EVT_LEN
  b[kFadtOffset + 89] = 2;                                              // PM1_CNT_LEN
  Put<uint16_t>(b, kFadtOffset + 109, kBootArchLegacy | kBootArch8042 | kBootArchNoVga | kBootArchNoCmos);
  Put<uint32_t>(b, kFadtOffset + 112, kFadtWbinvd | kFadtPwrButton | kFadtSlpButton | kFadtResetRegSup);
  IoGas(b, kFadtOffset + 116, 0x64);  // RESET_REG: the i8042 command port
  b[kFadtOffset + 128] = 0xfe;        // RESET_VALUE: pulse the reset line
  Put<uint64_t>(b, kFadtOffset + 132, kAcpiTablesAddr + kFacsOffset);  // X_FIRMWARE_CTRL
  Put<uint64_t>(b, kFadtOffset + 140, kAcpiTablesAddr + kDsdtOffset);  // X_DSDT
  IoGas(b, kFadtOffset + 148, kAcpiPmPort, 32);                        // X_PM1a_EVT_BLK
  IoGas(b, kFadtOffset + 172, kAcpiPmPort + kAcpiPm1CntOffset, 16);    // X_PM1a_CNT_BLK
  Put<uint64_t>(b, kFadtOffset + 268, 0x4b56544b56544b56ull);          // hypervisor vendor identity "VTKVTKVT"
  Finish(b, kFadtOffset);

  // MADT
  Header(b, kMadtOffset, "APIC", madt_len, 4);
  Put<uint32_t>(b, kMadtOffset + 36, static_cast<uint32_t>(kLapicAddr));
  Put<uint32_t>(b, kMadtOffset + 40, 1);  // PCAT_COMPAT: the 8259s exist (Linux masks them)
  size_t off = kMadtOffset + 44;
  for (uint32_t i = 0; i < vcpus; ++i, off += 8) {
    b[off] = 0;  // Processor Local APIC
    b[off + 1] = 8;
    b[off + 2] = static_cast<uint8_t>(i);  // ACPI processor UID
    b[off + 3] = static_cast<uint8_t>(i);  // APIC ID (= the vCPU's CPUID initial APIC ID)
    Put<uint32_t>(b, off + 4, 1);          // enabled
  }
  b[off] = 1;  // I/O APIC
  b[off + 1] = 12;
  b[off + 2] = 0;  // IOAPIC ID
  Put<uint32_t>(b, off + 4, static_cast<uint32_t>(kIoapicAddr));
  Put<uint32_t>(b, off + 8, 0);  // GSI base
  Finish(b, kMadtOffset);

  // XSDT: FADT, MADT
  Header(b, kXsdtOffset, "XSDT", 36 + 16, 1);
  Put<uint64_t>(b, kXsdtOffset + 36, kAcpiTablesAddr + kFadtOffset);
  Put<uint64_t>(b, kXsdtOffset + 44, kAcpiTablesAddr + kMadtOffset);
  Finish(b, kXsdtOffset);

  // RSDP (ACPI 2.0+): checksum over the first 20 bytes, extended checksum over all 36.
  std::memcpy(b.data() + kRsdpOffset, "RSD PTR ", 8);
  std::memcpy(b.data() + kRsdpOffset + 9, "KVTS  ", 6);
  b[kRsdpOffset + 15] = 2;
  Put<uint32_t>(b, kRsdpOffset + 20, 36);
  Put<uint64_t>(b, kRsdpOffset + 24, kAcpiTablesAddr + kXsdtOffset);
  Checksum(b, kRsdpOffset, 20, 8);
  Checksum(b, kRsdpOffset, 36, 32);
  return b;
}

void AcpiPmDevice::Read(uint16_t offset, uint8_t* data, size_t len) {
  std::memset(data, 0, len);
  // PM1a_CNT: SCI_EN and the last SLP_TYP; the event block (status, enable) reads 0.
  for (size_t i = 0; i < len; ++i) {
    size_t at = offset + i;
    if (at == kAcpiPm1CntOffset) data[i] = static_cast<uint8_t>(cnt_);
    if (at == kAcpiPm1CntOffset + 1u) data[i] = static_cast<uint8_t>(cnt_ >> 8);
  }
}

void AcpiPmDevice::Write(uint16_t offset, const uint8_t* data, size_t len) {
  // Only PM1a_CNT matters (status write-1-to-clear and enable writes are ignored: no event is ever raised).
  for (size_t i = 0; i < len; ++i) {
    size_t at = offset + i;
    if (at == kAcpiPm1CntOffset) cnt_ = static_cast<uint16_t>((cnt_ & 0xff00) | data[i]);
    if (at == kAcpiPm1CntOffset + 1u) cnt_ = static_cast<uint16_t>((cnt_ & 0x00ff) | (data[i] << 8));
  }
  if (offset > kAcpiPm1CntOffset + 1u || offset + len <= kAcpiPm1CntOffset) return;
  cnt_ |= kAcpiSciEn;
  if (!(cnt_ & kAcpiSlpEn)) return;
  cnt_ &= static_cast<uint16_t>(~kAcpiSlpEn);
  power_offs_++;
  sink_->OnGuestExit(0);  // S5 (the only sleep state the DSDT declares): the guest powered off
}

}  // namespace kvmts::vmm
