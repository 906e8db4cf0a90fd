// TLS 1.3's record layer in user space (RFC 8446 §5.2, TLS_AES_128_GCM_SHA256): what the kernel's kTLS does once
// OpenSSL hands it the keys after the handshake (tls.h), for kernels without kTLS (this machine's). The keys are the
// handshake's application traffic keys, so the bytes on the wire are TLS's own: a record written here is read by
// SSL_read on the other end and the other way round (tls_tests.cc checks both directions).
//
//   record  = 0x17 0x03 0x03 | u16 length | AES-128-GCM(content | inner type) | tag (16)
//   nonce   = iv XOR sequence number (u64 big-endian, right-aligned), the 5-byte header as additional data
//   key, iv = HKDF-Expand-Label(traffic secret, "key" | "iv", "", 16 | 12)   (TrafficKeysFrom)
//
// Writes encrypt straight from the caller's buffers (guest memory) into records, several per system call; reads
// decrypt a record straight into the caller's buffers when it fits there whole, in place otherwise. A large read (a
// frame's page data) is pipelined: this thread receives records while a worker thread opens the ones received
// before it, so receiving and decrypting run side by side on a target (Opener below). A record that fails
// authentication (tampered, replayed, reordered, cut) ends the stream with EBADMSG; a TLS alert from the peer ends it
// with the alert's name (close_notify is the end of the stream).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "migration/channel.h"

namespace kvmts::migration {

/** One direction's AES-128-GCM key and static IV. */
struct TrafficKeys {
  std::array<uint8_t, 16> key{};
  std::array<uint8_t, 12> iv{};
};

/** HKDF-Expand-Label (RFC 8446 §7.1) over SHA-256 with an empty context; `out_len` <= 32. */
std::vector<uint8_t> HkdfExpandLabel(const uint8_t* secret, size_t secret_len, const std::string& label,
                                     size_t out_len);

/** The record keys of a TLS 1.3 application traffic secret (32 bytes, SHA-256 suites). */
TrafficKeys TrafficKeysFrom(const uint8_t* traffic_secret, size_t len);

/** Largest plaintext of one record (TLS's 2^14), and a record's overhead: header, inner type, tag. */
inline constexpr size_t kMaxRecordPlaintext = 16384;
inline constexpr size_t kRecordHeader = 5;
inline constexpr size_t kRecordOverhead = kRecordHeader + 1 + 16;

class Aead;

/**
 * A Channel that is plain until Start() and carries TLS 1.3 records after it. Safe to Shutdown() from another
 * thread, like its inner channel.
 */
class TlsRecordChannel : public Channel {
 public:
  explicit TlsRecordChannel(Channel& inner);
  ~TlsRecordChannel() override;
  TlsRecordChannel(const TlsRecordChannel&) = delete;
  TlsRecordChannel& operator=(const TlsRecordChannel&) = delete;

  /** From now on, writes are sealed with `send` and reads opened with `recv`, both from sequence number 0. */
  Status Start(const TrafficKeys& send, const TrafficKeys& recv);
  /** Whether large reads are pipelined on a worker thread (default: with at least kPipelineCpus CPUs). */
  void SetPipelined(bool on) { pipeline_ = on; }
  /** A target already keeps two threads busy (receiving, faulting memory in), its source one: a third on the
   *  target pays only where the machine has the cores for it. On 2 CPUs it cost 10% (stream_bench, ADR 0013). */
  static constexpr unsigned kPipelineCpus = 4;
  bool started() const { return send_ != nullptr; }

  Result<size_t> Writev(const iovec* iov, int n) override;
  Result<size_t> Readv(const iovec* iov, int n) override;
  void Shutdown() override { inner_.Shutdown(); }

 private:
  /** Makes a whole record available at in_start_ (reading as needed unless `block` is false); false at a clean end
   *  of stream, or when not blocking and no whole record is buffered. */
  Result<bool> Buffer(bool block);
  /** Opens the buffered record in place into [plain_pos_, plain_end_). */
  Status OpenInPlace();
  /** Opens the buffered record straight into iov[*i] at *off onwards (its content fits there); advances both. */
  Status OpenInto(const iovec* iov, int n, int* i, size_t* off, size_t content);
  /** The error for a record of inner type `type` with `content` (an alert, a handshake message). */
  Status NotData(uint8_t type, const uint8_t* content, size_t len);
  /** A large read: receives whole records into slots_ while opener_ opens them into iov from (*i, *off) on; stops
   *  at a record that does not fit there whole, leaving its bytes in in_. Returns the bytes delivered. */
  Result<size_t> ReadPipelined(const iovec* iov, int n, int* i, size_t* off);

 public:
  class Opener;  // the worker thread of pipelined reads (tls_records.cc)

 private:
  Channel& inner_;
  std::unique_ptr<Aead> send_, recv_;
  uint64_t send_seq_ = 0, recv_seq_ = 0;
  std::vector<uint8_t> out_;  // sealed records waiting to be written
  std::vector<uint8_t> in_;   // raw bytes read; a record opened in place leaves its plaintext here
  size_t in_start_ = 0, in_end_ = 0;
  size_t plain_pos_ = 0, plain_end_ = 0;
  bool eof_ = false;  // close_notify received
  bool pipeline_ = std::thread::hardware_concurrency() >= kPipelineCpus;
  std::vector<std::vector<uint8_t>> slots_;  // raw records of pipelined reads
  std::unique_ptr<Opener> opener_;
};

}  // namespace kvmts::migration
