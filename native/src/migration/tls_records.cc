#include "migration/tls_records.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "migration/openssl.h"
#include "migration/sha256.h"

namespace kvmts::migration {
namespace {

constexpr size_t kTag = 16;
constexpr uint8_t kAlert = 0x15;
constexpr uint8_t kHandshake = 0x16;
constexpr uint8_t kApplicationData = 0x17;
constexpr size_t kMaxRecordBody = kMaxRecordPlaintext + 256;  // RFC 8446 §5.2: 2^14 + 256
constexpr size_t kRecordsPerWrite = 64;
constexpr size_t kReadBuffer = 64 * (kRecordHeader + kMaxRecordBody);
// A record at least this long is opened straight into the caller's buffer when it fits there (page data); shorter
// ones (frame headers, replies, alerts) are opened in place and copied.
constexpr size_t kDirectMin = 1024;
// Pipelined reads: a read of at least this much (a frame's page data) receives into kSlots slots of 16 records each
// while the Opener decrypts; a slot is received into again once its records are opened.
constexpr size_t kPipelineMin = 256 * 1024;
constexpr size_t kSlots = 4;
constexpr size_t kSlotBytes = 64 * (kRecordHeader + kMaxRecordBody);

void PutHeader(uint8_t* h, size_t body_len) {
  h[0] = kApplicationData;
  h[1] = 3;
  h[2] = 3;
  h[3] = static_cast<uint8_t>(body_len >> 8);
  h[4] = static_cast<uint8_t>(body_len);
}

size_t BodyLength(const uint8_t* h) { return (size_t{h[3]} << 8) | h[4]; }

const char* AlertName(uint8_t d) {
  switch (d) {
    case 0: return "close_notify";
    case 10: return "unexpected_message";
    case 20: return "bad_record_mac";
    case 40: return "handshake_failure";
    case 42: return "bad_certificate";
    case 43: return "unsupported_certificate";
    case 45: return "certificate_expired";
    case 46: return "certificate_unknown";
    case 47: return "illegal_parameter";
    case 48: return "unknown_ca";
    case 50: return "decode_error";
    case 51: return "decrypt_error";
    case 70: return "protocol_version";
    case 80: return "internal_error";
    case 90: return "user_canceled";
    case 116: return "certificate_required";
    default: return "unknown";
  }
}

}  // namespace

/** One direction's AES-128-GCM context: the key is set once, the nonce per record. */
class Aead {
 public:
  Aead(const ossl::Library& c, const TrafficKeys& k, bool encrypt) : c_(c), keys_(k), encrypt_(encrypt) {}
  ~Aead() {
    if (ctx_ != nullptr) c_.EVP_CIPHER_CTX_free(ctx_);
  }
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  Status Init() {
    ctx_ = c_.EVP_CIPHER_CTX_new();
    if (ctx_ == nullptr) return Error{ENOMEM, "EVP_CIPHER_CTX_new", "migration stream encryption"};
    auto init = encrypt_ ? c_.EVP_EncryptInit_ex : c_.EVP_DecryptInit_ex;
    if (init(ctx_, c_.EVP_aes_128_gcm(), nullptr, keys_.key.data(), nullptr) != 1) {
      return Error{EPROTO, "EVP_CipherInit_ex", "libcrypto AES-128-GCM failed"};
    }
    return OkStatus();
  }

