// The Machine's virtio-pci devices: a PCI bus on ports 0xCF8-0xCFF (host bridge at 00:00.0), one virtio-blk
// function per MachineConfig::disks entry, then one virtio-net function per MachineConfig::nics entry, BARs in the
// root bridge's MMIO window (the SSDT of vmm/linux_acpi.h declares it), MSI-X through KVM_SIGNAL_MSI.
//
//   function k (disks first, then NICs)   PCI 00:(k+1).0   BAR0 at kPciMmioWindowBase + k * 512 KiB
//   disk: MSI-X vectors config + 1 queue          NIC: config + rx + tx, backend a tap (devices/virtio/net.h)
//
//   vCPU  PIO 0xCF8/0xCFC -> PioBus -> PciRootBus            (config space)
//   vCPU  KVM_EXIT_MMIO   -> HandleExit -> MachineImpl::MmioRead/Write -> PciRootBus -> transport (BAR0)
//   vCPU  notify write    -> KVM ioeventfd (bound by KvmNotifyRegistrar while the BAR decodes) -> the device's
//                            kick eventfd -> its worker: no exit to userspace
//   worker                -> KvmMsiSink::SignalMsi -> KVM_SIGNAL_MSI (the in-kernel LAPICs route it)
//   broken queue/request  -> VirtioErrorForwarder -> MachineEvents::OnDeviceError("virtio-blk 00:01.0", why)
//                            (or "virtio-net 00:02.0")
//
// KVM_SIGNAL_MSI bypasses the GSI routing table. KvmMsiRouter rewrites it whole for its irqfd routes, KVM's default
// irqchip routes (GSIs 0-23: UART 4, keyboard 1, the PIT's 0) included unchanged.
// Lifecycle: the devices run while the machine runs; Pause/Stop quiesce them (no guest-memory write after the
// final dirty-log collection), Start/Resume let them go on, a restore happens quiesced (a target that never starts
// runs nothing twice). Interrupts: a device worker's are one KVM_SIGNAL_MSI ioctl each; vhost-net's go through
// KvmMsiRouter (irqfd on an MSI route) while their vector is deliverable.
//   vhost call eventfd -> KVM irqfd -> MSI route (GSI 24+) -> the in-kernel LAPIC: no userspace hop
#include <errno.h>

#include <cstdio>
#include <cstring>

#include "vmm/linux_acpi.h"
#include "vmm/machine_impl.h"

namespace kvmts::vmm {

namespace dv = devices::virtio;

void KvmMsiSink::SignalMsi(uint64_t address, uint32_t data) {
  if (!vm_->SignalMsi(address, data).ok()) failures_++;
}

bool KvmMsiRouter::Attach(int fd, uint64_t address, uint32_t data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = routes_.find(fd);
  if (it != routes_.end()) {
    if (it->second.address == address && it->second.data == data) return true;
    Route old = it->second;
    it->second.address = address;
    it->second.data = data;
    if (CommitLocked()) return true;
    (void)vm_->Irqfd(fd, old.gsi, false);  // the route could not follow the vector: the relay takes over
    routes_.erase(fd);
    (void)CommitLocked();
    failures_++;
    return false;
  }
  // The lowest free GSI from 24 (below are the irqchip pins).
  uint32_t gsi = 24;
  auto taken = [&](uint32_t g) {
    for (const auto& kv : routes_) {
      if (kv.second.gsi == g) return true;
    }
    return false;
  };
  while (taken(gsi)) gsi++;
  routes_[fd] = Route{gsi, address, data};
  if (CommitLocked() && vm_->Irqfd(fd, gsi, true).ok()) return true;
  routes_.erase(fd);
  (void)CommitLocked();
  failures_++;
  return false;
}

void KvmMsiRouter::Detach(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = routes_.find(fd);
  if (it == routes_.end()) return;
  if (!vm_->Irqfd(fd, it->second.gsi, false).ok()) failures_++;
  routes_.erase(it);
  if (!CommitLocked()) failures_++;
}

size_t KvmMsiRouter::routes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routes_.size();
}

bool KvmMsiRouter::CommitLocked() {
  // KVM's default table (arch/x86/kvm/irq_comm.c): GSI i to IOAPIC pin i for 0-23, and to the PICs for 0-15.
  std::vector<kvm::VmFd::GsiRoute> table;
  for (uint32_t i = 0; i < 24; ++i) {
    table.push_back({i, false, KVM_IRQCHIP_IOAPIC, i, 0, 0});
    uint32_t pic = i < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE;
    if (i < 16) table.push_back({i, false, pic, i % 8, 0, 0});
  }
  for (const auto& [fd, r] : routes_) table.push_back({r.gsi, true, 0, 0, r.address, r.data});
  return vm_->SetGsiRouting(table).ok();
}

KvmNotifyRegistrar::KvmNotifyRegistrar(kvm::VmFd* vm)
    : vm_(vm), len_(vm->CheckExtension(KVM_CAP_IOEVENTFD_ANY_LENGTH) > 0 ? 0 : 2) {}

