// MsixTable: a PCI function's MSI-X table and pending-bit array (PCI spec 6.8.2), pure state. The transport owns
// one, maps it into its BAR and delivers messages through an MsiSink (KVM_SIGNAL_MSI); an MsiRouter (irqfd) carries
// a device's eventfd straight into KVM while the vector is deliverable.
//
//   table entry i at 16*i:  +0 le32 message address low | +4 address high | +8 le32 data | +12 vector control
//                           (bit 0 = masked; every entry starts masked)
//   PBA: bit i set while vector i fired masked; cleared when it is delivered on unmask.
//   capability message control: bit 15 enable, bit 14 function mask, bits 10:0 table size - 1 (read-only).
//
//   Signal(v): disabled -> not delivered (the caller falls back to the ISR); masked (entry or function) -> PBA bit;
//              else sink.SignalMsi(address, data).
//   Unmasking an entry, clearing the function mask or enabling delivers a pending vector once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvmts::devices::virtio {

inline constexpr uint64_t kMsixEntryBytes = 16;
inline constexpr uint32_t kMsixVectorMasked = 1;
inline constexpr uint16_t kMsixControlEnable = 0x8000, kMsixControlFunctionMask = 0x4000;
inline constexpr uint16_t kMsixNoVector = 0xffff;  // virtio's VIRTIO_MSI_NO_VECTOR

// Where an MSI goes: the machine turns (address, data) into an interrupt (KVM_SIGNAL_MSI).
class MsiSink {
 public:
  virtual ~MsiSink() = default;
  virtual void SignalMsi(uint64_t address, uint32_t data) = 0;
};

// Where an eventfd's signals go without a userspace hop: the machine routes an MSI to a GSI and has KVM raise it
// whenever the eventfd is signalled (KVM_IRQFD). The transport attaches a device's eventfd while the queue's vector
// is deliverable and detaches it while it is masked (the device's own relay then sees the signal and the vector
// goes pending as for any masked MSI).
class MsiRouter {
 public:
  virtual ~MsiRouter() = default;
  // Routes (address, data) for `fd` (again, with a new message, when attached already); false when it cannot (the
  // relay goes on).
  virtual bool Attach(int fd, uint64_t address, uint32_t data) = 0;
  virtual void Detach(int fd) = 0;
};

class MsixTable {
 public:
  explicit MsixTable(uint16_t vectors);
  uint16_t size() const { return static_cast<uint16_t>(entries_.size()); }
  bool enabled() const { return enabled_; }
  bool function_masked() const { return function_masked_; }
  // Back to power-on: disabled, every entry masked and zero, nothing pending.
  void Reset();
  // The capability's enable and function-mask bits changed; delivers what became deliverable (returns how many).
  uint32_t SetControl(bool enabled, bool function_masked, MsiSink* sink);
  // Table accesses at a byte offset into the table: 4- or 8-byte aligned accesses, others read 0 / are dropped.
  // A write that unmasks a pending vector delivers it (returns how many were delivered).
  void TableRead(uint64_t offset, uint8_t* data, size_t len) const;
  uint32_t TableWrite(uint64_t offset, const uint8_t* data, size_t len, MsiSink* sink);
  // PBA reads (writes are ignored by the spec).
  void PbaRead(uint64_t offset, uint8_t* data, size_t len) const;
  uint64_t PbaBytes() const { return 8 * ((entries_.size() + 63) / 64); }
  // Fires vector v: true when delivered now, false when disabled, out of range, or left pending while masked.
  bool Signal(uint16_t v, MsiSink* sink);
  bool Pending(uint16_t v) const { return v < entries_.size() && pending_[v]; }
  // Enabled, neither the function nor vector v masked, v in range.
  bool Deliverable(uint16_t v) const;
  // Vector v's message address and data (v in range).
  uint64_t Address(uint16_t v) const {
    return static_cast<uint64_t>(entries_[v].addr_hi) << 32 | entries_[v].addr_lo;
  }
  uint32_t Data(uint16_t v) const { return entries_[v].data; }

  // Persist: u8 version (1) | u8 flags (enable 1, function mask 2) | u16 n | n x 16-byte entries | n pending bytes.
  std::vector<uint8_t> Save() const;
  bool Restore(const uint8_t* data, size_t len);

 private:
  struct Entry {
    uint32_t addr_lo = 0, addr_hi = 0, data = 0, control = kMsixVectorMasked;
  };
  uint32_t DeliverPending(MsiSink* sink);
  std::vector<Entry> entries_;
  std::vector<uint8_t> pending_;
  bool enabled_ = false;
  bool function_masked_ = false;
};

}  // namespace kvmts::devices::virtio