  /** Starts record `seq` with its header as additional data. */
  bool Begin(uint64_t seq, const uint8_t* header) {
    int n = 0;
    auto nonce = Nonce(seq);
    auto init = encrypt_ ? c_.EVP_EncryptInit_ex : c_.EVP_DecryptInit_ex;
    auto update = encrypt_ ? c_.EVP_EncryptUpdate : c_.EVP_DecryptUpdate;
    return init(ctx_, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
           update(ctx_, nullptr, &n, header, static_cast<int>(kRecordHeader)) == 1;
  }
  /** Encrypts or decrypts `len` more bytes of the record (GCM: out may be in, or elsewhere). */
  bool Update(uint8_t* out, const uint8_t* in, size_t len) {
    int n = 0;
    auto update = encrypt_ ? c_.EVP_EncryptUpdate : c_.EVP_DecryptUpdate;
    return update(ctx_, out, &n, in, static_cast<int>(len)) == 1;
  }
  /** Ends a sealed record: its tag to `tag`. */
  bool Seal(uint8_t* tag) {
    int n = 0;
    uint8_t none[16];
    return c_.EVP_EncryptFinal_ex(ctx_, none, &n) == 1 &&
           c_.EVP_CIPHER_CTX_ctrl(ctx_, ossl::kCtrlAeadGetTag, static_cast<int>(kTag), tag) == 1;
  }
  /** Ends an opened record: true when `tag` authenticates it. */
  bool Open(const uint8_t* tag) {
    int n = 0;
    uint8_t none[16];
    return c_.EVP_CIPHER_CTX_ctrl(ctx_, ossl::kCtrlAeadSetTag, static_cast<int>(kTag), const_cast<uint8_t*>(tag)) ==
               1 &&
           c_.EVP_DecryptFinal_ex(ctx_, none, &n) == 1;
  }

 private:
  std::array<uint8_t, 12> Nonce(uint64_t seq) const {
    std::array<uint8_t, 12> n = keys_.iv;
    for (int i = 0; i < 8; i++) n[11 - i] ^= static_cast<uint8_t>(seq >> (8 * i));
    return n;
  }

  const ossl::Library& c_;
  TrafficKeys keys_;
  bool encrypt_;
  void* ctx_ = nullptr;
};

/**
 * The worker of pipelined reads: opens received records (in a slot) straight into their destinations, in the order
 * they were pushed (their sequence numbers), with the direction's one Aead, which nothing else uses meanwhile. The
 * first failure is kept; later records are then skipped.
 */
class TlsRecordChannel::Opener {
 public:
  struct Job {
    size_t slot;
    const uint8_t* record;  // header, then body
    uint64_t seq;
    size_t content;
    std::vector<iovec> dst;  // `content` bytes in all
  };

  explicit Opener(Aead& aead) : aead_(aead), thread_([this] { Run(); }) {}
  ~Opener() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_.notify_one();
    thread_.join();
  }
  Opener(const Opener&) = delete;
  Opener& operator=(const Opener&) = delete;

  void Push(Job job) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_[job.slot]++;
      pending_++;
      queue_.push_back(std::move(job));
      wake = idle_;  // a busy worker takes what is queued when it comes back: no wake-up per record
    }
    if (wake) work_.notify_one();
  }
  /** Waits until every record of `slot` is opened (the slot may be received into again). */
  void WaitSlot(size_t slot) {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_++;
    done_.wait(lock, [&] { return busy_[slot] == 0; });
    waiters_--;
  }
  /** Waits until every record pushed is opened; the first failure, if any (then cleared). */
  Status Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_++;
    done_.wait(lock, [&] { return pending_ == 0; });
    waiters_--;
    Status e = error_;
    error_ = OkStatus();
    return e;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      idle_ = true;
      work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      idle_ = false;
      if (queue_.empty()) return;  // stop_
      std::deque<Job> batch;  // everything queued, opened without the lock
      batch.swap(queue_);
      bool skip = !error_.ok();
      lock.unlock();
      Status first = OkStatus();
      std::array<int, kSlots> opened{};
      for (const Job& job : batch) {
        if (!skip && first.ok()) first = Open(job);
        opened[job.slot]++;
      }
      lock.lock();
      if (!first.ok() && error_.ok()) error_ = first;
      for (size_t k = 0; k < kSlots; k++) busy_[k] -= opened[k];
      pending_ -= batch.size();
      if (waiters_ > 0) done_.notify_all();
    }
  }

  Status Open(const Job& job) {
    const uint8_t* body = job.record + kRecordHeader;
    bool ok = aead_.Begin(job.seq, job.record);
    size_t at = 0;
    for (const iovec& d : job.dst) {
      if (!ok) break;
      ok = aead_.Update(static_cast<uint8_t*>(d.iov_base), body + at, d.iov_len);
      at += d.iov_len;
    }
    uint8_t type = 0;
    if (!ok || !aead_.Update(&type, body + job.content, 1) || !aead_.Open(body + job.content + 1)) {
      return Error{EBADMSG, "migration stream", "a TLS record failed authentication (tampered, cut or reordered)"};
    }
    if (type != kApplicationData) {
      return Error{EPROTO, "migration stream", "a TLS record of content type " + std::to_string(type) + " mid-frame"};
    }
    return OkStatus();
  }

  Aead& aead_;
  std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<Job> queue_;
  std::array<int, kSlots> busy_{};
  size_t pending_ = 0;
  int waiters_ = 0;    // threads in WaitSlot or Drain
  bool idle_ = false;  // the worker waits for work
  bool stop_ = false;
  Status error_ = OkStatus();
  std::thread thread_;
};

