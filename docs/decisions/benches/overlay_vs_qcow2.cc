// The containerDisk write layer: our copy-on-write overlay (native/src/devices/virtio/blk_overlay.cc, the code the
// virtio-blk worker runs) against QEMU's qcow2 overlay (`qemu-img bench`, QEMU's own qcow2 driver, the same access
// patterns at queue depth 1, cache=writeback as our worker's page-cache I/O) and a plain raw file, over one 256 MiB
// raw base of random data. For docs/decisions/0011-containerdisk-overlay.md. Build and run from the repository root:
//   g++ -O2 -std=c++17 -Inative/src -o /tmp/overlay-bench docs/decisions/benches/overlay_vs_qcow2.cc
//       native/src/devices/virtio/blk_overlay.cc && /tmp/overlay-bench [dir]   (one command line)
// Each figure is the median of 5 runs on a fresh layer; writes end with one flush (fdatasync / QEMU's flush).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "devices/virtio/blk_overlay.h"

using kvmts::devices::virtio::BlockOverlay;
using kvmts::devices::virtio::FullIo;

namespace {

constexpr uint64_t kDisk = 256ull << 20;
constexpr uint64_t kGranule = 64 << 10;

struct Pattern {
  const char* name;
  uint64_t size, step;
  bool write;
  bool prefill;  // the layer first gets every granule written (1 MiB writes), so the pattern hits the overlay
};

const Pattern kPatterns[] = {
    {"4k write, first in each 64k", 4096, kGranule, true, false},
    {"4k rewrite, each 64k", 4096, kGranule, true, true},
    {"1M write, sequential", 1 << 20, 1 << 20, true, false},
    {"4k read from the base", 4096, kGranule, false, false},
    {"1M read from the base", 1 << 20, 1 << 20, false, false},
    {"1M read from the overlay", 1 << 20, 1 << 20, false, true},
};

// CPU seconds (user + system) of this process or of its waited-for children.
double Cpu(int who) {
  rusage u{};
  getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Sample {
  double wall, cpu;
  bool operator<(const Sample& o) const { return wall < o.wall; }
};

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void Die(const char* what) {
  perror(what);
  std::exit(1);
}

std::string Run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) Die("popen");
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  if (pclose(p) != 0) {
    fprintf(stderr, "failed: %s\n%s", cmd.c_str(), out.c_str());
    std::exit(1);
  }
  return out;
}

// Wall and CPU seconds for one run of `p` through BlockOverlay (overlay = true) or on a plain raw file.
Sample Ours(const std::string& dir, const std::string& base, const Pattern& p, bool overlay) {
  std::string top = dir + "/layer.img";
  unlink(top.c_str());
  int fd = open(top.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, kDisk) != 0) Die("layer");
  int bfd = open(base.c_str(), O_RDONLY);
  BlockOverlay ov(fd, bfd, kDisk);
  std::vector<uint8_t> buf(std::max<uint64_t>(p.size, 1 << 20), 0x5a);
  auto io = [&](uint64_t off, uint64_t len, bool write) {
    std::vector<iovec> iov{iovec{buf.data(), len}};
    bool ok = overlay ? (write ? ov.Write(iov, off, len) : ov.Read(iov, off, len)) : FullIo(fd, iov, off, write);
    if (!ok) Die("io");
  };
  if (p.prefill) {
    for (uint64_t off = 0; off < kDisk; off += 1 << 20) io(off, 1 << 20, true);
    fdatasync(fd);
  }
  double t0 = Now(), c0 = Cpu(RUSAGE_SELF);
  for (uint64_t off = 0; off < kDisk; off += p.step) io(off, p.size, p.write);
  if (p.write) fdatasync(fd);
  Sample t{Now() - t0, Cpu(RUSAGE_SELF) - c0};
  close(bfd);
  close(fd);
  unlink(top.c_str());
  return t;
}

// qemu-img bench's own time for one run of `p` on a fresh qcow2 overlay over `base`, and the CPU of the whole
// qemu-img process (its start and image open included: a few ms, see the "-c 1" row).
Sample Qemu(const std::string& dir, const std::string& base, const Pattern& p) {
  std::string top = dir + "/layer.qcow2";
  unlink(top.c_str());
  Run("qemu-img create -q -f qcow2 -b " + base + " -F raw " + top);
  if (p.prefill) Run("qemu-img bench -q -w -f qcow2 -t writeback -c 256 -s 1M -S 1M --flush-interval=256 " + top);
  uint64_t count = kDisk / p.step;
  std::string cmd = "qemu-img bench -f qcow2 -t writeback -d 1 -c " + std::to_string(count) + " -s " +
                    std::to_string(p.size) + " -S " + std::to_string(p.step) +
                    (p.write ? " -w --flush-interval=" + std::to_string(count) : std::string()) + " " + top;
  double c0 = Cpu(RUSAGE_CHILDREN);
  std::string out = Run(cmd);
  double cpu = Cpu(RUSAGE_CHILDREN) - c0;
  auto at = out.find("Run completed in ");
  if (at == std::string::npos) Die("qemu-img bench output");
  unlink(top.c_str());
  return Sample{std::strtod(out.c_str() + at + 17, nullptr), cpu};
}

// The median run by wall time, and the median CPU time (sorted apart).
template <typename F>
Sample Median(F&& f) {
  std::vector<Sample> v;
  std::vector<double> cpu;
  for (int i = 0; i < 5; ++i) {
    v.push_back(f());
    cpu.push_back(v.back().cpu);
  }
  std::sort(v.begin(), v.end());
  std::sort(cpu.begin(), cpu.end());
  return Sample{v[2].wall, cpu[2]};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  std::string base = dir + "/overlay-bench-base.raw";
  {
    int fd = open(base.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<uint8_t> chunk(1 << 20);
    std::mt19937_64 rng(1);
    for (uint64_t off = 0; off < kDisk; off += chunk.size()) {
      for (auto& b : chunk) b = static_cast<uint8_t>(rng());
      if (pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) != static_cast<ssize_t>(chunk.size())) {
        Die("base");
      }
    }
    fsync(fd);
    close(fd);
  }
  printf("%-28s %8s %8s %8s %7s | %8s %8s %8s\n", "pattern (256 MiB, QD1)", "raw ms", "ours ms", "qcow2 ms",
         "ours/q", "raw cpu", "ours cpu", "q cpu");
  for (const Pattern& p : kPatterns) {
    Sample raw = Median([&] { return Ours(dir, base, p, false); });
    Sample ours = Median([&] { return Ours(dir, base, p, true); });
    Sample qemu = Median([&] { return Qemu(dir, base, p); });
    printf("%-28s %8.1f %8.1f %8.1f %7.2f | %8.1f %8.1f %8.1f\n", p.name, raw.wall * 1e3, ours.wall * 1e3,
           qemu.wall * 1e3, ours.wall / qemu.wall, raw.cpu * 1e3, ours.cpu * 1e3, qemu.cpu * 1e3);
  }
  Pattern one{"qemu-img bench -c 1", 4096, kDisk, false, false};
  Sample q1 = Median([&] { return Qemu(dir, base, one); });
  printf("%-28s %8s %8s %8.1f %7s | %8s %8s %8.1f\n", one.name, "", "", q1.wall * 1e3, "", "", "", q1.cpu * 1e3);
  unlink(base.c_str());
  return 0;
}
