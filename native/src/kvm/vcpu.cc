#include "kvm/vcpu.h"

#include "kvm/abi.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <utility>

namespace kvmts::kvm {
namespace {

template <typename Arg>
int Ioctl(int fd, unsigned long req, Arg arg) {
  int r;
  do {
    r = ioctl(fd, req, arg);
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

#define KVT_GET_SET(Name, Type, GetReq, SetReq)                                    \
  Status VcpuFd::Get##Name(Type* v) {                                              \
    if (Ioctl(fd_.get(), GetReq, v) < 0) return ErrnoError(#GetReq);               \
    return OkStatus();                                                             \
  }                                                                                \
  Status VcpuFd::Set##Name(const Type& v) {                                        \
    if (Ioctl(fd_.get(), SetReq, const_cast<Type*>(&v)) < 0) return ErrnoError(#SetReq); \
    return OkStatus();                                                             \
  }

KVT_GET_SET(Regs, kvm_regs, KVM_GET_REGS, KVM_SET_REGS)
KVT_GET_SET(Sregs, kvm_sregs, KVM_GET_SREGS, KVM_SET_SREGS)
KVT_GET_SET(Fpu, kvm_fpu, KVM_GET_FPU, KVM_SET_FPU)
KVT_GET_SET(Xcrs, kvm_xcrs, KVM_GET_XCRS, KVM_SET_XCRS)
KVT_GET_SET(Lapic, kvm_lapic_state, KVM_GET_LAPIC, KVM_SET_LAPIC)
KVT_GET_SET(VcpuEvents, kvm_vcpu_events, KVM_GET_VCPU_EVENTS, KVM_SET_VCPU_EVENTS)
KVT_GET_SET(MpState, kvm_mp_state, KVM_GET_MP_STATE, KVM_SET_MP_STATE)
KVT_GET_SET(DebugRegs, kvm_debugregs, KVM_GET_DEBUGREGS, KVM_SET_DEBUGREGS)
#undef KVT_GET_SET

VcpuFd::~VcpuFd() {
  if (run_) munmap(run_, mmap_size_);
}

VcpuFd::VcpuFd(VcpuFd&& o) noexcept
    : fd_(std::move(o.fd_)), id_(o.id_), run_(std::exchange(o.run_, nullptr)), mmap_size_(o.mmap_size_) {}

Result<VcpuFd> VcpuFd::Create(ScopedFd fd, uint32_t id, int mmap_size) {
  void* p = mmap(nullptr, static_cast<size_t>(mmap_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return ErrnoError("mmap", "kvm_run");
  VcpuFd v;
  v.fd_ = std::move(fd);
  v.id_ = id;
  v.run_ = static_cast<kvm_run*>(p);
  v.mmap_size_ = static_cast<size_t>(mmap_size);
  return v;
}

int VcpuFd::Run() {
  int r = ioctl(fd_.get(), KVM_RUN, 0);
  return r < 0 ? -errno : 0;
}

Status VcpuFd::SetCpuid(const std::vector<kvm_cpuid_entry2>& entries) {
  size_t bytes = sizeof(abi::Cpuid2Header) + entries.size() * sizeof(kvm_cpuid_entry2);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]());
  auto* cpuid = reinterpret_cast<abi::Cpuid2Header*>(buf.get());
  cpuid->nent = static_cast<uint32_t>(entries.size());
  std::memcpy(buf.get() + sizeof(abi::Cpuid2Header), entries.data(), entries.size() * sizeof(kvm_cpuid_entry2));
  if (Ioctl(fd_.get(), abi::kSetCpuid2, cpuid) < 0) return ErrnoError("KVM_SET_CPUID2");
  return OkStatus();
}

Status VcpuFd::GetXsave(std::vector<uint8_t>* buf, size_t size) {
  if (size < abi::kXsaveBytes) size = abi::kXsaveBytes;
  buf->assign(size, 0);
  bool big = size > abi::kXsaveBytes;
  if (Ioctl(fd_.get(), big ? abi::kGetXsave2 : abi::kGetXsave, buf->data()) < 0) {
    return ErrnoError(big ? "KVM_GET_XSAVE2" : "KVM_GET_XSAVE");
  }
  return OkStatus();
}

Status VcpuFd::SetXsave(const std::vector<uint8_t>& buf) {
  if (buf.size() < abi::kXsaveBytes) return Error{EINVAL, "KVM_SET_XSAVE", "short buffer"};
  if (Ioctl(fd_.get(), abi::kSetXsave, const_cast<uint8_t*>(buf.data())) < 0) return ErrnoError("KVM_SET_XSAVE");
  return OkStatus();
}

Result<size_t> VcpuFd::GetMsrs(const std::vector<uint32_t>& indices, std::vector<kvm_msr_entry>* out) {
  size_t bytes = sizeof(abi::MsrsHeader) + indices.size() * sizeof(kvm_msr_entry);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]());
  auto* msrs = reinterpret_cast<abi::MsrsHeader*>(buf.get());
  auto* entries = reinterpret_cast<kvm_msr_entry*>(buf.get() + sizeof(abi::MsrsHeader));
  msrs->nmsrs = static_cast<uint32_t>(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) entries[i].index = indices[i];
  int r = Ioctl(fd_.get(), abi::kGetMsrs, msrs);
  if (r < 0) return ErrnoError("KVM_GET_MSRS");
  out->assign(entries, entries + r);
  return static_cast<size_t>(r);
}

Status VcpuFd::SetMsrs(const std::vector<kvm_msr_entry>& entries) {
  size_t bytes = sizeof(abi::MsrsHeader) + entries.size() * sizeof(kvm_msr_entry);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]());
  auto* msrs = reinterpret_cast<abi::MsrsHeader*>(buf.get());
  msrs->nmsrs = static_cast<uint32_t>(entries.size());
  std::memcpy(buf.get() + sizeof(abi::MsrsHeader), entries.data(), entries.size() * sizeof(kvm_msr_entry));
  int r = Ioctl(fd_.get(), abi::kSetMsrs, msrs);
  if (r < 0) return ErrnoError("KVM_SET_MSRS");
  if (static_cast<size_t>(r) != entries.size()) {
    return Error{EINVAL, "KVM_SET_MSRS", "MSR " + std::to_string(entries[static_cast<size_t>(r)].index) + " refused"};
  }
  return OkStatus();
}

