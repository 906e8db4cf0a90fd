// The pure parts of src/vmm: exit dispatch with synthetic kvm_run structs (Firecracker's test_handle_kvm_exit), the
// ELF loader and boot layout, and the state-blob container.
#include <elf.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "devices/bus.h"
#include "vmm/boot.h"
#include "vmm/exit_handler.h"
#include "vmm/state_blob.h"

using namespace kvmts;
using namespace kvmts::vmm;

namespace {

struct Echo : devices::PioDevice {
  std::vector<uint8_t> written;
  void Read(uint16_t offset, uint8_t* data, size_t len) override {
    for (size_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>(0x40 + offset + i);
  }
  void Write(uint16_t, const uint8_t* data, size_t len) override { written.insert(written.end(), data, data + len); }
};

struct FakePeripherals : Peripherals {
  devices::PioBus pio;
  std::vector<std::pair<std::string, bool>> reports;
  std::vector<ShutdownReason> shutdowns;
  devices::PioBus& bus() override { return pio; }
  void ReportExit(uint32_t, const std::string& reason, bool fatal) override { reports.emplace_back(reason, fatal); }
  void RequestShutdown(ShutdownReason reason, uint32_t) override { shutdowns.push_back(reason); }
};

// A kvm_run followed by room for I/O data, like the real mapping.
struct RunPage {
  alignas(4096) uint8_t bytes[8192] = {};
  kvm_run* run() { return reinterpret_cast<kvm_run*>(bytes); }
};

void SetIo(RunPage& page, uint8_t dir, uint16_t port, uint8_t size, uint32_t count, const char* data) {
  kvm_run* run = page.run();
  run->exit_reason = KVM_EXIT_IO;
  run->io.direction = dir;
  run->io.port = port;
  run->io.size = size;
  run->io.count = count;
  run->io.data_offset = 4096;
  if (data) std::memcpy(page.bytes + 4096, data, size * count);
}

std::vector<uint8_t> MiniElf(uint64_t paddr, const std::vector<uint8_t>& code) {
  std::vector<uint8_t> img(0x1000 + code.size(), 0);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_EXEC;
  eh.e_machine = EM_X86_64;
  eh.e_entry = paddr;
  eh.e_phoff = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  Elf64_Phdr ph{};
  ph.p_type = PT_LOAD;
  ph.p_offset = 0x1000;
  ph.p_paddr = ph.p_vaddr = paddr;
  ph.p_filesz = code.size();
  ph.p_memsz = code.size() + 100;
  std::memcpy(img.data(), &eh, sizeof eh);
  std::memcpy(img.data() + sizeof eh, &ph, sizeof ph);
  std::memcpy(img.data() + 0x1000, code.data(), code.size());
  return img;
}

}  // namespace

TEST(exit_io_out_string_reaches_the_device_once_per_repetition) {
  FakePeripherals p;
  Echo dev;
  p.pio.Register(0x3f8, 8, &dev);
  RunPage page;
  SetIo(page, KVM_EXIT_IO_OUT, 0x3f8, 1, 5, "hello");
  ExitCounters c;
  CHECK(HandleExit(0, page.run(), p, c) == ExitAction::kContinue);
  CHECK_EQ(std::string(dev.written.begin(), dev.written.end()), std::string("hello"));
  CHECK_EQ(c.io, 1u);
}

TEST(exit_io_in_fills_the_data_area_and_unclaimed_ports_read_ff) {
  FakePeripherals p;
  Echo dev;
  p.pio.Register(0x60, 5, &dev);
  RunPage page;
  SetIo(page, KVM_EXIT_IO_IN, 0x64, 1, 1, nullptr);
  ExitCounters c;
  HandleExit(0, page.run(), p, c);
  CHECK_EQ(page.bytes[4096], 0x44);
  SetIo(page, KVM_EXIT_IO_IN, 0x80, 4, 1, nullptr);
  HandleExit(0, page.run(), p, c);
  CHECK_EQ(page.bytes[4096 + 3], 0xff);
  CHECK_EQ(c.unclaimed_io, 1u);
  CHECK(p.reports.empty());
}

TEST(exit_io_with_a_bogus_size_is_ignored) {
  FakePeripherals p;
  RunPage page;
  SetIo(page, KVM_EXIT_IO_OUT, 0x3f8, 3, 1, "abc");
  ExitCounters c;
  CHECK(HandleExit(0, page.run(), p, c) == ExitAction::kContinue);
}

TEST(exit_mmio_reads_ff_and_reports_only_the_first_few) {
  FakePeripherals p;
  RunPage page;
  kvm_run* run = page.run();
  run->exit_reason = KVM_EXIT_MMIO;
  run->mmio.phys_addr = 0xfee00000;
  run->mmio.len = 4;
  run->mmio.is_write = 0;
  ExitCounters c;
  for (int i = 0; i < 40; ++i) CHECK(HandleExit(1, run, p, c) == ExitAction::kContinue);
  CHECK_EQ(run->mmio.data[0], 0xff);
  CHECK_EQ(p.reports.size(), static_cast<size_t>(kMaxReports));
  CHECK_EQ(p.reports[0].first, std::string("KVM_EXIT_MMIO read 0xfee00000 len 4"));
  CHECK(!p.reports[0].second);
}

TEST(exit_shutdown_and_internal_errors_stop_the_machine_with_a_reason) {
  FakePeripherals p;
  RunPage page;
  ExitCounters c;
  page.run()->exit_reason = KVM_EXIT_SHUTDOWN;
  CHECK(HandleExit(0, page.run(), p, c) == ExitAction::kShutdown);
  page.run()->exit_reason = KVM_EXIT_INTERNAL_ERROR;
  page.run()->internal.suberror = 1;
  CHECK(HandleExit(0, page.run(), p, c) == ExitAction::kFatal);
  page.run()->exit_reason = 0xbeef;
  CHECK(HandleExit(0, page.run(), p, c) == ExitAction::kFatal);
  CHECK_EQ(p.shutdowns.size(), 3u);
  CHECK(p.shutdowns[0] == ShutdownReason::kTripleFault);
  CHECK(p.shutdowns[1] == ShutdownReason::kFatalExit);
  CHECK_EQ(p.reports[1].first, std::string("KVM_EXIT_INTERNAL_ERROR suberror 1"));
  CHECK_EQ(p.reports[2].first, std::string("KVM_EXIT_48879"));
}

TEST(elf_parser_accepts_a_valid_image_and_rejects_broken_ones) {
  auto img = MiniElf(0x100000, {0xf4});
  auto ok = ParseElf(img.data(), img.size());
  CHECK(ok.ok());
  if (ok.ok()) {
    CHECK_EQ(ok.value().entry, 0x100000u);
    CHECK_EQ(ok.value().segments.size(), 1u);
  }
  CHECK(!ParseElf(img.data(), 10).ok());
  auto low = MiniElf(0x1000, {0xf4});  // would overwrite the boot page tables
  CHECK(!ParseElf(low.data(), low.size()).ok());
  auto cut = img;
  cut.resize(0x1000);  // segment data missing
  CHECK(!ParseElf(cut.data(), cut.size()).ok());
  auto bad = img;
  bad[18] = 3;  // EM_386
  auto r = ParseElf(bad.data(), bad.size());
  CHECK(!r.ok());
  if (!r.ok()) CHECK_EQ(r.error().detail, std::string("not x86-64"));
}

TEST(elf_loader_writes_segments_page_tables_and_pvh_start_info) {
  auto mem = memory::GuestMemory::Create({32ull << 20, memory::Backing::kAnonymous, false});
  CHECK(mem.ok());
  if (!mem.ok()) return;
  auto img = MiniElf(0x100000, {0x90, 0xf4});
  auto elf = ParseElf(img.data(), img.size());
  CHECK(LoadElfInto(*mem.value(), img.data(), img.size(), elf.value(), "ws=1").ok());
  uint8_t* host = mem.value()->HostPtr(memory::Gpa(0), 1 << 21);
  CHECK_EQ(host[0x100000], 0x90);
  uint64_t pml4, pd1;
  std::memcpy(&pml4, host + kPml4Addr, 8);
  std::memcpy(&pd1, host + kPml4Addr + 0x2000 + 8, 8);
  CHECK_EQ(pml4, (kPml4Addr + 0x1000) | 7);
  CHECK_EQ(pd1, (1ull << 21) | 0x87);
  uint32_t magic;
  std::memcpy(&magic, host + kStartInfoAddr, 4);
  CHECK_EQ(magic, kHvmStartMagic);
  CHECK_EQ(std::string(reinterpret_cast<char*>(host + kCmdlineAddr)), std::string("ws=1"));
  kvm_regs regs;
  InitialRegs(elf.value(), &regs);
  CHECK_EQ(regs.rip, 0x100000u);
  CHECK_EQ(regs.rbx, kStartInfoAddr);
}

TEST(state_blob_round_trips_sections_and_rejects_malformed_input) {
  StateWriter w(2);
  uint64_t a = 42;
  w.Section(kTagRegs, 1, &a, sizeof a);
  w.Section(kTagSerial, kMachineWide, "xy", 2);
  std::vector<uint8_t> blob = w.Take();
  uint32_t vcpus = 0, version = 0;
  std::vector<StateSection> sections;
  std::string why;
  CHECK(ParseState(blob.data(), blob.size(), &version, &vcpus, &sections, &why));
  CHECK_EQ(version, kStateVersion);
  CHECK_EQ(vcpus, 2u);
  CHECK_EQ(sections.size(), 2u);
  CHECK_EQ(sections[0].tag, static_cast<uint32_t>(kTagRegs));
  CHECK_EQ(sections[0].vcpu, 1u);
  CHECK_EQ(sections[1].len, 2u);
  sections.clear();
  CHECK(!ParseState(blob.data(), blob.size() - 1, &version, &vcpus, &sections, &why));
  CHECK_EQ(why, std::string("truncated section"));
  blob[4] = 7;
  CHECK(!ParseState(blob.data(), blob.size(), &version, &vcpus, &sections, &why));
  CHECK_EQ(why, std::string("unsupported version 7"));
  CHECK(!ParseState(blob.data(), 3, &version, &vcpus, &sections, &why));
  // The previous version is still read (STYLE: current and previous only).
  StateWriter v1(1, kStateVersionPrevious);
  v1.Section(kTagSerial, kMachineWide, "z", 1);
  std::vector<uint8_t> old = v1.Take();
  sections.clear();
  CHECK(ParseState(old.data(), old.size(), &version, &vcpus, &sections, &why));
  CHECK_EQ(version, kStateVersionPrevious);
  CHECK_EQ(sections.size(), 1u);
}
