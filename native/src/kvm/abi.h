// The KVM structs with flexible arrays, laid out as the kernel (C) sees them. Debian 12's <linux/kvm.h> declares
// them with __DECLARE_FLEX_ARRAY, which in C++ inserts an empty struct of size 1: sizeof(kvm_cpuid2) becomes 12
// instead of 8, `entries` moves to offset 12, and the ioctl numbers built from those sizes are ones the kernel
// does not know (EINVAL). Use these headers and ioctl numbers instead of the <linux/kvm.h> ones.
#pragma once

#include <linux/kvm.h>

#include <cstddef>
#include <cstdint>

namespace kvmts::kvm::abi {

struct Cpuid2Header {   // struct kvm_cpuid2; kvm_cpuid_entry2 entries[] follow at offset 8
  uint32_t nent;
  uint32_t padding;
};
struct MsrsHeader {     // struct kvm_msrs; kvm_msr_entry entries[] follow at offset 8
  uint32_t nmsrs;
  uint32_t pad;
};
struct MsrListHeader {  // struct kvm_msr_list; u32 indices[] follow at offset 4
  uint32_t nmsrs;
};
inline constexpr size_t kXsaveBytes = 4096;  // sizeof(struct kvm_xsave) in C
struct XsaveRegion {
  uint32_t region[1024];
};

inline constexpr unsigned long kGetSupportedCpuid = _IOWR(KVMIO, 0x05, Cpuid2Header);
inline constexpr unsigned long kSetCpuid2 = _IOW(KVMIO, 0x90, Cpuid2Header);
inline constexpr unsigned long kGetCpuid2 = _IOWR(KVMIO, 0x91, Cpuid2Header);
inline constexpr unsigned long kGetMsrIndexList = _IOWR(KVMIO, 0x02, MsrListHeader);
inline constexpr unsigned long kGetMsrs = _IOWR(KVMIO, 0x88, MsrsHeader);
inline constexpr unsigned long kSetMsrs = _IOW(KVMIO, 0x89, MsrsHeader);
inline constexpr unsigned long kGetXsave = _IOR(KVMIO, 0xa4, XsaveRegion);
inline constexpr unsigned long kSetXsave = _IOW(KVMIO, 0xa5, XsaveRegion);
inline constexpr unsigned long kGetXsave2 = _IOR(KVMIO, 0xcf, XsaveRegion);

static_assert(sizeof(Cpuid2Header) == 8 && sizeof(MsrsHeader) == 8 && sizeof(MsrListHeader) == 4);
static_assert(sizeof(XsaveRegion) == kXsaveBytes);

}  // namespace kvmts::kvm::abi
