#include "migration/outgoing.h"

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "migration/crc32c.h"

namespace kvmts::migration {
namespace {

constexpr uint64_t kPage = 4096;
constexpr size_t kMaxRangesPerBatch = 1000;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

OutgoingMigration::OutgoingMigration(Channel& channel, RamLayout ram, std::string secret, RandomFn random,
                                     uint16_t max_version)
    : ch_(channel), ram_(std::move(ram)), secret_(std::move(secret)), random_(std::move(random)),
      max_version_(max_version) {}

Status OutgoingMigration::SendFrame(Command c, const void* payload, size_t len) {
  auto frame = EncodeFrame(c, payload, len);
  auto r = WriteBytes(ch_, frame.data(), frame.size());
  if (!r.ok()) return r;
  stats_.frames++;
  stats_.bytes += frame.size();
  return OkStatus();
}

Status OutgoingMigration::ReadReply(Command expected, std::vector<uint8_t>* payload) {
  uint8_t raw[kHeaderSize];
  auto r = ReadBytes(ch_, raw, kHeaderSize);
  if (!r.ok()) return r;
  FrameHeader h = DecodeHeader(raw);
  r = ValidateHeader(h);
  if (!r.ok()) return r;
  if (h.length > 4096) return ProtocolError("reply frame too long");
  payload->resize(h.length);
  r = ReadBytes(ch_, payload->data(), payload->size());
  if (!r.ok()) return r;
  if (Crc32c(HeaderCrc(h), payload->data(), payload->size()) != h.crc) {
    return ProtocolError(std::string("CRC mismatch in ") + CommandName(h.command) + " reply");
  }
  if (static_cast<Command>(h.command) == Command::kAbandon) {
    auto a = DecodeAbandon(payload->data(), payload->size());
    return Error{ECONNABORTED, "migration", "target abandoned: " + (a.ok() ? a.value().reason : "?")};
  }
  if (static_cast<Command>(h.command) != expected) {
    return ProtocolError(std::string("expected ") + CommandName(static_cast<uint16_t>(expected)) + ", got " +
                         CommandName(h.command));
  }
  return OkStatus();
}

Status OutgoingMigration::Handshake() {
  Hello hello;
  hello.max_version = max_version_;
  random_(hello.nonce, kNonceSize);
  auto p = EncodeHello(hello);
  auto r = SendFrame(Command::kHello, p.data(), p.size());
  if (!r.ok()) return WithPeerReason(r);  // a target that refused us (a TLS alert, an Abandon) may have said why
  std::vector<uint8_t> reply;
  r = ReadReply(Command::kChallenge, &reply);
  if (!r.ok()) return r;
  auto ch = DecodeChallenge(reply.data(), reply.size());
  if (!ch.ok()) return ch.error();
  uint16_t version = ch.value().version;
  if (version < kMinProtocolVersion || version > max_version_) return ProtocolError("target chose an unknown version");
  if (!DigestEqual(ch.value().mac, HandshakeMac(secret_, kTargetLabel, version, hello.nonce, ch.value().nonce))) {
    Abandon("authentication failed");
    return Error{EACCES, "migration handshake", "authentication failed: the target does not know the secret"};
  }
  if (!disks_.empty() && version < kDiskProtocolVersion) {
    std::string why = "the target cannot receive copied disks: it speaks migration protocol " +
                      std::to_string(version) + ", copying disks needs " + std::to_string(kDiskProtocolVersion);
    Abandon(why);
    return Error{EPROTONOSUPPORT, "migration handshake", why};
  }
  Digest mac = HandshakeMac(secret_, kSourceLabel, version, ch.value().nonce, hello.nonce);
  r = SendFrame(Command::kAuth, mac.data(), mac.size());
  if (!r.ok()) return r;
  r = ReadReply(Command::kAuthOk, &reply);
  if (!r.ok()) return r;
  stats_.version = version;
  p = EncodeStart(Start{version, 0, ram_.total(), static_cast<uint32_t>(kPage), disks_});
  r = SendFrame(Command::kStart, p.data(), p.size());
  if (!r.ok() || disks_.empty()) return r;
  // With copied disks the target may refuse Start (a disk of another size, one it does not copy): a Sync round trip
  // brings its Abandon reason back here now, instead of an EPIPE in the middle of the bulk pass.
  return Sync();
}

Status OutgoingMigration::Classify(const PageRange& r, const SendOptions& o, RangeTable* data, RangeTable* zeros) {
  const RamRegion* region = ram_.RegionOf(r.gpa);
  const uint8_t* hva = ram_.Translate(r.gpa, r.length);
  if (region == nullptr || hva == nullptr) return Error{EFAULT, "migration", "range outside guest RAM"};
  uint64_t pages = r.length / kPage;
  std::vector<bool> populated;
  if (o.probe_residency) {
    probe_.Populated(hva, pages, region->shared, &populated);
  } else {
    populated.assign(pages, true);
  }
  for (uint64_t i = 0; i < pages; i++) {
    PageRange page{r.gpa + i * kPage, kPage};
    if (!populated[i] || IsZeroPage(hva + i * kPage, kPage)) {
      zeros->Append(page);
    } else {
      data->Append(page);
    }
  }
  return OkStatus();
}

Status OutgoingMigration::SendBatch(const std::vector<PageRange>& data, bool checked) {
  auto table = EncodeRangeTable(data);
  uint64_t bytes = 0;
  std::vector<iovec> iov(data.size() + 2);
  for (size_t i = 0; i < data.size(); i++) {
    uint8_t* hva = ram_.Translate(data[i].gpa, data[i].length);
    if (hva == nullptr) return Error{EFAULT, "migration", "range outside guest RAM"};
    iov[i + 2] = iovec{hva, data[i].length};
    bytes += data[i].length;
  }
  FrameHeader h{static_cast<uint16_t>(Command::kMemory), static_cast<uint8_t>(checked ? kFlagPayloadChecked : 0), 0,
                0, table.size() + bytes};
  uint32_t crc = Crc32c(HeaderCrc(h), table.data(), table.size());
  if (checked) {
    for (size_t i = 0; i < data.size(); i++) crc = Crc32c(crc, iov[i + 2].iov_base, iov[i + 2].iov_len);
  }
  h.crc = crc;
  uint8_t raw[kHeaderSize];
  EncodeHeader(h, raw);
  iov[0] = iovec{raw, kHeaderSize};
  iov[1] = iovec{table.data(), table.size()};
  auto r = WriteAll(ch_, iov.data(), iov.size());
  if (!r.ok()) return r;
  stats_.frames++;
  stats_.bytes += kHeaderSize + h.length;
  stats_.data_pages += bytes / kPage;
  paced_bytes_ += kHeaderSize + h.length;
  return OkStatus();
}

Status OutgoingMigration::SendZeros(const std::vector<PageRange>& zeros) {
  auto table = EncodeRangeTable(zeros);
  auto r = SendFrame(Command::kZero, table.data(), table.size());
  if (!r.ok()) return r;
  for (const PageRange& z : zeros) stats_.zero_pages += z.length / kPage;
  paced_bytes_ += kHeaderSize + table.size();
  return OkStatus();
}

// Sends `ranges` as Zero or Populate frames of at most kMaxRangesPerFrame entries each.
Status OutgoingMigration::SendTables(Command c, const std::vector<PageRange>& ranges) {
  for (size_t i = 0; i < ranges.size(); i += kMaxRangesPerFrame) {
    size_t end = std::min<size_t>(ranges.size(), i + kMaxRangesPerFrame);
    std::vector<PageRange> part(ranges.begin() + static_cast<ptrdiff_t>(i), ranges.begin() + static_cast<ptrdiff_t>(end));
    if (c == Command::kZero) {
      auto r = SendZeros(part);
      if (!r.ok()) return r;
      continue;
    }
    auto table = EncodeRangeTable(part);
    auto r = SendFrame(c, table.data(), table.size());
    if (!r.ok()) return r;
    paced_bytes_ += kHeaderSize + table.size();
  }
  return OkStatus();
}

// The bulk pass of protocol >= 3: one classification of every page (residency, then zero check), the data ranges
// as Populate hints so the target faults them in meanwhile, the zero ranges, then the data in GPA order. A page
// that changes after its classification is dirty in the log (started before the bulk pass) and goes again later.
Status OutgoingMigration::SendClassifiedFirst(const std::vector<PageRange>& ranges, const SendOptions& o) {
  RangeTable data, zeros;
  for (const Batch& batch : SplitIntoBatches(ranges, uint64_t{64} << 20, kMaxRangesPerFrame, kPage)) {
    if (o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed)) {
      return Error{ECANCELED, "migration", "canceled"};
    }
    for (const PageRange& r : batch.ranges) {
      auto c = Classify(r, o, &data, &zeros);
      if (!c.ok()) return c;
    }
  }
  auto r = SendTables(Command::kPopulate, data.ranges());
  if (!r.ok()) return r;
  r = SendTables(Command::kZero, zeros.ranges());
  if (!r.ok()) return r;
  for (const Batch& batch : SplitIntoBatches(data.ranges(), o.max_frame_bytes, kMaxRangesPerBatch, kPage)) {
    if (o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed)) {
      return Error{ECANCELED, "migration", "canceled"};
    }
    r = SendBatch(batch.ranges, o.check_data);
    if (!r.ok()) return r;
    Pace(o.bytes_per_sec);
  }
  return OkStatus();
}

