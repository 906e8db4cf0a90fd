// kvm::System: the /dev/kvm file descriptor (rust-vmm kvm-ioctls `Kvm`).
#pragma once

#include "kvm/result.h"

namespace kvmts::kvm {

// Path of the KVM device node.
inline constexpr const char* kKvmPath = "/dev/kvm";

// Opens /dev/kvm, asks KVM_GET_API_VERSION, closes it. 12 on every supported kernel.
Result<int> QueryApiVersion();

}  // namespace kvmts::kvm
