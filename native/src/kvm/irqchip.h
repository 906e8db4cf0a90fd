// kvm::irqchip: the in-kernel legacy interrupt controllers a stock Linux guest expects (KVM_CREATE_IRQCHIP:
// 2x 8259 PIC + IOAPIC + LAPICs; KVM_CREATE_PIT2: the 8254 timer) and ISA interrupt lines into them. Free functions
// over a VmFd, one ioctl each (kvm-ioctls style), so the VM fd class stays as it is.
//
//   device raises ISA IRQ n --> IrqLine(vm, n, 1); IrqLine(vm, n, 0)   (an edge: PIC pin n and IOAPIC pin n)
//   save/restore: GetIrqchip(KVM_IRQCHIP_PIC_MASTER | PIC_SLAVE | IOAPIC), GetPit2 / SetPit2
#pragma once

#include <linux/kvm.h>

#include <cstdint>

#include "kvm/result.h"
#include "kvm/vm.h"

namespace kvmts::kvm {

// KVM_CREATE_PIT2 with a dummy PC speaker port. Needs the in-kernel irqchip first.
Status CreatePit2(const VmFd& vm);
// KVM_IRQ_LINE: sets the level of GSI `irq` (ISA IRQs 0-15 reach the PIC and the IOAPIC).
Status IrqLine(const VmFd& vm, uint32_t irq, uint32_t level);
// Raises and lowers `irq` (an ISA edge).
Status IrqPulse(const VmFd& vm, uint32_t irq);
// KVM_GET_IRQCHIP / KVM_SET_IRQCHIP for one chip (chip->chip_id selects it).
Status GetIrqchip(const VmFd& vm, kvm_irqchip* chip);
Status SetIrqchip(const VmFd& vm, const kvm_irqchip& chip);
// KVM_GET_PIT2 / KVM_SET_PIT2.
Status GetPit2(const VmFd& vm, kvm_pit_state2* pit);
Status SetPit2(const VmFd& vm, const kvm_pit_state2& pit);

}  // namespace kvmts::kvm
