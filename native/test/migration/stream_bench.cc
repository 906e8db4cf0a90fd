// stream_bench: the migration data path alone, without KVM. A source process sends a plain anonymous "guest" of
// --mib MiB (non-zero pages, THP requested like GuestMemory) over loopback TCP to a target process that receives
// it into a fresh mapping (the way a new target Vm's memory starts). Prints wall time and each side's CPU time so a
// change can be judged by CPU per byte, not only by a noisy wall clock.
//
//   build/migration-test/stream_bench [--mib 1024] [--frame-mib 4] [--zero-every N] [--prefault] [--no-huge]
//                                     [--no-hint] [--dense N] [--calibrate N] [--sparse N] [--reps N] [--sleep S]
//                                     [--tls none|user|openssl] [--no-pipeline]
// --tls: the stream over TLS (tls.h) with test certificates, records in user space (the default without kTLS) or
// OpenSSL's SSL_write/SSL_read (what kTLS would take over); none (default): plain. --no-pipeline: the target opens
// user-space records on its receiving thread (default: a worker thread opens large reads' records).
#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "migration/incoming.h"
#include "migration/outgoing.h"
#include "migration/tls.h"
#include "test_certs.h"

using namespace kvmts;
using namespace kvmts::migration;

namespace {

struct Options {
  uint64_t mib = 1024;
  uint64_t frame_mib = 4;
  uint64_t zero_every = 0;  // every Nth page zero (0 = none)
  bool prefault = false;
  bool huge = true;
  bool hint = true;        // protocol 3's Populate hints and the target's prefault helper
  uint32_t dense = 256;    // PrefaultOptions::dense_pages
  uint32_t calibrate = PrefaultOptions{}.calibration_chunks;
  uint32_t sparse = 0;     // only this many random pages of every 2 MiB chunk are non-zero (0 = all)
  int reps = 3;
  unsigned sleep_s = 0;    // before each rep: long enough and freed memory is reported to the host (cold again)
  std::string tls = "none";  // none | user | openssl
  bool pipeline = true;
  mtest::CertAndKey source_cert, target_cert;
};

// The TLS handshake of --tls (source: client), or nothing for a plain stream.
Status MaybeTls(TlsChannel& ch, bool server, const Options& o) {
  if (o.tls == "none") return OkStatus();
  const mtest::CertAndKey& me = server ? o.target_cert : o.source_cert;
  const mtest::CertAndKey& peer = server ? o.source_cert : o.target_cert;
  ch.SetPipelined(o.pipeline);
  return ch.Handshake(server, {me.cert_pem, me.key_pem}, peer.cert_pem,
                      o.tls == "openssl" ? TlsRecords::kOpenSsl : TlsRecords::kUserSpace);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double CpuSeconds(int who, double* user, double* sys) {
  rusage ru;
  getrusage(who, &ru);
  *user = double(ru.ru_utime.tv_sec) + double(ru.ru_utime.tv_usec) / 1e6;
  *sys = double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) / 1e6;
  return *user + *sys;
}

uint8_t* Map(uint64_t bytes, bool huge) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(2);
  }
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<uint8_t*>(p);
}

void Secret(uint8_t* out, size_t len) {
  for (size_t i = 0; i < len; i++) out[i] = static_cast<uint8_t>(i * 7 + 1);
}

int Target(int listen_fd, const Options& o, int report_fd) {
  int fd = accept(listen_fd, nullptr, nullptr);
  if (fd < 0) return 3;
  uint64_t bytes = o.mib << 20;
  uint8_t* mem = Map(bytes, o.huge);
  if (o.prefault) madvise(mem, bytes, 23 /* MADV_POPULATE_WRITE */);
  double u0, s0, u1, s1;
  CpuSeconds(RUSAGE_SELF, &u0, &s0);
  double t0 = Now();
  TlsChannel ch(fd);
  Status h = MaybeTls(ch, true, o);
  if (!h.ok()) return 5;
  IncomingMigration in(ch, RamLayout({{0, bytes, mem, false, o.huge}}), "secret", true, Secret);
  in.SetEncrypted(ch.active());
  PrefaultOptions po;
  po.enabled = o.hint;
  po.dense_pages = o.dense;
  po.calibration_chunks = o.calibrate;
  in.EnablePrefault(po);
  Status r = in.ReceiveUntilComplete();
  if (r.ok()) r = in.ConfirmResumed();
  double t1 = Now();
  CpuSeconds(RUSAGE_SELF, &u1, &s1);
  char line[256];
  const IncomingStats& st = in.stats();
  int n = std::snprintf(line, sizeof line,
                        "target: %s wall %.3f s user %.3f s sys %.3f s; hinted %lu MiB, prefaulted %lu MiB, small "
                        "pages %lu MiB\n",
                        r.ok() ? "ok" : r.error().op.c_str(), t1 - t0, u1 - u0, s1 - s0,
                        static_cast<unsigned long>(st.hinted_bytes >> 20),
                        static_cast<unsigned long>(st.prefaulted_bytes >> 20),
                        static_cast<unsigned long>(st.small_page_bytes >> 20));
  if (write(report_fd, line, static_cast<size_t>(n)) < 0) return 4;
  munmap(mem, bytes);
  return r.ok() ? 0 : 1;
}

