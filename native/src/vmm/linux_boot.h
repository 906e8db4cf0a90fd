// LinuxBoot: the Linux x86 64-bit boot protocol (Documentation/arch/x86/boot.rst), as Firecracker's
// `arch::x86_64::load_kernel` + `configure_system` do it: a bzImage is parsed, its protected-mode kernel copied to
// 1 MiB and entered at its 64-bit entry point (load address + 0x200) with RSI = the zero page (struct boot_params).
//
//   bzImage file                                   guest physical memory
//   +---------------------------+ 0                 0x0500  GDT (vmm/boot.h: code64 0x08, data 0x10)
//   | real-mode setup           |                   0x1000  PML4 -> PDPT -> 4 PDs: identity map 0..4 GiB, 2 MiB pages
//   |   0x1f1 setup header      |--- copied into -> 0x7000  zero page: setup header, e820 map, initrd, cmdline ptrs
//   |   "HdrS" at 0x202         |                   0x8ff0  boot stack (RSP)
//   +---------------------------+ (setup_sects+1)   0x20000 command line (NUL-terminated, <= cmdline_size)
//   | protected-mode kernel     |*512  ----------> 0x100000 kernel (decompresses itself to its pref_address)
//   | (compressed + decompressor)                   top of low RAM: initramfs (page aligned, <= initrd_addr_max)
//   +---------------------------+                   0xe0000 ACPI tables (vmm/linux_acpi.h), e820-reserved
//
//   e820: [0, 0x9fc00) RAM | [0x9fc00, 0x100000) reserved (EBDA, ROM area, ACPI) | [1 MiB, low top) RAM |
//         [4 GiB, ...) RAM when the guest has more than 3 GiB
//   vCPU 0: long mode as for the ELF guests (vmm/boot.h InitialSregs), RIP = 0x100200, RSI = 0x7000, RSP = 0x8ff0.
//
// An uncompressed vmlinux (ELF64, what Firecracker boots on x86_64) skips the bzImage's self-decompression: its
// PT_LOAD segments go to their physical addresses (16 MiB on), vCPU 0 enters at the ELF entry point
// (phys_startup_64, the kernel proper's 64-bit entry) with the same zero page, whose setup header the loader writes
// itself (VmlinuxSetupHeader) since a vmlinux has none.
//
// Everything here is pure (byte layouts only) and unit-tested without KVM; machine_linux.cc writes the results into
// guest memory and the vCPU.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvm/result.h"

