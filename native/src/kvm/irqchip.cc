#include "kvm/irqchip.h"

#include <errno.h>
#include <sys/ioctl.h>

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

Status CreatePit2(const VmFd& vm) {
  kvm_pit_config config{};
  config.flags = KVM_PIT_SPEAKER_DUMMY;
  if (Ioctl(vm.fd(), KVM_CREATE_PIT2, &config) < 0) return ErrnoError("KVM_CREATE_PIT2");
  return OkStatus();
}

Status IrqLine(const VmFd& vm, uint32_t irq, uint32_t level) {
  kvm_irq_level line{};
  line.irq = irq;
  line.level = level;
  if (Ioctl(vm.fd(), KVM_IRQ_LINE, &line) < 0) return ErrnoError("KVM_IRQ_LINE");
  return OkStatus();
}

Status IrqPulse(const VmFd& vm, uint32_t irq) {
  if (auto st = IrqLine(vm, irq, 1); !st.ok()) return st;
  return IrqLine(vm, irq, 0);
}

Status GetIrqchip(const VmFd& vm, kvm_irqchip* chip) {
  if (Ioctl(vm.fd(), KVM_GET_IRQCHIP, chip) < 0) return ErrnoError("KVM_GET_IRQCHIP");
  return OkStatus();
}

Status SetIrqchip(const VmFd& vm, const kvm_irqchip& chip) {
  kvm_irqchip copy = chip;
  if (Ioctl(vm.fd(), KVM_SET_IRQCHIP, &copy) < 0) return ErrnoError("KVM_SET_IRQCHIP");
  return OkStatus();
}

Status GetPit2(const VmFd& vm, kvm_pit_state2* pit) {
  if (Ioctl(vm.fd(), KVM_GET_PIT2, pit) < 0) return ErrnoError("KVM_GET_PIT2");
  return OkStatus();
}

Status SetPit2(const VmFd& vm, const kvm_pit_state2& pit) {
  kvm_pit_state2 copy = pit;
  if (Ioctl(vm.fd(), KVM_SET_PIT2, &copy) < 0) return ErrnoError("KVM_SET_PIT2");
  return OkStatus();
}

}  // namespace kvmts::kvm
