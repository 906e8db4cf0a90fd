#include "vmm/machine.h"

#include <errno.h>
#include <time.h>

#include <chrono>

#include "vmm/boot.h"
#include "vmm/machine_impl.h"

namespace kvmts::vmm {

const char* MachineStateName(MachineState s) {
  switch (s) {
    case MachineState::kCreated: return "created";
    case MachineState::kRunning: return "running";
    case MachineState::kPaused: return "paused";
    case MachineState::kStopped: return "stopped";
  }
  return "unknown";
}

const char* ShutdownReasonName(ShutdownReason r) {
  switch (r) {
    case ShutdownReason::kGuestExit: return "guest-exit";
    case ShutdownReason::kReset: return "reset";
    case ShutdownReason::kTripleFault: return "triple-fault";
    case ShutdownReason::kFatalExit: return "fatal-exit";
  }
  return "unknown";
}

namespace {

constexpr int kAckTimeoutMs = 5000;
// Placed in the MMIO hole, below the 4 GiB boundary (Intel needs both; they must not overlap RAM).
constexpr uint64_t kTssAddr = 0xfffbd000;
constexpr uint64_t kIdentityMapAddr = 0xfffbc000;

Error StateError(const char* op, MachineState s) { return Error{EINVAL, op, std::string("machine is ") + MachineStateName(s)}; }

}  // namespace

uint64_t MachineImpl::MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

MachineImpl::~MachineImpl() {
  {
    std::lock_guard<std::mutex> lock(throttle_mu);
    throttle_exit = true;
  }
  throttle_cv.notify_all();
  if (throttle_thread.joinable()) throttle_thread.join();
  JoinThreads();
  threads.clear();
  DestroyVirtio(*this);  // device workers stop before the memory and the VM fd they use go away
  vcpus.clear();  // unmaps kvm_run, closes vCPU fds
  vm = kvm::VmFd();  // closes the VM fd (and its slots) before the memory behind them is unmapped
  mem.reset();
}

void MachineImpl::ReportExit(uint32_t vcpu, const std::string& reason, bool fatal) {
  if (events) events->OnVcpuExit(vcpu, reason, fatal);
}

void MachineImpl::RequestShutdown(ShutdownReason reason, uint32_t code) {
  if (shutdown.exchange(true)) return;
  state.store(MachineState::kStopped);
  for (auto& t : threads) t->Post(VcpuCommand::kFinish);
  if (events) events->OnShutdown(reason, code);
}

void MachineImpl::Write(uint8_t byte) {
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(serial_out_mu);
    // Bounded: a guest printing while nobody drains (JS busy or gone) must not grow the VMM without limit.
    if (serial_out.size() >= kSerialBufferMaxBytes) {
      serial_dropped++;
      return;
    }
    serial_out.push_back(static_cast<char>(byte));
    if (!serial_notified) notify = serial_notified = true;
  }
  if (notify && events) events->OnSerialOutput();
}

Status MachineImpl::Broadcast(VcpuCommand cmd, const char* op) {
  for (auto& t : threads) t->Post(cmd);
  for (auto& t : threads) {
    if (!t->WaitAck(kAckTimeoutMs)) return Error{ETIMEDOUT, op, "a vCPU did not acknowledge"};
  }
  return OkStatus();
}

void MachineImpl::JoinThreads() {
  for (auto& t : threads) t->Post(VcpuCommand::kFinish);
  for (auto& t : threads) t->Join();
}

