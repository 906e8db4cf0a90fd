// kvm::VcpuFd: one vCPU file descriptor and its mmap'd kvm_run page (rust-vmm kvm-ioctls `VcpuFd`). Every state
// ioctl the save/restore path needs is a method; each returns the failed ioctl's name in its Error.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <vector>

#include "kvm/fd.h"
#include "kvm/result.h"

namespace kvmts::kvm {

class VcpuFd {
 public:
  VcpuFd() = default;
  ~VcpuFd();
  VcpuFd(VcpuFd&& o) noexcept;
  VcpuFd& operator=(VcpuFd&&) = delete;
  VcpuFd(const VcpuFd&) = delete;

  // Maps the kvm_run area of an fd from KVM_CREATE_VCPU (mmap_size from System::VcpuMmapSize).
  static Result<VcpuFd> Create(ScopedFd fd, uint32_t id, int mmap_size);
  uint32_t id() const { return id_; }
  int fd() const { return fd_.get(); }
  kvm_run* run() const { return run_; }

  // KVM_RUN once: 0 on an exit to handle (see run()->exit_reason), else -errno (-EINTR when kicked).
  int Run();

  Status SetCpuid(const std::vector<kvm_cpuid_entry2>& entries);
  Status GetRegs(kvm_regs* r);
  Status SetRegs(const kvm_regs& r);
  Status GetSregs(kvm_sregs* s);
  Status SetSregs(const kvm_sregs& s);
  Status GetFpu(kvm_fpu* f);
  Status SetFpu(const kvm_fpu& f);
  // KVM_GET_XSAVE(2) into a buffer of `size` bytes (>= sizeof(kvm_xsave)); KVM_SET_XSAVE from one.
  Status GetXsave(std::vector<uint8_t>* buf, size_t size);
  Status SetXsave(const std::vector<uint8_t>& buf);
  Status GetXcrs(kvm_xcrs* x);
  Status SetXcrs(const kvm_xcrs& x);
  Status GetLapic(kvm_lapic_state* l);
  Status SetLapic(const kvm_lapic_state& l);
  Status GetVcpuEvents(kvm_vcpu_events* e);
  Status SetVcpuEvents(const kvm_vcpu_events& e);
  Status GetMpState(kvm_mp_state* m);
  Status SetMpState(const kvm_mp_state& m);
  Status GetDebugRegs(kvm_debugregs* d);
  Status SetDebugRegs(const kvm_debugregs& d);
  // KVM_GET_MSRS for `indices`; returns how many were read (KVM stops at the first it cannot read).
  Result<size_t> GetMsrs(const std::vector<uint32_t>& indices, std::vector<kvm_msr_entry>* out);
  Status SetMsrs(const std::vector<kvm_msr_entry>& entries);
  // KVM_GET_CPUID2: the CPUID table the vCPU was given.
  Result<std::vector<kvm_cpuid_entry2>> GetCpuid();
  // KVM_GET_TSC_KHZ / KVM_SET_TSC_KHZ: the guest TSC frequency (setting a different one needs TSC scaling, or a
  // value within KVM's tolerance of the host's; EINVAL or ENOTSUP otherwise).
  Result<uint32_t> GetTscKhz();
  Status SetTscKhz(uint32_t khz);
  // The vCPU's TSC offset (KVM_{GET,SET}_DEVICE_ATTR, group KVM_VCPU_TSC_CTRL, attribute KVM_VCPU_TSC_OFFSET; Linux
  // 5.16+): guest TSC = scaled host TSC + offset. ENXIO (or ENOTTY) where the kernel does not offer it.
  Result<int64_t> GetTscOffset();
  Status SetTscOffset(int64_t offset);
  // KVM_KVMCLOCK_CTRL: tells the guest's kvmclock it was paused (avoids soft-lockup warnings). Best effort.
  void KvmclockCtrl();

 private:
  ScopedFd fd_;
  uint32_t id_ = 0;
  kvm_run* run_ = nullptr;
  size_t mmap_size_ = 0;
};

}  // namespace kvmts::kvm
