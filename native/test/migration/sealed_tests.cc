// The sealed (encrypted) migration stream: HKDF against RFC 5869, the record format against the vector the
// TypeScript implementation checks too (sealed-vector.txt; libs/migration/src/seal.test.ts), round
// trips in odd pieces, and every kind of damage a network peer could do refused with an error, never served.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "migration/incoming.h"
#include "migration/outgoing.h"
#include "migration/sealed_channel.h"
#include "test_util.h"

using namespace kvmts;
using namespace kvmts::migration;

namespace {

// Keys of the shared vector: secret "kvt-shared-vector", source nonce 32 x 0x01, target nonce 32 x 0x02.
SessionKeys VectorKeys() {
  std::vector<uint8_t> s(kNonceSize, 1), t(kNonceSize, 2);
  return DeriveSessionKeys("kvt-shared-vector", s.data(), t.data());
}

// Seals `chunks` (one Writev each) source->target into memory and returns the wire bytes.
std::vector<uint8_t> SealToMemory(const std::vector<std::string>& chunks, const SessionKeys& k) {
  MemoryChannel mem(nullptr, 0);
  SealedChannel ch(mem);
  CHECK(ch.Seal(k.source_to_target, k.target_to_source).ok());
  for (const std::string& c : chunks) CHECK(WriteBytes(ch, c.data(), c.size()).ok());
  return mem.written;
}

// Opens `wire` as the target would; returns the plaintext, or the error.
Result<std::string> OpenFromMemory(const std::vector<uint8_t>& wire, const SessionKeys& k, size_t max_read = 0) {
  MemoryChannel mem(wire.data(), wire.size(), max_read);
  SealedChannel ch(mem);
  CHECK(ch.Seal(k.target_to_source, k.source_to_target).ok());
  std::string out;
  char buf[1000];
  for (;;) {
    iovec v{buf, sizeof buf};
    auto r = ch.Readv(&v, 1);
    if (!r.ok()) return r.error();
    if (r.value() == 0) return out;
    out.append(buf, r.value());
  }
}

}  // namespace

TEST(hkdf_sha256_matches_rfc_5869_test_case_1) {
  auto ikm = std::vector<uint8_t>(22, 0x0b);
  auto salt = mtest::Unhex("000102030405060708090a0b0c");
  auto info = mtest::Unhex("f0f1f2f3f4f5f6f7f8f9");
  auto okm = Hkdf(salt.data(), salt.size(), ikm.data(), ikm.size(), std::string(info.begin(), info.end()), 42);
  CHECK_EQ(mtest::Hex(okm.data(), okm.size()),
           std::string("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"));
}

// `migration_tests --sealed-vector`: the keys and records of the shared vector (sealed-vector.txt, checked by
// test/migration.test.ts and, against the TypeScript implementation, by libs/migration seal.test.ts).
std::string SealedVectorText() {
  SessionKeys k = VectorKeys();
  auto wire = SealToMemory({"kvt", "migration"}, k);
  return "s2t-key " + mtest::Hex(k.source_to_target.key.data(), 16) + "\n" +
         "s2t-iv " + mtest::Hex(k.source_to_target.iv.data(), 12) + "\n" +
         "t2s-key " + mtest::Hex(k.target_to_source.key.data(), 16) + "\n" +
         "t2s-iv " + mtest::Hex(k.target_to_source.iv.data(), 12) + "\n" +
         "records " + mtest::Hex(wire.data(), wire.size()) + "\n";
}

