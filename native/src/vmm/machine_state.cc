// Machine::SaveState / RestoreState: every vCPU's architectural state, the interrupt controllers and timers in the
// kernel, the devices and the KVM clock, in the blob of vmm/state_blob.h (version 2; version 1 is still read).
//
// Save (machine paused, or created): the platform, the KVM clock first (the instant the guest stopped), then per
// vCPU CPUID, TSC kHz, MP state, regs, sregs, XSAVE, XCRs, debug regs, LAPIC, MSRs (kvmclock's among them:
// MSR_KVM_SYSTEM_TIME_NEW, MSR_KVM_WALL_CLOCK_NEW), pending events; then the PIC master, PIC slave, IOAPIC and
// PIT, and the devices. The UART's and the 8042's locks are held while the interrupt controllers are read, so an
// edge a device raises (console input arrives on the JS thread) is either in both snapshots or in neither.
//
// Restore applies the sections in this order, whatever their order in the blob (QEMU's kvm_arch_put_registers,
// then the devices, then the clock as the VM starts):
//
//   1 CPUID, TSC kHz        before any register: the TSC MSR is scaled by the frequency; CPUID gates MSRs/XSAVE
//   2 PIC, PIC, IOAPIC, PIT interrupt routing and timer 0 in place before a vCPU can see an interrupt
//   3 regs, XSAVE, XCRs, sregs (CR4/EFER/APIC base before the MSRs and the LAPIC), MSRs except TSC deadline,
//     MP state, LAPIC, then MSR_IA32_TSC_DEADLINE (armed against the restored LAPIC), events, debug regs
//   4 UART, 8042, ACPI PM; their interrupt lines are pulsed again when an interrupt was pending; the virtio-pci
//     functions (restored parked: their queues run from Start/Resume, see vmm/machine_virtio.cc)
//   5 the KVM clock, last: with KVM_CLOCK_REALTIME (when saved and offered) KVM adds the wall time since the save,
//     so the guest's clock moves by the real downtime and never backwards; without it the clock resumes where it
//     stopped (the guest then runs behind by the downtime)
#include <errno.h>

#include <algorithm>

#include "kvm/irqchip.h"
#include "vmm/machine.h"
#include "vmm/machine_impl.h"
#include "vmm/state_blob.h"

