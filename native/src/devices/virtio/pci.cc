// PciConfig and PciRootBus: see pci.h for the register layout and the address port.
#include "devices/virtio/pci.h"

#include <cstring>

namespace kvmts::devices::virtio {

namespace {

bool AccessOk(uint16_t offset, size_t len) {
  return (len == 1 || len == 2 || len == 4) && offset + len <= kPciConfigBytes && (offset & (len - 1)) == 0;
}

}  // namespace

PciConfig::PciConfig() {
  std::memset(bytes_, 0, sizeof bytes_);
  std::memset(wmask_, 0, sizeof wmask_);
  // command: IO, memory, bus master, INTx disable are writable; interrupt line is scratch for the OS.
  wmask_[kPciCommandOffset] = kPciCommandIo | kPciCommandMemory | kPciCommandBusMaster;
  wmask_[kPciCommandOffset + 1] = kPciCommandIntxDisable >> 8;
  wmask_[kPciInterruptLineOffset] = 0xff;
}

void PciConfig::SetIdentity(uint16_t vendor, uint16_t device, uint32_t class_code, uint8_t revision,
                            uint16_t sub_vendor, uint16_t sub_device) {
  Set16(kPciVendorOffset, vendor);
  Set16(kPciDeviceOffset, device);
  bytes_[kPciRevisionOffset] = revision;
  bytes_[kPciClassOffset] = static_cast<uint8_t>(class_code);
  bytes_[kPciClassOffset + 1] = static_cast<uint8_t>(class_code >> 8);
  bytes_[kPciClassOffset + 2] = static_cast<uint8_t>(class_code >> 16);
  bytes_[kPciHeaderTypeOffset] = 0;
  Set16(kPciSubsystemVendorOffset, sub_vendor);
  Set16(kPciSubsystemOffset, sub_device);
}

void PciConfig::AddBar64(int index, uint64_t size, uint64_t gpa) {
  bar_size_[index] = size;
  uint16_t off = static_cast<uint16_t>(kPciBar0Offset + 4 * index);
  uint64_t mask = ~(size - 1);
  for (int i = 0; i < 8; ++i) wmask_[off + i] = static_cast<uint8_t>(mask >> (8 * i));
  wmask_[off] &= 0xf0;  // type bits are read-only
  SetBarAddress(index, gpa);
}

uint64_t PciConfig::BarAddress(int index) const {
  uint16_t off = static_cast<uint16_t>(kPciBar0Offset + 4 * index);
  uint64_t lo = Get32(off) & ~0xfull;
  uint64_t hi = Get32(static_cast<uint16_t>(off + 4));
  return hi << 32 | lo;
}

void PciConfig::SetBarAddress(int index, uint64_t gpa) {
  uint16_t off = static_cast<uint16_t>(kPciBar0Offset + 4 * index);
  Set32(off, static_cast<uint32_t>(gpa & ~0xfull) | kPciBarMem64);
  Set32(static_cast<uint16_t>(off + 4), static_cast<uint32_t>(gpa >> 32));
}

uint16_t PciConfig::AddCapability(uint8_t id, const std::vector<uint8_t>& body, const std::vector<uint8_t>& writable) {
  size_t len = 2 + body.size();
  if (next_cap_ + len > kPciConfigBytes) return 0;
  uint16_t at = next_cap_;
  bytes_[at] = id;
  bytes_[at + 1] = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    bytes_[at + 2 + i] = body[i];
    wmask_[at + 2 + i] = i < writable.size() ? writable[i] : 0;
  }
  if (last_cap_ == 0) {
    bytes_[kPciCapPointerOffset] = static_cast<uint8_t>(at);
    Set16(kPciStatusOffset, Get16(kPciStatusOffset) | kPciStatusCapList);
  } else {
    bytes_[last_cap_ + 1] = static_cast<uint8_t>(at);
  }
  last_cap_ = at;
  next_cap_ = static_cast<uint16_t>((at + len + 3) & ~3u);  // capabilities are dword-aligned
  return at;
}