TEST(sealed_stream_round_trips_in_odd_pieces_and_hides_the_plaintext) {
  SessionKeys k = VectorKeys();
  std::mt19937 rng(7);
  std::string data(300000, '\0');
  for (char& c : data) c = static_cast<char>(rng() % 8 == 0 ? 'A' : rng());
  std::vector<std::string> chunks;
  for (size_t at = 0; at < data.size();) {
    size_t n = std::min<size_t>(data.size() - at, 1 + rng() % 70000);
    chunks.push_back(data.substr(at, n));
    at += n;
  }
  auto wire = SealToMemory(chunks, k);
  size_t records = 0;
  for (const std::string& c : chunks) records += (c.size() + kMaxRecordPlaintext - 1) / kMaxRecordPlaintext;
  CHECK_EQ(wire.size(), data.size() + records * kRecordOverhead);
  CHECK(std::search(wire.begin(), wire.end(), data.begin() + 1000, data.begin() + 1032) == wire.end());
  auto plain = OpenFromMemory(wire, k, 777);  // the reader gets the wire in 777-byte pieces
  CHECK(plain.ok());
  CHECK(plain.value() == data);
}

TEST(sealed_stream_refuses_tampered_reordered_cut_foreign_and_plain_input) {
  SessionKeys k = VectorKeys();
  std::string big(40000, 'x');  // three records
  auto wire = SealToMemory({big}, k);
  auto flipped = wire;
  flipped[100] ^= 1;
  CHECK_EQ(OpenFromMemory(flipped, k).error().err, EBADMSG);
  auto swapped = wire;  // the first two (full, equal-length) records change places
  size_t rec = kMaxRecordPlaintext + kRecordOverhead;
  std::swap_ranges(swapped.begin(), swapped.begin() + rec, swapped.begin() + rec);
  CHECK_EQ(OpenFromMemory(swapped, k).error().err, EBADMSG);
  auto cut = std::vector<uint8_t>(wire.begin(), wire.end() - 10);
  CHECK_EQ(OpenFromMemory(cut, k).error().err, ECONNRESET);
  std::vector<uint8_t> other_nonce(kNonceSize, 9), t(kNonceSize, 2);
  SessionKeys foreign = DeriveSessionKeys("kvt-shared-vector", other_nonce.data(), t.data());
  CHECK_EQ(OpenFromMemory(wire, foreign).error().err, EBADMSG);
  std::vector<uint8_t> plain(200, 0x4b);  // a plain frame where a record should be
  auto r = OpenFromMemory(plain, k);
  CHECK_EQ(r.error().err, EBADMSG);
  CHECK(r.error().detail.find("not a sealed record") != std::string::npos);
  std::vector<uint8_t> huge = {0x17, 3, 3, 0xff, 0xff};  // a length over TLS's record limit
  huge.resize(70000);
  CHECK_EQ(OpenFromMemory(huge, k).error().err, EBADMSG);
}

TEST(sealed_session_moves_the_guest_and_a_plain_peer_fails_cleanly) {
  for (bool target_encrypts : {true, false}) {
    std::vector<uint8_t> src(64 * 4096), dst(64 * 4096, 0);
    std::mt19937 rng(3);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    FdChannel a(sv[0]), b(sv[1]);
    SealedChannel sa(a), sb(b);
    Status target = OkStatus();
    std::thread t([&] {
      IncomingMigration in(sb, RamLayout({{0, dst.size(), dst.data(), false}}), "k", true, SystemRandom);
      if (target_encrypts) in.EncryptWith(&sb);
      target = in.ReceiveUntilComplete();
      if (target.ok()) target = in.ConfirmResumed();
      if (!target.ok()) b.Shutdown();
    });
    OutgoingMigration out(sa, RamLayout({{0, src.size(), src.data(), false}}), "k", SystemRandom);
    out.EncryptWith(&sa);
    Status s = out.Handshake();
    if (s.ok()) s = out.SendRanges({{0, src.size()}}, SendOptions{});
    if (s.ok()) s = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
    if (s.ok()) s = out.Complete();
    if (!s.ok()) a.Shutdown();
    t.join();
    CHECK_EQ(s.ok(), target_encrypts);
    CHECK_EQ(target.ok(), target_encrypts);
    CHECK_EQ(src == dst, target_encrypts);
  }
}