namespace kvmts::vmm {
namespace {

constexpr uint32_t kMsrTscDeadline = 0x6e0;
constexpr uint32_t kMsrTsc = 0x10;

// The PCI slot of the i-th virtio function (vmm/machine_virtio.cc puts function i, disks then NICs, at 00:(i+1).0).
uint32_t VirtioSlot(size_t i) { return static_cast<uint32_t>(i + 1); }

Error BlobError(const std::string& why) { return Error{EINVAL, "restore-state", why}; }

template <typename T>
void Take(const StateSection& s, T* out) {
  std::memcpy(out, s.data, sizeof(T));
}

bool IsMachineWide(uint32_t tag) { return tag >= kTagClock; }

// The payload size a section must have, or 0 when it varies (checked separately).
size_t FixedSize(uint32_t tag) {
  switch (tag) {
    case kTagRegs: return sizeof(kvm_regs);
    case kTagSregs: return sizeof(kvm_sregs);
    case kTagXcrs: return sizeof(kvm_xcrs);
    case kTagLapic: return sizeof(kvm_lapic_state);
    case kTagEvents: return sizeof(kvm_vcpu_events);
    case kTagMpState: return sizeof(kvm_mp_state);
    case kTagDebugRegs: return sizeof(kvm_debugregs);
    case kTagTscKhz: return sizeof(uint32_t);
    case kTagClock: return sizeof(kvm_clock_data);
    case kTagPlatform: return sizeof(uint32_t);
    case kTagPicMaster: case kTagPicSlave: case kTagIoapic: return sizeof(kvm_irqchip);
    case kTagPit: return sizeof(kvm_pit_state2);
    case kTagAcpiPm: return sizeof(uint16_t);
    default: return 0;
  }
}

// Restore order (see the top of the file); lower first, blob order within a rank.
int Rank(uint32_t tag) {
  switch (tag) {
    case kTagPlatform: return 0;
    case kTagCpuid: return 1;
    case kTagTscKhz: return 2;
    case kTagPicMaster: return 3;
    case kTagPicSlave: return 4;
    case kTagIoapic: return 5;
    case kTagPit: return 6;
    case kTagRegs: return 10;
    case kTagXsave: return 11;
    case kTagXcrs: return 12;
    case kTagSregs: return 13;
    case kTagMsrs: return 14;
    case kTagMpState: return 15;
    case kTagLapic: return 16;  // followed by the vCPU's TSC deadline (applied with it)
    case kTagEvents: return 17;
    case kTagDebugRegs: return 18;
    case kTagSerial: case kTagPs2: case kTagAcpiPm: case kTagVirtioPci: return 20;
    case kTagClock: return 30;
    default: return 99;
  }
}

// Checks every section's tag, vCPU and size, so a bad blob is refused before KVM is touched.
Status Validate(const std::vector<StateSection>& sections, uint32_t vcpus, bool linux_platform,
                const std::vector<uint32_t>& virtio_slots) {
  std::vector<uint32_t> blob_slots;
  uint32_t platform = 0;
  bool has_platform = false;
  for (const auto& sec : sections) {
    if (IsMachineWide(sec.tag) ? sec.vcpu != kMachineWide : sec.vcpu >= vcpus) {
      return BlobError("section " + std::to_string(sec.tag) + " for a missing vCPU");
    }
    switch (sec.tag) {
      case kTagXsave:
        if (sec.len < kvm::abi::kXsaveBytes) return BlobError("short XSAVE");
        continue;
      case kTagMsrs:
        if (sec.len % sizeof(kvm_msr_entry)) return BlobError("bad MSR section");
        continue;
      case kTagCpuid:
        if (sec.len == 0 || sec.len % sizeof(kvm_cpuid_entry2) || sec.len > 256 * sizeof(kvm_cpuid_entry2)) {
          return BlobError("bad CPUID section");
        }
        continue;
      case kTagSerial: case kTagPs2: continue;  // the devices check their own bytes
      case kTagVirtioPci: {
        if (sec.len < sizeof(uint32_t)) return BlobError("short virtio section");
        uint32_t slot;
        std::memcpy(&slot, sec.data, sizeof slot);
        blob_slots.push_back(slot);
        continue;  // the transport checks the rest
      }
      default: break;
    }
    size_t want = FixedSize(sec.tag);
    if (want == 0) return BlobError("unknown section " + std::to_string(sec.tag));
    if (sec.len != want) return BlobError("section " + std::to_string(sec.tag) + " has the wrong size");
    if (sec.tag == kTagPlatform) {
      std::memcpy(&platform, sec.data, sizeof platform);
      has_platform = true;
    }
    bool platform_only = sec.tag == kTagPicMaster || sec.tag == kTagPicSlave || sec.tag == kTagIoapic ||
                         sec.tag == kTagPit || sec.tag == kTagAcpiPm;
    if (platform_only && !linux_platform) return BlobError("PC platform state for a machine without it");
  }
  if (blob_slots != virtio_slots) return BlobError("the virtio devices differ from this machine's");
  // A version 1 blob has no platform section (it came from a test-guest machine).
  bool blob_linux = has_platform && (platform & kPlatformLinux);
  if (blob_linux != linux_platform) {
    return BlobError(blob_linux ? "the state is of a Linux (PC platform) machine, this one is not"
                                : "the state is not of a Linux (PC platform) machine, this one is");
  }
  return OkStatus();
}

// Reads the MSRs KVM lists, dropping any it refuses to read (KVM_GET_MSRS stops at the first failure).
Status ReadMsrs(MachineImpl& m, kvm::VcpuFd& vcpu, std::vector<kvm_msr_entry>* out) {
  for (int attempts = 0; attempts < 512; ++attempts) {
    auto n = vcpu.GetMsrs(m.msr_indices, out);
    if (!n.ok()) return n.error();
    if (n.value() == m.msr_indices.size()) {
      m.msr_indices_filtered = true;
      return OkStatus();
    }
    m.msr_indices.erase(m.msr_indices.begin() + static_cast<long>(n.value()));
  }
  return Error{EIO, "KVM_GET_MSRS", "too many unreadable MSRs"};
}

Status SaveVcpu(MachineImpl& m, kvm::VcpuFd& v, StateWriter* w) {
  uint32_t id = v.id();
  kvm_regs regs;
  kvm_sregs sregs;
  kvm_xcrs xcrs;
  kvm_lapic_state lapic;
  kvm_vcpu_events events;
  kvm_mp_state mp;
  kvm_debugregs dbg;
  std::vector<uint8_t> xsave;
  std::vector<kvm_msr_entry> msrs;
  auto cpuid = v.GetCpuid();
  if (!cpuid.ok()) return cpuid.error();
  auto tsc_khz = v.GetTscKhz();
  if (!tsc_khz.ok()) return tsc_khz.error();
  if (auto st = v.GetMpState(&mp); !st.ok()) return st;
  if (auto st = v.GetRegs(&regs); !st.ok()) return st;
  if (auto st = v.GetSregs(&sregs); !st.ok()) return st;
  if (auto st = v.GetXsave(&xsave, m.xsave_bytes); !st.ok()) return st;
  if (auto st = v.GetXcrs(&xcrs); !st.ok()) return st;
  if (auto st = v.GetDebugRegs(&dbg); !st.ok()) return st;
  if (auto st = v.GetLapic(&lapic); !st.ok()) return st;
  if (auto st = ReadMsrs(m, v, &msrs); !st.ok()) return st;
  if (auto st = v.GetVcpuEvents(&events); !st.ok()) return st;
  w->Section(kTagCpuid, id, cpuid.value().data(), cpuid.value().size() * sizeof(kvm_cpuid_entry2));
  w->Section(kTagTscKhz, id, &tsc_khz.value(), sizeof(uint32_t));
  w->Section(kTagMpState, id, &mp, sizeof mp);
  w->Section(kTagRegs, id, &regs, sizeof regs);
  w->Section(kTagSregs, id, &sregs, sizeof sregs);
  w->Section(kTagXsave, id, xsave.data(), xsave.size());
  w->Section(kTagXcrs, id, &xcrs, sizeof xcrs);
  w->Section(kTagDebugRegs, id, &dbg, sizeof dbg);
  w->Section(kTagLapic, id, &lapic, sizeof lapic);
  w->Section(kTagMsrs, id, msrs.data(), msrs.size() * sizeof(kvm_msr_entry));
  w->Section(kTagEvents, id, &events, sizeof events);
  return OkStatus();
}

// The in-kernel PIC pair, IOAPIC and PIT (PC platform only).
Status SaveIrqchips(MachineImpl& m, StateWriter* w) {
  const std::pair<uint32_t, uint32_t> chips[] = {
      {KVM_IRQCHIP_PIC_MASTER, kTagPicMaster}, {KVM_IRQCHIP_PIC_SLAVE, kTagPicSlave}, {KVM_IRQCHIP_IOAPIC, kTagIoapic}};
  for (const auto& [chip_id, tag] : chips) {
    kvm_irqchip chip{};
    chip.chip_id = chip_id;
    if (auto st = kvm::GetIrqchip(m.vm, &chip); !st.ok()) return st;
    w->Section(tag, kMachineWide, &chip, sizeof chip);
  }
  kvm_pit_state2 pit{};
  if (auto st = kvm::GetPit2(m.vm, &pit); !st.ok()) return st;
  w->Section(kTagPit, kMachineWide, &pit, sizeof pit);
  return OkStatus();
}

// Linux before 6.6 takes a host write of MSR_IA32_TSC that lands within one second of the TSC a fresh vCPU of this
// VM is expected to show as an attempt to synchronise vCPUs, and keeps the VM's current offset instead: a guest
// that had run for less than a second came back with its TSC gone back (seen on Debian 12's 6.1 under nested SVM:
// saved 167411556, restored 23982816). Read the TSC back and, when it is behind, move the vCPU's TSC offset by the
// difference (KVM_VCPU_TSC_OFFSET). Kernels without the attribute keep KVM's answer.
Status KeepRestoredTsc(kvm::VcpuFd& v, const std::vector<kvm_msr_entry>& restored) {
  auto want = std::find_if(restored.begin(), restored.end(), [](const kvm_msr_entry& x) { return x.index == kMsrTsc; });
  if (want == restored.end()) return OkStatus();
  std::vector<kvm_msr_entry> now;
  auto got = v.GetMsrs({kMsrTsc}, &now);
  if (!got.ok()) return got.error();
  if (got.value() != 1 || now[0].data >= want->data) return OkStatus();
  auto offset = v.GetTscOffset();
  if (!offset.ok()) return OkStatus();  // no KVM_VCPU_TSC_CTRL (before 5.16): nothing better to do
  return v.SetTscOffset(offset.value() + static_cast<int64_t>(want->data - now[0].data));
}

// The guest TSC frequency: unchanged when it already matches (the usual case: same host model), else set.
Status RestoreTscKhz(kvm::VcpuFd& v, uint32_t khz) {
  auto now = v.GetTscKhz();
  if (!now.ok()) return now.error();
  if (khz == 0 || now.value() == khz) return OkStatus();
  return v.SetTscKhz(khz);
}

}  // namespace

Result<std::vector<uint8_t>> Machine::SaveState() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineImpl& m = *impl_;
  MachineState s = m.state.load();
  if (s != MachineState::kPaused && s != MachineState::kCreated) {
    return Error{EINVAL, "save-state", "machine must be paused (or created)"};
  }
  StateWriter w(m.config.vcpu_count);
  uint32_t platform = m.config.linux_platform ? kPlatformLinux : 0;
  w.Section(kTagPlatform, kMachineWide, &platform, sizeof platform);
  kvm_clock_data clock{};
  if (auto st = m.vm.GetClock(&clock); !st.ok()) return st.error();
  w.Section(kTagClock, kMachineWide, &clock, sizeof clock);
  for (auto& vp : m.vcpus) {
    if (auto st = SaveVcpu(m, *vp, &w); !st.ok()) return st.error();
  }
  // Device locks in a fixed order (serial, then 8042); no other path holds both.
  std::lock_guard<std::mutex> serial_lock(*m.pio.LockOf(&m.serial));
  std::unique_ptr<std::lock_guard<std::mutex>> ps2_lock;
  if (m.ps2) ps2_lock = std::make_unique<std::lock_guard<std::mutex>>(*m.pio.LockOf(m.ps2.get()));
  if (m.config.linux_platform) {
    if (auto st = SaveIrqchips(m, &w); !st.ok()) return st.error();
  }
  std::vector<uint8_t> serial = m.serial.Save();
  w.Section(kTagSerial, kMachineWide, serial.data(), serial.size());
  if (m.ps2) {
    std::vector<uint8_t> ps2 = m.ps2->Save();
    w.Section(kTagPs2, kMachineWide, ps2.data(), ps2.size());
  }
  if (m.acpi_pm) {
    uint16_t cnt = m.acpi_pm->control();
    w.Section(kTagAcpiPm, kMachineWide, &cnt, sizeof cnt);
  }
  for (size_t i = 0; i < m.transports.size(); ++i) {
    // Save() drains the device and leaves it parked; Resume() lets it go on if this machine keeps running.
    std::vector<uint8_t> payload(sizeof(uint32_t));
    uint32_t slot = VirtioSlot(i);
    std::memcpy(payload.data(), &slot, sizeof slot);
    std::vector<uint8_t> dev = m.transports[i]->Save();
    payload.insert(payload.end(), dev.begin(), dev.end());
    w.Section(kTagVirtioPci, kMachineWide, payload.data(), payload.size());
  }
  return w.Take();
}

