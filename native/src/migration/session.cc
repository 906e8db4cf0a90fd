#include "migration/session.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "migration/incoming.h"
#include "migration/sha256.h"

namespace kvmts::migration {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

void SetTimeouts(int fd, uint32_t ms) {
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Result<addrinfo*> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) return Error{EHOSTUNREACH, "getaddrinfo", host + ": " + gai_strerror(rc)};
  return res;
}

}  // namespace

RamLayout LayoutOf(vmm::Machine* machine) {
  std::vector<RamRegion> regions;
  bool huge = machine->memory().huge_pages();
  for (const memory::MemoryRegion& r : machine->memory().regions()) {
    regions.push_back({r.base.value, r.size_bytes, r.host, r.fd >= 0, huge});
  }
  return RamLayout(std::move(regions));
}

std::string MemoryDigest(const RamLayout& ram) {
  Sha256 h;
  for (const RamRegion& r : ram.regions()) h.Update(r.hva, r.size);
  Digest d = h.Final();
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

uint64_t HugePageBytes(const RamLayout& ram) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return 0;
  char line[512];
  bool in_guest = false;
  uint64_t total = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long start = 0, end = 0;
    // Mapping header lines look like "7f00...-7f00... rw-p ..."; field lines like "AnonHugePages:   2048 kB".
    if (line[std::strspn(line, "0123456789abcdef")] == '-' && std::sscanf(line, "%lx-%lx", &start, &end) == 2) {
      in_guest = false;
      for (const RamRegion& r : ram.regions()) {
        uint64_t h = reinterpret_cast<uint64_t>(r.hva);
        if (start < h + r.size && end > h) in_guest = true;
      }
      continue;
    }
    unsigned long kb = 0;
    if (in_guest && (std::sscanf(line, "AnonHugePages: %lu kB", &kb) == 1 ||
                     std::sscanf(line, "ShmemPmdMapped: %lu kB", &kb) == 1)) {
      total += uint64_t(kb) * 1024;
    }
  }
  std::fclose(f);
  return total;
}

SourceSession::SourceSession(std::shared_ptr<vmm::Machine> machine, std::unique_ptr<TlsChannel> ch, RamLayout ram,
                             const std::string& secret)
    : machine_(std::move(machine)), ch_(std::move(ch)), ram_(std::move(ram)) {
  out_ = std::make_unique<OutgoingMigration>(*ch_, ram_, secret, SystemRandom);
  for (const RamRegion& r : ram_.regions()) {
    pending_.emplace_back(r.size / memory::kPageSize);
    region_base_.push_back(r.gpa);
  }
}

SourceSession::~SourceSession() { Close(); }

Result<std::unique_ptr<SourceSession>> SourceSession::Connect(std::shared_ptr<vmm::Machine> machine,
                                                              const std::string& host,
                                                              uint16_t port, const std::string& secret,
                                                              uint32_t io_timeout_ms,
                                                              const std::optional<PinnedTls>& tls) {
  if (tls) {
    auto c = TlsAvailable();  // before connecting: the target then sees no half-made attempt
    if (!c.ok()) return c.error();
  }
  auto res = Resolve(host, port, false);
  if (!res.ok()) return res.error();
  int fd = -1;
  int err = ECONNREFUSED;
  for (addrinfo* ai = res.value(); ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    SetTimeouts(fd, io_timeout_ms);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res.value());
  if (fd < 0) return Error{err, "connect", host + ":" + std::to_string(port)};
  auto ch = std::make_unique<TlsChannel>(fd);
  if (tls) {
    auto h = ch->Handshake(false, tls->me, tls->peer_certificate_pem);
    if (!h.ok()) return h.error();
  }
  RamLayout layout = LayoutOf(machine.get());
  std::unique_ptr<SourceSession> s(new SourceSession(machine, std::move(ch), std::move(layout), secret));
  s->out_->SetEncrypted(tls.has_value());
  std::vector<DiskSpec> specs;
  for (const vmm::CopiedDisk& d : machine->CopiedDisks()) {
    auto disk = DiskSource::Open(d.index, d.path, d.overlay);
    if (!disk.ok()) return disk.error();
    specs.push_back({d.index, disk.value().size_bytes(), d.overlay ? kDiskFlagOverlay : 0u});
    s->disks_.push_back(std::move(disk.value()));
  }
  s->out_->SetDisks(specs);
  auto r = s->out_->Handshake();
  if (!r.ok()) return r.error();
  r = machine->StartDirtyLog();
  if (!r.ok()) {
    s->out_->Abandon("dirty log failed");
    return r.error();
  }
  if (!s->disks_.empty()) machine->StartDiskDirtyLog();  // before the bulk pass reads the disks
  s->last_collect_ns_ = NowNs();
  return s;
}

