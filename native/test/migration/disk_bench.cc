// disk_bench: the copied-disk data path alone, without KVM: a source thread sends a disk file of --mib MiB (random
// data, --hole-every N: every Nth MiB left a hole; --encrypt 1: TLS records, the launchers' default) with
// DiskSource::SendAll (the bulk pass) over a socketpair to an IncomingMigration writing a fresh sparse file of the
// same size, then fdatasync at Complete. Prints wall time and MiB/s of disk data. Files in $TMPDIR (default /tmp):
// put them on the file system the launcher uses.
//
//   build/migration-test/disk_bench [--mib 256] [--hole-every 0] [--encrypt 0]
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "migration/disk_source.h"
#include "migration/incoming.h"
#include "migration/outgoing.h"
#include "migration/tls_records.h"

using namespace kvmts;
using namespace kvmts::migration;

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/kvt-disk-bench-" + name + "-" + std::to_string(getpid());
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 256, hole_every = 0, encrypt = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--hole-every") == 0) hole_every = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--encrypt") == 0) encrypt = std::strtoull(argv[i + 1], nullptr, 10);
  }
  const uint64_t kMiB = uint64_t{1} << 20, bytes = mib * kMiB;
  std::string src_path = TempPath("src"), dst_path = TempPath("dst");
  int src = open(src_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  int dst = open(dst_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (src < 0 || dst < 0 || ftruncate(src, static_cast<off_t>(bytes)) != 0 || ftruncate(dst, static_cast<off_t>(bytes)) != 0) {
    std::perror("disk_bench: files");
    return 1;
  }
  std::vector<uint8_t> block(kMiB);
  std::mt19937_64 rng(7);
  for (uint64_t m = 0; m < mib; m++) {
    if (hole_every != 0 && m % hole_every == 0) continue;
    for (size_t i = 0; i < block.size(); i += 8) {
      uint64_t v = rng();
      std::memcpy(&block[i], &v, 8);
    }
    if (pwrite(src, block.data(), kMiB, static_cast<off_t>(m * kMiB)) != static_cast<ssize_t>(kMiB)) return 1;
  }
  fdatasync(src);
  std::vector<uint8_t> ram(16 * 4096, 0), ram2(16 * 4096, 0);
  RamLayout src_layout({{0, ram.size(), ram.data(), false}}), dst_layout({{0, ram2.size(), ram2.data(), false}});
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  // --encrypt 1: TLS records under fixed keys (tls_records.h): the record layer's cost, without a handshake.
  TlsRecordChannel sa(a), sb(b);
  TrafficKeys k1, k2;
  k2.key[0] = 1;
  if (encrypt != 0 && (!sa.Start(k1, k2).ok() || !sb.Start(k2, k1).ok())) return 1;
  Status t = OkStatus();
  IncomingStats in_stats;
  std::thread target([&] {
    IncomingMigration in(sb, dst_layout, "bench", true, SystemRandom);
    in.SetEncrypted(encrypt != 0);
    in.SetDisks({{0, dst, bytes}});
    t = in.ReceiveUntilComplete();
    if (t.ok()) t = in.ConfirmResumed();
    in_stats = in.stats();
  });
  auto disk = DiskSource::Open(0, src_path);
  if (!disk.ok()) return 1;
  OutgoingMigration out(sa, src_layout, "bench", SystemRandom);
  out.SetEncrypted(encrypt != 0);
  out.SetDisks({{0, bytes}});
  double t0 = Now();
  Status s = out.Handshake();
  if (s.ok()) s = disk.value().SendAll(out, 0, nullptr);
  double sent = Now();
  if (s.ok()) s = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
  if (s.ok()) s = out.Complete();  // the target fdatasyncs its copy before Resumed
  double done = Now();
  target.join();
  unlink(src_path.c_str());
  unlink(dst_path.c_str());
  if (!s.ok() || !t.ok()) {
    std::fprintf(stderr, "disk_bench: %s / %s\n", s.ok() ? "ok" : s.error().detail.c_str(),
                 t.ok() ? "ok" : t.error().detail.c_str());
    return 1;
  }
  double data_mib = double(in_stats.disk_bytes) / double(kMiB);
  std::printf("{\"encrypt\":%s,\"diskMiB\":%llu,\"dataMiB\":%.1f,\"zeroMiB\":%.1f,\"sendSeconds\":%.3f,"
              "\"withSyncSeconds\":%.3f,\"dataMiBps\":%.0f}\n",
              encrypt != 0 ? "true" : "false", static_cast<unsigned long long>(mib), data_mib,
              double(in_stats.disk_zero_bytes) / double(kMiB), sent - t0, done - t0, data_mib / (done - t0));
  return 0;
}
