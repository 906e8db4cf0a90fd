// kvm::System: the /dev/kvm file descriptor (rust-vmm kvm-ioctls `Kvm`): API version, capabilities, the CPUID
// KVM supports, the MSR index list, and VM creation.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <vector>

#include "kvm/fd.h"
#include "kvm/result.h"

namespace kvmts::kvm {

// Path of the KVM device node.
inline constexpr const char* kKvmPath = "/dev/kvm";

// Opens /dev/kvm, asks KVM_GET_API_VERSION, closes it. 12 on every supported kernel.
Result<int> QueryApiVersion();

class System {
 public:
  // Opens /dev/kvm and checks the API version is 12 (else EINVAL op "KVM_GET_API_VERSION").
  static Result<System> Open();
  int fd() const { return fd_.get(); }
  // KVM_CHECK_EXTENSION on /dev/kvm: 0 when unsupported.
  int CheckExtension(int cap) const;
  // KVM_GET_VCPU_MMAP_SIZE.
  Result<int> VcpuMmapSize() const;
  // KVM_GET_SUPPORTED_CPUID: every leaf KVM can expose.
  Result<std::vector<kvm_cpuid_entry2>> SupportedCpuid() const;
  // KVM_GET_MSR_INDEX_LIST: the MSRs to save and restore.
  Result<std::vector<uint32_t>> MsrIndexList() const;
  // KVM_CREATE_VM (type 0); the caller owns the returned fd.
  Result<ScopedFd> CreateVm() const;

 private:
  ScopedFd fd_;
};

}  // namespace kvmts::kvm
