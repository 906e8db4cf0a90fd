// StateBlob: the byte format of Machine::SaveState, a tagged-section container (Firecracker `Persist` snapshots,
// reduced). Pure; tested on its own.
//
//   "KVTS" | u32 version (2) | u32 vcpu_count | section*
//   section = u32 tag | u32 vcpu (or 0xffffffff for machine-wide) | u64 length | length bytes
// All integers little-endian (x86 host order). Unknown tags are an error on restore (no silent partial state).
//
// Versions (the current and the previous one are read, STYLE section 4):
//   1  vCPUs (regs, sregs, XSAVE, XCRs, LAPIC, events, MP state, debug regs, MSRs), the KVM clock, the UART.
//   2  adds what a Linux guest on the PC platform needs: the platform (kTagPlatform: a v2 blob is refused by a
//      machine of the other kind), per vCPU the CPUID table and the TSC frequency, the in-kernel PIC master and
//      slave and IOAPIC (KVM_GET_IRQCHIP), the PIT (KVM_GET_PIT2), the 8042 and the ACPI PM1a control register.
//      Its clock section keeps KVM_GET_CLOCK's flags (KVM_CLOCK_REALTIME: the target adds the time in between).
//      A v2 blob of a machine with disks or NICs also carries one kTagVirtioPci section per virtio-pci function
//      (payload: u32 PCI slot | the transport's Save() blob, devices/virtio/virtio_pci.cc); a machine restores
//      only a blob whose virtio sections match its own functions one for one (no version bump: a machine
//      without disks writes and reads exactly what it did before).
// The payload of each section is the KVM struct as the ioctl returns it (or the device's own Save() bytes).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvmts::vmm {

inline constexpr uint32_t kStateVersion = 2;
inline constexpr uint32_t kStateVersionPrevious = 1;
inline constexpr uint32_t kMachineWide = 0xffffffffu;

enum StateTag : uint32_t {
  // per vCPU
  kTagRegs = 1, kTagSregs, kTagXsave, kTagXcrs, kTagLapic, kTagEvents, kTagMpState, kTagDebugRegs, kTagMsrs,
  kTagCpuid, kTagTscKhz,                                            // v2
  // machine-wide
  kTagClock = 100, kTagSerial,
  kTagPlatform, kTagPicMaster, kTagPicSlave, kTagIoapic, kTagPit, kTagPs2, kTagAcpiPm,  // v2
  kTagVirtioPci,                                                                        // v2, with disks/NICs
};

// kTagPlatform payload: u32 flags.
inline constexpr uint32_t kPlatformLinux = 1u << 0;

class StateWriter {
 public:
  // `version` other than kStateVersion only for tests of the previous version's reader.
  explicit StateWriter(uint32_t vcpus, uint32_t version = kStateVersion) {
    buf_.insert(buf_.end(), {'K', 'V', 'T', 'S'});
    Put32(version);
    Put32(vcpus);
  }
  void Section(uint32_t tag, uint32_t vcpu, const void* data, uint64_t len) {
    Put32(tag);
    Put32(vcpu);
    Put64(len);
    const auto* p = static_cast<const uint8_t*>(data);
    buf_.insert(buf_.end(), p, p + len);
  }
  std::vector<uint8_t> Take() { return std::move(buf_); }

 private:
  void Put32(uint32_t v) { for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void Put64(uint64_t v) { for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  std::vector<uint8_t> buf_;
};

struct StateSection {
  uint32_t tag = 0;
  uint32_t vcpu = 0;
  const uint8_t* data = nullptr;
  uint64_t len = 0;
};

// Parses the header and every section; returns false (with *why) on any malformation.
// *version is the blob's version (kStateVersion or kStateVersionPrevious).
inline bool ParseState(const uint8_t* data, size_t len, uint32_t* version, uint32_t* vcpus,
                       std::vector<StateSection>* out, std::string* why) {
  auto get32 = [&](size_t off) { uint32_t v; std::memcpy(&v, data + off, 4); return v; };
  if (len < 12 || std::memcmp(data, "KVTS", 4) != 0) return *why = "bad magic", false;
  *version = get32(4);
  if (*version != kStateVersion && *version != kStateVersionPrevious) {
    return *why = "unsupported version " + std::to_string(*version), false;
  }
  *vcpus = get32(8);
  size_t off = 12;
  while (off < len) {
    if (len - off < 16) return *why = "truncated section header", false;
    StateSection s;
    s.tag = get32(off);
    s.vcpu = get32(off + 4);
    std::memcpy(&s.len, data + off + 8, 8);
    off += 16;
    if (s.len > len - off) return *why = "truncated section", false;
    s.data = data + off;
    off += s.len;
    out->push_back(s);
  }
  return true;
}

}  // namespace kvmts::vmm
