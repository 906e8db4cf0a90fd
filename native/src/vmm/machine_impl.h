// MachineImpl: the parts of a Machine, shared by machine.cc (lifecycle, dirty log, serial) and machine_state.cc
// (save/restore). Private to src/vmm. Member order is teardown order in reverse: threads go first, then vCPU fds,
// devices, memory slots' backing, the VM fd and /dev/kvm last.
#pragma once

#include <linux/kvm.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/bus.h"
#include "devices/i8042.h"
#include "devices/ps2_controller.h"
#include "devices/serial_16550.h"
#include "devices/test_port.h"
#include "devices/virtio/blk.h"
#include "devices/virtio/guest_access.h"
#include "devices/virtio/net.h"
#include "devices/virtio/pci.h"
#include "devices/virtio/virtio_pci.h"
#include "kvm/abi.h"
#include "kvm/system.h"
#include "kvm/vcpu.h"
#include "kvm/vm.h"
#include "memory/guest_memory.h"
#include "vmm/exit_handler.h"
#include "vmm/linux_acpi.h"
#include "vmm/machine.h"
#include "vmm/vcpu_thread.h"

namespace kvmts::vmm {

// Serial output kept for JS before bytes are dropped (the guest's console is slower than this in practice).
inline constexpr size_t kSerialBufferMaxBytes = 4u << 20;

// MSI-X messages of the virtio devices, injected with KVM_SIGNAL_MSI (any thread: the devices' workers).
class KvmMsiSink : public devices::virtio::MsiSink {
 public:
  explicit KvmMsiSink(kvm::VmFd* vm) : vm_(vm) {}
  void SignalMsi(uint64_t address, uint32_t data) override;
  uint64_t failures() const { return failures_.load(); }

 private:
  kvm::VmFd* vm_;
  std::atomic<uint64_t> failures_{0};
};

// Device eventfds as KVM irqfds on MSI routes (a vhost-net completion then reaches the guest without a userspace
// hop). Every change rewrites the whole GSI table: KVM's default irqchip routes (GSIs 0-23) and one MSI route per
// attached eventfd, from GSI 24 up.
class KvmMsiRouter : public devices::virtio::MsiRouter {
 public:
  explicit KvmMsiRouter(kvm::VmFd* vm) : vm_(vm) {}
  bool Attach(int fd, uint64_t address, uint32_t data) override;
  void Detach(int fd) override;
  uint64_t failures() const { return failures_.load(); }
  size_t routes() const;

 private:
  struct Route {
    uint32_t gsi;
    uint64_t address;
    uint32_t data;
  };
  bool CommitLocked();
  kvm::VmFd* vm_;
  mutable std::mutex mu_;
  std::map<int, Route> routes_;  // by eventfd
  std::atomic<uint64_t> failures_{0};
};

// The virtio notify addresses as KVM ioeventfds (a kick then wakes the device's worker without an exit).
class KvmNotifyRegistrar : public devices::virtio::NotifyRegistrar {
 public:
  explicit KvmNotifyRegistrar(kvm::VmFd* vm);
  void AddNotify(uint64_t gpa, int fd) override;
  void RemoveNotify(uint64_t gpa, int fd) override;
  uint64_t failures() const { return failures_.load(); }

 private:
  kvm::VmFd* vm_;
  uint32_t len_;  // 0 (any length) when KVM offers it, else 2 (the virtio driver's 16-bit write)
  std::atomic<uint64_t> failures_{0};
};

// Forwards one transport's OnBroken to MachineEvents::OnDeviceError with the device's name.
class VirtioErrorForwarder : public devices::virtio::TransportListener {
 public:
  VirtioErrorForwarder(MachineEvents* events, std::string device) : events_(events), device_(std::move(device)) {}
  void OnBroken(const char* why) override {
    if (events_ != nullptr) events_->OnDeviceError(device_, why);
  }

