// Boot: load a 64-bit ELF into guest memory and compute vCPU 0's initial long-mode state (Firecracker
// `arch::x86_64` + the PVH boot ABI, entered directly in 64-bit mode).
//
//   GPA 0x0500  GDT: null, code64 (0x08), data (0x10)
//   GPA 0x1000  PML4 -> 0x2000 PDPT -> 0x3000..0x6fff four PDs: identity map of 0..4 GiB with 2 MiB pages
//               (present, writable, user) so the guest's ring-3 code reaches everything
//   GPA 0x7000  hvm_start_info (magic 0x336ec578, version 1) ; 0x7100 memory map ; 0x7400 command line
//   ELF PT_LOAD segments at their p_paddr (the test guest links at 1 MiB)
//   vCPU 0: CR0 = PE|MP|ET|NE|WP|PG, CR4 = PAE|OSFXSR|OSXMMEXCPT, EFER = LME|LMA, CS = 0x08 (L=1), RIP = e_entry,
//           RBX = 0x7000 (start info), RFLAGS = 0x2
// ParseElf is pure (tested with synthetic images); LoadElfInto writes guest memory.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvm/result.h"
#include "memory/guest_memory.h"

namespace kvmts::vmm {

inline constexpr uint64_t kGdtAddr = 0x500;
inline constexpr uint64_t kPml4Addr = 0x1000;
inline constexpr uint64_t kStartInfoAddr = 0x7000;
inline constexpr uint64_t kMemmapAddr = 0x7100;
inline constexpr uint64_t kCmdlineAddr = 0x7400;
inline constexpr size_t kCmdlineMaxBytes = 3072;
inline constexpr uint32_t kHvmStartMagic = 0x336ec578;

struct ElfSegment {
  uint64_t paddr = 0;
  uint64_t file_offset = 0;
  uint64_t file_bytes = 0;
  uint64_t mem_bytes = 0;
};

struct ElfImage {
  uint64_t entry = 0;
  std::vector<ElfSegment> segments;
};

// Validates an ELF64 x86-64 executable and lists its PT_LOAD segments. EINVAL op "elf" with a reason otherwise.
Result<ElfImage> ParseElf(const uint8_t* data, size_t len);

// Copies the PT_LOAD segments to their physical addresses (the part past a segment's file bytes zeroed).
Status LoadElfSegments(memory::GuestMemory& mem, const uint8_t* data, size_t len, const ElfImage& image);

// Copies the segments, writes GDT, page tables, start info, memory map and command line into memory. Segments
// must lie in RAM above 1 MiB and below the MMIO hole.
Status LoadElfInto(memory::GuestMemory& mem, const uint8_t* data, size_t len, const ElfImage& image,
                   const std::string& cmdline);

// The boot vCPU's registers for a loaded image.
void InitialRegs(const ElfImage& image, kvm_regs* regs);
void InitialSregs(kvm_sregs* sregs);

}  // namespace kvmts::vmm
