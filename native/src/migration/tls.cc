#include "migration/tls.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "migration/crc32c.h"
#include "migration/openssl.h"
#include "migration/stream.h"

namespace kvmts::migration {
namespace {

constexpr const char* kCipherSuite = "TLS_AES_128_GCM_SHA256";
constexpr size_t kSecretBytes = 32;  // SHA-256 suites' traffic secrets

std::string Subject(const ossl::Library& l, void* cert) {
  char buf[256] = {0};
  l.X509_NAME_oneline(l.X509_get_subject_name(cert), buf, sizeof buf);
  return buf[0] ? std::string("a certificate for ") + buf : std::string("a certificate without subject");
}

// Frees an OpenSSL object with its own free function when it goes out of scope.
template <typename F>
struct Owned {
  void* p;
  F free;
  ~Owned() {
    if (p != nullptr) free(p);
  }
};

Result<void*> ReadPem(const ossl::Library& l, const std::string& pem, bool key, const char* what) {
  void* bio = l.BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return Error{ENOMEM, "BIO_new_mem_buf", what};
  void* out = key ? l.PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)
                  : l.PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  l.BIO_free(bio);
  if (out == nullptr) {
    ossl::TakeErrors();
    const char* expected = key ? " is not a PEM private key" : " is not a PEM certificate";
    return Error{EINVAL, "migration TLS", std::string(what) + expected};
  }
  return out;
}

std::vector<uint8_t> Unhex(const std::string& s) {
  std::vector<uint8_t> out;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i + 1 < s.size(); i += 2) {
    int hi = nibble(s[i]), lo = nibble(s[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

}  // namespace

/** What the callbacks of one handshake record (the SSL's ex_data 0 points here while it runs). */
struct TlsChannel::Handshaking {
  void* pinned = nullptr;  // the peer's certificate (X509*)
  std::string refused;     // why the peer's certificate was refused
  std::string client_secret, server_secret;  // application traffic secrets (hex), from the key log callback
  uint8_t first_header[kRecordHeader] = {0};  // the first record header the peer sent
  bool got_header = false;
};

namespace {

TlsChannel::Handshaking* StateOf(const ossl::Library& l, const void* ssl) {
  return static_cast<TlsChannel::Handshaking*>(l.SSL_get_ex_data(ssl, 0));
}

// Pinning: the peer's certificate must be, byte for byte, the one given (it is the only trust anchor, partial chains
// allowed, so OpenSSL also checks its validity period); any other certificate is rejected here.
int Verify(int preverify_ok, void* store) {
  const ossl::Library& l = ossl::Get();
  void* ssl = l.X509_STORE_CTX_get_ex_data(store, l.SSL_get_ex_data_X509_STORE_CTX_idx());
  auto* h = StateOf(l, ssl);
  if (h == nullptr) return 0;
  void* cert = l.X509_STORE_CTX_get_current_cert(store);
  if (l.X509_STORE_CTX_get_error_depth(store) == 0 && cert != nullptr && l.X509_cmp(cert, h->pinned) != 0) {
    if (h->refused.empty()) {
      h->refused = "presented " + Subject(l, cert) + ", not the one its virt-handler gave for this migration";
    }
    l.X509_STORE_CTX_set_error(store, ossl::kX509VErrCertRejected);
    return 0;
  }
  if (!preverify_ok && h->refused.empty()) {
    h->refused = std::string("presented the pinned certificate, which failed verification: ") +
                 l.X509_verify_cert_error_string(l.X509_STORE_CTX_get_error(store));
  }
  return preverify_ok;
}

void KeyLog(const void* ssl, const char* line) {
  auto* h = StateOf(ossl::Get(), ssl);
  if (h == nullptr) return;
  std::string s(line);
  auto value = [&s]() { return s.substr(s.rfind(' ') + 1); };
  if (s.rfind("CLIENT_TRAFFIC_SECRET_0 ", 0) == 0) h->client_secret = value();
  if (s.rfind("SERVER_TRAFFIC_SECRET_0 ", 0) == 0) h->server_secret = value();
}

void OnMessage(int write_p, int, int content_type, const void* buf, size_t len, void* ssl, void*) {
  auto* h = StateOf(ossl::Get(), ssl);
  if (h == nullptr || write_p != 0 || content_type != ossl::kSsl3RtHeader || h->got_header || len < kRecordHeader) {
    return;
  }
  std::memcpy(h->first_header, buf, kRecordHeader);
  h->got_header = true;
}

// A target that does not speak TLS answers a ClientHello with a plaintext Abandon frame (session.cc); OpenSSL read
// the first kRecordHeader bytes of it as a record header. The rest is still in the socket: read it, give its reason.
Status PlainAbandon(FdChannel& fd, const uint8_t* first) {
  uint8_t raw[kHeaderSize];
  std::memcpy(raw, first, kRecordHeader);
  auto r = ReadBytes(fd, raw + kRecordHeader, kHeaderSize - kRecordHeader);
  FrameHeader h = DecodeHeader(raw);
  if (r.ok()) r = ValidateHeader(h);
  if (!r.ok() || h.command != static_cast<uint16_t>(Command::kAbandon)) {
    return ProtocolError("the target answered the TLS handshake with something else than TLS");
  }
  std::vector<uint8_t> payload(h.length);
  r = ReadBytes(fd, payload.data(), payload.size());
  if (!r.ok() || Crc32c(HeaderCrc(h), payload.data(), payload.size()) != h.crc) {
    return ProtocolError("the target answered the TLS handshake with a damaged plaintext frame");
  }
  auto a = DecodeAbandon(payload.data(), payload.size());
  return Error{ECONNABORTED, "migration", "target abandoned: " + (a.ok() ? a.value().reason : "?")};
}

}  // namespace

Status TlsAvailable() { return ossl::Available(); }

void LingerAfterRefusal(int fd, int ms) {
  shutdown(fd, SHUT_WR);
  uint8_t sink[16384];
  for (int waited = 0; waited < ms; waited += 100) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) == 0) continue;
    ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
  }
}

