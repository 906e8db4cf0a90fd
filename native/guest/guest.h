/* Shared declarations of the test guest: fixed-width types, port I/O, the serial console, the clock. */
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char s8;

#define SERIAL_PORT 0x3f8
#define TEST_PORT 0xf4 /* isa-debug-exit on QEMU; the kubevirt-ts test port */
#define TEST_PORT_SIGNATURE 0x4b /* a 1-byte read of TEST_PORT on the kubevirt-ts VMM (QEMU: never 0x4b) */
#define TEST_IDLE_PORT 0xf6 /* 4-byte write: sleep up to that many microseconds (kubevirt-ts VMM only) */
#define TEST_IDLE_MAX_US 1000000u
#define CLOCK_NONE 0
#define CLOCK_KVM 1
#define CLOCK_TEST_PORT 2

/* KVM's per-vCPU time structure (pvclock_vcpu_time_info). */
struct pvclock {
  volatile u32 version;
  u32 pad0;
  volatile u64 tsc_timestamp;
  volatile u64 system_time;
  volatile u32 tsc_to_system_mul;
  volatile s8 tsc_shift;
  volatile u8 flags;
  u8 pad[2];
};

extern struct pvclock pvclock;
extern volatile u32 clock_source;

/*
 * Port I/O, the same instructions in ring 0 and ring 3. Ring 3 runs with IOPL 3, so on hardware KVM and QEMU they
 * execute directly; a KVM that does not honour IOPL in ring 3 (PVM) raises #GP instead, and kernel.c's #GP handler
 * performs the instruction in ring 0 and skips it. A whole line leaves in one `rep outsb`: one trap, one VM exit.
 */
static inline void outb(u16 port, u8 v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(port)); }
static inline u8 inb(u16 port) {
  u8 v;
  __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
  return v;
}
static inline void outl(u16 port, u32 v) { __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(port)); }
static inline u32 inl(u16 port) {
  u32 v;
  __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(port));
  return v;
}
static inline void outsb(u16 port, const char* s, u64 n) {
  __asm__ volatile("rep outsb" : "+S"(s), "+c"(n) : "d"(port) : "memory");
}

static inline u64 kstrlen(const char* s) {
  u64 n = 0;
  while (s[n]) n++;
  return n;
}

static inline void kputs(const char* s) { outsb(SERIAL_PORT, s, kstrlen(s)); }

static inline void kputhex(u64 v) {
  char buf[19];
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < 16; i++) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
  buf[18] = 0;
  kputs(buf);
}
