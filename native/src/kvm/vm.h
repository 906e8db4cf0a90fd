// kvm::VmFd: one KVM VM file descriptor (rust-vmm kvm-ioctls `VmFd`): memory slots, irqchip, dirty log, clock,
// vCPU creation. Thin: each method is one ioctl and returns the failed ioctl's name in its Error.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <vector>

#include "kvm/fd.h"
#include "kvm/result.h"

namespace kvmts::kvm {

class VmFd {
 public:
  VmFd() = default;
  explicit VmFd(ScopedFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }
  int CheckExtension(int cap) const;

  // KVM_SET_USER_MEMORY_REGION. size 0 deletes the slot.
  Status SetUserMemoryRegion(uint32_t slot, uint32_t flags, uint64_t gpa, uint64_t size, void* host);
  // KVM_SET_TSS_ADDR / KVM_SET_IDENTITY_MAP_ADDR (needed on Intel; harmless elsewhere).
  Status SetTssAddr(uint64_t addr);
  Status SetIdentityMapAddr(uint64_t addr);
  // KVM_ENABLE_CAP(KVM_CAP_SPLIT_IRQCHIP): LAPICs in the kernel, no PIC/IOAPIC. Before any vCPU.
  Status EnableSplitIrqchip(uint32_t ioapic_pins);
  // KVM_CREATE_IRQCHIP: PIC + IOAPIC + LAPICs in the kernel.
  Status CreateIrqchip();
  // KVM_GET_DIRTY_LOG: fetch-and-clear the slot's dirty bitmap into `bitmap` (one bit per page).
  Status GetDirtyLog(uint32_t slot, uint64_t* bitmap);
  // KVM_ENABLE_CAP(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2): GET_DIRTY_LOG stops clearing; CLEAR_DIRTY_LOG re-protects.
  Status EnableManualDirtyProtect();
  // KVM_CLEAR_DIRTY_LOG: re-arms write tracking for the set bits of `bitmap` (pages first_page.., a multiple of 64).
  Status ClearDirtyLog(uint32_t slot, uint64_t first_page, uint32_t num_pages, uint64_t* bitmap);
  // KVM_GET_CLOCK / KVM_SET_CLOCK (kvmclock). SetClock passes data.flags through: the only flag KVM accepts is
  // KVM_CLOCK_REALTIME (data.realtime is then the host wall clock the value belongs to, and KVM adds the time
  // since), offered when CheckExtension(KVM_CAP_ADJUST_CLOCK) has that bit; any other flag is EINVAL.
  Status GetClock(kvm_clock_data* data);
  Status SetClock(const kvm_clock_data& data);
  // KVM_SIGNAL_MSI: injects one MSI (address, data) through the in-kernel LAPICs. Any thread. Returns EINVAL
  // without an in-kernel irqchip; a blocked message (the guest masked it in its APIC) is not an error.
  Status SignalMsi(uint64_t address, uint32_t data);
  // KVM_IOEVENTFD on MMIO [addr, addr + len) without datamatch: a guest write there signals `fd` in the kernel
  // instead of exiting (len 0 = any length, with KVM_CAP_IOEVENTFD_ANY_LENGTH). assign false removes it.
  Status Ioeventfd(uint64_t addr, uint32_t len, int fd, bool assign);
  // One GSI routing entry: an MSI (address, data) or an in-kernel irqchip pin.
  struct GsiRoute {
    uint32_t gsi = 0;
    bool msi = false;
    uint32_t irqchip = 0, pin = 0;  // irqchip routes
    uint64_t address = 0;           // MSI routes
    uint32_t data = 0;
  };
  // Replaces the whole GSI routing table (KVM_SET_GSI_ROUTING).
  Status SetGsiRouting(const std::vector<GsiRoute>& routes);
  // Has KVM raise `gsi` whenever eventfd `fd` is signalled (KVM_IRQFD), or stops it (assign false).
  Status Irqfd(int fd, uint32_t gsi, bool assign);
  // KVM_CREATE_VCPU; the caller owns the returned fd.
  Result<ScopedFd> CreateVcpu(uint32_t id);

 private:
  ScopedFd fd_;
};

}  // namespace kvmts::kvm