void OutgoingMigration::Pace(uint64_t bytes_per_sec) {
  if (bytes_per_sec == 0) return;
  uint64_t now = NowNs();
  if (pace_start_ns_ == 0) {
    pace_start_ns_ = now;
    paced_bytes_ = 0;
    return;
  }
  uint64_t due = pace_start_ns_ + static_cast<uint64_t>(double(paced_bytes_) * 1e9 / double(bytes_per_sec));
  if (due > now) {
    uint64_t wait = due - now;
    timespec ts{static_cast<time_t>(wait / 1000000000ull), static_cast<long>(wait % 1000000000ull)};
    nanosleep(&ts, nullptr);
  }
}

Status OutgoingMigration::SendRanges(const std::vector<PageRange>& ranges, const SendOptions& o) {
  bool zero_markers = o.detect_zero && stats_.version >= 2;
  if (zero_markers && o.populate_hint && stats_.version >= 3) return SendClassifiedFirst(ranges, o);
  for (const Batch& batch : SplitIntoBatches(ranges, o.max_frame_bytes, kMaxRangesPerBatch, kPage)) {
    if (o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed)) {
      return Error{ECANCELED, "migration", "canceled"};
    }
    RangeTable data, zeros;
    if (zero_markers) {
      for (const PageRange& r : batch.ranges) {
        auto c = Classify(r, o, &data, &zeros);
        if (!c.ok()) return c;
      }
    } else {
      for (const PageRange& r : batch.ranges) data.Append(r);
    }
    // Classification merges pages back into runs; a batch stays within the frame limits it started with.
    if (!data.empty()) {
      auto r = SendBatch(data.ranges(), o.check_data);
      if (!r.ok()) return r;
    }
    if (!zeros.empty()) {
      auto r = SendZeros(zeros.ranges());
      if (!r.ok()) return r;
    }
    Pace(o.bytes_per_sec);
  }
  return OkStatus();
}

