// Whole-stream tests without KVM: an OutgoingMigration and an IncomingMigration on two threads over a socketpair,
// moving a plain buffer "guest" (two regions with a hole, like guest RAM across the MMIO hole).
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "migration/incoming.h"
#include "migration/outgoing.h"
#include "test_util.h"

using namespace kvmts;
using namespace kvmts::migration;

namespace {

constexpr uint64_t kPage = 4096;

struct FakeGuest {
  std::vector<uint8_t> low, high;
  explicit FakeGuest(uint64_t pages) : low(pages * kPage, 0), high(pages * kPage, 0) {}
  RamLayout Layout() {
    return RamLayout({{0, low.size(), low.data(), false}, {uint64_t{1} << 32, high.size(), high.data(), false}});
  }
  std::vector<PageRange> All() const { return {{0, low.size()}, {uint64_t{1} << 32, high.size()}}; }
};

void Counter(uint8_t* out, size_t len) {
  static uint8_t next = 0;
  for (size_t i = 0; i < len; i++) out[i] = next++;
}

struct Outcome {
  Status source = OkStatus();
  Status target = OkStatus();
  std::vector<uint8_t> state;
  OutgoingStats out;
  IncomingStats in;
};

// Runs a migration of `src` into `dst`; `tamper` may corrupt the source side's writes.
Outcome Migrate(FakeGuest& src, FakeGuest& dst, const std::string& source_secret, const std::string& target_secret,
                const std::vector<PageRange>& second_round = {}) {
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  Outcome o;
  std::thread target([&] {
    IncomingMigration in(b, dst.Layout(), target_secret, true, SystemRandom);
    o.target = in.ReceiveUntilComplete();
    if (o.target.ok()) {
      o.state = in.state();
      o.target = in.ConfirmResumed();
    }
    o.in = in.stats();
  });
  OutgoingMigration out(a, src.Layout(), source_secret, Counter);
  o.source = out.Handshake();
  SendOptions opts;
  opts.probe_residency = true;
  opts.populate_hint = true;
  if (o.source.ok()) o.source = out.SendRanges(src.All(), opts);
  opts.populate_hint = false;
  if (o.source.ok() && !second_round.empty()) {
    opts.check_data = true;
    o.source = out.SendRanges(second_round, opts);
  }
  const char kState[] = "machine-state";
  if (o.source.ok()) o.source = out.SendState(reinterpret_cast<const uint8_t*>(kState), sizeof kState);
  if (o.source.ok()) o.source = out.Complete();
  if (!o.source.ok()) a.Shutdown();
  target.join();
  o.out = out.stats();
  return o;
}

TEST(session_pages_zero_markers_state_and_resumed_cross_the_stream) {
  FakeGuest src(64), dst(64);
  std::mt19937 rng(1);
  for (int p : {0, 1, 5, 63}) {
    for (uint64_t i = 0; i < kPage; i++) src.low[p * kPage + i] = static_cast<uint8_t>(rng() | 1);
  }
  src.high[10 * kPage + 17] = 42;
  Outcome o = Migrate(src, dst, "k", "k");
  CHECK(o.source.ok());
  CHECK(o.target.ok());
  CHECK(src.low == dst.low);
  CHECK(src.high == dst.high);
  CHECK_EQ(std::string(reinterpret_cast<const char*>(o.state.data())), std::string("machine-state"));
  CHECK_EQ(o.out.data_pages, uint64_t(5));
  CHECK_EQ(o.out.zero_pages, uint64_t(123));
  CHECK_EQ(o.in.data_pages, uint64_t(5));
  CHECK_EQ(o.in.version, kProtocolVersion);
  CHECK_EQ(o.in.hinted_bytes, 5 * kPage);
}

TEST(session_a_dirty_round_overwrites_and_a_page_that_became_zero_is_cleared_on_the_target) {
  FakeGuest src(16), dst(16);
  std::memset(src.low.data(), 7, src.low.size());
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  Status target_status = OkStatus();
  std::thread target([&] {
    IncomingMigration in(b, dst.Layout(), "k", true, SystemRandom);
    target_status = in.ReceiveUntilComplete();
    if (target_status.ok()) target_status = in.ConfirmResumed();
  });
  OutgoingMigration out(a, src.Layout(), "k", SystemRandom);
  CHECK(out.Handshake().ok());
  CHECK(out.SendRanges(src.All(), SendOptions{}).ok());
  std::memset(src.low.data() + 2 * kPage, 0, kPage);  // guest zeroes page 2
  src.low[9 * kPage] = 1;                             // and writes page 9
  CHECK(out.Sync().ok());  // the target answers once the bulk pass is in its memory
  CHECK(out.SendRanges({{2 * kPage, kPage}, {9 * kPage, kPage}}, SendOptions{}).ok());
  CHECK(out.SendState(reinterpret_cast<const uint8_t*>("s"), 1).ok());
  CHECK(out.Complete().ok());
  target.join();
  CHECK(target_status.ok());
  CHECK(src.low == dst.low);
}

TEST(session_a_wrong_secret_is_refused_before_any_memory_moves) {
  FakeGuest src(8), dst(8);
  std::memset(src.low.data(), 3, src.low.size());
  Outcome o = Migrate(src, dst, "right", "wrong");
  CHECK(!o.source.ok());
  CHECK_EQ(o.source.error().err, EACCES);
  CHECK(!o.target.ok());
  CHECK(std::all_of(dst.low.begin(), dst.low.end(), [](uint8_t v) { return v == 0; }));
}

TEST(session_a_version_2_source_sends_no_populate_hints_and_version_1_is_refused) {
  for (uint16_t max_version : {uint16_t{2}, uint16_t{1}}) {
    FakeGuest src(8), dst(8);
    src.low[0] = 1;
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    FdChannel a(sv[0]), b(sv[1]);
    Status t = OkStatus();
    IncomingStats in_stats;
    std::thread target([&] {
      IncomingMigration in(b, dst.Layout(), "k", true, SystemRandom);
      in.EnablePrefault(PrefaultOptions{});
      t = in.ReceiveUntilComplete();
      if (t.ok()) t = in.ConfirmResumed();
      in_stats = in.stats();
      b.Shutdown();
    });
    OutgoingMigration out(a, src.Layout(), "k", SystemRandom, max_version);
    SendOptions o;
    o.populate_hint = true;
    Status s = out.Handshake();
    if (s.ok()) s = out.SendRanges(src.All(), o);
    if (s.ok()) s = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
    if (s.ok()) s = out.Complete();
    target.join();
    if (max_version == 2) {
      CHECK(t.ok());
      CHECK(s.ok());
      CHECK_EQ(in_stats.version, uint16_t(2));
      CHECK_EQ(in_stats.hinted_bytes, uint64_t(0));
      CHECK_EQ(in_stats.data_pages, uint64_t(1));
      CHECK(src.low == dst.low);
    } else {
      CHECK(!t.ok());  // no common version: nothing but the handshake was read
      CHECK(!s.ok());
      CHECK(std::all_of(dst.low.begin(), dst.low.end(), [](uint8_t v) { return v == 0; }));
    }
  }
}

TEST(session_a_populate_frame_in_a_version_2_stream_is_refused) {
  FakeGuest src(8), dst(8);
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  Status t = OkStatus();
  std::thread target([&] {
    IncomingMigration in(b, dst.Layout(), "k", true, SystemRandom);
    t = in.ReceiveUntilComplete();
    b.Shutdown();
  });
  OutgoingMigration out(a, src.Layout(), "k", SystemRandom, 2);
  CHECK(out.Handshake().ok());
  auto table = EncodeRangeTable({{0, kPage}});
  auto frame = EncodeFrame(Command::kPopulate, table.data(), table.size());
  CHECK(WriteBytes(a, frame.data(), frame.size()).ok());
  target.join();
  CHECK(!t.ok());
  CHECK_EQ(t.error().err, EPROTO);
  CHECK(t.error().detail.find("Populate frame in a version 2 stream") != std::string::npos);
}

// Page-aligned anonymous memory (huge pages requested) at a 2 MiB boundary, as guest RAM is.
struct MappedGuest {
  static constexpr uint64_t kBytes = uint64_t{8} << 20;
  uint8_t* base = nullptr;
  void* map = nullptr;
  MappedGuest() {
    map = mmap(nullptr, kBytes + (uint64_t{2} << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uintptr_t p = reinterpret_cast<uintptr_t>(map);
    base = reinterpret_cast<uint8_t*>((p + (uintptr_t{2} << 20) - 1) & ~((uintptr_t{2} << 20) - 1));
    madvise(base, kBytes, MADV_HUGEPAGE);
  }
  ~MappedGuest() { munmap(map, kBytes + (uint64_t{2} << 20)); }
  RamLayout Layout() { return RamLayout({{0, kBytes, base, false, true}}); }
};

TEST(session_populate_hints_name_the_data_pages_and_sparse_chunks_get_small_pages) {
  MappedGuest src, dst;
  std::memset(src.base, 0x5a, uint64_t{2} << 20);                     // chunk 0: dense (huge page)
  for (uint64_t p : {600, 700, 1000}) src.base[p * kPage + 8] = 1;    // chunk 1: 3 pages of 512 (small pages)
  src.base[(uint64_t{6} << 20) + 3 * kPage] = 2;                      // chunk 3: 1 page; chunk 2 stays zero
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  Status t = OkStatus();
  IncomingStats in_stats;
  std::thread target([&] {
    IncomingMigration in(b, dst.Layout(), "k", true, SystemRandom);
    in.EnablePrefault(PrefaultOptions{});
    t = in.ReceiveUntilComplete();
    if (t.ok()) t = in.ConfirmResumed();
    in_stats = in.stats();
  });
  OutgoingMigration out(a, src.Layout(), "k", SystemRandom);
  SendOptions o;
  o.probe_residency = true;
  o.populate_hint = true;
  CHECK(out.Handshake().ok());
  CHECK(out.SendRanges({{0, MappedGuest::kBytes}}, o).ok());
  CHECK(out.Sync().ok());
  CHECK(out.SendState(reinterpret_cast<const uint8_t*>("s"), 1).ok());
  CHECK(out.Complete().ok());
  target.join();
  CHECK(t.ok());
  CHECK_EQ(in_stats.version, kProtocolVersion);
  CHECK_EQ(in_stats.hinted_bytes, (512 + 3 + 1) * kPage);
  CHECK_EQ(in_stats.small_page_bytes, (3 + 1) * kPage);
  CHECK(in_stats.prefaulted_bytes <= (uint64_t{2} << 20) + 4 * kPage);
  CHECK_EQ(in_stats.data_pages, uint64_t(516));
  CHECK(std::memcmp(src.base, dst.base, MappedGuest::kBytes) == 0);
}

// A channel that flips one byte of everything written after `skip` bytes.
class CorruptingChannel : public Channel {
 public:
  CorruptingChannel(Channel& inner, uint64_t at) : inner_(inner), at_(at) {}
  Result<size_t> Writev(const iovec* iov, int n) override {
    std::vector<uint8_t> flat;
    for (int i = 0; i < n; i++) {
      auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
      flat.insert(flat.end(), p, p + iov[i].iov_len);
    }
    if (at_ >= written_ && at_ < written_ + flat.size()) flat[at_ - written_] ^= 0x40;
    auto r = WriteBytes(inner_, flat.data(), flat.size());
    if (!r.ok()) return r.error();
    written_ += flat.size();
    return flat.size();
  }
  Result<size_t> Readv(const iovec* iov, int n) override { return inner_.Readv(iov, n); }

 private:
  Channel& inner_;
  uint64_t at_;
  uint64_t written_ = 0;
};

TEST(session_a_corrupt_frame_makes_the_target_abandon_and_the_source_sees_the_reason) {
  // The source writes Hello (64 B), Auth (48 B), Start (40 B), then the first Memory frame at byte 152: byte 5 is
  // Hello's CRC, 156 the Memory frame's CRC, 180 a GPA in its range table.
  for (uint64_t at : {uint64_t{5}, uint64_t{156}, uint64_t{180}}) {
    FakeGuest src(8), dst(8);
    std::memset(src.low.data(), 5, src.low.size());
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    FdChannel a(sv[0]), b(sv[1]);
    CorruptingChannel bad(a, at);
    Status t = OkStatus();
    std::thread target([&] {
      IncomingMigration in(b, dst.Layout(), "k", true, SystemRandom);
      t = in.ReceiveUntilComplete();
      if (t.ok()) t = in.ConfirmResumed();
      b.Shutdown();
    });
    OutgoingMigration out(bad, src.Layout(), "k", SystemRandom);
    Status s = out.Handshake();
    if (s.ok()) s = out.SendRanges(src.All(), SendOptions{});
    if (s.ok()) s = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
    if (s.ok()) s = out.Complete();
    target.join();
    CHECK(!t.ok());
    CHECK(!s.ok());
    CHECK_EQ(t.error().err, EPROTO);
    CHECK(s.error().detail.find("target abandoned") != std::string::npos || s.error().err == EPIPE ||
          s.error().err == ECONNRESET);
  }
}

TEST(session_the_target_refuses_memory_before_authentication) {
  FakeGuest dst(4);
  auto table = EncodeRangeTable({{0, kPage}});
  std::vector<uint8_t> page(kPage, 9);
  std::vector<uint8_t> stream(16);
  FrameHeader h{6, 0, 0, 0, table.size() + kPage};
  h.crc = 0;
  EncodeHeader(h, stream.data());
  stream.insert(stream.end(), table.begin(), table.end());
  stream.insert(stream.end(), page.begin(), page.end());
  MemoryChannel ch(stream.data(), stream.size());
  IncomingMigration in(ch, dst.Layout(), "k", true, SystemRandom);
  Status s = in.ReceiveUntilComplete();
  CHECK(!s.ok());
  CHECK(std::all_of(dst.low.begin(), dst.low.end(), [](uint8_t v) { return v == 0; }));
  CHECK(in.phase() == IncomingMigration::Phase::kFailed);
}

}  // namespace