std::vector<uint8_t> HkdfExpandLabel(const uint8_t* secret, size_t secret_len, const std::string& label,
                                     size_t out_len) {
  std::string full = "tls13 " + label;
  std::vector<uint8_t> info = {static_cast<uint8_t>(out_len >> 8), static_cast<uint8_t>(out_len),
                               static_cast<uint8_t>(full.size())};
  info.insert(info.end(), full.begin(), full.end());
  info.push_back(0);  // empty context
  info.push_back(1);  // HKDF-Expand's block counter: one block (out_len <= 32)
  Digest t = HmacSha256(secret, secret_len, info.data(), info.size());
  return std::vector<uint8_t>(t.begin(), t.begin() + static_cast<long>(std::min<size_t>(out_len, t.size())));
}

TrafficKeys TrafficKeysFrom(const uint8_t* traffic_secret, size_t len) {
  TrafficKeys k;
  auto key = HkdfExpandLabel(traffic_secret, len, "key", 16);
  auto iv = HkdfExpandLabel(traffic_secret, len, "iv", 12);
  std::copy(key.begin(), key.end(), k.key.begin());
  std::copy(iv.begin(), iv.end(), k.iv.begin());
  return k;
}

TlsRecordChannel::TlsRecordChannel(Channel& inner) : inner_(inner) {}
TlsRecordChannel::~TlsRecordChannel() { opener_.reset(); }  // before recv_, which it uses

Status TlsRecordChannel::Start(const TrafficKeys& send, const TrafficKeys& recv) {
  auto ok = ossl::Available();
  if (!ok.ok()) return ok;
  auto s = std::make_unique<Aead>(ossl::Get(), send, true);
  auto r = std::make_unique<Aead>(ossl::Get(), recv, false);
  if (auto e = s->Init(); !e.ok()) return e;
  if (auto e = r->Init(); !e.ok()) return e;
  send_ = std::move(s);
  recv_ = std::move(r);
  send_seq_ = recv_seq_ = 0;
  out_.resize(kRecordsPerWrite * (kMaxRecordPlaintext + kRecordOverhead));
  in_.resize(kReadBuffer);
  return OkStatus();
}

Result<size_t> TlsRecordChannel::Writev(const iovec* iov, int n) {
  if (!started()) return inner_.Writev(iov, n);
  size_t used = 0, consumed = 0;
  int i = 0;
  size_t off = 0;  // into iov[i]
  for (size_t rec = 0; rec < kRecordsPerWrite && i < n; rec++) {
    size_t len = 0;  // this record's content: up to 16 KiB from (i, off) on
    for (int j = i; j < n && len < kMaxRecordPlaintext; j++) {
      len += std::min(kMaxRecordPlaintext - len, iov[j].iov_len - (j == i ? off : 0));
    }
    if (len == 0) break;
    uint8_t* header = out_.data() + used;
    uint8_t* body = header + kRecordHeader;
    PutHeader(header, len + 1 + kTag);
    bool ok = send_->Begin(send_seq_, header);
    for (size_t at = 0; ok && at < len;) {  // straight from the caller's buffers into the record
      size_t take = std::min(len - at, iov[i].iov_len - off);
      ok = send_->Update(body + at, static_cast<const uint8_t*>(iov[i].iov_base) + off, take);
      at += take;
      off += take;
      if (off == iov[i].iov_len) {
        i++;
        off = 0;
      }
    }
    const uint8_t type = kApplicationData;  // TLS 1.3's inner content type
    if (!ok || !send_->Update(body + len, &type, 1) || !send_->Seal(body + len + 1)) {
      return Error{EPROTO, "seal", "libcrypto AES-128-GCM failed"};
    }
    send_seq_++;
    used += kRecordHeader + len + 1 + kTag;
    consumed += len;
  }
  auto w = WriteBytes(inner_, out_.data(), used);
  if (!w.ok()) return w.error();
  return consumed;
}

