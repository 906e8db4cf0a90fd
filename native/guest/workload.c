/*
 * The test guest's workload, in 64-bit ring 3: deterministic given its parameters (the PVH command line):
 *
 *   ws=<MiB>          working set, placed at 16 MiB                                   (default 16)
 *   pattern=seq|random|fill|idle                                                      (default seq)
 *       seq    touch page i % N at a moving offset      random  touch a PRNG-chosen page
 *       fill   write every byte of the working set once, then idle                  idle    touch nothing
 *   rate=<MiB/s>      dirtying rate, paced by the KVM clock (0 = as fast as possible)  (default 0)
 *   seed=<n>          PRNG seed (xorshift64*)                                           (default 1)
 *   every=<pages>     pages per progress line (idle: one line per `tick` ms)            (default 4096)
 *   tick=<ms>         idle line interval                                                (default 100)
 *   lines=<n>         stop after n progress lines (0 = never)                           (default 0)
 *
 * Every touch reads the old value into the running checksum before writing a new one, so a page lost or
 * corrupted by a migration changes every later line. Output (same parameters => same bytes):
 *   kvt-guest start ws=16 pattern=seq rate=0 seed=1 every=4096 lines=3
 *   kvt-guest progress n=1 pages=4096 sum=0x...
 *   kvt-guest done n=3 sum=0x...         then exit code 0 through the test port (QEMU isa-debug-exit)
 * Serial input is polled once per line and echoed as `kvt-guest input <line>`.
 *
 * Waiting (idle ticks, rate pacing) does not burn the host core: on the kubevirt-ts VMM (its test port answers the
 * signature) the guest asks the VMM to sleep until the deadline (port 0xf6, the guest's HLT: it has no interrupts);
 * elsewhere (QEMU's isa-debug-exit, which would exit on that write) it spins with `pause`. Only the waiting changes:
 * the output is the same bytes either way.
 */
#include "guest.h"

#define WS_BASE (16ull << 20)
#define PAGE 4096ull

struct params {
  u64 ws_mib, rate_mib, seed, every, tick_ms, lines;
  int pattern; /* 0 seq, 1 random, 2 fill, 3 idle */
};
static const char* const kPatterns[] = {"seq", "random", "fill", "idle"};

static u64 prng_state;
static u64 next(void) {
  u64 x = prng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  prng_state = x;
  return x * 0x2545f4914f6cdd1dull;
}

static u64 mix(u64 sum, u64 v) { return (sum ^ v) * 0x100000001b3ull; }

