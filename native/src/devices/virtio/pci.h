// PCI: a type-0 configuration space model (PciConfig), the device interface (PciDevice) and bus 0 behind the PC's
// configuration mechanism #1 (PciRootBus), which is also a PCI host bridge at 00:00.0. Pure code: no KVM.
//
//   port 0xCF8 (32-bit writes only)   bit 31 enable | 23:16 bus | 15:11 device | 10:8 function | 7:2 register
//   ports 0xCFC-0xCFF                 data: config register (address & 0xfc) + (port - 0xCFC), 1/2/4 bytes
//   bus 0, function 0 only; 00:00.0 = host bridge 8086:0d57 class 06/00/00 (what Linux's type-1 sanity check
//   looks for), devices 1..31 = PciDevice; anything else reads all-ones, writes are dropped.
//
//   type-0 header (PciConfig)
//   0x00 vendor  0x02 device  0x04 command (IO 1, MEM 2, BUS MASTER 4, INTX DISABLE 0x400)  0x06 status (CAP 0x10)
//   0x08 revision | prog-if | subclass | class   0x0e header type   0x10..0x24 BAR0..5   0x2c subsystem vendor/id
//   0x34 capability pointer   0x3c interrupt line | pin    0x40.. capabilities (id, next, body)
// Every byte has a write mask; a BAR's low bits are read-only, so the driver's all-ones sizing write reads back
// ~(size - 1) with the type bits and needs no special case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "devices/bus.h"

namespace kvmts::devices::virtio {

inline constexpr uint16_t kPciVendorOffset = 0x00, kPciDeviceOffset = 0x02, kPciCommandOffset = 0x04,
                          kPciStatusOffset = 0x06, kPciRevisionOffset = 0x08, kPciClassOffset = 0x09,
                          kPciHeaderTypeOffset = 0x0e, kPciBar0Offset = 0x10, kPciSubsystemVendorOffset = 0x2c,
                          kPciSubsystemOffset = 0x2e, kPciCapPointerOffset = 0x34, kPciInterruptLineOffset = 0x3c,
                          kPciInterruptPinOffset = 0x3d, kPciFirstCapOffset = 0x40;
inline constexpr uint16_t kPciCommandIo = 0x1, kPciCommandMemory = 0x2, kPciCommandBusMaster = 0x4,
                          kPciCommandIntxDisable = 0x400;
inline constexpr uint16_t kPciStatusCapList = 0x10;
inline constexpr uint32_t kPciBarMem64 = 0x4;  // memory BAR, type 64-bit, not prefetchable
inline constexpr size_t kPciConfigBytes = 256;
inline constexpr uint16_t kPciConfigAddressPort = 0xcf8, kPciConfigDataPort = 0xcfc, kPciConfigPortCount = 8;
inline constexpr uint32_t kPciConfigEnableBit = 0x80000000u;
inline constexpr uint16_t kHostBridgeVendor = 0x8086, kHostBridgeDevice = 0x0d57;
inline constexpr uint8_t kPciMaxDevices = 32;

// A 256-byte type-0 configuration space with per-byte write masks.
class PciConfig {
 public:
  PciConfig();
  // Identity: vendor, device, 24-bit class code (class << 16 | subclass << 8 | prog-if), revision, subsystem.
  void SetIdentity(uint16_t vendor, uint16_t device, uint32_t class_code, uint8_t revision, uint16_t sub_vendor,
                   uint16_t sub_device);
  // A 64-bit memory BAR at index (0..4, uses index and index+1), size a power of two >= 16, at gpa.
  void AddBar64(int index, uint64_t size, uint64_t gpa);
  // Appends a capability (id, then `body` after the id/next bytes) and links it; returns its offset, or 0 when
  // it does not fit. Bytes of the body listed in `writable` (a mask per body byte, may be empty) are writable.
  uint16_t AddCapability(uint8_t id, const std::vector<uint8_t>& body, const std::vector<uint8_t>& writable = {});
  // The BAR's current address (the low type bits masked off).
  uint64_t BarAddress(int index) const;
  void SetBarAddress(int index, uint64_t gpa);
  uint64_t BarSize(int index) const { return bar_size_[index]; }
  uint16_t command() const { return Get16(kPciCommandOffset); }

  // Config accesses; offset + len <= 256 and len 1, 2 or 4 (else reads are all-ones and writes are dropped).
  void Read(uint16_t offset, uint8_t* data, size_t len) const;
  void Write(uint16_t offset, const uint8_t* data, size_t len);
  uint16_t Get16(uint16_t offset) const { return static_cast<uint16_t>(bytes_[offset] | bytes_[offset + 1] << 8); }
  uint32_t Get32(uint16_t offset) const;
  void Set16(uint16_t offset, uint16_t v);
  void Set32(uint16_t offset, uint32_t v);
  // The raw bytes, for save/restore.
  const uint8_t* bytes() const { return bytes_; }
  void SetBytes(const uint8_t* b) { for (size_t i = 0; i < kPciConfigBytes; ++i) bytes_[i] = b[i]; }

 private:
  uint8_t bytes_[kPciConfigBytes];
  uint8_t wmask_[kPciConfigBytes];
  uint64_t bar_size_[6] = {};
  uint16_t next_cap_ = kPciFirstCapOffset;
  uint16_t last_cap_ = 0;
};

// A device function on bus 0. Config accesses come from the 0xCF8/0xCFC ports, BAR accesses from MMIO exits.
class PciDevice {
 public:
  virtual ~PciDevice() = default;
  virtual void ConfigRead(uint16_t offset, uint8_t* data, size_t len) = 0;
  virtual void ConfigWrite(uint16_t offset, const uint8_t* data, size_t len) = 0;
  // MMIO at guest address addr: false when none of this device's enabled BARs covers [addr, addr+len).
  virtual bool MmioRead(uint64_t addr, uint8_t* data, size_t len) = 0;
  virtual bool MmioWrite(uint64_t addr, const uint8_t* data, size_t len) = 0;
};

// Bus 0 and its host bridge, reached through ports 0xCF8..0xCFF (register it on the PioBus there). Devices are
// added before the guest runs; the list is then fixed.
class PciRootBus : public PioDevice {
 public:
  PciRootBus();
  // Puts dev at 00:slot.0 (slot 1..31); false when taken or out of range.
  bool AddDevice(uint8_t slot, PciDevice* dev);
  void Read(uint16_t offset, uint8_t* data, size_t len) override;
  void Write(uint16_t offset, const uint8_t* data, size_t len) override;
  // MMIO dispatch to the device whose BAR covers the address; false when none does.
  bool MmioRead(uint64_t addr, uint8_t* data, size_t len);
  bool MmioWrite(uint64_t addr, const uint8_t* data, size_t len);
  uint32_t address() const { return address_; }
  void set_address(uint32_t a) { address_ = a; }

 private:
  // The device the latched address selects, with the register offset; nullptr for none.
  PciDevice* Selected(uint16_t* reg, bool* host_bridge);
  uint32_t address_ = 0;
  PciConfig host_bridge_;
  PciDevice* devices_[kPciMaxDevices] = {};
};

}  // namespace kvmts::devices::virtio
