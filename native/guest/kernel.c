/*
 * Ring 0 of the test guest (runs once, briefly): the TSS (a ring-0 stack for exceptions from ring 3), an IDT whose
 * every vector reports and stops, and the KVM clock when the hypervisor offers it. Then entry.S drops to ring 3.
 */
#include "guest.h"

struct __attribute__((packed)) tss64 {
  u32 reserved0;
  u64 rsp[3];
  u64 reserved1;
  u64 ist[7];
  u64 reserved2;
  u16 reserved3;
  u16 iomap_base;
};

struct __attribute__((packed)) idt_gate {
  u16 offset_lo, selector;
  u8 ist, type;
  u16 offset_mid;
  u32 offset_hi, reserved;
};

extern u64 gdt[];
extern char kstack_top[];
extern void exception_entry(void);
extern void gp_entry(void);

static struct tss64 tss __attribute__((aligned(16)));
static struct idt_gate idt[32] __attribute__((aligned(16)));
struct pvclock pvclock __attribute__((aligned(64)));
volatile u32 clock_source;

static inline void wrmsr(u32 msr, u64 v) {
  __asm__ volatile("wrmsr" ::"c"(msr), "a"((u32)v), "d"((u32)(v >> 32)));
}

static inline void cpuid(u32 leaf, u32* a, u32* b, u32* c, u32* d) {
  __asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0));
}

void kernel_main(u64 start_info) {
  (void)start_info;
  u64 base = (u64)&tss;
  tss.rsp[0] = (u64)kstack_top;
  tss.iomap_base = sizeof(tss);
  gdt[5] = (sizeof(tss) - 1) | ((base & 0xffffff) << 16) | (0x89ull << 40) | (((base >> 24) & 0xff) << 56);
  gdt[6] = base >> 32;
  __asm__ volatile("ltr %w0" ::"r"(0x28));

  u64 h = (u64)exception_entry;
  struct idt_gate g = {(u16)h, 0x08, 0, 0x8e, (u16)(h >> 16), (u32)(h >> 32), 0};
  for (int i = 0; i < 32; i++) idt[i] = g;
  u64 gp = (u64)gp_entry;
  struct idt_gate gg = {(u16)gp, 0x08, 0, 0x8e, (u16)(gp >> 16), (u32)(gp >> 32), 0};
  idt[13] = gg;
  struct __attribute__((packed)) {
    u16 limit;
    u64 base;
  } idtr = {sizeof(idt) - 1, (u64)idt};
  __asm__ volatile("lidt %0" ::"m"(idtr));

  u32 a, b, c, d;
  cpuid(0x40000000, &a, &b, &c, &d);
  if (b == 0x4b4d564b && c == 0x564b4d56 && d == 0x4d && a >= 0x40000001) {  /* "KVMKVMKVM\0\0\0" */
    cpuid(0x40000001, &a, &b, &c, &d);
    if (a & (1u << 3)) {  /* KVM_FEATURE_CLOCKSOURCE2 */
      wrmsr(0x4b564d01, (u64)&pvclock | 1);
      clock_source = CLOCK_KVM;
    }
  }
}

void kernel_exception(u64 top, u64 next) {
  kputs("kvt-guest: exception, stack ");
  kputhex(top);
  kputs(" ");
  kputhex(next);
  kputs("\n");
  outl(TEST_PORT, 3);
}

/* Registers saved by gp_entry, lowest address first, then the CPU's exception frame. */
struct gp_frame {
  u64 r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
  u64 error, rip, cs, rflags, rsp, ss;
};

/* Emulates the port I/O instruction at the faulting ring-3 RIP. Returns 1 when handled. */
int gp_handler(struct gp_frame* f) {
  if (f->error != 0 || (f->cs & 3) != 3) return 0;
  const u8* ip = (const u8*)f->rip;
  int op16 = 0, rep = 0, n = 0;
  for (; n < 4; n++) {
    if (ip[n] == 0x66) op16 = 1;
    else if (ip[n] == 0xf3) rep = 1;
    else break;
  }
  u8 op = ip[n++];
  u16 port = (u16)f->rdx;
  if (op == 0xe4 || op == 0xe5 || op == 0xe6 || op == 0xe7) port = ip[n++];
  switch (op) {
    case 0xec: case 0xe4: f->rax = (f->rax & ~0xffull) | inb(port); break;
    case 0xed: case 0xe5:
      if (op16) {
        u16 v;
        __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(port));
        f->rax = (f->rax & ~0xffffull) | v;
      } else {
        f->rax = inl(port);
      }
      break;
    case 0xee: case 0xe6: outb(port, (u8)f->rax); break;
    case 0xef: case 0xe7:
      if (op16) __asm__ volatile("outw %0, %1" ::"a"((u16)f->rax), "Nd"(port));
      else outl(port, (u32)f->rax);
      break;
    case 0x6e: {
      u64 count = rep ? f->rcx : 1;
      outsb(port, (const char*)f->rsi, count);
      f->rsi += count;
      if (rep) f->rcx = 0;
      break;
    }
    default:
      return 0;
  }
  f->rip += (u64)n;
  return 1;
}
