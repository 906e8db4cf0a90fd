// The Machine's virtio-pci devices: a PCI bus on ports 0xCF8-0xCFF (host bridge at 00:00.0), one virtio-blk
// function per MachineConfig::disks entry, BARs in the root bridge's MMIO window (the SSDT of vmm/linux_acpi.h
// declares it), MSI-X through KVM_SIGNAL_MSI.
//
//   disk i   PCI 00:(i+1).0   BAR0 at kPciMmioWindowBase + i * 512 KiB   MSI-X vectors: config + 1 queue
//
//   vCPU  PIO 0xCF8/0xCFC -> PioBus -> PciRootBus            (config space)
//   vCPU  KVM_EXIT_MMIO   -> HandleExit -> MachineImpl::MmioRead/Write -> PciRootBus -> transport (BAR0)
//   worker                -> KvmMsiSink::SignalMsi -> KVM_SIGNAL_MSI (the in-kernel LAPICs route it)
//
// The legacy IRQCHIP routes (UART 4, keyboard 1) are untouched: MSIs bypass the GSI routing table.
// Lifecycle: the devices run while the machine runs; Pause/Stop quiesce them (no guest-memory write after the
// final dirty-log collection), Start/Resume let them go on, a restore happens quiesced (a target that never starts
// runs nothing twice). Not yet: ioeventfd for the notify region (every kick is an MMIO exit), irqfd routes.
#include <errno.h>

#include "vmm/linux_acpi.h"
#include "vmm/machine_impl.h"

namespace kvmts::vmm {

namespace dv = devices::virtio;

void KvmMsiSink::SignalMsi(uint64_t address, uint32_t data) {
  if (!vm_->SignalMsi(address, data).ok()) failures_++;
}

Status CreateVirtioDevices(MachineImpl& m) {
  if (m.config.disks.empty()) return OkStatus();
  if (!m.config.linux_platform) return Error{EINVAL, "create-vm", "disks need the Linux platform"};
  if (m.config.disks.size() > 16) return Error{EINVAL, "create-vm", "at most 16 disks"};
  m.guest_access = std::make_unique<dv::GuestMemoryAccess>(m.mem.get());
  m.msi_sink = std::make_unique<KvmMsiSink>(&m.vm);
  m.pci = std::make_unique<dv::PciRootBus>();
  for (size_t i = 0; i < m.config.disks.size(); ++i) {
    const DiskConfig& d = m.config.disks[i];
    dv::BlockOptions o;
    o.path = d.path;
    o.read_only = d.read_only;
    o.serial = d.serial;
    auto blk = dv::VirtioBlock::Open(o);
    if (!blk.ok()) return blk.error();
    uint64_t bar = kPciMmioWindowBase + i * dv::kVirtioBarSize;
    m.blocks.push_back(std::move(blk.value()));
    m.transports.push_back(std::make_unique<dv::VirtioPciTransport>(m.blocks.back().get(), m.guest_access.get(),
                                                                    m.msi_sink.get(), bar));
    m.pci->AddDevice(static_cast<uint8_t>(i + 1), m.transports.back().get());
  }
  if (!m.pio.Register(dv::kPciConfigAddressPort, dv::kPciConfigPortCount, m.pci.get())) {
    return Error{EBUSY, "create-vm", "PCI config ports taken"};
  }
  return OkStatus();
}

void QuiesceVirtio(MachineImpl& m) {
  for (auto& t : m.transports) t->Quiesce();
}

void ResumeVirtio(MachineImpl& m) {
  for (auto& t : m.transports) t->Resume();
}

void DestroyVirtio(MachineImpl& m) {
  m.transports.clear();  // resets each device: its worker is joined
  m.blocks.clear();
}

}  // namespace kvmts::vmm
