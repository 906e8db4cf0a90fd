#include "migration/incoming.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "migration/crc32c.h"

namespace kvmts::migration {
namespace {

std::string Describe(const Error& e) { return e.detail.empty() ? e.op : e.op + ": " + e.detail; }

}  // namespace

void SystemRandom(uint8_t* out, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t r = getrandom(out + done, len - done, 0);
    if (r > 0) done += static_cast<size_t>(r);
  }
}

IncomingMigration::IncomingMigration(Channel& channel, RamLayout ram, std::string secret, bool fresh_memory,
                                     RandomFn random)
    : ch_(channel), ram_(std::move(ram)), secret_(std::move(secret)), fresh_(fresh_memory), random_(std::move(random)) {
  memory_end_ = ram_.end();
  touched_.assign((memory_end_ / page_size_ + 63) / 64, 0);
}

IncomingMigration::~IncomingMigration() { FinishPrefault(); }

void IncomingMigration::EnablePrefault(PrefaultOptions options) {
  if (options.enabled) prefault_ = std::make_unique<Prefaulter>(ram_, options);
}

void IncomingMigration::FinishPrefault() {
  if (prefault_ == nullptr || !prefault_->started()) return;
  prefault_->Finish();
  stats_.prefaulted_bytes = prefault_->stats().populated_bytes;
  stats_.small_page_bytes = prefault_->stats().small_page_bytes + prefault_->stats().dense_small_page_bytes;
}

Status IncomingMigration::Fail(Error e) {
  if (phase_ != Phase::kFailed) {
    phase_ = Phase::kFailed;
    auto payload = EncodeAbandon(Abandon{1, "target: " + Describe(e)});
    auto frame = EncodeFrame(Command::kAbandon, payload.data(), payload.size());
    (void)WriteBytes(ch_, frame.data(), frame.size());
  }
  return e;
}

void IncomingMigration::Abort(const std::string& reason) { (void)Fail(Error{ECANCELED, "migration", reason}); }

Status IncomingMigration::ReadFrame(FrameHeader* h, std::vector<uint8_t>* payload) {
  uint8_t raw[kHeaderSize];
  auto r = ReadBytes(ch_, raw, kHeaderSize);
  if (!r.ok()) return r;
  *h = DecodeHeader(raw);
  auto v = ValidateHeader(*h);
  if (!v.ok()) return v;
  stats_.frames++;
  stats_.bytes += kHeaderSize;
  if (static_cast<Command>(h->command) == Command::kMemory) return OkStatus();
  payload->resize(h->length);
  r = ReadBytes(ch_, payload->data(), payload->size());
  if (!r.ok()) return r;
  stats_.bytes += h->length;
  size_t checked = payload->size();
  if (!(h->flags & kFlagPayloadChecked)) {  // ValidateHeader lets only Disk frames come here unchecked
    if (stats_.version < kEncryptedDiskProtocolVersion ||
        (!encrypted_ && stats_.version < kDiskDigestProtocolVersion)) {
      return ProtocolError(
          "Disk frame without its data check in a version < 5 stream or an unencrypted version < 6 one");
    }
    if (payload->size() < kDiskExtentBytes) return ProtocolError("Disk frame truncated");
    checked = kDiskExtentBytes;  // the extent; the record layer authenticated the data, or DiskDigest will
  }
  if (Crc32c(HeaderCrc(*h), payload->data(), checked) != h->crc) {
    return ProtocolError(std::string("CRC mismatch in ") + CommandName(h->command) + " frame");
  }
  if (static_cast<Command>(h->command) == Command::kAbandon) {
    auto a = DecodeAbandon(payload->data(), payload->size());
    return Error{ECONNABORTED, "migration", "source abandoned: " + (a.ok() ? a.value().reason : "?")};
  }
  return OkStatus();
}

