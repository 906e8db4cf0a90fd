// LinuxAcpi: the smallest ACPI a stock Linux needs to find its CPUs and interrupt controllers and to power off,
// on a PC platform with legacy devices (PIC, PIT, ISA IRQs of the UART and keyboard stay as on a PC: a
// hardware-reduced FADT would make Linux drop the legacy PIC and with it every ISA IRQ mapping). Fixed ACPI
// hardware is only the PM1a event and control blocks; no PM timer, no GPEs, no AML beyond the \_S5 object.
//
//   0xe0000 RSDP "RSD PTR " rev 2 --> XSDT --> FADT (rev 6, RESET_REG_SUP, no fixed power/sleep buttons)
//                                          |      X_DSDT --> DSDT: Name (_S5_, Package (4) {5, 0, 0, 0})
//                                          |      FIRMWARE_CTRL --> FACS (64 bytes, no waking vector)
//                                          |      PM1a_EVT_BLK = I/O 0x600 (4 bytes), PM1a_CNT_BLK = I/O 0x604 (2)
//                                          |      SCI_INT = 9, SMI_CMD = 0 (always in ACPI mode: SCI_EN reads 1)
//                                          |      RESET_REG = I/O 0x64, value 0xfe (the i8042 reset line)
//                                          +--> MADT (APIC): one Local APIC per vCPU, IOAPIC id 0 at 0xfec00000
//                                          +--> SSDT (only with PCI devices): \_SB.PCI0, the PCI root bridge
//
//   power-off: the guest writes SLP_TYP<<10 | SLP_EN (bit 13) to PM1a_CNT --> AcpiPmDevice --> OnGuestExit(0)
//   reboot:    the guest writes 0xfe to 0x64 (ACPI reset register, then the keyboard controller) --> i8042 reset
// The tables live in the e820-reserved ROM area (vmm/linux_boot.h), so the kernel never reuses that memory.
// BuildAcpiTables is pure (checksums and offsets are unit-tested); AcpiPmDevice is a port-I/O device.
#pragma once

#include <cstdint>
#include <vector>

#include "devices/bus.h"
#include "devices/test_port.h"

namespace kvmts::vmm {

inline constexpr uint64_t kAcpiTablesAddr = 0xe0000;
inline constexpr uint16_t kAcpiPmPort = 0x600, kAcpiPmPortLen = 6;  // PM1a_EVT (status, enable), PM1a_CNT
inline constexpr uint16_t kAcpiPm1CntOffset = 4;
inline constexpr uint16_t kAcpiSlpEn = 1u << 13, kAcpiSciEn = 1u << 0;
inline constexpr uint64_t kIoapicAddr = 0xfec00000, kLapicAddr = 0xfee00000;

// The tables as one blob to copy to kAcpiTablesAddr (RSDP first). vcpus: 1..64. pci_root: add the SSDT that
// declares the PCI root bridge (a machine with virtio-pci devices; see BuildPciRootSsdt), listed third in the XSDT.
std::vector<uint8_t> BuildAcpiTables(uint32_t vcpus, bool pci_root = false);

// Offsets of the tables inside the blob, for tests.
inline constexpr size_t kRsdpOffset = 0x0, kXsdtOffset = 0x40, kFadtOffset = 0x100, kFacsOffset = 0x240,
                        kDsdtOffset = 0x280, kMadtOffset = 0x300, kSsdtOffset = 0x600;

// The 32-bit MMIO window of the PCI root bridge, below the IOAPIC and inside the RAM hole; BARs live here.
inline constexpr uint64_t kPciMmioWindowBase = 0xe0000000, kPciMmioWindowBytes = 0x10000000;

// An SSDT with the PCI root bridge Linux needs to scan bus 0 once ACPI is present (it then ignores the legacy
// probe): \_SB.PCI0 with _HID PNP0A03 (conventional PCI: no ECAM), _SEG/_BBN/_UID 0 and a _CRS of bus 0..0, the config ports
// 0xCF8..0xCFF and the MMIO window above. No _PRT: the devices are MSI-X only (no INTx pin).
std::vector<uint8_t> BuildPciRootSsdt();

// The compressed EISA id as AML stores it ("PNP0A08" -> 0x080ad041).
uint32_t EisaId(const char id[8]);

// The PM1a event (status, enable: read 0, writes ignored) and control blocks. A PM1a_CNT write with SLP_EN set
// powers off (S5 is the only sleep state the DSDT declares); PM1a_CNT reads SCI_EN = 1 (ACPI mode).
class AcpiPmDevice : public devices::PioDevice {
 public:
  explicit AcpiPmDevice(devices::ExitSink* sink) : sink_(sink) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  uint64_t power_offs() const { return power_offs_; }
  // The PM1a_CNT register (SCI_EN, the last SLP_TYP), for the machine state.
  uint16_t control() const { return cnt_; }
  void set_control(uint16_t cnt) { cnt_ = cnt; }

 private:
  devices::ExitSink* sink_;
  uint64_t power_offs_ = 0;
  uint16_t cnt_ = kAcpiSciEn;
};

}  // namespace kvmts::vmm
