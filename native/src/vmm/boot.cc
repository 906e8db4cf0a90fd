#include "vmm/boot.h"

#include <elf.h>
#include <errno.h>

#include <cstring>

namespace kvmts::vmm {
namespace {

Error ElfError(const char* why) { return Error{EINVAL, "elf", why}; }

// hvm_start_info / hvm_memmap_table_entry (xen/include/public/arch-x86/hvm/start_info.h).
struct HvmStartInfo {
  uint32_t magic, version, flags, nr_modules;
  uint64_t modlist_paddr, cmdline_paddr, rsdp_paddr, memmap_paddr;
  uint32_t memmap_entries, reserved;
};
struct HvmMemmapEntry {
  uint64_t addr, size;
  uint32_t type, reserved;
};

}  // namespace

Result<ElfImage> ParseElf(const uint8_t* data, size_t len) {
  if (len < sizeof(Elf64_Ehdr)) return ElfError("shorter than an ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, data, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return ElfError("bad magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) return ElfError("not ELF64 LE");
  if (eh.e_machine != EM_X86_64) return ElfError("not x86-64");
  if (eh.e_type != ET_EXEC) return ElfError("not an executable");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 64) return ElfError("bad program headers");
  if (eh.e_phoff > len || (len - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum) return ElfError("program headers out of file");
  ElfImage image;
  image.entry = eh.e_entry;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, data + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof ph);
    if (ph.p_type != PT_LOAD) continue;
    if (ph.p_filesz > ph.p_memsz) return ElfError("segment file size exceeds memory size");
    if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset) return ElfError("segment out of file");
    if (ph.p_paddr < (1u << 20) || ph.p_memsz > memory::kMmioHoleStart ||
        ph.p_paddr > memory::kMmioHoleStart - ph.p_memsz) {
      return ElfError("segment outside 1 MiB..3 GiB");
    }
    image.segments.push_back(ElfSegment{ph.p_paddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
  }
  if (image.segments.empty()) return ElfError("no PT_LOAD segment");
  return image;
}

Status LoadElfSegments(memory::GuestMemory& mem, const uint8_t* data, size_t len, const ElfImage& image) {
  for (const auto& s : image.segments) {
    if (s.file_offset > len || s.file_bytes > len - s.file_offset) return ElfError("segment out of file");
    uint8_t* dst = mem.HostPtr(memory::Gpa(s.paddr), s.mem_bytes);
    if (!dst) return Error{EFAULT, "elf", "segment beyond guest RAM"};
    std::memcpy(dst, data + s.file_offset, s.file_bytes);
    std::memset(dst + s.file_bytes, 0, s.mem_bytes - s.file_bytes);
  }
  return OkStatus();
}

Status LoadElfInto(memory::GuestMemory& mem, const uint8_t* data, size_t len, const ElfImage& image,
                   const std::string& cmdline) {
  if (auto st = LoadElfSegments(mem, data, len, image); !st.ok()) return st;
  if (cmdline.size() >= kCmdlineMaxBytes) return Error{EINVAL, "elf", "command line too long"};

  uint64_t gdt[3] = {0, 0x00af9b000000ffffull, 0x00cf93000000ffffull};
  uint64_t pml4 = (kPml4Addr + 0x1000) | 0x7;
  uint64_t pdpt[4];
  for (int i = 0; i < 4; ++i) pdpt[i] = (kPml4Addr + 0x2000 + i * 0x1000) | 0x7;
  std::vector<uint64_t> pd(4 * 512);
  for (size_t i = 0; i < pd.size(); ++i) pd[i] = (i << 21) | 0x87;  // present, writable, user, 2 MiB

  HvmStartInfo info{};
  info.magic = kHvmStartMagic;
  info.version = 1;
  info.cmdline_paddr = kCmdlineAddr;
  info.memmap_paddr = kMemmapAddr;
  std::vector<HvmMemmapEntry> map;
  for (const auto& r : mem.regions()) map.push_back(HvmMemmapEntry{r.base.value, r.size_bytes, 1, 0});
  info.memmap_entries = static_cast<uint32_t>(map.size());

  struct Piece {
    uint64_t gpa;
    const void* src;
    size_t len;
  } pieces[] = {
      {kGdtAddr, gdt, sizeof gdt},
      {kPml4Addr, &pml4, sizeof pml4},
      {kPml4Addr + 0x1000, pdpt, sizeof pdpt},
      {kPml4Addr + 0x2000, pd.data(), pd.size() * sizeof(uint64_t)},
      {kStartInfoAddr, &info, sizeof info},
      {kMemmapAddr, map.data(), map.size() * sizeof(HvmMemmapEntry)},
      {kCmdlineAddr, cmdline.c_str(), cmdline.size() + 1},
  };
  for (const auto& p : pieces) {
    auto st = mem.Write(memory::Gpa(p.gpa), p.src, p.len);
    if (!st.ok()) return st;
  }
  return OkStatus();
}

void InitialRegs(const ElfImage& image, kvm_regs* regs) {
  std::memset(regs, 0, sizeof *regs);
  regs->rip = image.entry;
  regs->rflags = 0x2;
  regs->rbx = kStartInfoAddr;
}

void InitialSregs(kvm_sregs* s) {
  kvm_segment code{};
  code.base = 0;
  code.limit = 0xffffffff;
  code.selector = 0x08;
  code.type = 0xb;
  code.present = 1;
  code.dpl = 0;
  code.db = 0;
  code.s = 1;
  code.l = 1;
  code.g = 1;
  kvm_segment data = code;
  data.selector = 0x10;
  data.type = 0x3;
  data.l = 0;
  data.db = 1;
  s->cs = code;
  s->ds = s->es = s->fs = s->gs = s->ss = data;
  s->gdt.base = kGdtAddr;
  s->gdt.limit = 3 * 8 - 1;
  s->idt.base = 0;
  s->idt.limit = 0;
  s->cr0 = 0x80050033;  // PG | WP | NE | ET | MP | PE
  s->cr3 = kPml4Addr;
  s->cr4 = 0x620;  // OSXMMEXCPT | OSFXSR | PAE
  s->efer = 0x500; // LMA | LME
}

}  // namespace kvmts::vmm
