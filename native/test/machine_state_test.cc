// Machine state of the PC (Linux) platform: the device Persist bytes (pure), and, where /dev/kvm opens, a
// save -> restore -> save round trip through KVM of a machine with the in-kernel PIC/IOAPIC/PIT (this host's PVM
// creates and reads them even though it cannot run Linux): every section the target writes back must be the one
// it was given, including interrupt-controller and PIT values the test sets, and foreign or broken blobs are
// refused before anything changes.
#include <fcntl.h>
#include <linux/kvm.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "devices/ps2_controller.h"
#include "devices/serial_16550.h"
#include "vmm/linux_boot.h"
#include "vmm/machine.h"
#include "vmm/state_blob.h"

using namespace kvmts;
using namespace kvmts::vmm;

namespace {

struct CountingIrq : devices::IrqTrigger, devices::OutputSink, devices::ResetSink {
  int irqs = 0;
  void Trigger() override { irqs++; }
  void Write(uint8_t) override {}
  void OnReset() override {}
};

struct NullEvents : MachineEvents {
  void OnSerialOutput() override {}
  void OnVcpuExit(uint32_t, const std::string&, bool) override {}
  void OnShutdown(ShutdownReason, uint32_t) override {}
};

template <typename T>
void PutAt(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

// A bzImage whose 64-bit entry (+0x200) halts forever: `hlt; jmp .-1`.
std::vector<uint8_t> HaltingBzImage() {
  constexpr size_t kKernelBytes = 8192;
  std::vector<uint8_t> img(5 * 512 + kKernelBytes, 0);
  img[kHdrSetupSects] = 4;
  PutAt<uint16_t>(img, kHdrBootFlag, 0xaa55);
  img[kHdrJump] = 0xeb;
  img[kHdrJump + 1] = 0x6a;
  PutAt<uint32_t>(img, kHdrMagic, 0x53726448);
  PutAt<uint16_t>(img, kHdrVersion, 0x020f);
  img[kHdrLoadflags] = 0x01;
  PutAt<uint32_t>(img, kHdrInitrdAddrMax, 0x7fffffff);
  PutAt<uint32_t>(img, kHdrKernelAlignment, 0x200000);
  img[kHdrRelocatable] = 1;
  PutAt<uint16_t>(img, kHdrXloadflags, 0x1);
  PutAt<uint32_t>(img, kHdrCmdlineSize, 2047);
  PutAt<uint64_t>(img, kHdrPrefAddress, 0x1000000);
  PutAt<uint32_t>(img, kHdrInitSize, 0x2000000);
  const uint8_t code[] = {0xf4, 0xeb, 0xfd};
  std::memcpy(img.data() + 5 * 512 + 0x200, code, sizeof code);
  return img;
}

using Key = std::pair<uint32_t, uint32_t>;  // tag, vcpu
std::map<Key, std::vector<uint8_t>> Sections(const std::vector<uint8_t>& blob) {
  uint32_t version = 0, vcpus = 0;
  std::vector<StateSection> sections;
  std::string why;
  std::map<Key, std::vector<uint8_t>> out;
  CHECK(ParseState(blob.data(), blob.size(), &version, &vcpus, &sections, &why));
  for (const auto& s : sections) out[{s.tag, s.vcpu}].assign(s.data, s.data + s.len);
  return out;
}

std::vector<uint8_t> Rebuild(uint32_t vcpus, const std::map<Key, std::vector<uint8_t>>& sections) {
  StateWriter w(vcpus);
  for (const auto& [key, bytes] : sections) w.Section(key.first, key.second, bytes.data(), bytes.size());
  return w.Take();
}

template <typename T>
T As(const std::vector<uint8_t>& bytes) {
  T v{};
  CHECK_EQ(bytes.size(), sizeof(T));
  std::memcpy(&v, bytes.data(), std::min(bytes.size(), sizeof(T)));
  return v;
}

bool KvmAvailable() {
  int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  close(fd);
  return true;
}

MachineConfig LinuxConfig(uint32_t vcpus) {
  MachineConfig c;
  c.memory_bytes = 64u << 20;
  c.vcpu_count = vcpus;
  c.huge_pages = false;
  c.linux_platform = true;
  return c;
}

}  // namespace

TEST(ps2_controller_state_round_trips_and_rejects_bad_bytes) {
  CountingIrq sink;
  devices::Ps2Controller a(&sink, &sink);
  uint8_t cmd = 0x60, ctr = devices::kPs2CtrKbdInt | devices::kPs2CtrSys;
  a.Write(devices::kI8042CommandOffset, &cmd, 1);
  a.Write(devices::kI8042DataOffset, &ctr, 1);
  uint8_t get_id = 0xf2, set_leds = 0xed;
  a.Write(devices::kI8042DataOffset, &get_id, 1);   // fa ab 83 queued
  a.Write(devices::kI8042DataOffset, &set_leds, 1);  // fa queued, waits for its parameter
  CHECK(a.InterruptPending());
  std::vector<uint8_t> saved = a.Save();
  devices::Ps2Controller b(&sink, &sink);
  CHECK(b.Restore(saved.data(), saved.size()));
  CHECK(b.Save() == saved);
  CHECK(b.InterruptPending());
  uint8_t byte = 0;
  for (uint8_t want : {0xfa, 0xab, 0x83, 0xfa}) {
    b.Read(devices::kI8042DataOffset, &byte, 1);
    CHECK_EQ(byte, want);
  }
  CHECK(!b.InterruptPending());
  uint8_t leds = 0x02;  // the restored half-done 0xed command takes its parameter
  b.Write(devices::kI8042DataOffset, &leds, 1);
  b.Read(devices::kI8042DataOffset, &byte, 1);
  CHECK_EQ(byte, 0xfa);
  std::vector<uint8_t> bad = saved;
  bad[0] = 2;
  CHECK(!b.Restore(bad.data(), bad.size()));
  CHECK(!b.Restore(saved.data(), saved.size() - 1));
}

TEST(serial_reports_a_pending_interrupt_as_its_line_state) {
  CountingIrq sink;
  devices::Serial16550 s(&sink, &sink);
  CHECK(!s.InterruptPending());
  uint8_t rda = devices::kIerRdaBit;
  s.Write(devices::kIerOffset, &rda, 1);
  s.Enqueue(reinterpret_cast<const uint8_t*>("x"), 1);
  CHECK(s.InterruptPending());
  std::vector<uint8_t> saved = s.Save();
  devices::Serial16550 t(&sink, &sink);
  CHECK(t.Restore(saved.data(), saved.size()));
  CHECK(t.InterruptPending());
  uint8_t b = 0;
  t.Read(devices::kDataOffset, &b, 1);
  CHECK_EQ(b, 'x');
  CHECK(!t.InterruptPending());
}

TEST(linux_machine_state_round_trips_through_kvm_irqchip_pit_and_vcpus) {
  if (!KvmAvailable()) {
    std::printf("*** /dev/kvm cannot be opened: the KVM round trip of the machine state is SKIPPED ***\n");
    return;
  }
  NullEvents events;
  auto src = Machine::Create(LinuxConfig(2), &events);
  CHECK(src.ok());
  if (!src.ok()) return;
  std::vector<uint8_t> img = HaltingBzImage();
  CHECK(src.value()->LoadLinux(img.data(), img.size(), nullptr, 0, "console=ttyS0").ok());
  CHECK(src.value()->Start().ok());
  CHECK(src.value()->Pause().ok());
  auto saved = src.value()->SaveState();
  CHECK(saved.ok());
  if (!saved.ok()) return;
  auto sections = Sections(saved.value());
  for (uint32_t tag : {kTagPlatform, kTagClock, kTagPicMaster, kTagPicSlave, kTagIoapic, kTagPit, kTagSerial, kTagPs2,
                       kTagAcpiPm}) {
    CHECK(sections.count({tag, kMachineWide}) == 1);
  }
  for (uint32_t v = 0; v < 2; ++v) {
    for (uint32_t tag : {kTagCpuid, kTagTscKhz, kTagRegs, kTagSregs, kTagLapic, kTagMsrs, kTagEvents}) {
      CHECK(sections.count({tag, v}) == 1);
    }
  }
  CHECK(As<uint32_t>(sections[{kTagTscKhz, 0}]) > 0u);
  // kvmclock's MSRs (MSR_KVM_WALL_CLOCK_NEW, MSR_KVM_SYSTEM_TIME_NEW) and the TSC are among the saved MSRs.
  for (uint32_t want : {0x4b564d00u, 0x4b564d01u, 0x10u}) {
    const auto& msrs = sections[{kTagMsrs, 0}];
    bool found = false;
    for (size_t off = 0; off + sizeof(kvm_msr_entry) <= msrs.size(); off += sizeof(kvm_msr_entry)) {
      kvm_msr_entry e;
      std::memcpy(&e, msrs.data() + off, sizeof e);
      found = found || e.index == want;
    }
    if (!found) std::printf("  MSR 0x%x is not saved\n", want);
    CHECK(found);
  }
  CHECK_EQ(As<kvm_regs>(sections[{kTagRegs, 0}]).rsi, kZeroPageAddr);  // vCPU 0 as LoadLinux left it

  // Values a fresh machine would not have, so the target can only show them if it applied the sections.
  auto pic = As<kvm_irqchip>(sections[{kTagPicMaster, kMachineWide}]);
  pic.chip.pic.imr = 0xa5;
  pic.chip.pic.irq_base = 0x30;
  std::memcpy(sections[{kTagPicMaster, kMachineWide}].data(), &pic, sizeof pic);
  auto ioapic = As<kvm_irqchip>(sections[{kTagIoapic, kMachineWide}]);
  ioapic.chip.ioapic.redirtbl[4].fields.vector = 0x34;
  ioapic.chip.ioapic.redirtbl[4].fields.mask = 0;
  std::memcpy(sections[{kTagIoapic, kMachineWide}].data(), &ioapic, sizeof ioapic);
  auto pit = As<kvm_pit_state2>(sections[{kTagPit, kMachineWide}]);
  pit.channels[0].count = 0x1234;
  pit.channels[0].mode = 2;
  pit.channels[0].rw_mode = 3;
  std::memcpy(sections[{kTagPit, kMachineWide}].data(), &pit, sizeof pit);
  auto regs = As<kvm_regs>(sections[{kTagRegs, 1}]);
  regs.rax = 0x1122334455667788ull;
  std::memcpy(sections[{kTagRegs, 1}].data(), &regs, sizeof regs);
  std::vector<uint8_t> blob = Rebuild(2, sections);

  auto dst = Machine::Create(LinuxConfig(2), &events);
  CHECK(dst.ok());
  if (!dst.ok()) return;
  auto st = dst.value()->RestoreState(blob.data(), blob.size());
  CHECK(st.ok());
  if (!st.ok()) std::printf("  restore: %s %s\n", st.error().op.c_str(), st.error().detail.c_str());
  auto again = dst.value()->SaveState();
  CHECK(again.ok());
  if (!again.ok()) return;
  auto back = Sections(again.value());
  // The restored PIT (channel 0 in mode 2) runs between the restore and the second save and may raise IRQ 0 on
  // the master PIC: its request bits for that line are the PIT's doing, not the restore's (seen on nested SVM KVM).
  for (auto* side : {&sections, &back}) {
    auto& bytes = (*side)[Key{kTagPicMaster, kMachineWide}];
    auto master = As<kvm_irqchip>(bytes);
    master.chip.pic.irr &= static_cast<uint8_t>(~1u);
    master.chip.pic.last_irr &= static_cast<uint8_t>(~1u);
    std::memcpy(bytes.data(), &master, sizeof master);
  }
  for (uint32_t tag : {kTagPlatform, kTagPicMaster, kTagPicSlave, kTagIoapic, kTagSerial, kTagPs2, kTagAcpiPm}) {
    const auto& a = sections[Key{tag, kMachineWide}];
    const auto& b = back[Key{tag, kMachineWide}];
    if (a != b) {
      std::printf("  machine section %u differs (%zu vs %zu bytes):", tag, a.size(), b.size());
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (a[i] != b[i]) std::printf(" [%zu] %02x->%02x", i, a[i], b[i]);
      std::printf("\n");
    }
    CHECK((a == b));
  }
  auto pit_back = As<kvm_pit_state2>(back[{kTagPit, kMachineWide}]);
  CHECK_EQ(pit_back.channels[0].count, 0x1234u);
  CHECK_EQ(pit_back.channels[0].mode, 2u);
  CHECK_EQ(As<kvm_irqchip>(back[{kTagPicMaster, kMachineWide}]).chip.pic.imr, 0xa5);
  CHECK_EQ(As<kvm_irqchip>(back[{kTagIoapic, kMachineWide}]).chip.ioapic.redirtbl[4].fields.vector, 0x34);
  for (uint32_t v = 0; v < 2; ++v) {
    for (uint32_t tag : {kTagCpuid, kTagTscKhz, kTagRegs, kTagSregs, kTagXcrs, kTagMpState, kTagDebugRegs}) {
      if (back[{tag, v}] != sections[{tag, v}]) std::printf("  vCPU %u section %u differs\n", v, tag);
      CHECK((back[Key{tag, v}] == sections[Key{tag, v}]));
    }
    // The LAPIC comes back the same except its timer's current count (0x390), which KVM computes on read.
    auto lapic_a = As<kvm_lapic_state>(sections[{kTagLapic, v}]);
    auto lapic_b = As<kvm_lapic_state>(back[{kTagLapic, v}]);
    std::memset(lapic_a.regs + 0x390, 0, 4);
    std::memset(lapic_b.regs + 0x390, 0, 4);
    CHECK(std::memcmp(&lapic_a, &lapic_b, sizeof lapic_a) == 0);
    // Every MSR comes back with its value, except the counters KVM derives from host time: the TSC kept counting
    // from the restored value; Hyper-V's VP runtime (0x40000010) and reference time count (0x40000020, which KVM
    // computes from kvmclock, checked below; host writes to it are ignored) are listed on some KVMs (nested SVM)
    // though our guests are offered no Hyper-V interface.
    const auto derived = [](uint32_t index) { return index == 0x40000010u || index == 0x40000020u; };
    const auto& ma = sections[{kTagMsrs, v}];
    const auto& mb = back[{kTagMsrs, v}];
    CHECK_EQ(ma.size(), mb.size());
    for (size_t off = 0; off + sizeof(kvm_msr_entry) <= std::min(ma.size(), mb.size()); off += sizeof(kvm_msr_entry)) {
      kvm_msr_entry ea, eb;
      std::memcpy(&ea, ma.data() + off, sizeof ea);
      std::memcpy(&eb, mb.data() + off, sizeof eb);
      CHECK_EQ(ea.index, eb.index);
      if (ea.index == 0x10) {
        if (eb.data < ea.data)
          std::printf("  vCPU %u TSC went back: saved %llu, restored %llu (%lld)\n", v,
                      static_cast<unsigned long long>(ea.data), static_cast<unsigned long long>(eb.data),
                      static_cast<long long>(eb.data - ea.data));
        CHECK(eb.data >= ea.data);
      } else if (derived(ea.index)) {
        continue;
      } else if (ea.data != eb.data) {
        std::printf("  vCPU %u MSR 0x%x: saved 0x%llx, restored 0x%llx\n", v, ea.index,
                    static_cast<unsigned long long>(ea.data), static_cast<unsigned long long>(eb.data));
        CHECK(ea.data == eb.data);
      }
    }
  }
  CHECK_EQ(As<kvm_regs>(back[{kTagRegs, 1}]).rax, 0x1122334455667788ull);
  // The KVM clock never goes back (with KVM_CLOCK_REALTIME it moved on by the time in between).
  uint64_t clock_saved = As<kvm_clock_data>(sections[{kTagClock, kMachineWide}]).clock;
  CHECK(As<kvm_clock_data>(back[{kTagClock, kMachineWide}]).clock >= clock_saved);
  CHECK(dst.value()->Start().ok());
  // The restored vCPUs run: they acknowledge a pause, unless the guest already ended the machine, which it may at
  // once here: nothing was copied into the target's RAM, so vCPU 0 resumes the kernel entry over zeroed memory and
  // can triple-fault before the pause arrives (seen under a loaded CI run). Either way no vCPU may hang.
  auto paused = dst.value()->Pause();
  if (!paused.ok()) std::printf("  pause after restore: %s %s\n", paused.error().op.c_str(), paused.error().detail.c_str());
  const std::string stopped = std::string("machine is ") + MachineStateName(MachineState::kStopped);
  CHECK(paused.ok() || (paused.error().err == EINVAL && paused.error().detail == stopped));
  dst.value()->Stop();
  src.value()->Stop();
}

TEST(machine_state_refuses_a_foreign_platform_and_broken_sections_before_changing_anything) {
  if (!KvmAvailable()) {
    std::printf("*** /dev/kvm cannot be opened: the KVM refusal checks of the machine state are SKIPPED ***\n");
    return;
  }
  NullEvents events;
  auto linux_machine = Machine::Create(LinuxConfig(1), &events);
  CHECK(linux_machine.ok());
  if (!linux_machine.ok()) return;
  auto saved = linux_machine.value()->SaveState();  // a created machine's state is the state Start() would use
  CHECK(saved.ok());
  if (!saved.ok()) return;
  MachineConfig plain = LinuxConfig(1);
  plain.linux_platform = false;
  auto test_guest_machine = Machine::Create(plain, &events);
  CHECK(test_guest_machine.ok());
  if (!test_guest_machine.ok()) return;
  auto st = test_guest_machine.value()->RestoreState(saved.value().data(), saved.value().size());
  CHECK(!st.ok());
  CHECK_EQ(st.error().err, EINVAL);
  auto other = test_guest_machine.value()->SaveState();
  CHECK(other.ok());
  st = linux_machine.value()->RestoreState(other.value().data(), other.value().size());
  CHECK(!st.ok());
  auto sections = Sections(saved.value());
  sections[{kTagPit, kMachineWide}].pop_back();
  std::vector<uint8_t> broken = Rebuild(1, sections);
  auto fresh = Machine::Create(LinuxConfig(1), &events);
  CHECK(fresh.ok());
  if (!fresh.ok()) return;
  st = fresh.value()->RestoreState(broken.data(), broken.size());
  CHECK(!st.ok());
  auto start = fresh.value()->Start();
  CHECK(!start.ok() && start.error().err == EINVAL);  // nothing was restored: no guest to start
}
