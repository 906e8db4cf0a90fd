// The migration stream's TLS (tls.h, tls_records.h): HKDF-Expand-Label against RFC 8448, the user-space record layer
// in odd pieces and against every kind of damage, the user-space records and OpenSSL's own records reading each
// other (so the keys and the record format are TLS's), a whole migration over pinned certificates, and every refusal
// a network peer can cause: another certificate than the pinned one on either side, an expired one, and a peer in
// the other mode of KubeVirt's migrations.disableTLS, each with a message that says so.
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "migration/incoming.h"
#include "migration/outgoing.h"
#include "migration/tls.h"
#include "migration/tls_records.h"
#include "test_certs.h"
#include "test_util.h"

using namespace kvmts;
using namespace kvmts::migration;

namespace {

bool Has(const Status& s, const std::string& text) {
  return !s.ok() && (s.error().detail + " " + s.error().op).find(text) != std::string::npos;
}

TrafficKeys Keys(uint8_t seed) {
  TrafficKeys k;
  for (size_t i = 0; i < k.key.size(); i++) k.key[i] = static_cast<uint8_t>(seed + i);
  for (size_t i = 0; i < k.iv.size(); i++) k.iv[i] = static_cast<uint8_t>(seed * 3 + i);
  return k;
}

// Seals `chunks` (one Writev each) into memory and returns the wire bytes.
std::vector<uint8_t> SealToMemory(const std::vector<std::string>& chunks, const TrafficKeys& k) {
  MemoryChannel mem(nullptr, 0);
  TlsRecordChannel ch(mem);
  CHECK(ch.Start(k, Keys(99)).ok());
  for (const std::string& c : chunks) CHECK(WriteBytes(ch, c.data(), c.size()).ok());
  return mem.written;
}

// Opens `wire` reading `piece` bytes at a time; returns the plaintext, or the error.
Result<std::string> OpenFromMemory(const std::vector<uint8_t>& wire, const TrafficKeys& k, size_t max_read = 0,
                                   size_t piece = 1000) {
  MemoryChannel mem(wire.data(), wire.size(), max_read);
  TlsRecordChannel ch(mem);
  CHECK(ch.Start(Keys(99), k).ok());
  ch.SetPipelined(true);  // reads of 256 KiB and more: a worker thread opens the records
  std::string out;
  std::vector<char> buf(piece);
  for (;;) {
    iovec v{buf.data(), buf.size()};
    auto r = ch.Readv(&v, 1);
    if (!r.ok()) return r.error();
    if (r.value() == 0) return out;
    out.append(buf.data(), r.value());
  }
}

struct Pair {
  mtest::CertAndKey source = mtest::MakeCert("kubevirt.io:migration:source");
  mtest::CertAndKey target = mtest::MakeCert("kubevirt.io:migration:target");
};

TlsIdentity Id(const mtest::CertAndKey& c) { return {c.cert_pem, c.key_pem}; }

// Both handshakes over a socketpair: the target (server) on a thread. Returns {source, target} results.
struct Shaken {
  Status source = OkStatus(), target = OkStatus();
};
Shaken Handshake(TlsChannel& client, TlsChannel& server, const TlsIdentity& source_id, const std::string& source_pin,
                 const TlsIdentity& target_id, const std::string& target_pin, TlsRecords client_records,
                 TlsRecords server_records) {
  Shaken s;
  std::thread t([&] {
    s.target = server.Handshake(true, target_id, target_pin, server_records);
    if (!s.target.ok()) server.Shutdown();
  });
  s.source = client.Handshake(false, source_id, source_pin, client_records);
  if (!s.source.ok()) client.Shutdown();
  t.join();
  return s;
}

struct Sockets {
  int sv[2];
  Sockets() {
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    timeval tv{5, 0};  // a hung peer fails the test instead of hanging it
    for (int fd : sv) {
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
  }
};

// A migration of a 64-page buffer "guest" as session.cc runs it: the target checks the mode, then TLS (when its
// identity is given), then the stream.
struct Migration {
  Status source = OkStatus(), target = OkStatus();
  bool moved = false;
};
Migration Migrate(const TlsIdentity* source_id, const std::string& source_pin, const TlsIdentity* target_id,
                  const std::string& target_pin) {
  std::vector<uint8_t> src(64 * 4096), dst(64 * 4096, 0);
  std::mt19937 rng(3);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  Sockets s;
  TlsChannel a(s.sv[0]), b(s.sv[1]);
  Migration m;
  std::thread t([&] {
    m.target = CheckStreamMode(b.fd(), target_id != nullptr);
    if (m.target.ok() && target_id != nullptr) m.target = b.Handshake(true, *target_id, target_pin);
    if (!m.target.ok()) LingerAfterRefusal(b.fd());  // as session.cc does
    if (m.target.ok()) {
      IncomingMigration in(b, RamLayout({{0, dst.size(), dst.data(), false}}), "k", true, SystemRandom);
      in.SetEncrypted(target_id != nullptr);
      m.target = in.ReceiveUntilComplete();
      if (m.target.ok()) m.target = in.ConfirmResumed();
    }
    if (!m.target.ok()) b.Shutdown();
  });
  if (source_id != nullptr) m.source = a.Handshake(false, *source_id, source_pin);
  if (m.source.ok()) {
    OutgoingMigration out(a, RamLayout({{0, src.size(), src.data(), false}}), "k", SystemRandom);
    out.SetEncrypted(source_id != nullptr);
    m.source = out.Handshake();
    if (m.source.ok()) m.source = out.SendRanges({{0, src.size()}}, SendOptions{});
    if (m.source.ok()) m.source = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
    if (m.source.ok()) m.source = out.Complete();
  }
  if (!m.source.ok()) a.Shutdown();
  t.join();
  m.moved = src == dst;
  return m;
}

}  // namespace

TEST(hkdf_expand_label_gives_rfc_8448s_handshake_traffic_keys) {
  // RFC 8448 §3, {server} derive write traffic keys for handshake data.
  auto secret = mtest::Unhex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38");
  TrafficKeys k = TrafficKeysFrom(secret.data(), secret.size());
  CHECK_EQ(mtest::Hex(k.key.data(), k.key.size()), std::string("3fce516009c21727d0f2e4e86ee403bc"));
  CHECK_EQ(mtest::Hex(k.iv.data(), k.iv.size()), std::string("5d313eb2671276ee13000b30"));
}

TEST(tls_records_round_trip_in_odd_pieces_and_hide_the_plaintext) {
  TrafficKeys k = Keys(1);
  std::mt19937 rng(7);
  std::string data(3000000, '\0');
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
  // Read in pieces smaller than a record (opened in place), in pieces that hold records whole (opened straight into
  // the reader's buffer), and in pieces large enough to pipeline (a worker opens them), the wire arriving in
  // 777-byte pieces or all at once.
  for (size_t piece : {size_t{1000}, size_t{100000}, size_t{1} << 20}) {
    for (size_t max_read : {size_t{777}, size_t{0}}) {
      auto plain = OpenFromMemory(wire, k, max_read, piece);
      CHECK(plain.ok());
      CHECK(plain.value() == data);
    }
  }
}

TEST(tls_records_refuse_tampered_reordered_cut_foreign_and_plain_input) {
  TrafficKeys k = Keys(1);
  std::string big(600000, 'x');  // 37 records
  auto wire = SealToMemory({big}, k);
  for (size_t piece : {size_t{1000}, size_t{100000}, size_t{1} << 20}) {
    for (size_t at : {size_t{100}, size_t{400000}}) {  // in the first record; in the middle (pipelined)
      auto flipped = wire;
      flipped[at] ^= 1;
      CHECK_EQ(OpenFromMemory(flipped, k, 0, piece).error().err, EBADMSG);
    }
    auto swapped = wire;  // the first two (full, equal-length) records change places
    size_t rec = kMaxRecordPlaintext + kRecordOverhead;
    std::swap_ranges(swapped.begin(), swapped.begin() + rec, swapped.begin() + rec);
    CHECK_EQ(OpenFromMemory(swapped, k, 0, piece).error().err, EBADMSG);
    CHECK_EQ(OpenFromMemory(wire, Keys(2), 0, piece).error().err, EBADMSG);
  }
  auto cut = std::vector<uint8_t>(wire.begin(), wire.end() - 10);
  CHECK_EQ(OpenFromMemory(cut, k).error().err, ECONNRESET);
  std::vector<uint8_t> plain(200, 0x4b);  // a plain frame where a record should be
  auto r = OpenFromMemory(plain, k);
  CHECK_EQ(r.error().err, EBADMSG);
  CHECK(Has(r.error(), "not a TLS 1.3 record"));
  std::vector<uint8_t> huge = {0x17, 3, 3, 0xff, 0xff};  // a length over TLS's record limit
  huge.resize(70000);
  CHECK_EQ(OpenFromMemory(huge, k).error().err, EBADMSG);
}

TEST(tls_user_space_records_and_openssls_records_read_each_other_both_ways) {
  signal(SIGPIPE, SIG_IGN);
  Pair p;
  std::mt19937 rng(11);
  std::string data(200000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (bool client_user_space : {true, false}) {
    Sockets s;
    TlsChannel client(s.sv[0]), server(s.sv[1]);
    auto cr = client_user_space ? TlsRecords::kUserSpace : TlsRecords::kOpenSsl;
    auto sr = client_user_space ? TlsRecords::kOpenSsl : TlsRecords::kUserSpace;
    auto h = Handshake(client, server, Id(p.source), p.target.cert_pem, Id(p.target), p.source.cert_pem, cr, sr);
    CHECK(h.source.ok());
    CHECK(h.target.ok());
    CHECK_EQ(client.info().cipher, std::string("TLS_AES_128_GCM_SHA256"));
    CHECK_EQ(client.info().user_space, client_user_space);
    CHECK_EQ(server.info().user_space, !client_user_space);
    std::string echoed(data.size(), '\0');
    std::thread t([&] {  // the server reads everything and sends it back reversed
      std::string got(data.size(), '\0');
      CHECK(ReadBytes(server, got.data(), got.size()).ok());
      std::reverse(got.begin(), got.end());
      CHECK(WriteBytes(server, got.data(), got.size()).ok());
    });
    CHECK(WriteBytes(client, data.data(), data.size()).ok());
    CHECK(ReadBytes(client, echoed.data(), echoed.size()).ok());
    t.join();
    std::reverse(echoed.begin(), echoed.end());
    CHECK(echoed == data);
  }
}

TEST(tls_session_moves_the_guest_between_pinned_certificates) {
  signal(SIGPIPE, SIG_IGN);
  Pair p;
  TlsIdentity s = Id(p.source), t = Id(p.target);
  auto m = Migrate(&s, p.target.cert_pem, &t, p.source.cert_pem);
  CHECK(m.source.ok());
  CHECK(m.target.ok());
  CHECK(m.moved);
}

TEST(tls_a_target_certificate_other_than_the_pinned_one_is_refused_by_the_source) {
  signal(SIGPIPE, SIG_IGN);
  Pair p;
  auto stranger = mtest::MakeCert("stranger");
  TlsIdentity s = Id(p.source), t = Id(stranger);  // the target presents a certificate its handler never gave
  auto m = Migrate(&s, p.target.cert_pem, &t, p.source.cert_pem);
  CHECK_EQ(m.source.error().err, EACCES);
  CHECK(Has(m.source, "the target presented a certificate for /CN=stranger, not the one its virt-handler gave"));
  CHECK(Has(m.target, "the source refused"));
  CHECK(!m.moved);
}

TEST(tls_a_source_certificate_other_than_the_pinned_one_is_refused_by_the_target) {
  signal(SIGPIPE, SIG_IGN);
  Pair p;
  auto stranger = mtest::MakeCert("stranger");
  TlsIdentity s = Id(stranger), t = Id(p.target);
  auto m = Migrate(&s, p.target.cert_pem, &t, p.source.cert_pem);
  CHECK_EQ(m.target.error().err, EACCES);
  CHECK(Has(m.target, "the source presented a certificate for /CN=stranger, not the one its virt-handler gave"));
  // TLS 1.3: the client's handshake ends before the server checks its certificate; the refusal arrives as an alert.
  CHECK(Has(m.source, "refused this side's certificate"));
  CHECK(!m.moved);
}

TEST(tls_an_expired_pinned_certificate_is_refused) {
  signal(SIGPIPE, SIG_IGN);
  Pair p;
  auto expired = mtest::MakeCert("kubevirt.io:migration:target", -7200, -3600);
  TlsIdentity s = Id(p.source), t = Id(expired);
  auto m = Migrate(&s, expired.cert_pem, &t, p.source.cert_pem);
  CHECK_EQ(m.source.error().err, EACCES);
  CHECK(Has(m.source, "certificate has expired"));
  CHECK(!m.moved);
}

TEST(tls_a_peer_in_the_other_disableTLS_mode_is_refused_with_a_message_naming_the_setting) {
  signal(SIGPIPE, SIG_IGN);
  Pair p;
  TlsIdentity s = Id(p.source), t = Id(p.target);
  auto plain_source = Migrate(nullptr, "", &t, p.source.cert_pem);
  CHECK(Has(plain_source.target, "the source sent an unencrypted migration stream and this target expects TLS"));
  CHECK(Has(plain_source.source, "target abandoned: target: the source sent an unencrypted migration stream"));
  CHECK(Has(plain_source.source, "migrations.disableTLS"));
  auto tls_source = Migrate(&s, p.target.cert_pem, nullptr, "");
  CHECK(Has(tls_source.target, "the source speaks TLS and this target expects an unencrypted stream"));
  CHECK(Has(tls_source.source, "target abandoned: target: the source speaks TLS"));
  CHECK(Has(tls_source.source, "migrations.disableTLS"));
  CHECK(!plain_source.moved);
  CHECK(!tls_source.moved);
}

TEST(tls_bad_pem_input_is_refused_before_any_connection) {
  CHECK_EQ(CheckCertificatePem("not a certificate").error().err, EINVAL);
  Pair p;
  CHECK(CheckCertificatePem(p.source.cert_pem).ok());
  Sockets s;
  TlsChannel a(s.sv[0]);
  auto r = a.Handshake(false, {p.source.cert_pem, p.target.key_pem}, p.target.cert_pem);
  CHECK(Has(r, "this side's certificate and key do not belong together"));
}
