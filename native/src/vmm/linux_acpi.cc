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

std::vector<uint8_t> BuildAcpiTables(uint32_t vcpus, bool pci_root) {
  uint32_t madt_len = 44 + 8 * vcpus + 12;
  std::vector<uint8_t> b(kMadtOffset + madt_len, 0);
  if (pci_root) {
    std::vector<uint8_t> ssdt = BuildPciRootSsdt();
    b.resize(kSsdtOffset, 0);
    b.insert(b.end(), ssdt.begin(), ssdt.end());
  }

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

  // XSDT: FADT, MADT [, SSDT]
  Header(b, kXsdtOffset, "XSDT", 36 + (pci_root ? 24 : 16), 1);
  Put<uint64_t>(b, kXsdtOffset + 36, kAcpiTablesAddr + kFadtOffset);
  Put<uint64_t>(b, kXsdtOffset + 44, kAcpiTablesAddr + kMadtOffset);
  if (pci_root) Put<uint64_t>(b, kXsdtOffset + 52, kAcpiTablesAddr + kSsdtOffset);
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

namespace {

// AML PkgLength (ACPI 6.x, 20.2.4): the length of what follows the opcode, counting the PkgLength bytes too.
void AmlPackage(std::vector<uint8_t>& out, const std::vector<uint8_t>& body) {
  size_t n = body.size();
  if (n + 1 < 0x40) {
    out.push_back(static_cast<uint8_t>(n + 1));
  } else if (n + 2 < 0x1000) {
    size_t v = n + 2;
    out.push_back(static_cast<uint8_t>(0x40 | (v & 0xf)));
    out.push_back(static_cast<uint8_t>(v >> 4));
  } else {
    size_t v = n + 3;
    out.push_back(static_cast<uint8_t>(0x80 | (v & 0xf)));
    out.push_back(static_cast<uint8_t>(v >> 4));
    out.push_back(static_cast<uint8_t>(v >> 12));
  }
  out.insert(out.end(), body.begin(), body.end());
}

constexpr uint8_t kAmlZeroOp = 0x00, kAmlNameOp = 0x08, kAmlDWordPrefix = 0x0c, kAmlBytePrefix = 0x0a,
                  kAmlScopeOp = 0x10, kAmlBufferOp = 0x11, kAmlExtOpPrefix = 0x5b, kAmlDeviceOp = 0x82,
                  kAmlRootChar = 0x5c;

void AmlNameSeg(std::vector<uint8_t>& out, const char seg[5]) { out.insert(out.end(), seg, seg + 4); }

void AmlNameDWord(std::vector<uint8_t>& out, const char seg[5], uint32_t v) {
  out.push_back(kAmlNameOp);
  AmlNameSeg(out, seg);
  out.push_back(kAmlDWordPrefix);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void AmlNameZero(std::vector<uint8_t>& out, const char seg[5]) {
  out.push_back(kAmlNameOp);
  AmlNameSeg(out, seg);
  out.push_back(kAmlZeroOp);
}

template <typename T>
void Le(std::vector<uint8_t>& out, T v) {
  for (size_t i = 0; i < sizeof v; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}

// The root bridge's resources (ACPI 6.x, 6.4 resource descriptors): bus 0..0, I/O 0xCF8/8, the MMIO window.
std::vector<uint8_t> PciRootResources() {
  constexpr uint8_t kWordAddress = 0x88, kDWordAddress = 0x87, kIoPort = 0x47, kEndTag = 0x79;
  constexpr uint8_t kBusRange = 2, kMemoryRange = 0;
  constexpr uint8_t kProducerMinMaxFixed = 0x0c;  // producer, positive decode, min and max fixed
  constexpr uint8_t kReadWriteUncached = 0x01;
  std::vector<uint8_t> r;
  r.insert(r.end(), {kWordAddress, 13, 0, kBusRange, kProducerMinMaxFixed, 0});
  for (uint16_t v : {0, 0, 0, 0, 1}) Le<uint16_t>(r, v);  // granularity, min, max, translation, length
  r.insert(r.end(), {kIoPort, 1, 0xf8, 0x0c, 0xf8, 0x0c, 1, 8});  // 16-bit decode, 0xCF8..0xCF8, align 1, 8 ports
  r.insert(r.end(), {kDWordAddress, 23, 0, kMemoryRange, kProducerMinMaxFixed, kReadWriteUncached});
  for (uint64_t v : {uint64_t{0}, kPciMmioWindowBase, kPciMmioWindowBase + kPciMmioWindowBytes - 1, uint64_t{0},
                     kPciMmioWindowBytes}) {
    Le<uint32_t>(r, static_cast<uint32_t>(v));
  }
  r.insert(r.end(), {kEndTag, 0});  // checksum 0: "treat as correct"
  return r;
}

}  // namespace

uint32_t EisaId(const char id[8]) {
  auto hex = [](char c) { return static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'A' + 10); };
  uint32_t vendor = (static_cast<uint32_t>(id[0] - 0x40) & 0x1f) << 10 |
                    (static_cast<uint32_t>(id[1] - 0x40) & 0x1f) << 5 | (static_cast<uint32_t>(id[2] - 0x40) & 0x1f);
  uint32_t product = hex(id[3]) << 12 | hex(id[4]) << 8 | hex(id[5]) << 4 | hex(id[6]);
  // Both 16-bit halves are stored big-endian.
  return (vendor >> 8 | (vendor & 0xff) << 8) | (product >> 8 | (product & 0xff) << 8) << 16;
}

std::vector<uint8_t> BuildPciRootSsdt() {
  std::vector<uint8_t> device;  // the TermList of Device (PCI0)
  // Conventional PCI (PNP0A03), not PCI Express (PNP0A08): there is no ECAM/MCFG, config space is the 256 bytes
  // of mechanism #1, and a PNP0A08 bridge would make Linux negotiate PCIe features through an _OSC we lack.
  AmlNameDWord(device, "_HID", EisaId("PNP0A03"));
  AmlNameZero(device, "_SEG");
  AmlNameZero(device, "_BBN");
  AmlNameZero(device, "_UID");
  std::vector<uint8_t> res = PciRootResources();
  std::vector<uint8_t> buffer{kAmlBytePrefix, static_cast<uint8_t>(res.size())};
  buffer.insert(buffer.end(), res.begin(), res.end());
  device.push_back(kAmlNameOp);
  AmlNameSeg(device, "_CRS");
  device.push_back(kAmlBufferOp);
  AmlPackage(device, buffer);

  std::vector<uint8_t> dev_body;
  AmlNameSeg(dev_body, "PCI0");
  dev_body.insert(dev_body.end(), device.begin(), device.end());
  std::vector<uint8_t> scope_body{kAmlRootChar};
  AmlNameSeg(scope_body, "_SB_");
  scope_body.push_back(kAmlExtOpPrefix);
  scope_body.push_back(kAmlDeviceOp);
  AmlPackage(scope_body, dev_body);
  std::vector<uint8_t> aml{kAmlScopeOp};
  AmlPackage(aml, scope_body);

  std::vector<uint8_t> t(36 + aml.size(), 0);
  Header(t, 0, "SSDT", static_cast<uint32_t>(t.size()), 2);
  std::memcpy(t.data() + 36, aml.data(), aml.size());
  Finish(t, 0);
  return t;
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
