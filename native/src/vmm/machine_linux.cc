// Machine::LoadLinux and the Linux platform hooks of the machine (MachineConfig::linux_platform): the in-kernel
// PIC/IOAPIC/PIT, the UART's IRQ 4, the ACPI power-off register. The byte layouts come from vmm/linux_boot.h
// (boot protocol), vmm/linux_acpi.h (ACPI tables) and vmm/smbios.h (system identity); this file only writes them
// into guest memory and the vCPUs.
#include <errno.h>

#include <algorithm>
#include <cstring>

#include "kvm/irqchip.h"
#include "vmm/boot.h"
#include "vmm/linux_acpi.h"
#include "vmm/linux_boot.h"
#include "vmm/machine.h"
#include "vmm/machine_impl.h"
#include "vmm/smbios.h"

namespace kvmts::vmm {
namespace {

constexpr uint32_t kSerialIrq = 4, kKeyboardIrq = 1;

// The boot GDT and identity page tables (the same layout as the ELF loader, vmm/boot.h).
Status WriteBootTables(memory::GuestMemory& mem) {
  uint64_t gdt[3] = {0, 0x00af9b000000ffffull, 0x00cf93000000ffffull};
  uint64_t pml4 = (kPml4Addr + 0x1000) | 0x3;
  uint64_t pdpt[4];
  for (int i = 0; i < 4; ++i) pdpt[i] = (kPml4Addr + 0x2000 + i * 0x1000) | 0x3;
  std::vector<uint64_t> pd(4 * 512);
  for (size_t i = 0; i < pd.size(); ++i) pd[i] = (i << 21) | 0x83;  // present, writable, 2 MiB
  if (auto st = mem.Write(memory::Gpa(kGdtAddr), gdt, sizeof gdt); !st.ok()) return st;
  if (auto st = mem.Write(memory::Gpa(kPml4Addr), &pml4, sizeof pml4); !st.ok()) return st;
  if (auto st = mem.Write(memory::Gpa(kPml4Addr + 0x1000), pdpt, sizeof pdpt); !st.ok()) return st;
  return mem.Write(memory::Gpa(kPml4Addr + 0x2000), pd.data(), pd.size() * sizeof(uint64_t));
}

}  // namespace

Status CreateLinuxIrqchip(kvm::VmFd& vm) {
  if (auto st = vm.CreateIrqchip(); !st.ok()) return st;
  return kvm::CreatePit2(vm);
}

// An ISA interrupt line of the in-kernel PIC/IOAPIC, as a device's IrqTrigger (one edge per Trigger()).
class IsaIrq : public devices::IrqTrigger {
 public:
  IsaIrq(kvm::VmFd* vm, uint32_t irq) : vm_(vm), irq_(irq) {}
  // A failed KVM_IRQ_LINE only loses an interrupt; the guest driver times out and retries.
  void Trigger() override { (void)kvm::IrqPulse(*vm_, irq_); }