Result<std::unique_ptr<Machine>> Machine::Create(const MachineConfig& config, MachineEvents* events) {
  if (config.vcpu_count < 1 || config.vcpu_count > 64) return Error{EINVAL, "create-vm", "vcpu_count must be 1..64"};
  auto impl = std::make_unique<MachineImpl>();
  impl->config = config;
  impl->events = events;

  auto kvm = kvm::System::Open();
  if (!kvm.ok()) return kvm.error();
  impl->kvm = std::move(kvm.value());
  auto vmfd = impl->kvm.CreateVm();
  if (!vmfd.ok()) return vmfd.error();
  impl->vm = kvm::VmFd(std::move(vmfd.value()));

  if (impl->vm.CheckExtension(KVM_CAP_SET_TSS_ADDR)) {
    if (auto st = impl->vm.SetTssAddr(kTssAddr); !st.ok()) return st.error();
    impl->vm.SetIdentityMapAddr(kIdentityMapAddr);  // best effort (AMD ignores it)
  }
  if (config.linux_platform) {
    // Stock Linux: PIC + IOAPIC + PIT in the kernel (vmm/machine_linux.cc), before any vCPU exists.
    if (auto st = CreateLinuxIrqchip(impl->vm); !st.ok()) return st.error();
  } else if (impl->vm.CheckExtension(KVM_CAP_SPLIT_IRQCHIP)) {
    if (auto st = impl->vm.EnableSplitIrqchip(24); !st.ok()) return st.error();
  } else if (auto st = impl->vm.CreateIrqchip(); !st.ok()) {
    return st.error();
  }

  if (config.dirty_log_mode != DirtyLogMode::kClassic &&
      (impl->vm.CheckExtension(KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2) & KVM_DIRTY_LOG_MANUAL_PROTECT_ENABLE)) {
    if (auto st = impl->vm.EnableManualDirtyProtect(); !st.ok()) return st.error();
    impl->manual_protect = true;
  } else if (config.dirty_log_mode == DirtyLogMode::kManualProtect) {
    return Error{ENOTSUP, "KVM_ENABLE_CAP", "KVM_CAP_MANUAL_DIRTY_LOG_PROTECT2 unsupported"};
  }

  auto mem = memory::GuestMemory::Create({config.memory_bytes, config.backing, config.huge_pages});
  if (!mem.ok()) return mem.error();
  impl->mem = std::move(mem.value());
  for (const auto& r : impl->mem->regions()) {
    if (auto st = impl->vm.SetUserMemoryRegion(r.slot, 0, r.base.value, r.size_bytes, r.host); !st.ok()) {
      return st.error();
    }
  }

  auto cpuid = impl->kvm.SupportedCpuid();
  if (!cpuid.ok()) return cpuid.error();
  impl->cpuid = std::move(cpuid.value());
  auto msrs = impl->kvm.MsrIndexList();
  if (!msrs.ok()) return msrs.error();
  impl->msr_indices = std::move(msrs.value());
  int xsave2 = impl->vm.CheckExtension(KVM_CAP_XSAVE2);
  if (xsave2 > static_cast<int>(kvm::abi::kXsaveBytes)) impl->xsave_bytes = static_cast<size_t>(xsave2);

  auto mmap_size = impl->kvm.VcpuMmapSize();
  if (!mmap_size.ok()) return mmap_size.error();
  for (uint32_t id = 0; id < config.vcpu_count; ++id) {
    auto fd = impl->vm.CreateVcpu(id);
    if (!fd.ok()) return fd.error();
    auto vcpu = kvm::VcpuFd::Create(std::move(fd.value()), id, mmap_size.value());
    if (!vcpu.ok()) return vcpu.error();
    std::vector<kvm_cpuid_entry2> entries = impl->cpuid;
    for (auto& e : entries) {
      if (e.function == 1) e.ebx = (e.ebx & 0x00ffffffu) | (id << 24);       // initial APIC ID
      if (e.function == 0xb || e.function == 0x1f) e.edx = id;              // x2APIC ID
    }
    if (auto st = vcpu.value().SetCpuid(entries); !st.ok()) return st.error();
    impl->vcpus.push_back(std::make_unique<kvm::VcpuFd>(std::move(vcpu.value())));
  }

  impl->pio.Register(0x3f8, 8, &impl->serial);
  if (config.linux_platform) {
    RegisterLinuxDevices(*impl);  // a full 8042 + keyboard and the ACPI PM port (machine_linux.cc)
  } else {
    impl->pio.Register(devices::kI8042Base, 5, &impl->i8042);
  }
  impl->pio.Register(devices::kTestPortBase, devices::kTestPortLen, &impl->test_port);
  if (auto st = CreateVirtioDevices(*impl); !st.ok()) return st.error();  // no-op without disks
  for (auto& v : impl->vcpus) impl->threads.push_back(std::make_unique<VcpuThread>(v.get(), impl.get()));
  return std::unique_ptr<Machine>(new Machine(std::move(impl)));
}