Status IncomingMigration::Handshake() {
  FrameHeader h;
  std::vector<uint8_t> p;
  auto r = ReadFrame(&h, &p);
  if (!r.ok()) return r;
  if (static_cast<Command>(h.command) != Command::kHello) {
    return ProtocolError(std::string("expected Hello, got ") + CommandName(h.command));
  }
  auto hello = DecodeHello(p.data(), p.size());
  if (!hello.ok()) return hello.error();
  uint16_t version = std::min(hello.value().max_version, max_version_);
  if (version < kMinProtocolVersion || version < hello.value().min_version) {
    return ProtocolError("no common protocol version");
  }
  Challenge ch;
  ch.version = version;
  random_(ch.nonce, kNonceSize);
  ch.mac = HandshakeMac(secret_, kTargetLabel, version, hello.value().nonce, ch.nonce);
  auto payload = EncodeChallenge(ch);
  auto frame = EncodeFrame(Command::kChallenge, payload.data(), payload.size());
  r = WriteBytes(ch_, frame.data(), frame.size());
  if (!r.ok()) return r;
  phase_ = Phase::kAwaitAuth;
  r = ReadFrame(&h, &p);
  if (!r.ok()) return r;
  if (static_cast<Command>(h.command) != Command::kAuth || p.size() != 32) {
    return ProtocolError(std::string("expected Auth, got ") + CommandName(h.command));
  }
  Digest got;
  std::memcpy(got.data(), p.data(), 32);
  if (!DigestEqual(got, HandshakeMac(secret_, kSourceLabel, version, ch.nonce, hello.value().nonce))) {
    return Error{EACCES, "migration handshake", "authentication failed: the source does not know the secret"};
  }
  frame = EncodeFrame(Command::kAuthOk, nullptr, 0);
  r = WriteBytes(ch_, frame.data(), frame.size());
  if (!r.ok()) return r;
  stats_.version = version;
  phase_ = Phase::kAwaitStart;
  r = ReadFrame(&h, &p);
  if (!r.ok()) return r;
  if (static_cast<Command>(h.command) != Command::kStart) {
    return ProtocolError(std::string("expected Start, got ") + CommandName(h.command));
  }
  auto start = DecodeStart(p.data(), p.size());
  if (!start.ok()) return start.error();
  if (start.value().version != version) return ProtocolError("Start names a version other than the negotiated one");
  if (start.value().memory_bytes != ram_.total() || start.value().page_size != page_size_) {
    return Error{EINVAL, "migration start",
                 "guest layout mismatch: source has " + std::to_string(start.value().memory_bytes) +
                     " bytes of RAM, target " + std::to_string(ram_.total())};
  }
  r = CheckDisks(start.value());
  if (!r.ok()) return r;
  disk_specs_ = start.value().disks;
  phase_ = Phase::kStreaming;
  return OkStatus();
}

Status IncomingMigration::ReadTable(const FrameHeader& h, uint32_t* crc, std::vector<PageRange>* ranges) {
  uint8_t prefix[8];
  if (h.length < 8) return ProtocolError("range table truncated");
  auto r = ReadBytes(ch_, prefix, 8);
  if (!r.ok()) return r;
  auto n = DecodeRangeCount(prefix);
  if (!n.ok()) return n.error();
  uint64_t table = RangeTableBytes(n.value());
  if (h.length < table) return ProtocolError("range table longer than its frame");
  std::vector<uint8_t> entries(table - 8);
  r = ReadBytes(ch_, entries.data(), entries.size());
  if (!r.ok()) return r;
  stats_.bytes += table;
  *crc = Crc32c(Crc32c(HeaderCrc(h), prefix, 8), entries.data(), entries.size());
  auto decoded = DecodeRanges(entries.data(), n.value(), memory_end_, page_size_);
  if (!decoded.ok()) return decoded.error();
  *ranges = std::move(decoded.value());
  return OkStatus();
}

Status IncomingMigration::OnMemory(const FrameHeader& h) {
  uint32_t crc = 0;
  std::vector<PageRange> ranges;
  auto r = ReadTable(h, &crc, &ranges);
  if (!r.ok()) return r;
  uint64_t data = h.length - RangeTableBytes(ranges.size());
  uint64_t sum = 0;
  std::vector<iovec> iov(ranges.size());
  for (size_t i = 0; i < ranges.size(); i++) {
    uint8_t* hva = ram_.Translate(ranges[i].gpa, ranges[i].length);
    if (hva == nullptr) return ProtocolError("Memory range outside guest RAM");
    iov[i] = iovec{hva, ranges[i].length};
    sum += ranges[i].length;
  }
  if (sum != data) return ProtocolError("Memory frame length disagrees with its range table");
  bool checked = h.flags & kFlagPayloadChecked;
  if (!checked && crc != h.crc) return ProtocolError("CRC mismatch in Memory frame range table");
  if (prefault_ != nullptr && !ranges.empty()) {
    // The helper works top down and stops below this frame: the receiver faults these pages itself.
    frontier_ = std::max(frontier_, ranges.back().gpa);
    prefault_->SetFrontier(frontier_);
  }
  r = ReadAll(ch_, iov.data(), iov.size());
  if (!r.ok()) return r;
  stats_.bytes += data;
  for (const PageRange& pr : ranges) {
    if (checked) crc = Crc32c(crc, ram_.Translate(pr.gpa, pr.length), pr.length);
    MarkTouched(pr);
    stats_.data_pages += pr.length / page_size_;
  }
  if (checked && crc != h.crc) return ProtocolError("CRC mismatch in Memory frame data");
  return OkStatus();
}

Status IncomingMigration::OnZero(const FrameHeader& h, const std::vector<uint8_t>& payload) {
  if (stats_.version < 2) return ProtocolError("Zero frame in a version 1 stream");
  if (payload.size() < 8) return ProtocolError("Zero frame truncated");
  auto n = DecodeRangeCount(payload.data());
  if (!n.ok()) return n.error();
  if (h.length != RangeTableBytes(n.value())) return ProtocolError("Zero frame length disagrees with its table");
  auto ranges = DecodeRanges(payload.data() + 8, n.value(), memory_end_, page_size_);
  if (!ranges.ok()) return ranges.error();
  for (const PageRange& pr : ranges.value()) {
    uint8_t* hva = ram_.Translate(pr.gpa, pr.length);
    if (hva == nullptr) return ProtocolError("Zero range outside guest RAM");
    if (!fresh_) probe_.Populated(hva, pr.length / page_size_, ram_.RegionOf(pr.gpa)->shared, &populated_);
    for (uint64_t off = 0; off < pr.length; off += page_size_) {
      if (fresh_ && !Touched((pr.gpa + off) / page_size_)) continue;  // still zero from the mapping
      if (!fresh_ && !Touched((pr.gpa + off) / page_size_) && !populated_[off / page_size_]) continue;
      if (!IsZeroPage(hva + off, page_size_)) std::memset(hva + off, 0, page_size_);
    }
    stats_.zero_pages += pr.length / page_size_;
  }
  return OkStatus();
}