Result<bool> TlsRecordChannel::Buffer(bool block) {
  for (;;) {
    size_t avail = in_end_ - in_start_;
    if (avail >= kRecordHeader) {
      const uint8_t* h = in_.data() + in_start_;
      size_t body_len = BodyLength(h);
      if (h[0] != kApplicationData || h[1] != 3 || h[2] != 3 || body_len < 1 + kTag || body_len > kMaxRecordBody) {
        return Error{EBADMSG, "migration stream", "not a TLS 1.3 record (does the peer speak TLS?)"};
      }
      if (avail >= kRecordHeader + body_len) return true;
    }
    if (!block) return false;
    if (in_start_ > 0 && in_.size() - in_start_ < kRecordHeader + kMaxRecordBody) {
      std::memmove(in_.data(), in_.data() + in_start_, avail);
      in_start_ = 0;
      in_end_ = avail;
    }
    iovec v{in_.data() + in_end_, in_.size() - in_end_};
    auto r = inner_.Readv(&v, 1);
    if (!r.ok()) return r.error();
    if (r.value() == 0) {
      if (avail == 0) return false;
      return Error{ECONNRESET, "recv", "connection closed in the middle of a TLS record"};
    }
    in_end_ += r.value();
  }
}

Status TlsRecordChannel::NotData(uint8_t type, const uint8_t* content, size_t len) {
  if (type == kAlert && len == 2) {
    if (content[1] == 0) {  // close_notify: the end of the stream
      eof_ = true;
      return OkStatus();
    }
    uint8_t d = content[1];
    bool certificate = (d >= 42 && d <= 46) || d == 48 || d == 116;
    return Error{ECONNABORTED, "migration stream",
                 std::string(certificate ? "the peer refused this side's certificate (TLS alert "
                                         : "the peer ended TLS (alert ") +
                     AlertName(d) + ", " + std::to_string(d) + ")"};
  }
  if (type == kHandshake) {
    return Error{EPROTO, "migration stream",
                 "a TLS handshake message after the handshake (key updates and session tickets are not used here)"};
  }
  if (type == 0) return Error{EPROTO, "migration stream", "a TLS record without content type"};
  return Error{EPROTO, "migration stream", "a TLS record of content type " + std::to_string(type)};
}

Status TlsRecordChannel::OpenInPlace() {
  uint8_t* h = in_.data() + in_start_;
  size_t body_len = BodyLength(h);
  uint8_t* body = h + kRecordHeader;
  size_t len = body_len - kTag;
  in_start_ += kRecordHeader + body_len;
  if (!recv_->Begin(recv_seq_++, h) || !recv_->Update(body, body, len) || !recv_->Open(body + len)) {
    return Error{EBADMSG, "migration stream", "a TLS record failed authentication (tampered, cut or reordered)"};
  }
  while (len > 0 && body[len - 1] == 0) len--;  // padding
  if (len == 0) return NotData(0, body, 0);
  uint8_t type = body[len - 1];
  if (type != kApplicationData) return NotData(type, body, len - 1);
  plain_pos_ = static_cast<size_t>(body - in_.data());
  plain_end_ = plain_pos_ + len - 1;
  return OkStatus();
}

Status TlsRecordChannel::OpenInto(const iovec* iov, int n, int* i, size_t* off, size_t content) {
  uint8_t* h = in_.data() + in_start_;
  size_t body_len = BodyLength(h);
  const uint8_t* body = h + kRecordHeader;
  in_start_ += kRecordHeader + body_len;
  bool ok = recv_->Begin(recv_seq_++, h);
  for (size_t at = 0; ok && at < content && *i < n;) {
    size_t take = std::min(content - at, iov[*i].iov_len - *off);
    ok = recv_->Update(static_cast<uint8_t*>(iov[*i].iov_base) + *off, body + at, take);
    at += take;
    *off += take;
    if (*off == iov[*i].iov_len) {
      (*i)++;
      *off = 0;
    }
  }
  uint8_t type = 0;
  // The caller's buffer now holds the content, authenticated only once the tag checks: on failure the stream ends
  // and the receiver discards what it wrote (a target's guest never starts).
  if (!ok || !recv_->Update(&type, body + content, 1) || !recv_->Open(body + content + 1)) {
    return Error{EBADMSG, "migration stream", "a TLS record failed authentication (tampered, cut or reordered)"};
  }
  if (type != kApplicationData) return NotData(type, nullptr, 0);  // padded, or not data: never sent here
  return OkStatus();
}

