#include "migration/sealed_channel.h"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "migration/sha256.h"
#include "migration/stream.h"

namespace kvmts::migration {
namespace {

// The few EVP entry points of libcrypto.so.3 this file uses (stable OpenSSL 3 ABI), resolved with dlsym. Loaded with
// RTLD_DEEPBIND so libcrypto binds to itself and not to the copy of OpenSSL that Node's executable exports (another
// version, other structure layouts); sanitizer runtimes refuse RTLD_DEEPBIND, and their test binaries carry no
// other OpenSSL, so they load it plainly.
struct Libcrypto {
  using InitFn = int (*)(void*, const void*, void*, const unsigned char*, const unsigned char*);
  using UpdateFn = int (*)(void*, unsigned char*, int*, const unsigned char*, int);
  using FinalFn = int (*)(void*, unsigned char*, int*);
  void* (*ctx_new)() = nullptr;
  void (*ctx_free)(void*) = nullptr;
  const void* (*aes_128_gcm)() = nullptr;
  int (*ctx_ctrl)(void*, int, int, void*) = nullptr;
  InitFn encrypt_init = nullptr, decrypt_init = nullptr;
  UpdateFn encrypt_update = nullptr, decrypt_update = nullptr;
  FinalFn encrypt_final = nullptr, decrypt_final = nullptr;
  std::string error;  // why it is unusable; empty when loaded
};

constexpr int kCtrlGetTag = 0x10;  // EVP_CTRL_AEAD_GET_TAG
constexpr int kCtrlSetTag = 0x11;  // EVP_CTRL_AEAD_SET_TAG
constexpr size_t kTag = 16;
constexpr uint8_t kApplicationData = 0x17;
constexpr size_t kMaxRecordBody = kMaxRecordPlaintext + 1 + kTag;
constexpr size_t kRecordsPerWrite = 16;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

template <typename F>
bool Bind(void* handle, const char* name, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr && error->empty()) *error = std::string("libcrypto has no ") + name;
  return *out != nullptr;
}

Libcrypto Load() {
  Libcrypto c;
  void* h = dlopen("libcrypto.so.3", kDlopenFlags);
  if (h == nullptr) {
    c.error = std::string("cannot load libcrypto.so.3 (OpenSSL 3; Debian: apt-get install libssl3): ") + dlerror();
    return c;
  }
  Bind(h, "EVP_CIPHER_CTX_new", &c.ctx_new, &c.error);
  Bind(h, "EVP_CIPHER_CTX_free", &c.ctx_free, &c.error);
  Bind(h, "EVP_CIPHER_CTX_ctrl", &c.ctx_ctrl, &c.error);
  Bind(h, "EVP_aes_128_gcm", &c.aes_128_gcm, &c.error);
  Bind(h, "EVP_EncryptInit_ex", &c.encrypt_init, &c.error);
  Bind(h, "EVP_EncryptUpdate", &c.encrypt_update, &c.error);
  Bind(h, "EVP_EncryptFinal_ex", &c.encrypt_final, &c.error);
  Bind(h, "EVP_DecryptInit_ex", &c.decrypt_init, &c.error);
  Bind(h, "EVP_DecryptUpdate", &c.decrypt_update, &c.error);
  Bind(h, "EVP_DecryptFinal_ex", &c.decrypt_final, &c.error);
  return c;  // the handle stays open for the life of the process
}

const Libcrypto& Crypto() {
  static const Libcrypto lib = Load();
  return lib;
}

void PutHeader(uint8_t* h, size_t body_len) {
  h[0] = kApplicationData;
  h[1] = 3;
  h[2] = 3;
  h[3] = static_cast<uint8_t>(body_len >> 8);
  h[4] = static_cast<uint8_t>(body_len);
}

}  // namespace

/** One direction's AES-128-GCM context: the key is set once, the nonce per record. */
class Aead {
 public:
  Aead(const Libcrypto& c, const TrafficKeys& k, bool encrypt) : c_(c), keys_(k), encrypt_(encrypt) {}
  ~Aead() {
    if (ctx_ != nullptr) c_.ctx_free(ctx_);
  }
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  Status Init() {
    ctx_ = c_.ctx_new();
    if (ctx_ == nullptr) return Error{ENOMEM, "EVP_CIPHER_CTX_new", "migration stream encryption"};
    auto init = encrypt_ ? c_.encrypt_init : c_.decrypt_init;
    if (init(ctx_, c_.aes_128_gcm(), nullptr, keys_.key.data(), nullptr) != 1) return Fail("EVP_CipherInit_ex");
    return OkStatus();
  }

