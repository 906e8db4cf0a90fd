// The migration stream's encryption: after the handshake has authenticated both sides, every byte in both
// directions travels in records protected as TLS 1.3 protects them (RFC 8446 §5.2: AES-128-GCM, nonce = iv XOR the
// record's sequence number, the 5-byte record header as additional data, an inner content type byte), under keys
// both sides derive from the per-migration secret and the handshake's two nonces (HKDF-SHA-256, RFC 5869):
//
//   prk                = HKDF-Extract(salt = source nonce | target nonce, ikm = secret)
//   (nonces: 32 bytes each)
//   key | iv (16 | 12) = HKDF-Expand(prk, "kvt-migration source->target" or "... target->source", 28)
//
// Fresh nonces make fresh keys for every connection, so a key and nonce pair is never used twice. A record that
// fails authentication (tampered, replayed, reordered, cut) ends the stream with EBADMSG. AES-GCM is OpenSSL's
// libcrypto (libcrypto.so.3), loaded at first use with its own symbol scope (docs/decisions/0013); the QEMU relay
// (apps/virt-launcher migration-relay.ts) speaks the same record format through node:crypto.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "migration/channel.h"

namespace kvmts::migration {

/** One direction's AES-128-GCM key and static IV. */
struct TrafficKeys {
  std::array<uint8_t, 16> key{};
  std::array<uint8_t, 12> iv{};
};

/** Both directions' keys of one connection. */
struct SessionKeys {
  TrafficKeys source_to_target;
  TrafficKeys target_to_source;
};

/** HKDF-SHA-256 (RFC 5869): Extract then Expand to `out_len` bytes (at most 255 * 32). */
std::vector<uint8_t> Hkdf(const uint8_t* salt, size_t salt_len, const uint8_t* ikm, size_t ikm_len,
                          const std::string& info, size_t out_len);

/** The keys of a connection from its secret and the handshake's nonces (see the header comment). */
SessionKeys DeriveSessionKeys(const std::string& secret, const uint8_t* source_nonce, const uint8_t* target_nonce);

/** Largest plaintext of one record (TLS's 2^14), and a record's overhead: header, inner type, tag. */
inline constexpr size_t kMaxRecordPlaintext = 16384;
inline constexpr size_t kRecordHeader = 5;
inline constexpr size_t kRecordOverhead = kRecordHeader + 1 + 16;

/** Whether AES-GCM is available here (libcrypto.so.3 loads); the error says what to install otherwise. */
Status RecordCryptoAvailable();

class Aead;

/**
 * A Channel that is plain until Seal() and encrypted after it. Writes are cut into records (several per system
 * call); reads are buffered and decrypted in place. Safe to Shutdown() from another thread, like its inner channel.
 */
class SealedChannel : public Channel {
 public:
  explicit SealedChannel(Channel& inner);
  ~SealedChannel() override;
  SealedChannel(const SealedChannel&) = delete;
  SealedChannel& operator=(const SealedChannel&) = delete;

  /** From now on, writes are sealed with `send` and reads opened with `recv`. */
  Status Seal(const TrafficKeys& send, const TrafficKeys& recv);
  bool sealed() const { return send_ != nullptr; }

  Result<size_t> Writev(const iovec* iov, int n) override;
  Result<size_t> Readv(const iovec* iov, int n) override;
  void Shutdown() override { inner_.Shutdown(); }

 private:
  /** Reads and opens the next record into [plain_pos_, plain_end_) of in_; 0 at a clean end of stream. */
  Result<size_t> NextRecord();

  Channel& inner_;
  std::unique_ptr<Aead> send_, recv_;
  uint64_t send_seq_ = 0, recv_seq_ = 0;
  std::vector<uint8_t> out_;  // sealed records waiting to be written
  std::vector<uint8_t> in_;   // raw bytes read; the open record's plaintext is decrypted in place
  size_t in_start_ = 0, in_end_ = 0;
  size_t plain_pos_ = 0, plain_end_ = 0;
};

}  // namespace kvmts::migration