Status OutgoingMigration::WithPeerReason(Status e) {
  if (e.ok() || (e.error().err != EPIPE && e.error().err != ECONNRESET)) return e;
  std::vector<uint8_t> reply;
  Status why = ReadReply(Command::kSync, &reply);  // anything but an Abandon leaves `e` as the error
  return !why.ok() && why.error().err == ECONNABORTED ? why : e;
}

Status OutgoingMigration::Sync() {
  if (stats_.version < 2) return OkStatus();
  auto r = SendFrame(Command::kSync, nullptr, 0);
  if (!r.ok()) return WithPeerReason(r);
  std::vector<uint8_t> reply;
  return ReadReply(Command::kSync, &reply);
}

Status OutgoingMigration::SendState(const uint8_t* data, size_t len) {
  if (len > kMaxStateBytes) return Error{EFBIG, "migration", "machine state too large"};
  return SendFrame(Command::kState, data, len);
}

Status OutgoingMigration::Complete() {
  if (DigestDisks() && !disks_.empty()) {
    auto p = EncodeDiskDigest(DiskDigest{disk_digest_.value(), stats_.disk_bytes});
    auto r = SendFrame(Command::kDiskDigest, p.data(), p.size());
    if (!r.ok()) return WithPeerReason(r);
  }
  auto r = SendFrame(Command::kComplete, nullptr, 0);
  if (!r.ok()) return WithPeerReason(r);  // a target that failed the digest sent its Abandon and hung up
  std::vector<uint8_t> reply;
  return ReadReply(Command::kResumed, &reply);
}

void OutgoingMigration::Abandon(const std::string& reason) {
  auto p = EncodeAbandon(migration::Abandon{1, "source: " + reason});
  (void)SendFrame(Command::kAbandon, p.data(), p.size());
}

}  // namespace kvmts::migration