  /** Seals body[0..len) in place under record `seq`, the header as additional data; writes the tag to `tag`. */
  Status Seal(uint64_t seq, const uint8_t* header, uint8_t* body, size_t len, uint8_t* tag) {
    int n = 0;
    auto nonce = Nonce(seq);
    if (c_.encrypt_init(ctx_, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
        c_.encrypt_update(ctx_, nullptr, &n, header, kRecordHeader) != 1 ||
        c_.encrypt_update(ctx_, body, &n, body, static_cast<int>(len)) != 1 ||
        c_.encrypt_final(ctx_, body + len, &n) != 1 || c_.ctx_ctrl(ctx_, kCtrlGetTag, kTag, tag) != 1) {
      return Fail("seal");
    }
    return OkStatus();
  }

  /** Opens body[0..len) in place; false when the record is not authentic. */
  bool Open(uint64_t seq, const uint8_t* header, uint8_t* body, size_t len, const uint8_t* tag) {
    int n = 0;
    auto nonce = Nonce(seq);
    return c_.decrypt_init(ctx_, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
           c_.decrypt_update(ctx_, nullptr, &n, header, kRecordHeader) == 1 &&
           c_.decrypt_update(ctx_, body, &n, body, static_cast<int>(len)) == 1 &&
           c_.ctx_ctrl(ctx_, kCtrlSetTag, kTag, const_cast<uint8_t*>(tag)) == 1 &&
           c_.decrypt_final(ctx_, body + len, &n) == 1;
  }

 private:
  std::array<uint8_t, 12> Nonce(uint64_t seq) const {
    std::array<uint8_t, 12> n = keys_.iv;
    for (int i = 0; i < 8; i++) n[11 - i] ^= static_cast<uint8_t>(seq >> (8 * i));
    return n;
  }
  static Error Fail(const char* step) { return Error{EPROTO, step, "libcrypto AES-128-GCM failed"}; }

  const Libcrypto& c_;
  TrafficKeys keys_;
  bool encrypt_;
  void* ctx_ = nullptr;
};

std::vector<uint8_t> Hkdf(const uint8_t* salt, size_t salt_len, const uint8_t* ikm, size_t ikm_len,
                          const std::string& info, size_t out_len) {
  Digest prk = HmacSha256(salt, salt_len, ikm, ikm_len);
  std::vector<uint8_t> out;
  std::vector<uint8_t> block;
  for (uint8_t i = 1; out.size() < out_len; i++) {
    std::vector<uint8_t> msg(block);
    msg.insert(msg.end(), info.begin(), info.end());
    msg.push_back(i);
    Digest t = HmacSha256(prk.data(), prk.size(), msg.data(), msg.size());
    block.assign(t.begin(), t.end());
    out.insert(out.end(), t.begin(), t.end());
  }
  out.resize(out_len);
  return out;
}

SessionKeys DeriveSessionKeys(const std::string& secret, const uint8_t* source_nonce, const uint8_t* target_nonce) {
  uint8_t salt[2 * kNonceSize];
  std::memcpy(salt, source_nonce, kNonceSize);
  std::memcpy(salt + kNonceSize, target_nonce, kNonceSize);
  auto ikm = reinterpret_cast<const uint8_t*>(secret.data());
  SessionKeys k;
  for (auto [keys, info] : {std::pair{&k.source_to_target, "kvt-migration source->target"},
                            std::pair{&k.target_to_source, "kvt-migration target->source"}}) {
    auto b = Hkdf(salt, sizeof salt, ikm, secret.size(), info, 28);
    std::copy(b.begin(), b.begin() + 16, keys->key.begin());
    std::copy(b.begin() + 16, b.end(), keys->iv.begin());
  }
  return k;
}

Status RecordCryptoAvailable() {
  const Libcrypto& c = Crypto();
  if (!c.error.empty()) return Error{ENOSYS, "migration stream encryption", c.error};
  return OkStatus();
}

SealedChannel::SealedChannel(Channel& inner) : inner_(inner) {}
SealedChannel::~SealedChannel() = default;

Status SealedChannel::Seal(const TrafficKeys& send, const TrafficKeys& recv) {
  auto ok = RecordCryptoAvailable();
  if (!ok.ok()) return ok;
  auto s = std::make_unique<Aead>(Crypto(), send, true);
  auto r = std::make_unique<Aead>(Crypto(), recv, false);
  if (auto e = s->Init(); !e.ok()) return e;
  if (auto e = r->Init(); !e.ok()) return e;
  send_ = std::move(s);
  recv_ = std::move(r);
  out_.resize(kRecordsPerWrite * (kMaxRecordPlaintext + kRecordOverhead));
  in_.resize(kRecordsPerWrite * (kMaxRecordPlaintext + kRecordOverhead));
  return OkStatus();
}

Result<size_t> SealedChannel::Writev(const iovec* iov, int n) {
  if (!sealed()) return inner_.Writev(iov, n);
  size_t used = 0, consumed = 0;
  int i = 0;
  size_t off = 0;  // into iov[i]
  for (size_t rec = 0; rec < kRecordsPerWrite && i < n; rec++) {
    uint8_t* header = out_.data() + used;
    uint8_t* body = header + kRecordHeader;
    size_t len = 0;
    while (i < n && len < kMaxRecordPlaintext) {
      size_t take = std::min(kMaxRecordPlaintext - len, iov[i].iov_len - off);
      std::memcpy(body + len, static_cast<const uint8_t*>(iov[i].iov_base) + off, take);
      len += take;
      off += take;
      if (off == iov[i].iov_len) {
        i++;
        off = 0;
      }
    }
    if (len == 0) break;
    body[len] = kApplicationData;  // TLS 1.3's inner content type
    PutHeader(header, len + 1 + kTag);
    auto s = send_->Seal(send_seq_++, header, body, len + 1, body + len + 1);
    if (!s.ok()) return s.error();
    used += kRecordHeader + len + 1 + kTag;
    consumed += len;
  }
  auto w = WriteBytes(inner_, out_.data(), used);
  if (!w.ok()) return w.error();
  return consumed;
}

Result<size_t> SealedChannel::NextRecord() {
  for (;;) {
    size_t avail = in_end_ - in_start_;
    if (avail >= kRecordHeader) {
      uint8_t* h = in_.data() + in_start_;
      size_t body_len = (size_t{h[3]} << 8) | h[4];
      if (h[0] != kApplicationData || h[1] != 3 || h[2] != 3 || body_len < 1 + kTag || body_len > kMaxRecordBody) {
        return Error{EBADMSG, "migration stream", "not a sealed record (is encryption on at both ends?)"};
      }
      if (avail >= kRecordHeader + body_len) {
        uint8_t* body = h + kRecordHeader;
        size_t len = body_len - kTag;
        if (!recv_->Open(recv_seq_++, h, body, len, body + len) || body[len - 1] != kApplicationData) {
          return Error{EBADMSG, "migration stream", "a record failed authentication (tampered, cut or reordered)"};
        }
        plain_pos_ = in_start_ + kRecordHeader;
        plain_end_ = plain_pos_ + len - 1;
        in_start_ += kRecordHeader + body_len;
        if (plain_end_ > plain_pos_) return plain_end_ - plain_pos_;
        continue;  // an empty record: nothing to serve
      }
    }
    if (in_start_ > 0 && in_.size() - in_start_ < kRecordHeader + kMaxRecordBody) {
      std::memmove(in_.data(), in_.data() + in_start_, avail);
      in_start_ = 0;
      in_end_ = avail;
    }
    iovec v{in_.data() + in_end_, in_.size() - in_end_};
    auto r = inner_.Readv(&v, 1);
    if (!r.ok()) return r.error();
    if (r.value() == 0) {
      if (avail == 0) return size_t{0};
      return Error{ECONNRESET, "recv", "connection closed in the middle of a record"};
    }
    in_end_ += r.value();
  }
}

Result<size_t> SealedChannel::Readv(const iovec* iov, int n) {
  if (!sealed()) return inner_.Readv(iov, n);
  size_t total = 0;
  for (int i = 0; i < n;) {
    if (plain_pos_ == plain_end_) {
      // Block for a record only when nothing was served yet; otherwise serve what is here.
      bool buffered = in_end_ - in_start_ >= kRecordHeader &&
                      in_end_ - in_start_ >= kRecordHeader + ((size_t{in_[in_start_ + 3]} << 8) | in_[in_start_ + 4]);
      if (total > 0 && !buffered) break;
      auto r = NextRecord();
      if (!r.ok()) return r.error();
      if (r.value() == 0) break;  // end of stream
    }
    size_t done = 0;
    while (i < n && plain_pos_ < plain_end_) {
      size_t take = std::min(iov[i].iov_len - done, plain_end_ - plain_pos_);
      std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + done, in_.data() + plain_pos_, take);
      plain_pos_ += take;
      done += take;
      total += take;
      if (done == iov[i].iov_len) {
        i++;
        done = 0;
      }
    }
    if (done > 0) break;  // iov[i] partly filled: Readv's contract lets the caller come back for the rest
  }
  return total;
}

}  // namespace kvmts::migration