namespace kvmts::vmm {

inline constexpr uint64_t kZeroPageAddr = 0x7000;
inline constexpr uint64_t kBootStackAddr = 0x8ff0;
inline constexpr uint64_t kLinuxCmdlineAddr = 0x20000;
inline constexpr uint64_t kKernelLoadAddr = 0x100000;
inline constexpr uint64_t kEbdaStart = 0x9fc00;
inline constexpr uint64_t kHighMemStart = 0x100000;
inline constexpr size_t kZeroPageBytes = 4096;
inline constexpr size_t kMaxE820Entries = 128;

// Offsets into the zero page (boot_params) and the setup header (same offsets in the bzImage file).
inline constexpr size_t kBpAcpiRsdpAddr = 0x070, kBpE820Entries = 0x1e8, kBpE820Table = 0x2d0;
inline constexpr size_t kHdrSetupSects = 0x1f1, kHdrBootFlag = 0x1fe, kHdrJump = 0x200, kHdrMagic = 0x202,
                        kHdrVersion = 0x206, kHdrTypeOfLoader = 0x210, kHdrLoadflags = 0x211,
                        kHdrRamdiskImage = 0x218, kHdrRamdiskSize = 0x21c, kHdrHeapEndPtr = 0x224,
                        kHdrCmdLinePtr = 0x228, kHdrInitrdAddrMax = 0x22c, kHdrKernelAlignment = 0x230,
                        kHdrRelocatable = 0x234, kHdrXloadflags = 0x236, kHdrCmdlineSize = 0x238,
                        kHdrPrefAddress = 0x258, kHdrInitSize = 0x260;
inline constexpr uint32_t kHdrSMagic = 0x53726448;  // "HdrS"
inline constexpr uint16_t kBootFlag = 0xaa55;
inline constexpr uint16_t kXlfKernel64 = 0x1;        // xloadflags: has the 64-bit entry at +0x200
inline constexpr uint8_t kLoadedHigh = 0x01, kCanUseHeap = 0x80;
inline constexpr uint32_t kE820Ram = 1, kE820Reserved = 2;

// What the loader needs from a bzImage's setup header.
struct BzImage {
  uint16_t version = 0;           // boot protocol, e.g. 0x020f
  uint32_t setup_bytes = 0;       // (setup_sects + 1) * 512: where the protected-mode kernel starts in the file
  uint64_t kernel_bytes = 0;      // size of the protected-mode kernel
  uint32_t init_size = 0;         // memory the kernel needs from its load address while decompressing
  uint64_t pref_address = 0;
  uint32_t kernel_alignment = 0;
  bool relocatable = false;
  uint32_t initrd_addr_max = 0;   // highest address the initramfs may end at (inclusive)
  uint32_t cmdline_size = 0;      // longest command line, without the NUL
  std::vector<uint8_t> header;    // the setup header bytes [0x1f1, 0x202 + jump length) to copy into the zero page
};

// Validates a bzImage (boot flag, "HdrS", protocol >= 2.12, the 64-bit entry flag) and reads its header.
// EINVAL op "bzimage" with a reason otherwise.
Result<BzImage> ParseBzImage(const uint8_t* data, size_t len);

// The setup header for a kernel without one (a vmlinux): boot protocol 2.15, LOADED_HIGH, the 64-bit entry flag,
// initramfs anywhere below 2 GiB, a 2047-byte command line (x86's COMMAND_LINE_SIZE less the NUL).
BzImage VmlinuxSetupHeader();

// Whether `data` starts with the ELF magic (a vmlinux rather than a bzImage).
bool IsElfKernel(const uint8_t* data, size_t len);

struct E820Entry {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t type = 0;
};

// One contiguous range of guest RAM (what GuestMemory's regions are).
struct RamRange {
  uint64_t base = 0;
  uint64_t size = 0;
};

// The e820 map for RAM `ranges` (region 0 must start at 0): low 640 KiB minus the EBDA, the reserved ROM area
// (holding the ACPI tables), then RAM from 1 MiB, and every further range as RAM.
std::vector<E820Entry> BuildE820(const std::vector<RamRange>& ranges);

// Where the initramfs goes: the highest page-aligned address below both the end of the low RAM range and
// initrd_addr_max, and above `kernel_end` (ENOMEM op "initrd" when it does not fit).
Result<uint64_t> PlaceInitrd(const std::vector<RamRange>& ranges, uint64_t kernel_end, uint64_t initrd_bytes,
                             uint32_t initrd_addr_max);

// The zero page: the image's setup header, loader type 0xff, LOADED_HIGH, the command line pointer, the initramfs
// and the e820 map (at most kMaxE820Entries), and the ACPI RSDP address when non-zero.
struct BootParamsInput {
  const BzImage* image = nullptr;
  std::vector<E820Entry> e820;
  uint64_t cmdline_addr = 0;
  uint64_t initrd_addr = 0;
  uint64_t initrd_bytes = 0;
  uint64_t rsdp_addr = 0;
};
Result<std::vector<uint8_t>> BuildBootParams(const BootParamsInput& in);

// The command line as written to guest memory: checked against the image's cmdline_size, NUL-terminated.
Result<std::string> CheckCmdline(const BzImage& image, const std::string& cmdline);

// vCPU 0's general registers at the 64-bit entry `entry` (a bzImage's: load address + 0x200; a vmlinux's: e_entry).
void LinuxInitialRegs(kvm_regs* regs, uint64_t entry = kKernelLoadAddr + 0x200);

// CPUID adjustments for a Linux guest, on top of KVM_GET_SUPPORTED_CPUID: the hypervisor bit (leaf 1 ECX bit 31),
// so the kernel looks for the KVM leaves (kvmclock, PV EOI, ...), and, with `tsc_deadline` (the in-kernel LAPIC
// emulates it: KVM_CAP_TSC_DEADLINE_TIMER, which KVM does not list itself, as QEMU and Firecracker know), the TSC
// deadline timer (leaf 1 ECX bit 24). Without it Linux calibrates the LAPIC timer against the PIT; under nested
// virtualization that calibration fails ("APIC timer disabled due to verification failure") and the PIT becomes
// the clock event device: every idle entry then reprograms it through port I/O, an exit to the host each time
// (measured in the nested lane: 7 of them per network round trip; docs/benchmarks/network.md).
void AdjustCpuidForLinux(std::vector<kvm_cpuid_entry2>* entries, bool tsc_deadline = false);

// MSRs set before the first KVM_RUN (Firecracker `create_boot_msr_entries`): fast strings in IA32_MISC_ENABLE and
// MTRRs enabled with write-back as the default type, so the kernel does not run on uncached memory.
std::vector<kvm_msr_entry> LinuxBootMsrs();

}  // namespace kvmts::vmm