Machine::Machine(std::unique_ptr<MachineImpl> impl) : impl_(std::move(impl)) {}

Machine::~Machine() { Stop(); }

Status Machine::LoadElf(const uint8_t* image, size_t len, const std::string& cmdline) {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  if (impl_->state.load() != MachineState::kCreated) return StateError("load-elf", impl_->state.load());
  auto elf = ParseElf(image, len);
  if (!elf.ok()) return elf.error();
  if (auto st = LoadElfInto(*impl_->mem, image, len, elf.value(), cmdline); !st.ok()) return st;
  auto& vcpu = *impl_->vcpus[0];
  kvm_sregs sregs;
  if (auto st = vcpu.GetSregs(&sregs); !st.ok()) return st;
  InitialSregs(&sregs);
  if (auto st = vcpu.SetSregs(sregs); !st.ok()) return st;
  kvm_regs regs;
  InitialRegs(elf.value(), &regs);
  if (auto st = vcpu.SetRegs(regs); !st.ok()) return st;
  impl_->loaded = true;
  return OkStatus();
}

Status Machine::Start() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  if (impl_->state.load() != MachineState::kCreated) return StateError("start", impl_->state.load());
  if (!impl_->loaded) return Error{EINVAL, "start", "no guest loaded and no state restored"};
  for (auto& t : impl_->threads) t->Spawn();
  ResumeVirtio(*impl_);  // a restored target's devices were parked until now
  impl_->state.store(MachineState::kRunning);
  for (auto& t : impl_->threads) t->Post(VcpuCommand::kResume);
  return OkStatus();
}

Status Machine::Pause() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineState s = impl_->state.load();
  if (s == MachineState::kPaused) return OkStatus();
  if (s != MachineState::kRunning) return StateError("pause", s);
  if (auto st = impl_->Broadcast(VcpuCommand::kPause, "pause"); !st.ok()) return st;
  if (impl_->shutdown.load()) return StateError("pause", MachineState::kStopped);
  QuiesceVirtio(*impl_);  // in-flight disk I/O done: nothing writes guest memory until Resume
  impl_->state.store(MachineState::kPaused);
  return OkStatus();
}

Status Machine::Resume() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  MachineState s = impl_->state.load();
  if (s == MachineState::kRunning) return OkStatus();
  if (s != MachineState::kPaused) return StateError("resume", s);
  ResumeVirtio(*impl_);
  impl_->state.store(MachineState::kRunning);
  for (auto& t : impl_->threads) t->Post(VcpuCommand::kResume);
  return OkStatus();
}

void Machine::Stop() {
  std::lock_guard<std::mutex> lock(impl_->lifecycle_mu);
  impl_->shutdown.store(true);
  impl_->JoinThreads();
  QuiesceVirtio(*impl_);
  impl_->state.store(MachineState::kStopped);
}

MachineState Machine::state() const { return impl_->state.load(); }
memory::GuestMemory& Machine::memory() { return *impl_->mem; }
uint32_t Machine::vcpu_count() const { return impl_->config.vcpu_count; }

Status Machine::StartDirtyLog() {
  // NICs on vhost-net move to their userspace path, whose writes into guest memory are marked dirty (net.h).
  for (auto& n : impl_->nets) n->SetDirtyTracking(true);
  std::lock_guard<std::mutex> lock(impl_->dirty_mu);
  for (size_t i = 0; i < impl_->mem->region_count(); ++i) {
    const auto& r = impl_->mem->region(i);
    auto st = impl_->vm.SetUserMemoryRegion(r.slot, KVM_MEM_LOG_DIRTY_PAGES, r.base.value, r.size_bytes, r.host);
    if (!st.ok()) return st;
    impl_->mem->vmm_dirty(i).Clear();
  }
  impl_->dirty_logging = true;
  return OkStatus();
}