 private:
  MachineEvents* events_;
  std::string device_;
};

struct MachineImpl : public Peripherals,
                     public devices::OutputSink,
                     public devices::IrqTrigger,
                     public devices::ResetSink,
                     public devices::ExitSink {
  MachineImpl() : serial(this, this), i8042(this), test_port(this, &MonotonicMicros) {}
  ~MachineImpl() override;

  static uint64_t MonotonicMicros();

  // Peripherals
  devices::PioBus& bus() override { return pio; }
  void ReportExit(uint32_t vcpu, const std::string& reason, bool fatal) override;
  void RequestShutdown(ShutdownReason reason, uint32_t code) override;
  bool MmioRead(uint64_t addr, uint8_t* data, size_t len) override { return pci && pci->MmioRead(addr, data, len); }
  bool MmioWrite(uint64_t addr, const uint8_t* data, size_t len) override {
    return pci && pci->MmioWrite(addr, data, len);
  }
  // Devices' sinks
  void Write(uint8_t byte) override;  // serial output
  // The test guest polls the UART (no routing); a Linux platform gets ISA IRQ 4 (vmm/machine_linux.cc).
  void Trigger() override {
    if (config.linux_platform) RaiseSerialIrq();
  }
  void RaiseSerialIrq();
  void OnReset() override { RequestShutdown(ShutdownReason::kReset, 0); }
  void OnGuestExit(uint32_t code) override { RequestShutdown(ShutdownReason::kGuestExit, code); }

  // Posts cmd to every vCPU thread, then waits for every acknowledgement.
  Status Broadcast(VcpuCommand cmd, const char* op);
  void JoinThreads();

  MachineConfig config;
  MachineEvents* events = nullptr;
  kvm::System kvm;
  kvm::VmFd vm;
  std::unique_ptr<memory::GuestMemory> mem;
  std::vector<kvm_cpuid_entry2> cpuid;
  std::vector<uint32_t> msr_indices;  // saved/restored MSRs (filtered to the readable ones on first save)
  bool msr_indices_filtered = false;
  size_t xsave_bytes = kvm::abi::kXsaveBytes;
  devices::Serial16550 serial;
  devices::I8042 i8042;
  devices::TestPort test_port;
  devices::PioBus pio;
  // virtio-pci (machine_virtio.cc), only with config.disks or config.nics. Transports after their devices: destroyed first.
  std::unique_ptr<devices::virtio::GuestMemoryAccess> guest_access;
  std::unique_ptr<KvmMsiSink> msi_sink;
  std::unique_ptr<KvmMsiRouter> msi_router;
  std::unique_ptr<KvmNotifyRegistrar> notify_registrar;
  std::unique_ptr<devices::virtio::PciRootBus> pci;
  std::vector<std::unique_ptr<VirtioErrorForwarder>> virtio_listeners;
  std::vector<std::unique_ptr<devices::virtio::VirtioBlock>> blocks;
  std::vector<std::unique_ptr<devices::virtio::VirtioNet>> nets;
  // transports[i] serves blocks[i] for i < blocks.size(), then nets[i - blocks.size()].
  std::vector<std::unique_ptr<devices::virtio::VirtioPciTransport>> transports;
  std::vector<std::unique_ptr<kvm::VcpuFd>> vcpus;
  std::vector<std::unique_ptr<VcpuThread>> threads;

  mutable std::mutex lifecycle_mu;  // state transitions (Start/Pause/Resume/Stop/Save/Restore)
  std::atomic<MachineState> state{MachineState::kCreated};
  std::atomic<bool> shutdown{false};
  bool loaded = false;

  std::mutex dirty_mu;
  bool dirty_logging = false;
  bool manual_protect = false;
  std::vector<uint64_t> kvm_log_scratch;
  std::atomic<uint64_t> dirty_collections{0};

  std::mutex serial_out_mu;
  std::string serial_out;
  bool serial_notified = false;
  uint64_t serial_dropped = 0;  // output bytes dropped because serial_out was full

  // Linux platform (machine_linux.cc): the 8042 with a keyboard on ISA IRQ 1, the ACPI power-off register.
  std::unique_ptr<devices::IrqTrigger> kbd_irq;
  std::unique_ptr<devices::Ps2Controller> ps2;
  std::unique_ptr<AcpiPmDevice> acpi_pm;

  std::atomic<uint32_t> throttle_pct{0};
  std::thread throttle_thread;
  std::mutex throttle_mu;
  std::condition_variable throttle_cv;
  bool throttle_exit = false;
};

// The virtio-pci devices (machine_virtio.cc): CreateVirtioDevices opens config.disks and config.nics and puts them on a PCI bus
// (ports 0xCF8-0xCFF, BARs in kPciMmioWindowBase); QuiesceVirtio parks every device's I/O (pause, stop, before a
// restore), ResumeVirtio lets it run (start, resume); DestroyVirtio stops the workers before memory goes away.
Status CreateVirtioDevices(MachineImpl& m);
void QuiesceVirtio(MachineImpl& m);
void ResumeVirtio(MachineImpl& m);
void DestroyVirtio(MachineImpl& m);
// Adds the disks' and NICs' counters to *s (any thread).
void AddVirtioStats(const MachineImpl& m, MachineStats* s);

// KVM_CREATE_IRQCHIP + KVM_CREATE_PIT2 for MachineConfig::linux_platform (machine_linux.cc).
Status CreateLinuxIrqchip(kvm::VmFd& vm);
// Registers the Linux platform's port devices (8042 + keyboard, ACPI PM) instead of the reset-only i8042.
void RegisterLinuxDevices(MachineImpl& m);

}  // namespace kvmts::vmm