// A failure (no ioeventfd support, an address already bound) is not fatal: the kick then exits to the transport,
// which calls QueueNotify, which signals the same eventfd.
void KvmNotifyRegistrar::AddNotify(uint64_t gpa, int fd) {
  if (!vm_->Ioeventfd(gpa, len_, fd, true).ok()) failures_++;
}

void KvmNotifyRegistrar::RemoveNotify(uint64_t gpa, int fd) {
  if (!vm_->Ioeventfd(gpa, len_, fd, false).ok()) failures_++;
}

namespace {

// Puts `device` on the bus as function k (slot k + 1) with its transport and error forwarder.
void AddFunction(MachineImpl& m, dv::VirtioDevice* device, const char* kind) {
  size_t k = m.transports.size();
  uint64_t bar = kPciMmioWindowBase + k * dv::kVirtioBarSize;
  m.transports.push_back(std::make_unique<dv::VirtioPciTransport>(device, m.guest_access.get(), m.msi_sink.get(), bar));
  m.transports.back()->SetNotifyRegistrar(m.notify_registrar.get());
  m.transports.back()->SetMsiRouter(m.msi_router.get());
  char name[40];
  std::snprintf(name, sizeof name, "%s 00:%02x.0", kind, static_cast<unsigned>(k + 1));  // k < 16
  m.virtio_listeners.push_back(std::make_unique<VirtioErrorForwarder>(m.events, name));
  m.transports.back()->SetListener(m.virtio_listeners.back().get());
  m.pci->AddDevice(static_cast<uint8_t>(k + 1), m.transports.back().get());
}

}  // namespace

Status CreateVirtioDevices(MachineImpl& m) {
  if (m.config.disks.empty() && m.config.nics.empty()) return OkStatus();
  if (!m.config.linux_platform) return Error{EINVAL, "create-vm", "disks and NICs need the Linux platform"};
  if (m.config.disks.size() + m.config.nics.size() > 16) return Error{EINVAL, "create-vm", "at most 16 disks and NICs"};
  m.guest_access = std::make_unique<dv::GuestMemoryAccess>(m.mem.get());
  m.msi_sink = std::make_unique<KvmMsiSink>(&m.vm);
  m.msi_router = std::make_unique<KvmMsiRouter>(&m.vm);
  m.notify_registrar = std::make_unique<KvmNotifyRegistrar>(&m.vm);
  m.pci = std::make_unique<dv::PciRootBus>();
  for (const DiskConfig& d : m.config.disks) {
    dv::BlockOptions o;
    o.path = d.path;
    o.read_only = d.read_only;
    o.serial = d.serial;
    o.base_path = d.base_path;
    auto blk = dv::VirtioBlock::Open(o);
    if (!blk.ok()) return blk.error();
    m.blocks.push_back(std::move(blk.value()));
    AddFunction(m, m.blocks.back().get(), "virtio-blk");
  }
  for (const NicConfig& n : m.config.nics) {
    dv::NetOptions o;
    o.tap = n.tap;
    o.vhost = n.vhost;
    std::memcpy(o.mac, n.mac, sizeof o.mac);
    auto net = dv::VirtioNet::Open(o);
    if (!net.ok()) return net.error();
    m.nets.push_back(std::move(net.value()));
    AddFunction(m, m.nets.back().get(), "virtio-net");
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

void AddVirtioStats(const MachineImpl& m, MachineStats* s) {
  for (const auto& b : m.blocks) {
    dv::BlockStats bs = b->stats();
    s->disk_requests += bs.requests;
    s->disk_read_bytes += bs.read_bytes;
    s->disk_write_bytes += bs.write_bytes;
    s->disk_errors += bs.io_errors + bs.unsupported;
  }
  for (const auto& n : m.nets) {
    dv::NetStats ns = n->stats();
    s->net_rx_frames += ns.rx_frames;
    s->net_rx_bytes += ns.rx_bytes;
    s->net_tx_frames += ns.tx_frames;
    s->net_tx_bytes += ns.tx_bytes;
    s->net_errors += ns.tx_errors + ns.rx_truncated + ns.rx_dropped;
    s->net_vhost += ns.vhost_active ? 1 : 0;
    s->net_vhost_fallbacks += ns.vhost_fallbacks;
  }
  for (size_t i = 0; i < m.transports.size(); ++i) {
    dv::TransportStats ts = m.transports[i]->stats();
    (i < m.blocks.size() ? s->disk_broken : s->net_broken) += ts.broken + ts.activate_failed;
    s->disk_kicks_exited += ts.notifies;
  }
  if (m.msi_sink) s->msi_failures = m.msi_sink->failures();
  if (m.msi_router) {
    s->irqfd_routes = m.msi_router->routes();
    s->irqfd_failures = m.msi_router->failures();
  }
  if (m.notify_registrar) s->ioeventfd_failures = m.notify_registrar->failures();
}

void DestroyVirtio(MachineImpl& m) {
  m.transports.clear();  // resets each device: its worker is joined
  m.blocks.clear();
  m.nets.clear();
}

}  // namespace kvmts::vmm