uint32_t PciConfig::Get32(uint16_t offset) const {
  uint32_t v;
  std::memcpy(&v, bytes_ + offset, 4);
  return v;
}

void PciConfig::Set16(uint16_t offset, uint16_t v) { std::memcpy(bytes_ + offset, &v, 2); }
void PciConfig::Set32(uint16_t offset, uint32_t v) { std::memcpy(bytes_ + offset, &v, 4); }

void PciConfig::Read(uint16_t offset, uint8_t* data, size_t len) const {
  if (!AccessOk(offset, len)) {
    std::memset(data, 0xff, len);
    return;
  }
  std::memcpy(data, bytes_ + offset, len);
}

void PciConfig::Write(uint16_t offset, const uint8_t* data, size_t len) {
  if (!AccessOk(offset, len)) return;
  for (size_t i = 0; i < len; ++i) {
    uint8_t m = wmask_[offset + i];
    bytes_[offset + i] = static_cast<uint8_t>((bytes_[offset + i] & ~m) | (data[i] & m));
  }
}

PciRootBus::PciRootBus() {
  host_bridge_.SetIdentity(kHostBridgeVendor, kHostBridgeDevice, 0x060000, 0, 0, 0);
}

bool PciRootBus::AddDevice(uint8_t slot, PciDevice* dev) {
  if (slot == 0 || slot >= kPciMaxDevices || devices_[slot] != nullptr || dev == nullptr) return false;
  devices_[slot] = dev;
  return true;
}

PciDevice* PciRootBus::Selected(uint16_t* reg, bool* host_bridge) {
  *host_bridge = false;
  if (!(address_ & kPciConfigEnableBit)) return nullptr;
  uint32_t bus = (address_ >> 16) & 0xff, slot = (address_ >> 11) & 0x1f, function = (address_ >> 8) & 0x7;
  *reg = static_cast<uint16_t>(address_ & 0xfc);
  if (bus != 0 || function != 0) return nullptr;
  if (slot == 0) {
    *host_bridge = true;
    return nullptr;
  }
  return devices_[slot];
}

void PciRootBus::Read(uint16_t offset, uint8_t* data, size_t len) {
  std::memset(data, 0xff, len);
  if (offset < 4) {  // the address register: any width reads its bytes (a straddling read sees 0xff past it)
    for (size_t i = 0; i < len && offset + i < 4; ++i) data[i] = static_cast<uint8_t>(address_ >> (8 * (offset + i)));
    return;
  }
  uint16_t reg = 0;
  bool bridge = false;
  PciDevice* dev = Selected(&reg, &bridge);
  uint16_t at = static_cast<uint16_t>(reg + (offset - 4));
  if (offset - 4 + len > 4) return;  // an access that straddles the data window
  if (bridge) {
    host_bridge_.Read(at, data, len);
  } else if (dev != nullptr) {
    dev->ConfigRead(at, data, len);
  }
}

void PciRootBus::Write(uint16_t offset, const uint8_t* data, size_t len) {
  if (offset < 4) {
    // Only a whole-dword write latches the address (Linux's type-1 probe writes a byte to 0xCFB first).
    if (offset == 0 && len == 4) std::memcpy(&address_, data, 4);
    return;
  }
  uint16_t reg = 0;
  bool bridge = false;
  PciDevice* dev = Selected(&reg, &bridge);
  uint16_t at = static_cast<uint16_t>(reg + (offset - 4));
  if (offset - 4 + len > 4) return;
  if (bridge) {
    host_bridge_.Write(at, data, len);
  } else if (dev != nullptr) {
    dev->ConfigWrite(at, data, len);
  }
}

bool PciRootBus::MmioRead(uint64_t addr, uint8_t* data, size_t len) {
  for (PciDevice* dev : devices_) {
    if (dev != nullptr && dev->MmioRead(addr, data, len)) return true;
  }
  return false;
}

bool PciRootBus::MmioWrite(uint64_t addr, const uint8_t* data, size_t len) {
  for (PciDevice* dev : devices_) {
    if (dev != nullptr && dev->MmioWrite(addr, data, len)) return true;
  }
  return false;
}

}  // namespace kvmts::devices::virtio