 private:
  kvm::VmFd* vm_;
  uint32_t irq_;
};

void RegisterLinuxDevices(MachineImpl& m) {
  m.kbd_irq = std::make_unique<IsaIrq>(&m.vm, kKeyboardIrq);
  m.ps2 = std::make_unique<devices::Ps2Controller>(&m, m.kbd_irq.get());
  m.pio.Register(devices::kI8042Base, 5, m.ps2.get());
  m.acpi_pm = std::make_unique<AcpiPmDevice>(&m);
  m.pio.Register(kAcpiPmPort, kAcpiPmPortLen, m.acpi_pm.get());
}

Status Machine::SendCtrlAltDel() {
  MachineImpl& m = *impl_;
  if (!m.ps2) return Error{EINVAL, "ctrl-alt-del", "not a Linux platform machine"};
  std::lock_guard<std::mutex> lock(*m.pio.LockOf(m.ps2.get()));
  if (!m.ps2->InjectCtrlAltDel()) return Error{EAGAIN, "ctrl-alt-del", "the guest has not enabled its keyboard"};
  return OkStatus();
}

void MachineImpl::RaiseSerialIrq() {
  // A failed KVM_IRQ_LINE only loses an interrupt (the guest's UART driver polls LSR too); nothing to report.
  (void)kvm::IrqPulse(vm, kSerialIrq);
}

Status Machine::LoadLinux(const uint8_t* kernel, size_t kernel_len, const uint8_t* initrd, size_t initrd_len,
                          const std::string& cmdline, const std::string& uuid) {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineImpl& m = *impl_;
  if (m.state.load() != MachineState::kCreated) return Error{EINVAL, "load-linux", "machine is not created"};
  if (!m.config.linux_platform) return Error{EINVAL, "load-linux", "machine was created without linux_platform"};
  // A vmlinux (ELF) is placed segment by segment and entered at its own entry point; a bzImage's protected-mode
  // part goes to 1 MiB and decompresses itself. Both get the same zero page.
  const bool vmlinux = IsElfKernel(kernel, kernel_len);
  ElfImage elf;
  Result<BzImage> image = VmlinuxSetupHeader();
  if (vmlinux) {
    auto parsed = ParseElf(kernel, kernel_len);
    if (!parsed.ok()) return Error{EINVAL, "vmlinux", parsed.error().detail};
    elf = std::move(parsed.value());
    bool entry_in_kernel = false;
    for (const auto& s : elf.segments) {
      if (elf.entry >= s.paddr && elf.entry - s.paddr < s.mem_bytes) entry_in_kernel = true;
    }
    if (!entry_in_kernel) return Error{EINVAL, "vmlinux", "entry point outside the loaded segments"};
  } else {
    image = ParseBzImage(kernel, kernel_len);
    if (!image.ok()) return image.error();
  }
  auto line = CheckCmdline(image.value(), cmdline);
  if (!line.ok()) return line.error();
  SmbiosInfo identity;
  if (!uuid.empty()) {
    auto parsed = ParseUuid(uuid);
    if (!parsed) return Error{EINVAL, "load-linux", "firmware uuid is not a UUID: " + uuid};
    identity.uuid = *parsed;
  }

  std::vector<RamRange> ram;
  for (const auto& r : m.mem->regions()) ram.push_back({r.base.value, r.size_bytes});
  uint64_t kernel_end = 0;
  if (vmlinux) {
    for (const auto& s : elf.segments) {
      if (!m.mem->HostPtr(memory::Gpa(s.paddr), s.mem_bytes)) {
        return Error{ENOMEM, "load-linux", "kernel does not fit in guest RAM"};
      }
    }
    if (auto st = LoadElfSegments(*m.mem, kernel, kernel_len, elf); !st.ok()) return st;
    for (const auto& s : elf.segments) {
      m.mem->MarkDirty(memory::Gpa(s.paddr), s.mem_bytes);
      kernel_end = std::max(kernel_end, s.paddr + s.mem_bytes);
    }
  } else {
    kernel_end = kKernelLoadAddr + image.value().kernel_bytes;
    // SAFETY: HostPtr bounds-checks the whole protected-mode kernel range against one RAM region.
    uint8_t* dst = m.mem->HostPtr(memory::Gpa(kKernelLoadAddr), image.value().kernel_bytes);
    if (!dst) return Error{ENOMEM, "load-linux", "kernel does not fit in guest RAM"};
    std::memcpy(dst, kernel + image.value().setup_bytes, image.value().kernel_bytes);
    m.mem->MarkDirty(memory::Gpa(kKernelLoadAddr), image.value().kernel_bytes);
  }

  BootParamsInput bp;
  bp.image = &image.value();
  bp.e820 = BuildE820(ram);
  bp.cmdline_addr = kLinuxCmdlineAddr;
  if (initrd_len) {
    auto at = PlaceInitrd(ram, kernel_end, initrd_len, image.value().initrd_addr_max);
    if (!at.ok()) return at.error();
    if (auto st = m.mem->Write(memory::Gpa(at.value()), initrd, initrd_len); !st.ok()) return st;
    bp.initrd_addr = at.value();
    bp.initrd_bytes = initrd_len;
  }
  auto acpi = BuildAcpiTables(m.config.vcpu_count, m.pci != nullptr);  // + the PCI root bridge with disks or NICs
  if (auto st = m.mem->Write(memory::Gpa(kAcpiTablesAddr), acpi.data(), acpi.size()); !st.ok()) return st;
  bp.rsdp_addr = kAcpiTablesAddr;
  auto smbios = BuildSmbiosTables(identity);
  if (auto st = m.mem->Write(memory::Gpa(kSmbiosAddr), smbios.data(), smbios.size()); !st.ok()) return st;
  auto zero_page = BuildBootParams(bp);
  if (!zero_page.ok()) return zero_page.error();
  if (auto st = m.mem->Write(memory::Gpa(kZeroPageAddr), zero_page.value().data(), kZeroPageBytes); !st.ok()) {
    return st;
  }
  if (auto st = m.mem->Write(memory::Gpa(kLinuxCmdlineAddr), line.value().c_str(), line.value().size() + 1);
      !st.ok()) {
    return st;
  }
  if (auto st = WriteBootTables(*m.mem); !st.ok()) return st;

  std::vector<kvm_cpuid_entry2> base = m.cpuid;
  // The in-kernel LAPIC (CreateLinuxIrqchip) emulates the TSC deadline timer where KVM says so.
  AdjustCpuidForLinux(&base, m.vm.CheckExtension(KVM_CAP_TSC_DEADLINE_TIMER) > 0);
  for (auto& vp : m.vcpus) {
    std::vector<kvm_cpuid_entry2> entries = base;
    uint32_t id = vp->id();
    for (auto& e : entries) {
      if (e.function == 1) e.ebx = (e.ebx & 0x00ffffffu) | (id << 24);  // initial APIC ID
      if (e.function == 0xb || e.function == 0x1f) e.edx = id;          // x2APIC ID
    }
    if (auto st = vp->SetCpuid(entries); !st.ok()) return st;
    if (auto st = vp->SetMsrs(LinuxBootMsrs()); !st.ok()) return st;
  }
  auto& vcpu = *m.vcpus[0];
  kvm_sregs sregs;
  if (auto st = vcpu.GetSregs(&sregs); !st.ok()) return st;
  InitialSregs(&sregs);
  if (auto st = vcpu.SetSregs(sregs); !st.ok()) return st;
  kvm_regs regs;
  if (vmlinux) {
    LinuxInitialRegs(&regs, elf.entry);
  } else {
    LinuxInitialRegs(&regs);
  }
  if (auto st = vcpu.SetRegs(regs); !st.ok()) return st;
  m.loaded = true;
  return OkStatus();
}

}  // namespace kvmts::vmm