Result<DirtySnapshot> Machine::CollectDirty() {
  std::lock_guard<std::mutex> lock(impl_->dirty_mu);
  if (!impl_->dirty_logging) return Error{EINVAL, "KVM_GET_DIRTY_LOG", "dirty logging is off"};
  DirtySnapshot snap;
  for (size_t i = 0; i < impl_->mem->region_count(); ++i) {
    const auto& r = impl_->mem->region(i);
    RegionDirty rd{static_cast<uint32_t>(i), r.base, memory::DirtyBitmap(r.pages())};
    impl_->kvm_log_scratch.assign(rd.bitmap.word_count(), 0);
    if (auto st = impl_->vm.GetDirtyLog(r.slot, impl_->kvm_log_scratch.data()); !st.ok()) return st.error();
    if (impl_->manual_protect && rd.bitmap.word_count()) {
      // Re-arm tracking for the pages just reported (KVM only visits the set bits).
      auto st = impl_->vm.ClearDirtyLog(r.slot, 0, static_cast<uint32_t>(r.pages()), impl_->kvm_log_scratch.data());
      if (!st.ok()) return st.error();
    }
    rd.bitmap.OrWords(impl_->kvm_log_scratch.data(), impl_->kvm_log_scratch.size());
    impl_->mem->vmm_dirty(i).TakeInto(rd.bitmap);
    snap.push_back(std::move(rd));
  }
  impl_->dirty_collections++;
  return snap;
}

Status Machine::StopDirtyLog() {
  {
    std::lock_guard<std::mutex> lock(impl_->dirty_mu);
    for (const auto& r : impl_->mem->regions()) {
      if (auto st = impl_->vm.SetUserMemoryRegion(r.slot, 0, r.base.value, r.size_bytes, r.host); !st.ok()) return st;
    }
    impl_->dirty_logging = false;
  }
  for (auto& n : impl_->nets) n->SetDirtyTracking(false);  // back to vhost-net where it runs
  return OkStatus();
}

bool Machine::dirty_logging() const { return impl_->dirty_logging; }

void Machine::WriteSerialInput(const uint8_t* data, size_t len) {
  std::mutex* mu = impl_->pio.LockOf(&impl_->serial);
  std::lock_guard<std::mutex> lock(*mu);
  impl_->serial.Enqueue(data, len);
}

size_t Machine::TakeSerialOutput(std::string* out) {
  std::lock_guard<std::mutex> lock(impl_->serial_out_mu);
  size_t n = impl_->serial_out.size();
  out->append(impl_->serial_out);
  impl_->serial_out.clear();
  impl_->serial_notified = false;
  return n;
}

void Machine::SetCpuThrottle(uint32_t percent) {
  if (percent > 99) percent = 99;
  impl_->throttle_pct.store(percent);
  for (auto& t : impl_->threads) t->SetThrottle(percent);
  std::lock_guard<std::mutex> lock(impl_->throttle_mu);
  if (percent == 0 || impl_->throttle_thread.joinable()) return;
  MachineImpl* m = impl_.get();
  impl_->throttle_thread = std::thread([m] {
    std::unique_lock<std::mutex> lock(m->throttle_mu);
    while (!m->throttle_exit) {
      m->throttle_cv.wait_for(lock, std::chrono::milliseconds(10));  // one throttle slice
      if (m->throttle_exit) break;
      if (m->throttle_pct.load() && m->state.load() == MachineState::kRunning) {
        for (auto& t : m->threads) t->Kick();
      }
    }
  });
}

MachineStats Machine::stats() const {
  MachineStats s;
  for (const auto& t : impl_->threads) {
    s.exits += t->exits();
    s.kicks += t->kicks();
    s.io_exits += t->counters().io;
    s.mmio_exits += t->counters().mmio;
    s.vcpu_seconds.push_back(t->CpuSeconds());
  }
  std::mutex* mu = impl_->pio.LockOf(&impl_->serial);
  std::lock_guard<std::mutex> lock(*mu);
  s.serial_bytes_out = impl_->serial.events().bytes_out;
  s.serial_bytes_in = impl_->serial.events().bytes_in;
  {
    std::lock_guard<std::mutex> out_lock(impl_->serial_out_mu);
    s.serial_bytes_dropped = impl_->serial_dropped;
  }
  s.dirty_log_collections = impl_->dirty_collections.load();
  AddVirtioStats(*impl_, &s);
  return s;
}

}  // namespace kvmts::vmm
