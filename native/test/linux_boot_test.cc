// The pure parts of direct Linux boot: bzImage setup-header parsing, the e820 map, initramfs placement, the zero
// page layout, the command line, the ACPI tables (checksums, pointers) and the PS/2 controller and ACPI PM devices.
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "devices/ps2_controller.h"
#include "vmm/linux_acpi.h"
#include "vmm/linux_boot.h"

using namespace kvmts;
using namespace kvmts::vmm;

namespace {

template <typename T>
void PutAt(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}

template <typename T>
T GetAt(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// A synthetic bzImage: 4 setup sectors + the boot sector, then `kernel_bytes` of protected-mode kernel.
std::vector<uint8_t> FakeBzImage(size_t kernel_bytes = 8192, uint16_t version = 0x020f, uint16_t xload = 0x1) {
  std::vector<uint8_t> img(5 * 512 + kernel_bytes, 0);
  img[kHdrSetupSects] = 4;
  PutAt<uint16_t>(img, kHdrBootFlag, 0xaa55);
  img[kHdrJump] = 0xeb;
  img[kHdrJump + 1] = 0x6a;  // header ends at 0x202 + 0x6a = 0x26c
  PutAt<uint32_t>(img, kHdrMagic, 0x53726448);
  PutAt<uint16_t>(img, kHdrVersion, version);
  img[kHdrLoadflags] = 0x01;
  PutAt<uint32_t>(img, kHdrInitrdAddrMax, 0x7fffffff);
  PutAt<uint32_t>(img, kHdrKernelAlignment, 0x200000);
  img[kHdrRelocatable] = 1;
  PutAt<uint16_t>(img, kHdrXloadflags, xload);
  PutAt<uint32_t>(img, kHdrCmdlineSize, 2047);
  PutAt<uint64_t>(img, kHdrPrefAddress, 0x1000000);
  PutAt<uint32_t>(img, kHdrInitSize, 0x2000000);
  for (size_t i = 0; i < kernel_bytes; ++i) img[5 * 512 + i] = static_cast<uint8_t>(i);
  return img;
}

struct Sink : devices::ResetSink, devices::IrqTrigger, devices::ExitSink {
  int resets = 0, irqs = 0, exits = 0;
  uint32_t code = 99;
  void OnReset() override { resets++; }
  void Trigger() override { irqs++; }
  void OnGuestExit(uint32_t c) override {
    exits++;
    code = c;
  }
};

uint8_t Sum(const std::vector<uint8_t>& b, size_t off, size_t len) {
  uint8_t s = 0;
  for (size_t i = 0; i < len; ++i) s = static_cast<uint8_t>(s + b[off + i]);
  return s;
}

}  // namespace

TEST(BzImageParsesTheSetupHeader) {
  auto img = FakeBzImage();
  auto r = ParseBzImage(img.data(), img.size());
  CHECK(r.ok());
  CHECK_EQ(r.value().version, 0x020f);
  CHECK_EQ(r.value().setup_bytes, 5u * 512);
  CHECK_EQ(r.value().kernel_bytes, 8192u);
  CHECK_EQ(r.value().pref_address, 0x1000000u);
  CHECK_EQ(r.value().init_size, 0x2000000u);
  CHECK_EQ(r.value().cmdline_size, 2047u);
  CHECK(r.value().relocatable);
  CHECK_EQ(r.value().header.size(), 0x26cu - 0x1f1u);
}

TEST(BzImageRejectsWhatItCannotBoot) {
  auto img = FakeBzImage();
  img[kHdrMagic] = 'X';
  CHECK(!ParseBzImage(img.data(), img.size()).ok());
  auto old = FakeBzImage(8192, 0x020b);
  CHECK(!ParseBzImage(old.data(), old.size()).ok());
  auto no64 = FakeBzImage(8192, 0x020f, 0);
  auto r = ParseBzImage(no64.data(), no64.size());
  CHECK(!r.ok());
  CHECK_EQ(r.error().op, std::string("bzimage"));
  auto noflag = FakeBzImage();
  noflag[kHdrBootFlag] = 0;
  CHECK(!ParseBzImage(noflag.data(), noflag.size()).ok());
  CHECK(!ParseBzImage(img.data(), 100).ok());
  auto huge_setup = FakeBzImage(16);
  huge_setup[kHdrSetupSects] = 200;
  CHECK(!ParseBzImage(huge_setup.data(), huge_setup.size()).ok());
}

TEST(VmlinuxSetupHeaderIsOneTheParserAndTheKernelAccept) {
  // A vmlinux has no setup header: the loader writes one. Laid into a file it must read back as a valid bzImage
  // header (boot flag, HdrS, 2.15, 64-bit entry), so the kernel's own checks of boot_params.hdr pass.
  BzImage h = VmlinuxSetupHeader();
  CHECK_EQ(h.version, 0x020f);
  CHECK_EQ(h.cmdline_size, 2047u);
  CHECK_EQ(h.initrd_addr_max, 0x7fffffffu);
  std::vector<uint8_t> file(8192, 0);
  std::memcpy(file.data() + kHdrSetupSects, h.header.data(), h.header.size());
  file[kHdrSetupSects] = 4;
  auto r = ParseBzImage(file.data(), file.size());
  CHECK(r.ok());
  CHECK_EQ(r.value().version, 0x020f);
  CHECK_EQ(r.value().cmdline_size, 2047u);
  CHECK_EQ(r.value().header.size(), h.header.size());
  BootParamsInput in;
  in.image = &h;
  in.cmdline_addr = kLinuxCmdlineAddr;
  auto zp = BuildBootParams(in);
  CHECK(zp.ok());
  CHECK_EQ(zp.value()[kHdrTypeOfLoader], 0xffu);
  CHECK((zp.value()[kHdrLoadflags] & kLoadedHigh) != 0);
  uint32_t magic;
  std::memcpy(&magic, zp.value().data() + kHdrMagic, 4);
  CHECK_EQ(magic, kHdrSMagic);
}

TEST(ElfKernelsAreToldFromBzImages) {
  const uint8_t elf[] = {0x7f, 'E', 'L', 'F', 2, 1};
  CHECK(IsElfKernel(elf, sizeof elf));
  CHECK(!IsElfKernel(elf, 3));
  auto bz = FakeBzImage();
  CHECK(!IsElfKernel(bz.data(), bz.size()));
}

TEST(E820MapLeavesTheLegacyHoleReserved) {
  auto map = BuildE820({{0, 256ull << 20}});
  CHECK_EQ(map.size(), 3u);
  CHECK_EQ(map[0].addr, 0u);
  CHECK_EQ(map[0].size, kEbdaStart);
  CHECK_EQ(map[0].type, kE820Ram);
  CHECK_EQ(map[1].addr, kEbdaStart);
  CHECK_EQ(map[1].type, kE820Reserved);
  CHECK_EQ(map[2].addr, 0x100000u);
  CHECK_EQ(map[2].size, (256ull << 20) - 0x100000);
  auto big = BuildE820({{0, 3ull << 30}, {4ull << 30, 1ull << 30}});
  CHECK_EQ(big.size(), 4u);
  CHECK_EQ(big[3].addr, 4ull << 30);
  CHECK_EQ(big[3].type, kE820Ram);
}

TEST(InitrdGoesToTheTopOfLowRam) {
  auto at = PlaceInitrd({{0, 256ull << 20}}, 0x100000 + 8192, 3000000, 0x7fffffff);
  CHECK(at.ok());
  CHECK_EQ(at.value() % 4096, 0u);
  CHECK(at.value() + 3000000 <= (256ull << 20));
  CHECK(at.value() + 3000000 + 4096 > (256ull << 20));
  auto capped = PlaceInitrd({{0, 3ull << 30}}, 0x200000, 4096, 0x0fffffff);
  CHECK(capped.ok());
  CHECK_EQ(capped.value(), 0x10000000u - 4096);
  CHECK(!PlaceInitrd({{0, 32ull << 20}}, 30ull << 20, 8ull << 20, 0x7fffffff).ok());
}

TEST(BootParamsCarryHeaderCmdlineInitrdAndE820) {
  auto img = FakeBzImage();
  auto bz = ParseBzImage(img.data(), img.size());
  BootParamsInput in;
  in.image = &bz.value();
  in.e820 = BuildE820({{0, 128ull << 20}});
  in.cmdline_addr = kLinuxCmdlineAddr;
  in.initrd_addr = 0x7000000;
  in.initrd_bytes = 12345;
  in.rsdp_addr = kAcpiTablesAddr;
  auto zp = BuildBootParams(in);
  CHECK(zp.ok());
  const auto& p = zp.value();
  CHECK_EQ(p.size(), kZeroPageBytes);
  CHECK_EQ(GetAt<uint32_t>(p, kHdrMagic), 0x53726448u);
  CHECK_EQ(GetAt<uint16_t>(p, kHdrBootFlag), 0xaa55);
  CHECK_EQ(p[kHdrTypeOfLoader], 0xff);
  CHECK((p[kHdrLoadflags] & kLoadedHigh) != 0);
  CHECK_EQ(GetAt<uint32_t>(p, kHdrCmdLinePtr), kLinuxCmdlineAddr);
  CHECK_EQ(GetAt<uint32_t>(p, kHdrRamdiskImage), 0x7000000u);
  CHECK_EQ(GetAt<uint32_t>(p, kHdrRamdiskSize), 12345u);
  CHECK_EQ(GetAt<uint64_t>(p, kBpAcpiRsdpAddr), kAcpiTablesAddr);
  CHECK_EQ(p[kBpE820Entries], 3);
  CHECK_EQ(GetAt<uint64_t>(p, kBpE820Table + 2 * 20), 0x100000u);
  CHECK_EQ(GetAt<uint64_t>(p, kBpE820Table + 2 * 20 + 8), (128ull << 20) - 0x100000);
  CHECK_EQ(GetAt<uint32_t>(p, kBpE820Table + 2 * 20 + 16), kE820Ram);
  in.initrd_addr = 1ull << 33;
  CHECK(!BuildBootParams(in).ok());
}

TEST(CmdlineIsCheckedAgainstTheKernelLimit) {
  auto img = FakeBzImage();
  PutAt<uint32_t>(img, kHdrCmdlineSize, 16);
  auto bz = ParseBzImage(img.data(), img.size());
  CHECK(CheckCmdline(bz.value(), "console=ttyS0").ok());
  CHECK(!CheckCmdline(bz.value(), "console=ttyS0 quiet panic=-1").ok());
  CHECK(!CheckCmdline(bz.value(), std::string("a\0b", 3)).ok());
}

TEST(LinuxEntryRegistersFollowTheProtocol) {
  kvm_regs regs;
  LinuxInitialRegs(&regs);
  CHECK_EQ(regs.rip, 0x100200u);
  CHECK_EQ(regs.rsi, kZeroPageAddr);
  LinuxInitialRegs(&regs, 0x1000000);  // a vmlinux's phys_startup_64
  CHECK_EQ(regs.rip, 0x1000000u);
  CHECK_EQ(regs.rsi, kZeroPageAddr);
  CHECK_EQ(regs.rflags, 0x2u);
  std::vector<kvm_cpuid_entry2> cpuid(1);
  cpuid[0].function = 1;
  AdjustCpuidForLinux(&cpuid);
  CHECK((cpuid[0].ecx & (1u << 31)) != 0);
  CHECK((cpuid[0].ecx & (1u << 24)) == 0);  // no TSC deadline timer unless the LAPIC emulates one
  std::vector<kvm_cpuid_entry2> with_deadline(2);
  with_deadline[0].function = 7;
  with_deadline[1].function = 1;
  AdjustCpuidForLinux(&with_deadline, true);
  CHECK((with_deadline[1].ecx & (1u << 24)) != 0);
  CHECK((with_deadline[1].ecx & (1u << 31)) != 0);
  CHECK_EQ(with_deadline[0].ecx, 0u);  // other leaves untouched
  auto msrs = LinuxBootMsrs();
  CHECK_EQ(msrs.size(), 2u);
  CHECK_EQ(msrs[1].index, 0x2ffu);
  CHECK_EQ(msrs[1].data, 0x806u);
}

TEST(AcpiTablesChecksumAndPointAtEachOther) {
  auto b = BuildAcpiTables(2);
  CHECK_EQ(std::string(reinterpret_cast<const char*>(b.data()), 8), std::string("RSD PTR "));
  CHECK_EQ(Sum(b, kRsdpOffset, 20), 0);
  CHECK_EQ(Sum(b, kRsdpOffset, 36), 0);
  CHECK_EQ(GetAt<uint64_t>(b, kRsdpOffset + 24), kAcpiTablesAddr + kXsdtOffset);
  CHECK_EQ(std::string(reinterpret_cast<const char*>(b.data() + kFacsOffset), 4), std::string("FACS"));
  CHECK((kAcpiTablesAddr + kFacsOffset) % 64 == 0);
  for (size_t off : {kXsdtOffset, kFadtOffset, kDsdtOffset, kMadtOffset}) {
    CHECK_EQ(Sum(b, off, GetAt<uint32_t>(b, off + 4)), 0);
  }
  CHECK_EQ(GetAt<uint64_t>(b, kXsdtOffset + 36), kAcpiTablesAddr + kFadtOffset);
  CHECK_EQ(GetAt<uint64_t>(b, kXsdtOffset + 44), kAcpiTablesAddr + kMadtOffset);
  CHECK_EQ(GetAt<uint32_t>(b, kFadtOffset + 4), 276u);
  CHECK((GetAt<uint32_t>(b, kFadtOffset + 112) & (1u << 20)) == 0);  // not hardware-reduced: legacy IRQs stay
  CHECK_EQ(GetAt<uint64_t>(b, kFadtOffset + 140), kAcpiTablesAddr + kDsdtOffset);
  CHECK_EQ(GetAt<uint32_t>(b, kFadtOffset + 64), static_cast<uint32_t>(kAcpiPmPort + kAcpiPm1CntOffset));
  CHECK_EQ(GetAt<uint64_t>(b, kFadtOffset + 172 + 4), static_cast<uint64_t>(kAcpiPmPort + kAcpiPm1CntOffset));
  CHECK_EQ(b[kFadtOffset + 89], 2);
  CHECK_EQ(GetAt<uint32_t>(b, kMadtOffset + 4), 44u + 2 * 8 + 12);
  CHECK_EQ(b[kMadtOffset + 44 + 8 + 3], 1);  // second LAPIC: APIC ID 1
  CHECK_EQ(b[kMadtOffset + 44 + 16], 1);     // then the IOAPIC
  CHECK_EQ(GetAt<uint32_t>(b, kMadtOffset + 44 + 16 + 4), 0xfec00000u);
}

TEST(AcpiSleepControlPowersOff) {
  Sink sink;
  AcpiPmDevice pm(&sink);
  uint8_t wake[2] = {0x00, 0x80};
  pm.Write(0, wake, 2);  // WAK_STS clear on the status register
  uint8_t cnt[2];
  pm.Read(kAcpiPm1CntOffset, cnt, 2);
  CHECK((cnt[0] & 1) != 0);  // SCI_EN: already in ACPI mode
  uint16_t typ_only = 5 << 10;
  pm.Write(kAcpiPm1CntOffset, reinterpret_cast<const uint8_t*>(&typ_only), 2);
  CHECK_EQ(sink.exits, 0);
  uint16_t s5 = (5 << 10) | kAcpiSlpEn;
  pm.Write(kAcpiPm1CntOffset, reinterpret_cast<const uint8_t*>(&s5), 2);
  CHECK_EQ(sink.exits, 1);
  CHECK_EQ(sink.code, 0u);
}

TEST(Ps2ControllerAnswersTheLinuxProbe) {
  Sink sink;
  devices::Ps2Controller kbc(&sink, &sink);
  auto cmd = [&](uint8_t c) { kbc.Write(devices::kI8042CommandOffset, &c, 1); };
  auto data = [&](uint8_t d) { kbc.Write(devices::kI8042DataOffset, &d, 1); };
  auto status = [&] { uint8_t s; kbc.Read(devices::kI8042CommandOffset, &s, 1); return s; };
  auto read = [&] { uint8_t d; kbc.Read(devices::kI8042DataOffset, &d, 1); return d; };
  CHECK_EQ(status() & devices::kPs2StatusObf, 0);
  cmd(0xaa);
  CHECK((status() & devices::kPs2StatusObf) != 0);
  CHECK_EQ(read(), 0x55);
  cmd(0x20);
  uint8_t ctr = read();
  CHECK_EQ(ctr, devices::kPs2CtrKbdInt | devices::kPs2CtrSys);
  cmd(0x60);
  data(0x45);
  cmd(0x20);
  CHECK_EQ(read(), 0x45);
  cmd(0xd3);  // aux loopback: no aux port
  data(0x5a);
  CHECK(read() != 0x5a);
  cmd(0xa9);
  CHECK_EQ(read(), 0x01);
  data(0xf2);  // keyboard: get ID
  CHECK_EQ(read(), 0xfa);
  CHECK_EQ(read(), 0xab);
  CHECK_EQ(read(), 0x83);
  data(0xf0);  // scancode set query
  data(0x00);
  CHECK_EQ(read(), 0xfa);
  CHECK_EQ(read(), 0xfa);
  CHECK_EQ(read(), 0x02);
  CHECK_EQ(status() & devices::kPs2StatusObf, 0);
  cmd(0xfe);
  CHECK_EQ(sink.resets, 1);
}

TEST(Ps2ControllerInjectsCtrlAltDelWithInterrupts) {
  Sink sink;
  devices::Ps2Controller kbc(&sink, &sink);
  uint8_t disable = 0xad;
  kbc.Write(devices::kI8042CommandOffset, &disable, 1);
  CHECK(!kbc.InjectCtrlAltDel());
  uint8_t enable = 0xae;
  kbc.Write(devices::kI8042CommandOffset, &enable, 1);
  int before = sink.irqs;
  CHECK(kbc.InjectCtrlAltDel());
  CHECK_EQ(sink.irqs, before + 1);
  std::vector<uint8_t> got;
  for (int i = 0; i < 11; ++i) {
    uint8_t b;
    kbc.Read(devices::kI8042DataOffset, &b, 1);
    got.push_back(b);
  }
  CHECK_EQ(got[0], 0x14);
  CHECK_EQ(got[3], 0x71);
  CHECK_EQ(got[10], 0x14);
  CHECK_EQ(sink.irqs, before + 11);  // one edge per byte
}
