// Machine::SaveState / RestoreState: every vCPU's architectural state, the devices and the KVM clock.
// SaveState writes the sections in restore order: the clock, then per vCPU MP state, regs, sregs (APIC base,
// EFER), XSAVE, XCRs, debug registers, LAPIC, MSRs (TSC deadline after the LAPIC), pending events last.
#include <errno.h>

#include "vmm/machine.h"
#include "vmm/machine_impl.h"
#include "vmm/state_blob.h"

namespace kvmts::vmm {
namespace {

Error BlobError(const std::string& why) { return Error{EINVAL, "restore-state", why}; }

template <typename T>
bool Take(const StateSection& s, T* out) {
  if (s.len != sizeof(T)) return false;
  std::memcpy(out, s.data, sizeof(T));
  return true;
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

}  // namespace

Result<std::vector<uint8_t>> Machine::SaveState() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineImpl& m = *impl_;
  if (m.state.load() != MachineState::kPaused) return Error{EINVAL, "save-state", "machine must be paused"};
  StateWriter w(m.config.vcpu_count);
  kvm_clock_data clock{};
  if (auto st = m.vm.GetClock(&clock); !st.ok()) return st.error();
  w.Section(kTagClock, kMachineWide, &clock, sizeof clock);
  for (auto& vp : m.vcpus) {
    kvm::VcpuFd& v = *vp;
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
    if (auto st = v.GetMpState(&mp); !st.ok()) return st.error();
    if (auto st = v.GetRegs(&regs); !st.ok()) return st.error();
    if (auto st = v.GetSregs(&sregs); !st.ok()) return st.error();
    if (auto st = v.GetXsave(&xsave, m.xsave_bytes); !st.ok()) return st.error();
    if (auto st = v.GetXcrs(&xcrs); !st.ok()) return st.error();
    if (auto st = v.GetDebugRegs(&dbg); !st.ok()) return st.error();
    if (auto st = v.GetLapic(&lapic); !st.ok()) return st.error();
    if (auto st = ReadMsrs(m, v, &msrs); !st.ok()) return st.error();
    if (auto st = v.GetVcpuEvents(&events); !st.ok()) return st.error();
    w.Section(kTagMpState, id, &mp, sizeof mp);
    w.Section(kTagRegs, id, &regs, sizeof regs);
    w.Section(kTagSregs, id, &sregs, sizeof sregs);
    w.Section(kTagXsave, id, xsave.data(), xsave.size());
    w.Section(kTagXcrs, id, &xcrs, sizeof xcrs);
    w.Section(kTagDebugRegs, id, &dbg, sizeof dbg);
    w.Section(kTagLapic, id, &lapic, sizeof lapic);
    w.Section(kTagMsrs, id, msrs.data(), msrs.size() * sizeof(kvm_msr_entry));
    w.Section(kTagEvents, id, &events, sizeof events);
  }
  std::mutex* mu = m.pio.LockOf(&m.serial);
  std::vector<uint8_t> serial;
  {
    std::lock_guard<std::mutex> dev_lock(*mu);
    serial = m.serial.Save();
  }
  w.Section(kTagSerial, kMachineWide, serial.data(), serial.size());
  return w.Take();
}

Status Machine::RestoreState(const uint8_t* data, size_t len) {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineImpl& m = *impl_;
  MachineState s = m.state.load();
  if (s != MachineState::kPaused && s != MachineState::kCreated) {
    return Error{EINVAL, "restore-state", "machine must be created or paused"};
  }
  uint32_t vcpus = 0;
  std::vector<StateSection> sections;
  std::string why;
  if (!ParseState(data, len, &vcpus, &sections, &why)) return BlobError(why);
  if (vcpus != m.config.vcpu_count) return BlobError("vcpu count differs");
  // Validate every section before touching KVM, so a bad blob changes nothing.
  for (const auto& sec : sections) {
    bool wide = sec.tag == kTagClock || sec.tag == kTagSerial;
    if (wide ? sec.vcpu != kMachineWide : sec.vcpu >= vcpus) return BlobError("section for a missing vCPU");
    size_t want = 0;
    switch (sec.tag) {
      case kTagRegs: want = sizeof(kvm_regs); break;
      case kTagSregs: want = sizeof(kvm_sregs); break;
      case kTagXcrs: want = sizeof(kvm_xcrs); break;
      case kTagLapic: want = sizeof(kvm_lapic_state); break;
      case kTagEvents: want = sizeof(kvm_vcpu_events); break;
      case kTagMpState: want = sizeof(kvm_mp_state); break;
      case kTagDebugRegs: want = sizeof(kvm_debugregs); break;
      case kTagClock: want = sizeof(kvm_clock_data); break;
      case kTagXsave: if (sec.len < kvm::abi::kXsaveBytes) return BlobError("short XSAVE"); continue;
      case kTagMsrs: if (sec.len % sizeof(kvm_msr_entry)) return BlobError("bad MSR section"); continue;
      case kTagSerial: continue;
      default: return BlobError("unknown section " + std::to_string(sec.tag));
    }
    if (sec.len != want) return BlobError("section " + std::to_string(sec.tag) + " has the wrong size");
  }
  // Sections are applied in the order they were saved (SaveState writes them in restore order).
  for (const auto& sec : sections) {
    Status st = OkStatus();
    kvm::VcpuFd* v = sec.vcpu == kMachineWide ? nullptr : m.vcpus[sec.vcpu].get();
    switch (sec.tag) {
      case kTagClock: { kvm_clock_data c; Take(sec, &c); st = m.vm.SetClock(c); break; }
      case kTagMpState: { kvm_mp_state x; Take(sec, &x); st = v->SetMpState(x); break; }
      case kTagRegs: { kvm_regs x; Take(sec, &x); st = v->SetRegs(x); break; }
      case kTagSregs: { kvm_sregs x; Take(sec, &x); st = v->SetSregs(x); break; }
      case kTagXsave: st = v->SetXsave(std::vector<uint8_t>(sec.data, sec.data + sec.len)); break;
      case kTagXcrs: { kvm_xcrs x; Take(sec, &x); st = v->SetXcrs(x); break; }
      case kTagDebugRegs: { kvm_debugregs x; Take(sec, &x); st = v->SetDebugRegs(x); break; }
      case kTagLapic: { kvm_lapic_state x; Take(sec, &x); st = v->SetLapic(x); break; }
      case kTagMsrs: {
        std::vector<kvm_msr_entry> e(sec.len / sizeof(kvm_msr_entry));
        std::memcpy(e.data(), sec.data, sec.len);
        st = v->SetMsrs(e);
        break;
      }
      case kTagEvents: { kvm_vcpu_events x; Take(sec, &x); st = v->SetVcpuEvents(x); break; }
      case kTagSerial: {
        std::lock_guard<std::mutex> dev_lock(*m.pio.LockOf(&m.serial));
        if (!m.serial.Restore(sec.data, sec.len)) return BlobError("bad serial state");
        break;
      }
      default: break;
    }
    if (!st.ok()) return st;
  }
  m.loaded = true;
  return OkStatus();
}

}  // namespace kvmts::vmm
