#include "kvm/vm.h"

#include <cstring>

#include <errno.h>
#include <sys/ioctl.h>

namespace kvmts::kvm {
namespace {

// Retries an ioctl interrupted by a signal (vCPU kicks use SIGRTMIN on other threads, but be safe).
template <typename Arg>
int Ioctl(int fd, unsigned long req, Arg arg) {
  int r;
  do {
    r = ioctl(fd, req, arg);
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

int VmFd::CheckExtension(int cap) const {
  int r = ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
  return r < 0 ? 0 : r;
}

Status VmFd::SetUserMemoryRegion(uint32_t slot, uint32_t flags, uint64_t gpa, uint64_t size, void* host) {
  kvm_userspace_memory_region region{};
  region.slot = slot;
  region.flags = flags;
  region.guest_phys_addr = gpa;
  region.memory_size = size;
  region.userspace_addr = reinterpret_cast<uint64_t>(host);
  if (Ioctl(fd_.get(), KVM_SET_USER_MEMORY_REGION, &region) < 0) return ErrnoError("KVM_SET_USER_MEMORY_REGION");
  return OkStatus();
}

Status VmFd::SetTssAddr(uint64_t addr) {
  if (Ioctl(fd_.get(), KVM_SET_TSS_ADDR, static_cast<unsigned long>(addr)) < 0) return ErrnoError("KVM_SET_TSS_ADDR");
  return OkStatus();
}

Status VmFd::SetIdentityMapAddr(uint64_t addr) {
  if (Ioctl(fd_.get(), KVM_SET_IDENTITY_MAP_ADDR, &addr) < 0) return ErrnoError("KVM_SET_IDENTITY_MAP_ADDR");
  return OkStatus();
}

Status VmFd::EnableSplitIrqchip(uint32_t ioapic_pins) {
  kvm_enable_cap cap{};
  cap.cap = KVM_CAP_SPLIT_IRQCHIP;
  cap.args[0] = ioapic_pins;
  if (Ioctl(fd_.get(), KVM_ENABLE_CAP, &cap) < 0) return ErrnoError("KVM_ENABLE_CAP", "KVM_CAP_SPLIT_IRQCHIP");
  return OkStatus();
}

Status VmFd::CreateIrqchip() {
  if (Ioctl(fd_.get(), KVM_CREATE_IRQCHIP, 0) < 0) return ErrnoError("KVM_CREATE_IRQCHIP");
  return OkStatus();
}

Status VmFd::SignalMsi(uint64_t address, uint32_t data) {
  kvm_msi msi{};
  msi.address_lo = static_cast<uint32_t>(address);
  msi.address_hi = static_cast<uint32_t>(address >> 32);
  msi.data = data;
  // > 0 delivered, 0 blocked by the guest (masked in its APIC): both are fine for a device.
  if (Ioctl(fd_.get(), KVM_SIGNAL_MSI, &msi) < 0) return ErrnoError("KVM_SIGNAL_MSI");
  return OkStatus();
}

Status VmFd::Ioeventfd(uint64_t addr, uint32_t len, int fd, bool assign) {
  kvm_ioeventfd io{};
  io.addr = addr;
  io.len = len;
  io.fd = fd;
  io.flags = assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN;
  if (Ioctl(fd_.get(), KVM_IOEVENTFD, &io) < 0) return ErrnoError("KVM_IOEVENTFD");
  return OkStatus();
}

Status VmFd::SetGsiRouting(const std::vector<GsiRoute>& routes) {
  // struct kvm_irq_routing is { u32 nr; u32 flags; entries[] at offset 8 }. Not through linux/kvm.h's type: in C++
  // its __DECLARE_FLEX_ARRAY adds an empty member, which makes sizeof 16 (the ioctl number then encodes the wrong
  // size and KVM answers ENOTTY) and may move the entries.
  constexpr unsigned long kSetGsiRouting = _IOC(_IOC_WRITE, KVMIO, 0x6a, 8);
  constexpr size_t kHeader = 8;
  std::vector<uint64_t> buf((kHeader + routes.size() * sizeof(kvm_irq_routing_entry) + 7) / 8, 0);  // aligned, 0
  auto* bytes = reinterpret_cast<uint8_t*>(buf.data());
  uint32_t nr = static_cast<uint32_t>(routes.size());
  std::memcpy(bytes, &nr, sizeof nr);
  for (size_t i = 0; i < routes.size(); ++i) {
    kvm_irq_routing_entry e{};
    e.gsi = routes[i].gsi;
    if (routes[i].msi) {
      e.type = KVM_IRQ_ROUTING_MSI;
      e.u.msi.address_lo = static_cast<uint32_t>(routes[i].address);
      e.u.msi.address_hi = static_cast<uint32_t>(routes[i].address >> 32);
      e.u.msi.data = routes[i].data;
    } else {
      e.type = KVM_IRQ_ROUTING_IRQCHIP;
      e.u.irqchip.irqchip = routes[i].irqchip;
      e.u.irqchip.pin = routes[i].pin;
    }
    std::memcpy(bytes + kHeader + i * sizeof e, &e, sizeof e);
  }
  if (Ioctl(fd_.get(), kSetGsiRouting, bytes) < 0) return ErrnoError("KVM_SET_GSI_ROUTING");
  return OkStatus();
}

Status VmFd::Irqfd(int fd, uint32_t gsi, bool assign) {
  kvm_irqfd irqfd{};
  irqfd.fd = static_cast<uint32_t>(fd);
  irqfd.gsi = gsi;
  irqfd.flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN;
  if (Ioctl(fd_.get(), KVM_IRQFD, &irqfd) < 0) return ErrnoError("KVM_IRQFD");
  return OkStatus();
}

Status VmFd::GetDirtyLog(uint32_t slot, uint64_t* bitmap) {
  kvm_dirty_log log{};
  log.slot = slot;
  log.dirty_bitmap = bitmap;
  if (Ioctl(fd_.get(), KVM_GET_DIRTY_LOG, &log) < 0) return ErrnoError("KVM_GET_DIRTY_LOG");
  return OkStatus();
}

Status VmFd::EnableManualDirtyProtect() {
  kvm_enable_cap cap{};
  cap.cap = KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2;
  cap.args[0] = KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE;
  if (Ioctl(fd_.get(), KVM_ENABLE_CAP, &cap) < 0) {
    return ErrnoError("KVM_ENABLE_CAP", "KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2");
  }
  return OkStatus();
}

Status VmFd::ClearDirtyLog(uint32_t slot, uint64_t first_page, uint32_t num_pages, uint64_t* bitmap) {
  kvm_clear_dirty_log clear{};
  clear.slot = slot;
  clear.first_page = first_page;
  clear.num_pages = num_pages;
  clear.dirty_bitmap = bitmap;
  if (Ioctl(fd_.get(), KVM_CLEAR_DIRTY_LOG, &clear) < 0) return ErrnoError("KVM_CLEAR_DIRTY_LOG");
  return OkStatus();
}

Status VmFd::GetClock(kvm_clock_data* data) {
  if (Ioctl(fd_.get(), KVM_GET_CLOCK, data) < 0) return ErrnoError("KVM_GET_CLOCK");
  return OkStatus();
}

Status VmFd::SetClock(const kvm_clock_data& data) {
  kvm_clock_data copy = data;
  if (Ioctl(fd_.get(), KVM_SET_CLOCK, &copy) < 0) return ErrnoError("KVM_SET_CLOCK");
  return OkStatus();
}

Result<ScopedFd> VmFd::CreateVcpu(uint32_t id) {
  int fd = Ioctl(fd_.get(), KVM_CREATE_VCPU, static_cast<unsigned long>(id));
  if (fd < 0) return ErrnoError("KVM_CREATE_VCPU");
  return ScopedFd(fd);
}

}  // namespace kvmts::kvm