Status SourceSession::Check() const {
  if (cancel_.load()) return Error{ECANCELED, "migration", "canceled"};
  if (closed_) return Error{EBADF, "migration", "session closed"};
  return OkStatus();
}

template <typename F>
Result<RoundStats> SourceSession::Timed(F send) {
  OutgoingStats before = out_->stats();
  uint64_t t0 = NowNs();
  Status r = send();
  if (!r.ok()) return cancel_.load() ? Error{ECANCELED, "migration", "canceled"} : out_->WithPeerReason(r).error();
  RoundStats rs;
  rs.bytes_sent = out_->stats().bytes - before.bytes;
  rs.data_pages = out_->stats().data_pages - before.data_pages;
  rs.zero_pages = out_->stats().zero_pages - before.zero_pages;
  rs.disk_bytes = out_->stats().disk_bytes - before.disk_bytes;
  rs.disk_zero_bytes = out_->stats().disk_zero_bytes - before.disk_zero_bytes;
  rs.seconds = double(NowNs() - t0) / 1e9;
  return rs;
}

Result<RoundStats> SourceSession::SendRangesTimed(const std::vector<PageRange>& ranges, const SendOptions& o,
                                                  bool bulk) {
  return Timed([&]() -> Status {
    auto r = out_->SendRanges(ranges, o);
    if (!r.ok()) return r;
    for (DiskSource& d : disks_) {
      r = bulk ? d.SendAll(*out_, o.bytes_per_sec, o.cancel) : d.SendPending(*out_, o.bytes_per_sec, o.cancel);
      if (!r.ok()) return r;
    }
    return OkStatus();
  });
}

Result<RoundStats> SourceSession::SendBulk(uint64_t bytes_per_sec) {
  auto c = Check();
  if (!c.ok()) return c.error();
  std::vector<PageRange> all;
  for (const RamRegion& r : ram_.regions()) all.push_back({r.gpa, r.size});
  SendOptions o;
  o.probe_residency = true;
  o.populate_hint = true;
  o.bytes_per_sec = bytes_per_sec;
  o.cancel = &cancel_;
  return SendRangesTimed(all, o, true);
}

Result<CollectStats> SourceSession::Collect() {
  auto c = Check();
  if (!c.ok()) return c.error();
  if (machine_->state() != vmm::MachineState::kPaused) {
    auto synced = out_->Sync();  // the target caught up: nothing of earlier rounds is left to drain at switch-over
    if (!synced.ok()) return cancel_.load() ? Error{ECANCELED, "migration", "canceled"} : synced.error();
  }
  auto snap = machine_->CollectDirty();
  if (!snap.ok()) return snap.error();
  CollectStats cs;
  uint64_t now = NowNs();
  cs.seconds_since_last = double(now - last_collect_ns_) / 1e9;
  last_collect_ns_ = now;
  for (vmm::RegionDirty& rd : snap.value()) {
    if (rd.region >= pending_.size()) continue;
    cs.new_dirty_bytes += rd.bitmap.Count() * memory::kPageSize;
    pending_[rd.region].OrWords(rd.bitmap.words(), rd.bitmap.word_count());
  }
  for (const memory::DirtyBitmap& p : pending_) cs.pending_bytes += p.Count() * memory::kPageSize;
  for (DiskSource& d : disks_) {
    cs.new_dirty_bytes += d.AddDirty(machine_->TakeDiskDirty(d.index()));
    cs.disk_pending_bytes += d.pending_bytes();
  }
  cs.pending_bytes += cs.disk_pending_bytes;
  return cs;
}

Result<RoundStats> SourceSession::SendPending(uint64_t bytes_per_sec) {
  auto c = Check();
  if (!c.ok()) return c.error();
  RangeTable table;
  for (size_t i = 0; i < pending_.size(); i++) {
    table.AppendBitmap(pending_[i].words(), pending_[i].pages(), region_base_[i], memory::kPageSize);
    pending_[i].Clear();
  }
  SendOptions o;
  o.bytes_per_sec = bytes_per_sec;
  o.cancel = &cancel_;
  // Page data is stable once paused: checked then, unless the records' AES-GCM tags already cover it (stream.h).
  o.check_data = machine_->state() == vmm::MachineState::kPaused && !ch_->active();
  return SendRangesTimed(table.ranges(), o, false);
}