Result<std::vector<kvm_cpuid_entry2>> VcpuFd::GetCpuid() {
  // KVM_GET_CPUID2 fails with E2BIG when nent is too small; 256 is KVM_MAX_CPUID_ENTRIES.
  constexpr uint32_t kMaxEntries = 256;
  size_t bytes = sizeof(abi::Cpuid2Header) + kMaxEntries * sizeof(kvm_cpuid_entry2);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]());
  auto* cpuid = reinterpret_cast<abi::Cpuid2Header*>(buf.get());
  cpuid->nent = kMaxEntries;
  if (Ioctl(fd_.get(), abi::kGetCpuid2, cpuid) < 0) return ErrnoError("KVM_GET_CPUID2");
  auto* entries = reinterpret_cast<kvm_cpuid_entry2*>(buf.get() + sizeof(abi::Cpuid2Header));
  return std::vector<kvm_cpuid_entry2>(entries, entries + cpuid->nent);
}

Result<uint32_t> VcpuFd::GetTscKhz() {
  int r = Ioctl(fd_.get(), KVM_GET_TSC_KHZ, 0);
  if (r < 0) return ErrnoError("KVM_GET_TSC_KHZ");
  return static_cast<uint32_t>(r);
}

Status VcpuFd::SetTscKhz(uint32_t khz) {
  if (Ioctl(fd_.get(), KVM_SET_TSC_KHZ, static_cast<unsigned long>(khz)) < 0) return ErrnoError("KVM_SET_TSC_KHZ");
  return OkStatus();
}

Result<int64_t> VcpuFd::GetTscOffset() {
  int64_t offset = 0;
  kvm_device_attr attr{};
  attr.group = KVM_VCPU_TSC_CTRL;
  attr.attr = KVM_VCPU_TSC_OFFSET;
  // SAFETY: KVM writes one u64 to attr.addr, which points at `offset` for the duration of the call.
  attr.addr = reinterpret_cast<uint64_t>(&offset);
  if (Ioctl(fd_.get(), KVM_GET_DEVICE_ATTR, &attr) < 0) return ErrnoError("KVM_GET_DEVICE_ATTR(KVM_VCPU_TSC_OFFSET)");
  return offset;
}

Status VcpuFd::SetTscOffset(int64_t offset) {
  kvm_device_attr attr{};
  attr.group = KVM_VCPU_TSC_CTRL;
  attr.attr = KVM_VCPU_TSC_OFFSET;
  // SAFETY: KVM reads one u64 from attr.addr, which points at `offset` for the duration of the call.
  attr.addr = reinterpret_cast<uint64_t>(&offset);
  if (Ioctl(fd_.get(), KVM_SET_DEVICE_ATTR, &attr) < 0) return ErrnoError("KVM_SET_DEVICE_ATTR(KVM_VCPU_TSC_OFFSET)");
  return OkStatus();
}

void VcpuFd::KvmclockCtrl() { ioctl(fd_.get(), KVM_KVMCLOCK_CTRL, 0); }

}  // namespace kvmts::kvm
