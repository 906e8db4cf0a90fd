#include "kvm/system.h"

#include "kvm/abi.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <memory>
#include <utility>

namespace kvmts {

Error ErrnoError(const char* op, std::string detail) { return Error{errno, op, std::move(detail)}; }

}  // namespace kvmts

namespace kvmts::kvm {

Result<int> QueryApiVersion() {
  int fd = open(kKvmPath, O_RDWR | O_CLOEXEC);
  if (fd < 0) return Error{errno, "open", kKvmPath};
  int version = ioctl(fd, KVM_GET_API_VERSION, 0);
  int saved = errno;
  close(fd);
  if (version < 0) return Error{saved, "KVM_GET_API_VERSION", ""};
  return version;
}

Result<System> System::Open() {
  int fd = open(kKvmPath, O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", kKvmPath);
  System sys;
  sys.fd_ = ScopedFd(fd);
  int version = ioctl(fd, KVM_GET_API_VERSION, 0);
  if (version < 0) return ErrnoError("KVM_GET_API_VERSION");
  if (version != KVM_API_VERSION) return Error{EINVAL, "KVM_GET_API_VERSION", "expected 12"};
  return sys;
}

int System::CheckExtension(int cap) const {
  int r = ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
  return r < 0 ? 0 : r;
}

Result<int> System::VcpuMmapSize() const {
  int r = ioctl(fd_.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  if (r < 0) return ErrnoError("KVM_GET_VCPU_MMAP_SIZE");
  return r;
}

Result<std::vector<kvm_cpuid_entry2>> System::SupportedCpuid() const {
  // KVM rejects nent above KVM_MAX_CPUID_ENTRIES (256) with EINVAL and too few with E2BIG.
  for (uint32_t n : {256u, 128u, 80u}) {
    size_t bytes = sizeof(abi::Cpuid2Header) + n * sizeof(kvm_cpuid_entry2);
    std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes]());
    auto* cpuid = reinterpret_cast<abi::Cpuid2Header*>(buf.get());
    cpuid->nent = n;
    if (ioctl(fd_.get(), abi::kGetSupportedCpuid, cpuid) == 0) {
      auto* entries = reinterpret_cast<kvm_cpuid_entry2*>(buf.get() + sizeof(abi::Cpuid2Header));
      return std::vector<kvm_cpuid_entry2>(entries, entries + cpuid->nent);
    }
    if (errno != E2BIG && errno != EINVAL) return ErrnoError("KVM_GET_SUPPORTED_CPUID");
  }
  return Error{E2BIG, "KVM_GET_SUPPORTED_CPUID", ""};
}

Result<std::vector<uint32_t>> System::MsrIndexList() const {
  abi::MsrListHeader probe{0};
  if (ioctl(fd_.get(), abi::kGetMsrIndexList, &probe) < 0 && errno != E2BIG) {
    return ErrnoError("KVM_GET_MSR_INDEX_LIST");
  }
  uint32_t n = probe.nmsrs;
  std::unique_ptr<uint8_t[]> buf(new uint8_t[sizeof(abi::MsrListHeader) + n * sizeof(uint32_t)]());
  auto* list = reinterpret_cast<abi::MsrListHeader*>(buf.get());
  list->nmsrs = n;
  if (ioctl(fd_.get(), abi::kGetMsrIndexList, list) < 0) return ErrnoError("KVM_GET_MSR_INDEX_LIST");
  auto* indices = reinterpret_cast<uint32_t*>(buf.get() + sizeof(abi::MsrListHeader));
  return std::vector<uint32_t>(indices, indices + list->nmsrs);
}

Result<ScopedFd> System::CreateVm() const {
  int fd;
  do {
    fd = ioctl(fd_.get(), KVM_CREATE_VM, 0);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError("KVM_CREATE_VM");
  return ScopedFd(fd);
}

}  // namespace kvmts::kvm