static char line[160];
static int len;
static void put_str(const char* s) {
  while (*s && len < (int)sizeof(line) - 2) line[len++] = *s++;
}
static void put_dec(u64 v) {
  char buf[21];
  int i = 20;
  buf[i] = 0;
  do {
    buf[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  put_str(buf + i);
}
static void put_hex(u64 v) {
  char buf[19];
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < 16; i++) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
  buf[18] = 0;
  put_str(buf);
}
static void flush_line(void) {
  line[len++] = '\n';
  line[len] = 0;
  outsb(SERIAL_PORT, line, (u64)len);
  len = 0;
}

static int starts(const char* s, const char* p) {
  while (*p)
    if (*s++ != *p++) return 0;
  return 1;
}
static u64 parse_u64(const char* s) {
  u64 v = 0;
  while (*s >= '0' && *s <= '9') v = v * 10 + (u64)(*s++ - '0');
  return v;
}

static void parse(const char* c, struct params* p) {
  while (c && *c) {
    while (*c == ' ') c++;
    if (starts(c, "ws=")) p->ws_mib = parse_u64(c + 3);
    else if (starts(c, "rate=")) p->rate_mib = parse_u64(c + 5);
    else if (starts(c, "seed=")) p->seed = parse_u64(c + 5);
    else if (starts(c, "every=")) p->every = parse_u64(c + 6);
    else if (starts(c, "tick=")) p->tick_ms = parse_u64(c + 5);
    else if (starts(c, "lines=")) p->lines = parse_u64(c + 6);
    else if (starts(c, "pattern=")) {
      for (int i = 0; i < 4; i++) {
        int k = 0;
        while (kPatterns[i][k]) k++;
        if (starts(c + 8, kPatterns[i]) && (c[8 + k] == ' ' || c[8 + k] == 0)) p->pattern = i;
      }
    }
    while (*c && *c != ' ') c++;
  }
}

/* Nanoseconds from the KVM clock (pvclock), or microseconds*1000 from the test port, or 0 (no pacing). */
static u64 now_ns(void) {
  if (clock_source == CLOCK_KVM) {
    u32 v;
    u64 ns;
    do {
      v = pvclock.version;
      __asm__ volatile("" ::: "memory");
      u32 lo, hi;
      __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
      u64 delta = (((u64)hi << 32) | lo) - pvclock.tsc_timestamp;
      s8 shift = pvclock.tsc_shift;
      if (shift < 0) delta >>= -shift;
      else delta <<= shift;
      ns = pvclock.system_time + (u64)(((unsigned __int128)delta * pvclock.tsc_to_system_mul) >> 32);
      __asm__ volatile("" ::: "memory");
    } while ((v & 1) || v != pvclock.version);
    return ns;
  }
  if (clock_source == CLOCK_TEST_PORT) return (u64)inl(TEST_PORT) * 1000ull;
  return 0;
}

/* 1 when the test port answered the kubevirt-ts signature: the VMM then serves idle requests. */
static int vmm_idle;

/* Returns once now_ns() >= deadline, sleeping in the VMM meanwhile when it can (else spinning politely). */
static void wait_until(u64 deadline) {
  for (;;) {
    u64 now = now_ns();
    if (now >= deadline) return;
    if (vmm_idle) {
      u64 us = (deadline - now + 999) / 1000;
      outl(TEST_IDLE_PORT, (u32)(us < TEST_IDLE_MAX_US ? us : TEST_IDLE_MAX_US));
    } else {
      __asm__ volatile("pause");
    }
  }
}

static void poll_input(void) {
  static char in[96];
  static int n;
  while (inb(SERIAL_PORT + 5) & 1) {
    char ch = (char)inb(SERIAL_PORT);
    if (ch == '\r' || ch == '\n') {
      in[n] = 0;
      put_str("kvt-guest input ");
      put_str(in);
      flush_line();
      n = 0;
    } else if (n < (int)sizeof(in) - 1) {
      in[n++] = ch;
    }
  }
}

static u64 ram_top(const u64* info) {
  /* hvm_start_info: magic at +0, version at +4, memmap_paddr at +40, memmap_entries at +48 (version >= 1). */
  const u32* w = (const u32*)info;
  if (!info || w[0] != 0x336ec578 || w[1] < 1 || info[5] == 0) return ~0ull;
  const u64* e = (const u64*)info[5];
  u64 top = 0;
  for (u32 i = 0; i < w[12]; i++, e += 3) {
    u32 type = (u32)e[2];
    if (type == 1 && e[0] <= WS_BASE && e[0] + e[1] > top) top = e[0] + e[1];
  }
  return top;
}

void workload_main(const u64* info) {
  struct params p = {16, 0, 1, 4096, 100, 0, 0};
  const u32* w = (const u32*)info;
  if (info && w[0] == 0x336ec578) parse((const char*)info[3], &p);
  vmm_idle = inb(TEST_PORT) == TEST_PORT_SIGNATURE;
  if (clock_source == CLOCK_NONE && vmm_idle) clock_source = CLOCK_TEST_PORT;
  if (p.every == 0) p.every = 4096;
  if (p.tick_ms == 0) p.tick_ms = 100;

  put_str("kvt-guest start ws=");
  put_dec(p.ws_mib);
  put_str(" pattern=");
  put_str(kPatterns[p.pattern]);
  put_str(" rate=");
  put_dec(p.rate_mib);
  put_str(" seed=");
  put_dec(p.seed);
  put_str(" every=");
  put_dec(p.every);
  put_str(" lines=");
  put_dec(p.lines);
  flush_line();

  u64 pages = p.ws_mib * (1ull << 20) / PAGE;
  if (WS_BASE + pages * PAGE > ram_top(info)) {
    put_str("kvt-guest error: the working set does not fit in RAM");
    flush_line();
    outl(TEST_PORT, 2);
    for (;;) __asm__ volatile("pause");
  }
  prng_state = p.seed ? p.seed : 0x9e3779b97f4a7c15ull;
  u64 sum = 0xcbf29ce484222325ull, n = 0, touched = 0;
  u64 pps = p.rate_mib * 256;  /* pages per second */
  u64 t0 = now_ns();
  volatile u64* ws = (volatile u64*)WS_BASE;

  if (p.pattern == 2) { /* fill: every u64 of the working set, non-zero */
    for (u64 pg = 0; pg < pages; pg++) {
      for (u64 i = 0; i < PAGE / 8; i++) {
        u64 v = next() | 1;
        ws[pg * (PAGE / 8) + i] = v;
      }
      sum = mix(sum, ws[pg * (PAGE / 8) + (pg & 511)]);
      touched++;
      if (pps && (touched & 15) == 0 && t0) wait_until(t0 + touched * 1000000000ull / pps);
    }
  }
  u64 tick_ns = p.tick_ms * 1000000ull, next_tick = now_ns() + tick_ns;
  for (;;) {
    if (p.pattern <= 1 && pages) {
      for (u64 k = 0; k < p.every; k++) {
        u64 pg = p.pattern == 0 ? touched % pages : next() % pages;
        u64 off = p.pattern == 0 ? (touched / pages) % 512 : next() % 512;
        volatile u64* cell = ws + pg * 512 + off;
        sum = mix(sum, *cell);
        *cell = next();
        sum = mix(sum, pg);
        touched++;
        if (pps && (touched & 15) == 0 && t0) wait_until(t0 + touched * 1000000000ull / pps);
      }
    } else {
      /* idle: one line per tick, reading the working set so corruption still shows */
      if (pages) sum = mix(sum, ws[(n % pages) * 512 + (n & 511)]);
      sum = mix(sum, n);
      if (t0) wait_until(next_tick);
      next_tick += tick_ns;
    }
    n++;
    put_str("kvt-guest progress n=");
    put_dec(n);
    put_str(" pages=");
    put_dec(touched);
    put_str(" sum=");
    put_hex(sum);
    flush_line();
    poll_input();
    if (p.lines && n >= p.lines) break;
  }
  put_str("kvt-guest done n=");
  put_dec(n);
  put_str(" sum=");
  put_hex(sum);
  flush_line();
  outl(TEST_PORT, 0);
  for (;;) __asm__ volatile("pause");
}
