// LinuxAcpi: the smallest ACPI a stock Linux needs to find its CPUs and interrupt controllers and to power off
// (Cloud Hypervisor's hardware-reduced layout, reduced): no SCI, no PM timer, no AML beyond the \_S5 object.
//
//   0xe0000 RSDP "RSD PTR " rev 2 --> XSDT --> FADT (rev 6, HW_REDUCED_ACPI, RESET_REG_SUP)
//                                          |      X_DSDT --> DSDT: Name (_S5_, Package (4) {5, 0, 0, 0})
//                                          |      SLEEP_CONTROL_REG = I/O 0x600, SLEEP_STATUS_REG = I/O 0x601
//                                          |      RESET_REG = I/O 0x64, value 0xfe (the i8042 reset line)
//                                          +--> MADT (APIC): one Local APIC per vCPU, IOAPIC id 0 at 0xfec00000
//
//   power-off: the guest writes SLP_TYP<<2 | SLP_EN (bit 5) to 0x600 --> AcpiPmDevice --> ExitSink::OnGuestExit(0)
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
inline constexpr uint16_t kAcpiPmPort = 0x600, kAcpiPmPortLen = 2;  // sleep control, sleep status
inline constexpr uint8_t kAcpiSlpEn = 0x20;
inline constexpr uint64_t kIoapicAddr = 0xfec00000, kLapicAddr = 0xfee00000;

// The tables as one blob to copy to kAcpiTablesAddr (RSDP first). vcpus: 1..64.
std::vector<uint8_t> BuildAcpiTables(uint32_t vcpus);

// Offsets of the tables inside the blob, for tests.
inline constexpr size_t kRsdpOffset = 0x0, kXsdtOffset = 0x40, kFadtOffset = 0x100, kDsdtOffset = 0x240,
                        kMadtOffset = 0x300;

// The sleep control/status registers of the hardware-reduced FADT. A write with SLP_EN set powers off.
class AcpiPmDevice : public devices::PioDevice {
 public:
  explicit AcpiPmDevice(devices::ExitSink* sink) : sink_(sink) {}
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  uint64_t power_offs() const { return power_offs_; }

 private:
  devices::ExitSink* sink_;
  uint64_t power_offs_ = 0;
};

}  // namespace kvmts::vmm