Status CheckStreamMode(int fd, bool tls) {
  uint8_t first[2] = {0, 0};
  ssize_t got;
  do {
    got = recv(fd, first, sizeof first, MSG_PEEK | MSG_WAITALL);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return Error{errno, "recv", "migration stream"};
  if (got < 2) return OkStatus();  // closed early: the handshake that follows says so
  bool client_hello = first[0] == 0x16 && first[1] == 0x03;  // a TLS handshake record, version 3.x
  bool plain_hello = first[0] == static_cast<uint8_t>(Command::kHello) && first[1] == 0;
  std::string why;
  if (tls && plain_hello) {
    why = "the source sent an unencrypted migration stream and this target expects TLS: KubeVirt's "
          "migrations.disableTLS must be the same at both ends";
  } else if (!tls && client_hello) {
    why = "the source speaks TLS and this target expects an unencrypted stream (migrations.disableTLS): KubeVirt's "
          "migrations.disableTLS must be the same at both ends";
  } else {
    return OkStatus();
  }
  auto payload = EncodeAbandon(Abandon{1, "target: " + why});
  auto frame = EncodeFrame(Command::kAbandon, payload.data(), payload.size());
  (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
  return Error{EPROTO, "migration", why};
}

Status CheckCertificatePem(const std::string& pem) {
  auto ok = ossl::Available();
  if (!ok.ok()) return ok;
  const ossl::Library& l = ossl::Get();
  auto c = ReadPem(l, pem, false, "the peer's certificate");
  if (!c.ok()) return c.error();
  l.X509_free(c.value());
  return OkStatus();
}

TlsChannel::TlsChannel(int fd) : fd_(fd), records_(fd_) {}

TlsChannel::~TlsChannel() {
  if (ssl_ == nullptr && ctx_ == nullptr) return;
  const ossl::Library& l = ossl::Get();
  if (ssl_ != nullptr) l.SSL_free(ssl_);
  if (ctx_ != nullptr) l.SSL_CTX_free(ctx_);
}

Status TlsChannel::Handshake(bool server, const TlsIdentity& me, const std::string& peer_pem, TlsRecords records) {
  auto ok = ossl::Available();
  if (!ok.ok()) return ok;
  if (ctx_ != nullptr) return Error{EALREADY, "migration TLS", "handshake already done"};
  const ossl::Library& l = ossl::Get();
  l.ERR_clear_error();
  auto cert = ReadPem(l, me.certificate_pem, false, "this side's certificate");
  if (!cert.ok()) return cert.error();
  Owned<decltype(l.X509_free)> cert_owned{cert.value(), l.X509_free};
  auto key = ReadPem(l, me.key_pem, true, "this side's key");
  if (!key.ok()) return key.error();
  Owned<decltype(l.EVP_PKEY_free)> key_owned{key.value(), l.EVP_PKEY_free};
  auto pinned = ReadPem(l, peer_pem, false, "the peer's certificate");
  if (!pinned.ok()) return pinned.error();
  Owned<decltype(l.X509_free)> pinned_owned{pinned.value(), l.X509_free};

  ctx_ = l.SSL_CTX_new(l.TLS_method());
  if (ctx_ == nullptr) return Error{ENOMEM, "SSL_CTX_new", ossl::TakeErrors()};
  uint64_t options = ossl::kSslOpNoTicket | (records == TlsRecords::kUserSpace ? 0 : ossl::kSslOpEnableKtls);
  void* store = l.SSL_CTX_get_cert_store(ctx_);
  if (l.SSL_CTX_ctrl(ctx_, ossl::kSslCtrlSetMinProto, ossl::kTls13Version, nullptr) != 1 ||
      l.SSL_CTX_ctrl(ctx_, ossl::kSslCtrlSetMaxProto, ossl::kTls13Version, nullptr) != 1 ||
      l.SSL_CTX_set_ciphersuites(ctx_, kCipherSuite) != 1 || l.SSL_CTX_set_num_tickets(ctx_, 0) != 1 ||
      l.X509_STORE_add_cert(store, pinned.value()) != 1 ||
      l.X509_STORE_set_flags(store, ossl::kX509VFlagPartialChain) != 1) {
    return Error{EPROTO, "migration TLS setup", ossl::TakeErrors()};
  }
  l.SSL_CTX_set_options(ctx_, options);
  if (l.SSL_CTX_use_certificate(ctx_, cert.value()) != 1 || l.SSL_CTX_use_PrivateKey(ctx_, key.value()) != 1 ||
      l.SSL_CTX_check_private_key(ctx_) != 1) {
    ossl::TakeErrors();
    return Error{EINVAL, "migration TLS", "this side's certificate and key do not belong together"};
  }
  l.SSL_CTX_set_verify(ctx_, ossl::kSslVerifyPeer | ossl::kSslVerifyFailIfNoPeerCert, Verify);
  l.SSL_CTX_set_keylog_callback(ctx_, KeyLog);
  ssl_ = l.SSL_new(ctx_);
  if (ssl_ == nullptr || l.SSL_set_fd(ssl_, fd_.fd()) != 1) return Error{ENOMEM, "SSL_new", ossl::TakeErrors()};
  Handshaking h;
  h.pinned = pinned.value();
  l.SSL_set_ex_data(ssl_, 0, &h);
  l.SSL_set_msg_callback(ssl_, OnMessage);
  int rc = server ? l.SSL_accept(ssl_) : l.SSL_connect(ssl_);
  Status result = rc == 1 ? OkStatus() : Fail(h, server, rc);
  l.SSL_set_msg_callback(ssl_, nullptr);
  l.SSL_set_ex_data(ssl_, 0, nullptr);
  if (!result.ok()) return result;

  info_.cipher = l.SSL_CIPHER_get_name(l.SSL_get_current_cipher(ssl_));
  info_.kernel_send = l.BIO_ctrl(l.SSL_get_wbio(ssl_), ossl::kBioCtrlGetKtlsSend, 0, nullptr) == 1;
  info_.kernel_recv = l.BIO_ctrl(l.SSL_get_rbio(ssl_), ossl::kBioCtrlGetKtlsRecv, 0, nullptr) == 1;
  if (l.SSL_version(ssl_) != ossl::kTls13Version || info_.cipher != kCipherSuite) {
    return Error{EPROTO, "migration TLS", "the peer settled on " + info_.cipher + ", not TLS 1.3 " + kCipherSuite};
  }
  bool kernel = info_.kernel_send || info_.kernel_recv;
  if (records == TlsRecords::kOpenSsl || (records == TlsRecords::kAuto && kernel)) {
    openssl_records_ = true;
  } else {
    // Our record layer takes over where OpenSSL stopped: nothing may be left in OpenSSL's buffers (no read-ahead;
    // the source speaks first after the handshake, and the target sends no session tickets).
    auto c = Unhex(h.client_secret), s = Unhex(h.server_secret);
    if (l.SSL_has_pending(ssl_) != 0 || c.size() != kSecretBytes || s.size() != kSecretBytes) {
      return Error{EPROTO, "migration TLS", "the handshake left no usable traffic secrets"};
    }
    TrafficKeys client = TrafficKeysFrom(c.data(), c.size()), srv = TrafficKeysFrom(s.data(), s.size());
    auto r = server ? records_.Start(srv, client) : records_.Start(client, srv);
    if (!r.ok()) return r;
    info_.user_space = true;
  }
  active_ = true;
  return OkStatus();
}

Status TlsChannel::Fail(Handshaking& h, bool server, int rc) {
  const ossl::Library& l = ossl::Get();
  int err = errno;
  int e = l.SSL_get_error(ssl_, rc);
  std::string queued = ossl::TakeErrors();
  const char* peer = server ? "the source" : "the target";
  const char* op = "migration TLS handshake";
  if (!h.refused.empty()) return Error{EACCES, op, std::string(peer) + " " + h.refused};
  if (!server && h.got_header && h.first_header[0] == static_cast<uint8_t>(Command::kAbandon) &&
      h.first_header[1] == 0) {
    return PlainAbandon(fd_, h.first_header);
  }
  if (e == ossl::kSslErrorWantRead || e == ossl::kSslErrorWantWrite) {
    return Error{ETIMEDOUT, op, std::string(peer) + " did not answer within the I/O timeout"};
  }
  if (queued.find(" alert ") != std::string::npos) {
    return Error{EACCES, op, std::string(peer) + " refused this side's certificate or handshake (" + queued + ")"};
  }
  // The first bytes back were no TLS record (a peer of another protocol), or OpenSSL says as much.
  bool not_tls = h.got_header && (h.first_header[0] < 0x14 || h.first_header[0] > 0x17);
  for (const char* sign : {"wrong version number", "packet length too long", "record layer failure"}) {
    not_tls = not_tls || queued.find(sign) != std::string::npos;
  }
  if (not_tls) {
    return Error{EPROTO, op,
                 std::string(peer) + " does not speak TLS (" + (queued.empty() ? "no TLS record" : queued) +
                     "): KubeVirt's migrations.disableTLS must be the same at both ends"};
  }
  if (e == ossl::kSslErrorSyscall) {
    if (err == 0 || queued.empty()) {
      return Error{ECONNRESET, op, std::string(peer) + " closed the connection during the TLS handshake"};
    }
    return Error{err, op, queued};
  }
  return Error{EPROTO, op, queued.empty() ? std::string("failed") : queued};
}

Result<size_t> TlsChannel::Writev(const iovec* iov, int n) {
  if (!active_) return fd_.Writev(iov, n);
  if (!openssl_records_) return records_.Writev(iov, n);
  // kTLS sends: what is written to the socket goes out as application data records, encrypted by the kernel, so
  // the whole iov (guest memory) goes in one sendmsg, as OpenSSL's own SSL_write would write it there piece by piece.
  if (info_.kernel_send) return fd_.Writev(iov, n);
  const ossl::Library& l = ossl::Get();
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    if (iov[i].iov_len == 0) continue;
    size_t written = 0;
    int rc = l.SSL_write_ex(ssl_, iov[i].iov_base, iov[i].iov_len, &written);
    if (rc != 1) {
      int err = errno;
      int e = l.SSL_get_error(ssl_, rc);
      if (total > 0) return total;
      if (e == ossl::kSslErrorSyscall && err != 0) return Error{err, "SSL_write", "migration stream"};
      return Error{EPROTO, "SSL_write", ossl::TakeErrors()};
    }
    total += written;
  }
  return total;
}

Result<size_t> TlsChannel::Readv(const iovec* iov, int n) {
  if (!active_) return fd_.Readv(iov, n);
  if (!openssl_records_) return records_.Readv(iov, n);
  const ossl::Library& l = ossl::Get();
  int i = 0;
  while (i < n && iov[i].iov_len == 0) i++;
  if (i == n) return size_t{0};
  size_t got = 0;
  int rc = l.SSL_read_ex(ssl_, iov[i].iov_base, iov[i].iov_len, &got);
  if (rc == 1) return got;
  int err = errno;
  int e = l.SSL_get_error(ssl_, rc);
  if (e == ossl::kSslErrorZeroReturn) return size_t{0};
  std::string queued = ossl::TakeErrors();
  if (e == ossl::kSslErrorSyscall && queued.empty()) {
    if (err == 0) return Error{ECONNRESET, "recv", "connection closed by peer"};
    return Error{err, "SSL_read", "migration stream"};
  }
  if (e == ossl::kSslErrorWantRead) return Error{EAGAIN, "SSL_read", "migration stream"};
  return Error{queued.find(" alert ") != std::string::npos ? ECONNABORTED : EBADMSG, "SSL_read", queued};
}

}  // namespace kvmts::migration