Status IncomingMigration::OnPopulate(const std::vector<uint8_t>& payload) {
  if (stats_.version < 3) return ProtocolError("Populate frame in a version 2 stream");
  if (payload.size() < 8) return ProtocolError("Populate frame truncated");
  auto n = DecodeRangeCount(payload.data());
  if (!n.ok()) return n.error();
  if (payload.size() != RangeTableBytes(n.value())) {
    return ProtocolError("Populate frame length disagrees with its table");
  }
  auto ranges = DecodeRanges(payload.data() + 8, n.value(), memory_end_, page_size_);
  if (!ranges.ok()) return ranges.error();
  for (const PageRange& pr : ranges.value()) stats_.hinted_bytes += pr.length;
  if (prefault_ != nullptr && !prefault_->started()) {
    prefault_->Hint(ranges.value());
    hints_pending_ = true;
  }
  return OkStatus();
}

void IncomingMigration::MarkTouched(const PageRange& r) {
  for (uint64_t p = r.gpa / page_size_; p < (r.gpa + r.length) / page_size_; p++) touched_[p / 64] |= uint64_t{1} << (p % 64);
}

bool IncomingMigration::Touched(uint64_t page) const { return (touched_[page / 64] >> (page % 64)) & 1; }

Status IncomingMigration::ReceiveUntilComplete() {
  if (phase_ != Phase::kAwaitHello) return Error{EALREADY, "migration", "receive already ran"};
  auto r = Handshake();
  if (!r.ok()) return Fail(r.error());
  bool have_state = false;
  std::vector<uint8_t> p;  // reused: Disk frames are up to 4 MiB
  for (;;) {
    FrameHeader h;
    r = ReadFrame(&h, &p);
    if (!r.ok()) {
      FinishPrefault();
      return Fail(r.error());
    }
    if (hints_pending_ && static_cast<Command>(h.command) != Command::kPopulate) {
      hints_pending_ = false;  // all hints of the bulk pass are in: fault them in while the data arrives
      prefault_->Start();
    }
    switch (static_cast<Command>(h.command)) {
      case Command::kPopulate:
        r = OnPopulate(p);
        break;
      case Command::kMemory:
        r = OnMemory(h);
        break;
      case Command::kZero:
        r = OnZero(h, p);
        break;
      case Command::kDisk:
        r = OnDisk(p);
        break;
      case Command::kDiskZero:
        r = OnDiskZero(p);
        break;
      case Command::kDiskDigest:
        r = OnDiskDigest(p);
        break;
      case Command::kSync: {
        if (stats_.version < 2) {
          r = ProtocolError("Sync frame in a version 1 stream");
          break;
        }
        FinishPrefault();  // the bulk pass is in memory: later rounds fault their few pages themselves
        r = SyncDisks();   // the disks' bulk data reaches stable storage now, not during the downtime
        if (!r.ok()) break;
        auto frame = EncodeFrame(Command::kSync, nullptr, 0);
        r = WriteBytes(ch_, frame.data(), frame.size());
        break;
      }
      case Command::kState:
        state_ = std::move(p);  // p is reused: a moved-from vector is empty and valid
        have_state = true;
        break;
      case Command::kComplete:
        FinishPrefault();
        if (!have_state) return Fail(ProtocolError("Complete before State"));
        if (DigestDisks() && !disk_specs_.empty() && !disk_digest_checked_) {
          return Fail(ProtocolError("Complete without the copied disks' digest (DiskDigest) in a plaintext version " +
                                    std::to_string(stats_.version) + " stream"));
        }
        r = SyncDisks();
        if (!r.ok()) return Fail(r.error());
        phase_ = Phase::kReceived;
        return OkStatus();
      default:
        r = ProtocolError(std::string("unexpected ") + CommandName(h.command) + " frame while streaming");
    }
    if (!r.ok()) {
      FinishPrefault();
      return Fail(r.error());
    }
  }
}

Status IncomingMigration::ConfirmResumed() {
  if (phase_ != Phase::kReceived) return Error{EINVAL, "migration", "nothing to confirm"};
  auto frame = EncodeFrame(Command::kResumed, nullptr, 0);
  auto r = WriteBytes(ch_, frame.data(), frame.size());
  if (!r.ok()) return Fail(r.error());
  phase_ = Phase::kDone;
  return OkStatus();
}

}  // namespace kvmts::migration
