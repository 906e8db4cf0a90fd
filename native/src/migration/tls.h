// The migration stream's TLS: a real TLS 1.3 handshake (OpenSSL's libssl, openssl.h) on the migration socket, the
// source as client and the target as server, mutually authenticated with per-migration certificates that the two
// virt-handlers minted and exchanged (docs/decisions/0013, 0017). Each side accepts exactly one peer certificate, the
// one its handler gave it (pinning: byte for byte, within its validity), and nothing else: no CA, no names.
//
//   source (client)                                        target (server)
//     ClientHello (TLS 1.3 only, TLS_AES_128_GCM_SHA256) -->
//                                 <-- ServerHello, {EncryptedExtensions, CertificateRequest, Certificate,
//                                      CertificateVerify, Finished}       the source checks the pin, else alert
//     {Certificate, CertificateVerify, Finished}         -->              the target checks the pin, else alert
//     ==== application data: the migration protocol (stream.h), from its Hello on ====
//
// After the handshake the records go through the kernel (kTLS, SSL_OP_ENABLE_KTLS) when the kernel took the keys,
// else through our user-space record layer (tls_records.h) keyed with the handshake's traffic secrets, which writes
// records straight from guest memory, 16 per system call. No session tickets (one connection per migration); no
// key updates (a migration moves far less than AES-GCM's limit per key).
#pragma once

#include <memory>
#include <string>

#include "migration/channel.h"
#include "migration/tls_records.h"

namespace kvmts::migration {

/** One side's certificate and private key (PEM), minted for this migration by its virt-handler. */
struct TlsIdentity {
  std::string certificate_pem;
  std::string key_pem;
};

/** One side's TLS for a migration: its identity, and the one certificate it accepts from the peer (PEM). */
struct PinnedTls {
  TlsIdentity me;
  std::string peer_certificate_pem;
};

/** Who carries the records after the handshake (kAuto: the kernel when it took the keys, else user space). */
enum class TlsRecords { kAuto, kOpenSsl, kUserSpace };

/** Whether a TLS handshake can run here (libssl.so.3 loads); the error says what to install otherwise. */
Status TlsAvailable();

/** Whether `pem` is one X.509 certificate OpenSSL reads (a pinned peer certificate, before any connection). */
Status CheckCertificatePem(const std::string& pem);

/**
 * Target side, before the handshake: peeks at the source's first bytes on `fd`. A plaintext migration Hello where
 * TLS is expected (`tls`), or a TLS ClientHello where a plaintext stream is, is answered with a plaintext Abandon
 * naming KubeVirt's migrations.disableTLS (the source reports it) and refused with the same reason.
 */
Status CheckStreamMode(int fd, bool tls);

/**
 * After refusing a peer (an alert, a plaintext Abandon): half-closes `fd` and reads what the peer still sends, for
 * at most `ms`, so that closing it later sends FIN and not RST, and the peer reads our last words before the end.
 */
void LingerAfterRefusal(int fd, int ms = 1000);

/** What the handshake settled. */
struct TlsInfo {
  std::string cipher;         // "TLS_AES_128_GCM_SHA256"
  bool kernel_send = false;   // kTLS carries the records we write
  bool kernel_recv = false;   // kTLS opens the records we read
  bool user_space = false;    // tls_records.h carries both directions
};

/**
 * A Channel over a connected socket that is plain until Handshake() and TLS after it. Safe to Shutdown() from
 * another thread.
 */
class TlsChannel : public Channel {
 public:
  explicit TlsChannel(int fd);
  ~TlsChannel() override;
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  /**
   * Runs the TLS 1.3 handshake as client (the source) or server (the target), presenting `me`, accepting only the
   * certificate `peer_pem`. On failure the error names the cause: the peer's certificate is not the pinned one, the
   * peer refused ours (its alert), the peer does not speak TLS, or the target's reason when it abandoned in plaintext
   * (a target with migrations.disableTLS set).
   */
  Status Handshake(bool server, const TlsIdentity& me, const std::string& peer_pem,
                   TlsRecords records = TlsRecords::kAuto);
  bool active() const { return active_; }
  const TlsInfo& info() const { return info_; }
  /** User-space records: whether large reads are pipelined on a worker thread (tls_records.h; default on with more
   *  than one CPU). */
  void SetPipelined(bool on) { records_.SetPipelined(on); }

  Result<size_t> Writev(const iovec* iov, int n) override;
  Result<size_t> Readv(const iovec* iov, int n) override;
  void Shutdown() override { fd_.Shutdown(); }
  int fd() const { return fd_.fd(); }

  struct Handshaking;  // what OpenSSL's callbacks record during Handshake() (tls.cc)

 private:
  Status Fail(Handshaking& h, bool server, int rc);

  FdChannel fd_;
  TlsRecordChannel records_;  // over fd_: the user-space record layer
  void* ssl_ = nullptr;       // the handshake's SSL; after it, used only when OpenSSL carries the records
  void* ctx_ = nullptr;
  bool active_ = false;
  bool openssl_records_ = false;
  TlsInfo info_;
};

}  // namespace kvmts::migration