Result<SwitchStats> SourceSession::SwitchOver(uint64_t bytes_per_sec, bool digest) {
  auto c = Check();
  if (!c.ok()) return c.error();
  uint64_t t0 = NowNs(), mark = t0;
  auto lap = [&mark]() {
    uint64_t now = NowNs();
    double ms = double(now - mark) / 1e6;
    mark = now;
    return ms;
  };
  auto r = machine_->Pause();
  if (!r.ok()) return r.error();
  SwitchStats ss;
  ss.pause_ms = lap();
  auto fail = [&](Error e) -> Result<SwitchStats> {
    if (cancel_.load()) e = Error{ECANCELED, "migration", "canceled"};
    out_->Abandon(e.detail.empty() ? e.op : e.detail);
    (void)machine_->Resume();  // the guest runs on here, untouched
    return e;
  };
  auto collected = Collect();
  if (!collected.ok()) return fail(collected.error());
  ss.collect_ms = lap();
  auto round = SendPending(bytes_per_sec);
  if (!round.ok()) return fail(round.error());
  ss.final_round = round.value();
  ss.send_ms = lap();
  auto blob = machine_->SaveState();
  if (!blob.ok()) return fail(blob.error());
  ss.state_bytes = blob.value().size();
  ss.save_ms = lap();
  r = out_->SendState(blob.value().data(), blob.value().size());
  if (!r.ok()) return fail(r.error());
  if (digest) ss.memory_digest = MemoryDigest(ram_);
  lap();  // the digest (tests only) is not a phase
  r = out_->Complete();
  if (!r.ok()) return fail(r.error());
  released_ = true;
  ss.resume_ms = lap();
  ss.downtime_ms = double(NowNs() - t0) / 1e6;
  return ss;
}

void SourceSession::Cancel() {
  cancel_.store(true);
  ch_->Shutdown();
}

void SourceSession::Close() {
  if (closed_) return;
  closed_ = true;
  if (machine_->dirty_logging()) (void)machine_->StopDirtyLog();
  if (!disks_.empty()) machine_->StopDiskDirtyLog();
  disks_.clear();  // their read-only fds: a deleted disk file's space is freed now, not when the handle is collected
  if (!released_) ch_->Shutdown();
}

Result<std::unique_ptr<TargetSession>> TargetSession::Listen(std::shared_ptr<vmm::Machine> machine,
                                                             const std::string& host,
                                                             uint16_t port) {
  auto res = Resolve(host, port, true);
  if (!res.ok()) return res.error();
  addrinfo* ai = res.value();
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(res.value());
    return Error{errno, "socket", "migration listener"};
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1) != 0) {
    int err = errno;
    freeaddrinfo(res.value());
    close(fd);
    return Error{err, "bind", host + ":" + std::to_string(port)};
  }
  freeaddrinfo(res.value());
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return std::unique_ptr<TargetSession>(new TargetSession(std::move(machine), fd, bound));
}

TargetSession::~TargetSession() {
  if (listen_fd_ >= 0) close(listen_fd_);
}

void TargetSession::Cancel() {
  cancel_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  shutdown(listen_fd_, SHUT_RDWR);
  if (conn_fd_ >= 0) shutdown(conn_fd_, SHUT_RDWR);
}

Status TargetSession::TrustPeer(const std::string& pem) {
  auto ok = CheckCertificatePem(pem);
  if (!ok.ok()) return ok;
  std::lock_guard<std::mutex> lock(mu_);
  if (connected_) return Error{EBUSY, "migration", "a source is already connected"};
  peer_pem_ = pem;
  return OkStatus();
}