Status Machine::RestoreState(const uint8_t* data, size_t len) {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineImpl& m = *impl_;
  MachineState s = m.state.load();
  if (s != MachineState::kPaused && s != MachineState::kCreated) {
    return Error{EINVAL, "restore-state", "machine must be created or paused"};
  }
  uint32_t version = 0, vcpus = 0;
  std::vector<StateSection> sections;
  std::string why;
  if (!ParseState(data, len, &version, &vcpus, &sections, &why)) return BlobError(why);
  if (vcpus != m.config.vcpu_count) return BlobError("vcpu count differs");
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < m.transports.size(); ++i) slots.push_back(VirtioSlot(i));
  if (auto st = Validate(sections, vcpus, m.config.linux_platform, slots); !st.ok()) return st;
  // The devices come back parked (Start or Resume runs them): a target that never starts executes nothing.
  QuiesceVirtio(m);
  size_t virtio_index = 0;
  std::stable_sort(sections.begin(), sections.end(),
                   [](const StateSection& a, const StateSection& b) { return Rank(a.tag) < Rank(b.tag); });
  // Each vCPU's TSC deadline waits for its LAPIC (an armed deadline needs the LAPIC timer in TSC-deadline mode).
  std::vector<std::vector<kvm_msr_entry>> deadlines(vcpus);
  bool serial_pending = false, ps2_pending = false;
  // KVM refuses a different CPUID once a vCPU has run; a paused machine keeps the one it runs with.
  bool fresh = s == MachineState::kCreated;
  for (const auto& sec : sections) {
    Status st = OkStatus();
    kvm::VcpuFd* v = sec.vcpu == kMachineWide ? nullptr : m.vcpus[sec.vcpu].get();
    switch (sec.tag) {
      case kTagCpuid: {
        if (!fresh) break;
        std::vector<kvm_cpuid_entry2> e(sec.len / sizeof(kvm_cpuid_entry2));
        std::memcpy(e.data(), sec.data, sec.len);
        st = v->SetCpuid(e);
        break;
      }
      case kTagTscKhz: { uint32_t khz; Take(sec, &khz); st = RestoreTscKhz(*v, khz); break; }
      case kTagPicMaster: case kTagPicSlave: case kTagIoapic: {
        kvm_irqchip c; Take(sec, &c); st = kvm::SetIrqchip(m.vm, c); break;
      }
      case kTagPit: { kvm_pit_state2 p; Take(sec, &p); st = kvm::SetPit2(m.vm, p); break; }
      case kTagRegs: { kvm_regs x; Take(sec, &x); st = v->SetRegs(x); break; }
      case kTagXsave: st = v->SetXsave(std::vector<uint8_t>(sec.data, sec.data + sec.len)); break;
      case kTagXcrs: { kvm_xcrs x; Take(sec, &x); st = v->SetXcrs(x); break; }
      case kTagSregs: { kvm_sregs x; Take(sec, &x); st = v->SetSregs(x); break; }
      case kTagMsrs: {
        std::vector<kvm_msr_entry> e(sec.len / sizeof(kvm_msr_entry));
        std::memcpy(e.data(), sec.data, sec.len);
        auto split = std::stable_partition(e.begin(), e.end(),
                                           [](const kvm_msr_entry& x) { return x.index != kMsrTscDeadline; });
        deadlines[sec.vcpu].assign(split, e.end());
        e.erase(split, e.end());
        st = v->SetMsrs(e);
        if (st.ok()) st = KeepRestoredTsc(*v, e);
        break;
      }
      case kTagMpState: { kvm_mp_state x; Take(sec, &x); st = v->SetMpState(x); break; }
      case kTagLapic: {
        kvm_lapic_state x;
        Take(sec, &x);
        st = v->SetLapic(x);
        if (st.ok() && !deadlines[sec.vcpu].empty()) st = v->SetMsrs(deadlines[sec.vcpu]);
        break;
      }
      case kTagEvents: {
        kvm_vcpu_events x;
        Take(sec, &x);
        // KVM_GET_VCPU_EVENTS does not mark these valid; without the flags a pending NMI would be dropped.
        x.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR;
        st = v->SetVcpuEvents(x);
        break;
      }
      case kTagDebugRegs: { kvm_debugregs x; Take(sec, &x); st = v->SetDebugRegs(x); break; }
      case kTagSerial: {
        std::lock_guard<std::mutex> dev_lock(*m.pio.LockOf(&m.serial));
        if (!m.serial.Restore(sec.data, sec.len)) return BlobError("bad serial state");
        serial_pending = m.serial.InterruptPending();
        break;
      }
      case kTagPs2: {
        if (!m.ps2) break;  // a version 1 test-guest machine has the reset-only i8042, nothing to restore
        std::lock_guard<std::mutex> dev_lock(*m.pio.LockOf(m.ps2.get()));
        if (!m.ps2->Restore(sec.data, sec.len)) return BlobError("bad 8042 state");
        ps2_pending = m.ps2->InterruptPending();
        break;
      }
      case kTagAcpiPm: { uint16_t cnt; Take(sec, &cnt); m.acpi_pm->set_control(cnt); break; }
      case kTagVirtioPci: {
        // Validate matched the sections to the transports in order.
        st = m.transports[virtio_index++]->Restore(sec.data + sizeof(uint32_t), sec.len - sizeof(uint32_t));
        break;
      }
      case kTagClock: {
        kvm_clock_data c;
        Take(sec, &c);
        bool realtime = (c.flags & KVM_CLOCK_REALTIME) &&
                        (static_cast<uint32_t>(m.vm.CheckExtension(KVM_CAP_ADJUST_CLOCK)) & KVM_CLOCK_REALTIME);
        c.flags = realtime ? KVM_CLOCK_REALTIME : 0;
        st = m.vm.SetClock(c);
        break;
      }
      default: break;  // kTagPlatform: checked by Validate
    }
    if (!st.ok()) return st;
  }
  // Edges raised after the interrupt controllers were read are raised again (a duplicate finds nothing to do).
  if (serial_pending) m.Trigger();
  if (ps2_pending) m.kbd_irq->Trigger();
  m.loaded = true;
  return OkStatus();
}

}  // namespace kvmts::vmm