int Source(uint16_t port, const Options& o, uint8_t* mem) {
  uint64_t bytes = o.mib << 20;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 3;
  TlsChannel ch(fd);
  OutgoingMigration out(ch, RamLayout({{0, bytes, mem, false}}), "secret", Secret);
  double u0, s0, u1, s1;
  CpuSeconds(RUSAGE_SELF, &u0, &s0);
  double t0 = Now();
  Status r = MaybeTls(ch, false, o);
  out.SetEncrypted(ch.active());
  if (r.ok()) r = out.Handshake();
  SendOptions so;
  so.probe_residency = true;
  so.max_frame_bytes = o.frame_mib << 20;
  so.populate_hint = o.hint;
  if (r.ok()) r = out.SendRanges({{0, bytes}}, so);
  double t_bulk = Now();
  if (r.ok()) r = out.Sync();
  double t_sync = Now();
  uint8_t state[64] = {1};
  if (r.ok()) r = out.SendState(state, sizeof state);
  if (r.ok()) r = out.Complete();
  double t1 = Now();
  CpuSeconds(RUSAGE_SELF, &u1, &s1);
  std::printf("source: %s wall %.3f s (bulk %.3f, sync %.3f) user %.3f s sys %.3f s  %.2f GiB/s, %lu data pages\n",
              r.ok() ? "ok" : r.error().op.c_str(), t1 - t0, t_bulk - t0, t_sync - t_bulk, u1 - u0, s1 - s0,
              double(bytes) / (t1 - t0) / double(1 << 30), static_cast<unsigned long>(out.stats().data_pages));
  return r.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> uint64_t { return i + 1 < argc ? std::strtoull(argv[++i], nullptr, 10) : 0; };
    if (a == "--mib") o.mib = next();
    else if (a == "--frame-mib") o.frame_mib = next();
    else if (a == "--zero-every") o.zero_every = next();
    else if (a == "--prefault") o.prefault = true;
    else if (a == "--no-huge") o.huge = false;
    else if (a == "--reps") o.reps = static_cast<int>(next());
    else if (a == "--no-hint") o.hint = false;
    else if (a == "--dense") o.dense = static_cast<uint32_t>(next());
    else if (a == "--calibrate") o.calibrate = static_cast<uint32_t>(next());
    else if (a == "--sparse") o.sparse = static_cast<uint32_t>(next());
    else if (a == "--sleep") o.sleep_s = static_cast<unsigned>(next());
    else if (a == "--tls" && i + 1 < argc) o.tls = argv[++i];
    else if (a == "--no-pipeline") o.pipeline = false;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.tls != "none") {
    signal(SIGPIPE, SIG_IGN);
    o.source_cert = mtest::MakeCert("kubevirt.io:migration:source");
    o.target_cert = mtest::MakeCert("kubevirt.io:migration:target");
  }
  uint64_t bytes = o.mib << 20;
  uint8_t* mem = Map(bytes, true);
  for (uint64_t off = 0; off < bytes; off += 8) {
    uint64_t v = (off * 0x9E3779B97F4A7C15ull) | 1;
    std::memcpy(mem + off, &v, 8);
  }
  if (o.sparse > 0) {  // populated (THP) but mostly zero, like a guest that wrote a few pages of each chunk
    for (uint64_t c = 0; c < bytes; c += uint64_t{2} << 20) {
      std::vector<bool> keep(512);
      for (uint32_t k = 0; k < o.sparse; k++) keep[((c >> 21) * 2654435761u + k * 40503u) % 512] = true;
      for (uint64_t p = 0; p < 512; p++) {
        if (!keep[p]) std::memset(mem + c + p * 4096, 0, 4096);
      }
    }
  }
  if (o.zero_every > 0) {
    for (uint64_t p = 0; p < bytes / 4096; p += o.zero_every) std::memset(mem + p * 4096, 0, 4096);
  }
  for (int rep = 0; rep < o.reps; rep++) {
    if (o.sleep_s > 0) sleep(o.sleep_s);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 1) != 0) return 3;
    socklen_t len = sizeof a;
    getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    int pipefd[2];
    if (pipe(pipefd) != 0) return 3;
    pid_t pid = fork();
    if (pid == 0) {
      close(pipefd[0]);
      _exit(Target(lfd, o, pipefd[1]));
    }
    close(pipefd[1]);
    close(lfd);
    int rc = Source(ntohs(a.sin_port), o, mem);
    int status = 0;
    waitpid(pid, &status, 0);
    char buf[256];
    ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
    close(pipefd[0]);
    if (n > 0) {
      buf[n] = 0;
      std::fputs(buf, stdout);
    }
    std::fflush(stdout);
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