Result<TargetStats> TargetSession::Accept(const std::string& secret, uint32_t io_timeout_ms, bool digest,
                                          const std::optional<TlsIdentity>& tls) {
  if (tls) {
    auto c = TlsAvailable();
    if (!c.ok()) return c.error();
  }
  // With TLS, virt-handler gives this target the source's certificate before the source learns where to connect, so
  // a connection that comes earlier is not the source (a stale peer of an earlier migration to this address and
  // port, a probe): it is closed unread and the listener waits on for the source. Taken as the source, it would
  // leave the session busy and the source's certificate refused (EBUSY), failing a migration it had no part in.
  const uint64_t deadline = NowNs() + uint64_t{io_timeout_ms} * 1000000u;
  uint32_t early = 0;
  int fd = -1;
  std::string peer_pem;
  for (;;) {
    uint64_t now = NowNs();
    int wait_ms = now >= deadline ? 0 : static_cast<int>((deadline - now + 999999) / 1000000);
    pollfd p{listen_fd_, POLLIN, 0};
    int pr = poll(&p, 1, wait_ms);
    if (cancel_.load()) return Error{ECANCELED, "migration", "canceled"};
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      return Error{ETIMEDOUT, "accept",
                   early == 0 ? "no source connected"
                              : "no source connected (" + std::to_string(early) +
                                    " connection(s) before the source's certificate refused)"};
    }
    fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (cancel_.load()) return Error{ECANCELED, "migration", "canceled"};
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return Error{errno, "accept", "migration listener"};
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (tls && peer_pem_.empty()) {
      close(fd);
      early++;
      continue;
    }
    conn_fd_ = fd;
    connected_ = true;
    peer_pem = peer_pem_;
    break;
  }
  SetTimeouts(fd, io_timeout_ms);
  struct Forget {  // clears conn_fd_ before ch closes the fd, on every path
    TargetSession* self;
    ~Forget() {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->conn_fd_ = -1;
    }
  };
  TlsChannel ch(fd);
  Forget forget{this};
  auto refused = [&](Error e) -> Error {
    if (cancel_.load()) return Error{ECANCELED, "migration", "canceled"};
    LingerAfterRefusal(fd);  // the source reads our alert or Abandon before the connection closes
    return e;
  };
  auto mode = CheckStreamMode(fd, tls.has_value());
  if (!mode.ok()) return refused(mode.error());
  if (tls) {
    auto h = ch.Handshake(true, *tls, peer_pem);
    if (!h.ok()) return refused(h.error());
  }
  RamLayout ram = LayoutOf(machine_.get());
  IncomingMigration in(ch, ram, secret, false, SystemRandom);
  in.SetEncrypted(tls.has_value());
  in.EnablePrefault(PrefaultOptions{});
  // The copied disks: this machine's own files (the launcher made them, sized as the source's), written here.
  struct DiskFds {
    std::vector<TargetDisk> disks;
    ~DiskFds() {
      for (const TargetDisk& d : disks) close(d.fd);
    }
  } fds;
  for (const vmm::CopiedDisk& d : machine_->CopiedDisks()) {
    int dfd = open(d.path.c_str(), O_RDWR | O_CLOEXEC);
    if (dfd < 0) return Error{errno, "open", d.path};
    fds.disks.push_back({d.index, dfd, 0, d.overlay.get()});
    struct stat st {};
    if (fstat(dfd, &st) != 0) return Error{errno, "fstat", d.path};
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (S_ISBLK(st.st_mode) && ioctl(dfd, BLKGETSIZE64, &size) != 0) return Error{errno, "BLKGETSIZE64", d.path};
    fds.disks.back().size_bytes = d.overlay ? d.overlay->disk_bytes() : size;  // a CoW disk: whole sectors
  }
  in.SetDisks(fds.disks);
  TargetStats ts;
  uint64_t t0 = NowNs();
  auto r = in.ReceiveUntilComplete();
  ts.stream = in.stats();
  if (!r.ok()) return cancel_.load() ? Error{ECANCELED, "migration", "canceled"} : r.error();
  ts.receive_seconds = double(NowNs() - t0) / 1e9;
  if (digest) ts.memory_digest = MemoryDigest(ram);
  uint64_t t1 = NowNs();
  r = machine_->RestoreState(in.state().data(), in.state().size());
  if (!r.ok()) {
    in.Abort("restore failed: " + r.error().op);
    return r.error();
  }
  r = machine_->Start();
  if (!r.ok()) {
    in.Abort("start failed: " + r.error().op);
    return r.error();
  }
  ts.restore_ms = double(NowNs() - t1) / 1e6;
  r = in.ConfirmResumed();
  // The guest already runs here; if the source never hears it, the source resumes too: a split brain the caller
  // must resolve (stop this copy). Report it as an error so it does.
  if (!r.ok()) return r.error();
  ts.huge_page_bytes = HugePageBytes(ram);
  return ts;
}

}  // namespace kvmts::migration
