#include "vmm/linux_boot.h"

#include <errno.h>

#include <cstring>

namespace kvmts::vmm {
namespace {

Error BzError(const std::string& why) { return Error{EINVAL, "bzimage", why}; }

template <typename T>
T Get(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

template <typename T>
void Put(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}

constexpr uint64_t kPage = 4096;
constexpr uint32_t kMsrMiscEnable = 0x1a0, kMsrMtrrDefType = 0x2ff;

}  // namespace

Result<BzImage> ParseBzImage(const uint8_t* data, size_t len) {
  if (len < kHdrInitSize + 4) return BzError("shorter than a setup header");
  if (Get<uint16_t>(data, kHdrBootFlag) != kBootFlag) return BzError("no 0xaa55 boot flag");
  if (Get<uint32_t>(data, kHdrMagic) != kHdrSMagic) return BzError("no HdrS magic (not a bzImage)");
  BzImage img;
  img.version = Get<uint16_t>(data, kHdrVersion);
  if (img.version < 0x020c) return BzError("boot protocol older than 2.12 (no 64-bit entry)");
  if (!(Get<uint16_t>(data, kHdrXloadflags) & kXlfKernel64)) return BzError("kernel has no 64-bit entry point");
  uint32_t setup_sects = data[kHdrSetupSects];
  if (setup_sects == 0) setup_sects = 4;  // the protocol's historical default
  img.setup_bytes = (setup_sects + 1) * 512;
  if (img.setup_bytes >= len) return BzError("setup sectors exceed the file");
  img.kernel_bytes = len - img.setup_bytes;
  size_t header_end = kHdrMagic + data[kHdrJump + 1];  // the jump at 0x200 skips the header
  if (header_end < kHdrInitSize + 4 || header_end > img.setup_bytes || header_end > kBpE820Table) {
    return BzError("bad setup header length");
  }
  img.header.assign(data + kHdrSetupSects, data + header_end);
  img.init_size = Get<uint32_t>(data, kHdrInitSize);
  img.pref_address = Get<uint64_t>(data, kHdrPrefAddress);
  img.kernel_alignment = Get<uint32_t>(data, kHdrKernelAlignment);
  img.relocatable = data[kHdrRelocatable] != 0;
  img.initrd_addr_max = Get<uint32_t>(data, kHdrInitrdAddrMax);
  img.cmdline_size = Get<uint32_t>(data, kHdrCmdlineSize);
  if (img.cmdline_size == 0) img.cmdline_size = 255;  // protocol < 2.06 default; never 0 for 2.12+
  return img;
}

BzImage VmlinuxSetupHeader() {
  constexpr size_t kHeaderEnd = kHdrInitSize + 8;  // 0x268: through handover_offset, protocol 2.15's header
  std::vector<uint8_t> file(kHeaderEnd, 0);
  uint8_t* p = file.data();
  Put<uint16_t>(p, kHdrBootFlag, kBootFlag);
  p[kHdrJump] = 0xeb;                                       // jmp short over the header: its length
  p[kHdrJump + 1] = static_cast<uint8_t>(kHeaderEnd - kHdrMagic);
  Put<uint32_t>(p, kHdrMagic, kHdrSMagic);
  Put<uint16_t>(p, kHdrVersion, 0x020f);
  p[kHdrLoadflags] = kLoadedHigh;
  Put<uint32_t>(p, kHdrInitrdAddrMax, 0x7fffffff);
  Put<uint32_t>(p, kHdrKernelAlignment, 0x200000);
  Put<uint16_t>(p, kHdrXloadflags, kXlfKernel64);
  Put<uint32_t>(p, kHdrCmdlineSize, 2047);
  BzImage img;
  img.version = 0x020f;
  img.kernel_alignment = 0x200000;
  img.initrd_addr_max = 0x7fffffff;
  img.cmdline_size = 2047;
  img.header.assign(p + kHdrSetupSects, p + kHeaderEnd);
  return img;
}

bool IsElfKernel(const uint8_t* data, size_t len) {
  return len >= 4 && data[0] == 0x7f && data[1] == 'E' && data[2] == 'L' && data[3] == 'F';
}

std::vector<E820Entry> BuildE820(const std::vector<RamRange>& ranges) {
  std::vector<E820Entry> map;
  if (ranges.empty()) return map;
  const RamRange& low = ranges[0];
  map.push_back({0, kEbdaStart, kE820Ram});
  map.push_back({kEbdaStart, kHighMemStart - kEbdaStart, kE820Reserved});
  if (low.base + low.size > kHighMemStart) map.push_back({kHighMemStart, low.base + low.size - kHighMemStart, kE820Ram});
  for (size_t i = 1; i < ranges.size(); ++i) map.push_back({ranges[i].base, ranges[i].size, kE820Ram});
  return map;
}

Result<uint64_t> PlaceInitrd(const std::vector<RamRange>& ranges, uint64_t kernel_end, uint64_t initrd_bytes,
                             uint32_t initrd_addr_max) {
  if (ranges.empty()) return Error{ENOMEM, "initrd", "no RAM"};
  uint64_t top = ranges[0].base + ranges[0].size;  // exclusive
  uint64_t max_end = static_cast<uint64_t>(initrd_addr_max) + 1;
  if (initrd_addr_max != 0 && max_end < top) top = max_end;
  if (initrd_bytes > top) return Error{ENOMEM, "initrd", "initramfs larger than low RAM"};
  uint64_t addr = (top - initrd_bytes) & ~(kPage - 1);
  if (addr < kernel_end) return Error{ENOMEM, "initrd", "initramfs does not fit between the kernel and the RAM top"};
  return addr;
}

Result<std::string> CheckCmdline(const BzImage& image, const std::string& cmdline) {
  if (cmdline.find('\0') != std::string::npos) return Error{EINVAL, "cmdline", "contains a NUL byte"};
  if (cmdline.size() > image.cmdline_size) {
    return Error{EINVAL, "cmdline", "longer than the kernel's " + std::to_string(image.cmdline_size) + " bytes"};
  }
  return cmdline;
}

Result<std::vector<uint8_t>> BuildBootParams(const BootParamsInput& in) {
  if (!in.image) return Error{EINVAL, "boot-params", "no image"};
  if (in.e820.size() > kMaxE820Entries) return Error{EINVAL, "boot-params", "too many e820 entries"};
  if (in.cmdline_addr > 0xffffffffu || in.initrd_addr > 0xffffffffu || in.initrd_bytes > 0xffffffffu) {
    return Error{EINVAL, "boot-params", "command line or initramfs above 4 GiB"};
  }
  std::vector<uint8_t> zp(kZeroPageBytes, 0);
  uint8_t* p = zp.data();
  std::memcpy(p + kHdrSetupSects, in.image->header.data(), in.image->header.size());
  p[kHdrTypeOfLoader] = 0xff;  // "undefined" boot loader
  p[kHdrLoadflags] = static_cast<uint8_t>(p[kHdrLoadflags] | kLoadedHigh | kCanUseHeap);
  Put<uint16_t>(p, kHdrHeapEndPtr, 0xfe00);
  Put<uint32_t>(p, kHdrCmdLinePtr, static_cast<uint32_t>(in.cmdline_addr));
  Put<uint32_t>(p, kHdrRamdiskImage, static_cast<uint32_t>(in.initrd_addr));
  Put<uint32_t>(p, kHdrRamdiskSize, static_cast<uint32_t>(in.initrd_bytes));
  Put<uint64_t>(p, kBpAcpiRsdpAddr, in.rsdp_addr);
  p[kBpE820Entries] = static_cast<uint8_t>(in.e820.size());
  for (size_t i = 0; i < in.e820.size(); ++i) {
    size_t off = kBpE820Table + i * 20;  // struct boot_e820_entry is packed: u64 addr, u64 size, u32 type
    Put<uint64_t>(p, off, in.e820[i].addr);
    Put<uint64_t>(p, off + 8, in.e820[i].size);
    Put<uint32_t>(p, off + 16, in.e820[i].type);
  }
  return zp;
}

void LinuxInitialRegs(kvm_regs* regs, uint64_t entry) {
  std::memset(regs, 0, sizeof *regs);
  regs->rip = entry;  // startup_64: the decompressor's (bzImage) or the kernel's own (vmlinux)
  regs->rsi = kZeroPageAddr;
  regs->rsp = kBootStackAddr;
  regs->rbp = kBootStackAddr;
  regs->rflags = 0x2;
}

void AdjustCpuidForLinux(std::vector<kvm_cpuid_entry2>* entries, bool tsc_deadline) {
  for (auto& e : *entries) {
    if (e.function != 1) continue;
    e.ecx |= 1u << 31;                   // X86_FEATURE_HYPERVISOR
    if (tsc_deadline) e.ecx |= 1u << 24;  // X86_FEATURE_TSC_DEADLINE_TIMER
  }
}

std::vector<kvm_msr_entry> LinuxBootMsrs() {
  std::vector<kvm_msr_entry> msrs(2);
  msrs[0].index = kMsrMiscEnable;
  msrs[0].data = 1;  // fast string operations
  msrs[1].index = kMsrMtrrDefType;
  msrs[1].data = (1u << 11) | 6;  // MTRRs enabled, default type write-back
  return msrs;
}

}  // namespace kvmts::vmm