Result<size_t> TlsRecordChannel::ReadPipelined(const iovec* iov, int n, int* i, size_t* off) {
  if (!opener_) {
    slots_.assign(kSlots, std::vector<uint8_t>(kSlotBytes));
    opener_ = std::make_unique<Opener>(*recv_);
  }
  // Raw bytes already buffered start slot 0 (at most a buffer's worth, which a slot holds).
  size_t cur = 0, pos = 0, fill = in_end_ - in_start_;
  std::memcpy(slots_[0].data(), in_.data() + in_start_, fill);
  in_start_ = in_end_ = 0;
  size_t total = 0;
  Status failed = OkStatus();
  for (bool more = true; more;) {
    // Whole records in the slot go to the Opener, each with its destination: the next `content` bytes of iov.
    while (fill - pos >= kRecordHeader) {
      const uint8_t* h = slots_[cur].data() + pos;
      size_t body_len = BodyLength(h);
      if (h[0] != kApplicationData || h[1] != 3 || h[2] != 3 || body_len < 1 + kTag || body_len > kMaxRecordBody) {
        failed = Error{EBADMSG, "migration stream", "not a TLS 1.3 record (does the peer speak TLS?)"};
        break;
      }
      if (fill - pos < kRecordHeader + body_len) break;
      size_t content = body_len - kTag - 1, space = 0;
      for (int j = *i; j < n && space < content; j++) space += iov[j].iov_len - (j == *i ? *off : 0);
      if (content < kDirectMin || space < content) {
        more = false;  // the rest goes the sequential way
        break;
      }
      Opener::Job job{cur, h, recv_seq_++, content, {}};
      for (size_t at = 0; at < content;) {
        size_t take = std::min(content - at, iov[*i].iov_len - *off);
        job.dst.push_back({static_cast<uint8_t*>(iov[*i].iov_base) + *off, take});
        at += take;
        *off += take;
        if (*off == iov[*i].iov_len) {
          (*i)++;
          *off = 0;
        }
      }
      opener_->Push(std::move(job));
      pos += kRecordHeader + body_len;
      total += content;
    }
    if (!failed.ok() || !more || *i == n) break;
    // More bytes: into this slot while a whole record still fits behind them, else into the next one (once its
    // records are opened), the partial record at the end of this one moved there first.
    if (kSlotBytes - fill < kRecordHeader + kMaxRecordBody) {
      size_t next = (cur + 1) % kSlots;
      opener_->WaitSlot(next);
      std::memmove(slots_[next].data(), slots_[cur].data() + pos, fill - pos);
      fill -= pos;
      pos = 0;
      cur = next;
    }
    iovec v{slots_[cur].data() + fill, kSlotBytes - fill};
    auto r = inner_.Readv(&v, 1);
    if (!r.ok()) {
      failed = r.error();
    } else if (r.value() == 0) {
      more = false;  // end of stream: what is left is the sequential way's to judge
    } else {
      fill += r.value();
    }
    if (!failed.ok()) break;
  }
  Status opened = opener_->Drain();
  // Bytes received but not given to the Opener (the start of a record that did not fit) go back to in_.
  std::memcpy(in_.data(), slots_[cur].data() + pos, fill - pos);
  in_end_ = fill - pos;
  if (!failed.ok()) return failed.error();
  if (!opened.ok()) return opened.error();
  return total;
}

Result<size_t> TlsRecordChannel::Readv(const iovec* iov, int n) {
  if (!started()) return inner_.Readv(iov, n);
  size_t total = 0;
  int i = 0;
  size_t off = 0;  // into iov[i]
  while (i < n) {
    if (off == iov[i].iov_len) {
      i++;
      off = 0;
      continue;
    }
    if (plain_pos_ < plain_end_) {
      size_t take = std::min(iov[i].iov_len - off, plain_end_ - plain_pos_);
      std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + off, in_.data() + plain_pos_, take);
      plain_pos_ += take;
      off += take;
      total += take;
      continue;
    }
    if (eof_) break;
    if (pipeline_) {
      size_t space = 0;
      for (int j = i; j < n && space < kPipelineMin; j++) space += iov[j].iov_len - (j == i ? off : 0);
      if (space >= kPipelineMin) {
        auto r = ReadPipelined(iov, n, &i, &off);
        if (!r.ok()) return r.error();
        total += r.value();
        if (i == n) break;
      }
    }
    auto b = Buffer(total == 0);  // block for a record only while nothing was served yet
    if (!b.ok()) return b.error();
    if (!b.value()) break;
    size_t content = BodyLength(in_.data() + in_start_) - kTag - 1;
    size_t space = 0;
    for (int j = i; j < n && space < content; j++) space += iov[j].iov_len - (j == i ? off : 0);
    if (content >= kDirectMin && space >= content) {
      auto r = OpenInto(iov, n, &i, &off, content);
      if (!r.ok()) return r.error();
      total += content;
    } else {
      auto r = OpenInPlace();
      if (!r.ok()) return r.error();
    }
  }
  return total;
}

}  // namespace kvmts::migration
