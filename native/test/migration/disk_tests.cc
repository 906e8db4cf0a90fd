// Copied disks in the migration stream (protocol 4) without KVM: the Disk/DiskZero extent codec and Start's disk
// table (malformed ones refused), then whole streams over a socketpair between two temp files: the bulk pass (holes
// as DiskZero, data as Disk), a dirty round, size and index mismatches refused in Start, a version 3 peer, and
// malformed frames (unknown disk, past the end) refused by the target. Protocol 6 (plaintext: the disk frames'
// digest before Complete): a byte flipped in flight fails the target, a version 5 peer still gets CRC-checked frames.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "migration/crc32c.h"
#include "migration/disk_source.h"
#include "migration/incoming.h"
#include "migration/outgoing.h"
#include "migration/tls_records.h"
#include "test_util.h"

using namespace kvmts;
using namespace kvmts::migration;

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

bool Has(const Error& e, const char* text) { return (e.op + ": " + e.detail).find(text) != std::string::npos; }

}  // namespace

TEST(disk_extent_round_trips_and_refuses_unknown_disks_ranges_past_the_end_and_long_frames) {
  std::vector<DiskSpec> disks{{0, 10 * kMiB}, {3, 4096}};
  auto p = EncodeDiskExtent({3, 1024, 2048});
  CHECK_EQ(p.size(), kDiskExtentBytes);
  auto e = DecodeDiskExtent(p.data(), disks, kMaxDiskFrameBytes);
  CHECK(e.ok());
  CHECK_EQ(e.value().disk, 3u);
  CHECK_EQ(e.value().offset, 1024u);
  CHECK_EQ(e.value().length, 2048u);
  struct Bad {
    DiskExtent e;
    const char* why;
  };
  for (const Bad& b : {Bad{{1, 0, 512}, "unknown disk 1"}, Bad{{3, 4096, 1}, "outside disk 3"},
                       Bad{{3, 4000, 512}, "outside disk 3"}, Bad{{0, ~uint64_t{0} - 10, 512}, "outside disk 0"},
                       Bad{{0, 0, 0}, "bad length"}, Bad{{0, 0, kMaxDiskFrameBytes + 512}, "bad length"}}) {
    auto q = EncodeDiskExtent(b.e);
    auto r = DecodeDiskExtent(q.data(), disks, kMaxDiskFrameBytes);
    CHECK(!r.ok());
    if (!r.ok()) {
      CHECK_EQ(r.error().err, EPROTO);
      CHECK(Has(r.error(), b.why));
    }
  }
  p[4] = 1;  // reserved word
  CHECK(!DecodeDiskExtent(p.data(), disks, kMaxDiskFrameBytes).ok());
  CHECK(!DecodeDiskExtent(EncodeDiskExtent({0, 0, 512}).data(), {}, kMaxDiskFrameBytes).ok());  // no copied disks
}

TEST(disk_start_carries_the_disk_table_and_refuses_malformed_ones) {
  Start s{4, 0, uint64_t{1} << 30, 4096, {{0, 64 * kMiB}, {2, 512}}};
  auto p = EncodeStart(s);
  CHECK_EQ(p.size(), 32u + 32u);
  auto d = DecodeStart(p.data(), p.size());
  CHECK(d.ok());
  CHECK_EQ(d.value().disks.size(), 2u);
  CHECK_EQ(d.value().disks[1].index, 2u);
  CHECK_EQ(d.value().disks[0].size_bytes, 64 * kMiB);
  CHECK_EQ(EncodeStart(Start{3, 0, 4096, 4096, {}}).size(), 24u);  // no disks: the version 3 layout
  auto dup = EncodeStart(Start{4, 0, 4096, 4096, {{1, 512}, {1, 512}}});
  CHECK(!DecodeStart(dup.data(), dup.size()).ok());
  auto flags = p;
  flags[36] = 2;  // unknown flag bits
  CHECK(!DecodeStart(flags.data(), flags.size()).ok());
  flags[36] = kDiskFlagOverlay;
  auto overlay = DecodeStart(flags.data(), flags.size());
  CHECK(overlay.ok() && overlay.value().disks[0].flags == kDiskFlagOverlay);
  CHECK(EncodeStart(overlay.value()) == flags);
  auto truncated = p;
  truncated.pop_back();
  CHECK(!DecodeStart(truncated.data(), truncated.size()).ok());
  auto zero = p;
  std::memset(&zero[24], 0, 4);
  CHECK(!DecodeStart(zero.data(), 32).ok());
  std::vector<uint8_t> many(32 + 16 * 17, 0);
  std::memcpy(many.data(), p.data(), 24);
  many[24] = 17;
  CHECK(!DecodeStart(many.data(), many.size()).ok());
}

TEST(disk_frame_headers_are_bounded_and_only_disk_data_may_go_unchecked) {
  FrameHeader h{static_cast<uint16_t>(Command::kDisk), kFlagPayloadChecked, 0, 0, kDiskExtentBytes + kMaxDiskFrameBytes};
  CHECK(ValidateHeader(h).ok());
  h.length++;
  CHECK(!ValidateHeader(h).ok());
  h.length = kDiskExtentBytes + 512;
  h.flags = 0;
  CHECK(ValidateHeader(h).ok());  // as Memory: the receiver allows it only in an encrypted version 5 stream
  FrameHeader z{static_cast<uint16_t>(Command::kDiskZero), kFlagPayloadChecked, 0, 0, kDiskExtentBytes + 1};
  CHECK(!ValidateHeader(z).ok());
  z.length = kDiskExtentBytes;
  z.flags = 0;
  CHECK(!ValidateHeader(z).ok());
  CHECK_EQ(std::string(CommandName(15)), std::string("DiskZero"));
}

namespace {

struct TempFile {
  std::string path;
  int fd = -1;
  explicit TempFile(uint64_t bytes) {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir != nullptr ? dir : "/tmp") + "/kvt-mig-disk-XXXXXX";
    fd = mkstemp(path.data());
    CHECK(fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0);
  }
  ~TempFile() {
    close(fd);
    unlink(path.c_str());
  }
  void Fill(uint64_t off, uint64_t len, uint8_t seed) {
    std::vector<uint8_t> b(len);
    for (uint64_t i = 0; i < len; i++) b[i] = static_cast<uint8_t>(seed + i * 13 + (i >> 9));
    CHECK(pwrite(fd, b.data(), len, static_cast<off_t>(off)) == static_cast<ssize_t>(len));
  }
  std::vector<uint8_t> All() const {
    off_t n = lseek(fd, 0, SEEK_END);
    std::vector<uint8_t> out(static_cast<size_t>(n));
    CHECK(pread(fd, out.data(), out.size(), 0) == n);
    return out;
  }
};

struct DiskRun {
  Status source = OkStatus();
  Status target = OkStatus();
  OutgoingStats out;
  IncomingStats in;
};

// Migrates an 8-page guest (no memory content) plus the given disks: SendAll, then `between` (the guest writes),
// then the dirty granules `dirty` as a round.
template <typename F>
DiskRun MigrateDisks(std::vector<std::pair<uint32_t, TempFile*>> src, std::vector<TargetDisk> dst, F between,
                     std::vector<std::vector<uint64_t>> dirty = {}, uint16_t max_version = kProtocolVersion,
                     std::vector<std::shared_ptr<const devices::virtio::OverlayMap>> src_overlays = {},
                     bool encrypt = false) {
  std::vector<uint8_t> src_ram(8 * 4096), dst_ram(8 * 4096);
  RamLayout src_layout({{0, src_ram.size(), src_ram.data(), false}});
  RamLayout dst_layout({{0, dst_ram.size(), dst_ram.data(), false}});
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  // Encrypted: TLS records under fixed keys (tls_records.h; the handshake that makes real ones is tls_tests.cc's).
  TlsRecordChannel sa(a), sb(b);
  TrafficKeys k1, k2;
  k2.key[0] = 1;
  if (encrypt) CHECK(sa.Start(k1, k2).ok() && sb.Start(k2, k1).ok());
  DiskRun run;
  std::thread target([&] {
    IncomingMigration in(sb, dst_layout, "k", true, SystemRandom);
    in.SetEncrypted(encrypt);
    in.SetDisks(dst);
    run.target = in.ReceiveUntilComplete();
    if (run.target.ok()) run.target = in.ConfirmResumed();
    run.in = in.stats();
    b.Shutdown();
  });
  std::vector<DiskSource> disks;
  std::vector<DiskSpec> specs;
  for (auto& [index, file] : src) {
    auto overlay = disks.size() < src_overlays.size() ? src_overlays[disks.size()] : nullptr;
    auto d = DiskSource::Open(index, file->path, overlay);
    CHECK(d.ok());
    specs.push_back({index, d.value().size_bytes(), overlay ? kDiskFlagOverlay : 0u});
    disks.push_back(std::move(d.value()));
  }
  OutgoingMigration out(sa, src_layout, "k", SystemRandom, max_version);
  out.SetEncrypted(encrypt);
  out.SetDisks(specs);
  Status s = out.Handshake();
  if (s.ok()) s = out.SendRanges({{0, src_ram.size()}}, SendOptions{});
  for (DiskSource& d : disks) {
    if (s.ok()) s = d.SendAll(out, 0, nullptr);
  }
  if (s.ok()) s = out.Sync();
  between(out);
  for (size_t i = 0; i < disks.size() && i < dirty.size(); i++) {
    disks[i].AddDirty(dirty[i]);
    if (s.ok()) s = disks[i].SendPending(out, 0, nullptr);
  }
  if (s.ok()) s = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
  if (s.ok()) s = out.Complete();
  if (!s.ok()) a.Shutdown();
  target.join();
  run.source = s;
  run.out = out.stats();
  return run;
}

}  // namespace

TEST(disk_a_copied_disk_arrives_whole_holes_as_zero_ranges_and_a_dirty_round_updates_it) {
  TempFile src(16 * kMiB), dst(16 * kMiB);
  src.Fill(0, 3 * kMiB + 4096, 1);       // data, with a partial last chunk
  src.Fill(9 * kMiB, 64 * 1024, 7);      // an island in a hole
  std::vector<uint8_t> zeros(kMiB, 0);
  CHECK(pwrite(src.fd, zeros.data(), kMiB, 12 * kMiB) == static_cast<ssize_t>(kMiB));  // allocated zeros
  dst.Fill(5 * kMiB, 2 * kMiB, 99);     // stale bytes on the target where the source has a hole
  auto run = MigrateDisks(
      {{2, &src}}, {{2, dst.fd, 16 * kMiB}},
      [&](OutgoingMigration&) {
        src.Fill(64 * 1024, 100, 42);  // the guest writes granule 1 and granule 200 (12.5 MiB) after the bulk pass
        src.Fill(200 * 64 * 1024, 512, 43);
      },
      {{(uint64_t{1} << 1), 0, 0, (uint64_t{1} << (200 - 192))}});
  CHECK(run.source.ok());
  CHECK(run.target.ok());
  CHECK(src.All() == dst.All());
  CHECK_EQ(run.in.version, kProtocolVersion);
  CHECK_EQ(run.out.disk_bytes, run.in.disk_bytes);
  CHECK(run.in.disk_bytes >= 3 * kMiB + 4096 + 64 * 1024);
  CHECK(run.in.disk_bytes < 5 * kMiB);  // holes and the zero MiB travelled as markers
  CHECK(run.in.disk_zero_bytes >= 10 * kMiB);
}

TEST(disk_an_overlay_sends_only_the_granules_it_holds_and_the_target_marks_them) {
  using devices::virtio::OverlayMap;
  constexpr uint64_t G = OverlayMap::kGranuleBytes;
  TempFile src(4 * kMiB), dst(4 * kMiB);
  auto src_map = std::make_shared<OverlayMap>(4 * kMiB);
  OverlayMap dst_map(4 * kMiB);
  src.Fill(0, 3 * G, 1);  // granules 0-2 held
  src_map->MarkAllocated(0, 3 * G);
  src.Fill(10 * G, 100, 2);  // granule 10 held, mostly zeroes
  src_map->MarkAllocated(10 * G, G);
  src.Fill(20 * G, G, 3);  // data in granule 20 that the overlay does not hold: never sent
  src.Fill(63 * G, G, 4);  // the last granule, held
  src_map->MarkAllocated(63 * G, G);
  auto run = MigrateDisks(
      {{0, &src}}, {{0, dst.fd, 4 * kMiB, &dst_map}},
      [&](OutgoingMigration&) {
        src.Fill(5 * G, G, 5);  // a write after the bulk pass: held, then marked dirty
        src_map->MarkAllocated(5 * G, G);
      },
      {{(uint64_t{1} << 5) | (uint64_t{1} << 30)}}, kProtocolVersion, {src_map});  // granule 30: marked, not held
  CHECK(run.source.ok());
  CHECK(run.target.ok());
  CHECK(src_map->Snapshot() == dst_map.Snapshot());
  CHECK_EQ(dst_map.allocated_granules(), 6u);
  auto a = src.All(), b = dst.All();
  for (uint64_t g : {0, 1, 2, 5, 10, 63}) CHECK(std::equal(a.begin() + g * G, a.begin() + (g + 1) * G, b.begin() + g * G));
  CHECK(std::all_of(b.begin() + 20 * G, b.begin() + 21 * G, [](uint8_t x) { return x == 0; }));
  CHECK_EQ(run.in.disk_bytes + run.in.disk_zero_bytes, 6 * G);
}

TEST(disk_an_overlay_on_one_side_only_is_refused_at_start) {
  TempFile src(kMiB), dst(kMiB);
  auto src_map = std::make_shared<devices::virtio::OverlayMap>(kMiB);
  devices::virtio::OverlayMap dst_map(kMiB);
  auto run = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB}}, [](OutgoingMigration&) {}, {}, kProtocolVersion, {src_map});
  CHECK(!run.target.ok());
  CHECK(Has(run.target.error(), "disk 0 is not a copy-on-write overlay here but the source's is"));
  run = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB, &dst_map}}, [](OutgoingMigration&) {});
  CHECK(!run.target.ok());
  CHECK(Has(run.target.error(), "disk 0 is a copy-on-write overlay here but the source's is not"));
}

TEST(disk_start_refuses_a_size_mismatch_and_a_disk_the_other_side_does_not_copy) {
  TempFile src(4 * kMiB), dst(2 * kMiB);
  auto run = MigrateDisks({{0, &src}}, {{0, dst.fd, 2 * kMiB}}, [](OutgoingMigration&) {});
  CHECK(!run.target.ok());
  CHECK(!run.source.ok());
  CHECK(Has(run.target.error(), "disk 0 size mismatch: source has 4194304 bytes, target 2097152"));
  // The source's handshake ends with a Sync when disks are copied: the target's reason comes back before any data.
  CHECK(Has(run.source.error(), "target abandoned: target: migration start: disk 0 size mismatch"));
  run = MigrateDisks({{1, &src}}, {{0, dst.fd, 4 * kMiB}}, [](OutgoingMigration&) {});
  CHECK(!run.target.ok());
  CHECK(Has(run.target.error(), "disk 1 is copied by the source but is not a copied disk here"));
  run = MigrateDisks({}, {{0, dst.fd, 2 * kMiB}}, [](OutgoingMigration&) {}, {}, 3);
  CHECK(!run.target.ok());
  CHECK(Has(run.target.error(), "disk 0 is a copied disk here but the source does not send it (the source speaks "
                                "protocol 3)"));
}

TEST(disk_a_source_with_copied_disks_refuses_a_version_3_peer_and_one_without_speaks_3) {
  TempFile src(kMiB), dst(kMiB);
  auto run = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB}}, [](OutgoingMigration&) {}, {}, 3);
  CHECK(!run.source.ok());
  CHECK_EQ(run.source.error().err, EPROTONOSUPPORT);
  CHECK(Has(run.source.error(), "the target cannot receive copied disks: it speaks migration protocol 3"));
  CHECK(!run.target.ok());  // told through Abandon before any data
  run = MigrateDisks({}, {}, [](OutgoingMigration&) {}, {}, 3);
  CHECK(run.source.ok());
  CHECK(run.target.ok());
  CHECK_EQ(run.in.version, uint16_t(3));
}

TEST(disk_an_encrypted_stream_carries_disk_data_checked_by_its_records_from_version_5_and_by_crc_in_4) {
  for (uint16_t version : {kProtocolVersion, uint16_t(5), uint16_t(4)}) {
    TempFile src(4 * kMiB), dst(4 * kMiB);
    src.Fill(0, 2 * kMiB + 4096, 5);
    auto run = MigrateDisks(
        {{0, &src}}, {{0, dst.fd, 4 * kMiB}}, [&](OutgoingMigration&) { src.Fill(64 * 1024, 4096, 9); },
        {{uint64_t{1} << 1}}, version, {}, true);
    CHECK(run.source.ok());
    CHECK(run.target.ok());
    CHECK_EQ(run.in.version, version);
    CHECK(src.All() == dst.All());
    CHECK_EQ(run.in.disk_bytes, run.out.disk_bytes);
  }
}

TEST(disk_a_disk_frame_without_its_data_check_fails_a_plaintext_version_5_stream) {
  TempFile src(kMiB), dst(kMiB);
  std::vector<uint8_t> data(4096, 3);
  auto run = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB}}, [&](OutgoingMigration&) {});
  CHECK(run.target.ok());  // the control: the same run with checked frames
  // A hand-made frame in a plaintext stream: header and extent checked, the data not.
  TempFile src2(kMiB), dst2(kMiB);
  std::vector<uint8_t> src_ram(8 * 4096), dst_ram(8 * 4096);
  RamLayout src_layout({{0, src_ram.size(), src_ram.data(), false}});
  RamLayout dst_layout({{0, dst_ram.size(), dst_ram.data(), false}});
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  FdChannel a(sv[0]), b(sv[1]);
  Status t = OkStatus();
  std::thread target([&] {
    IncomingMigration in(b, dst_layout, "k", true, SystemRandom);
    in.SetDisks({{0, dst2.fd, kMiB}});
    t = in.ReceiveUntilComplete();
    b.Shutdown();
  });
  OutgoingMigration out(a, src_layout, "k", SystemRandom, 5);  // from 6 a plaintext stream has DiskDigest instead
  out.SetDisks({{0, kMiB}});
  CHECK(out.Handshake().ok());
  auto prefix = EncodeDiskExtent(DiskExtent{0, 0, data.size()});
  FrameHeader h{static_cast<uint16_t>(Command::kDisk), 0, 0, 0, kDiskExtentBytes + data.size()};
  h.crc = Crc32c(HeaderCrc(h), prefix.data(), prefix.size());
  uint8_t raw[kHeaderSize];
  EncodeHeader(h, raw);
  iovec iov[3] = {{raw, kHeaderSize}, {prefix.data(), prefix.size()}, {data.data(), data.size()}};
  (void)WriteAll(a, iov, 3);
  a.Shutdown();  // a target that took the frame would otherwise wait for the next one
  target.join();
  CHECK(!t.ok());
  CHECK(Has(t.error(), "Disk frame without its data check in a version < 5 stream or an unencrypted version < 6 one"));
}

TEST(disk_frames_for_an_unknown_disk_or_past_the_end_fail_the_target) {
  TempFile src(kMiB), dst(kMiB);
  std::vector<uint8_t> data(4096, 1);
  auto unknown = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB}}, [&](OutgoingMigration& out) {
    (void)out.SendDiskData(5, 0, data.data(), data.size());
  });
  CHECK(!unknown.target.ok());
  CHECK(Has(unknown.target.error(), "unknown disk 5"));
  auto past = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB}}, [&](OutgoingMigration& out) {
    (void)out.SendDiskZero(0, kMiB - 512, 1024);
  });
  CHECK(!past.target.ok());
  CHECK(Has(past.target.error(), "outside disk 0"));
}

// Protocol 6, plaintext: Disk frames check their extent only and a DiskDigest of every disk frame comes before
// Complete. A channel that records what the source writes and flips one byte at a chosen stream offset stands in
// for corruption that TCP's checksum let through.
namespace {

class CorruptingChannel : public Channel {
 public:
  explicit CorruptingChannel(Channel& inner) : inner_(inner) {}
  Result<size_t> Writev(const iovec* iov, int n) override {
    std::vector<uint8_t> buf;
    for (int i = 0; i < n; i++) {
      const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
      buf.insert(buf.end(), p, p + iov[i].iov_len);
    }
    if (flip_at >= written && flip_at < written + buf.size()) buf[flip_at - written] ^= 0x20;
    auto r = WriteBytes(inner_, buf.data(), buf.size());  // all of it: the offsets above stay exact
    if (!r.ok()) return r.error();
    log.insert(log.end(), buf.begin(), buf.end());
    written += buf.size();
    return buf.size();
  }
  Result<size_t> Readv(const iovec* iov, int n) override { return inner_.Readv(iov, n); }
  void Shutdown() override { inner_.Shutdown(); }
  uint64_t flip_at = UINT64_MAX;  // stream offset of the byte to flip
  uint64_t written = 0;
  std::vector<uint8_t> log;  // every byte written, as sent (flipped)

 private:
  Channel& inner_;
};

struct DigestRun {
  Status source = OkStatus();
  Status target = OkStatus();
  IncomingStats in;
  uint8_t first_disk_flags = 0xff;  // the header flags of the first disk frame on the wire
};

enum class Tamper { kNone, kFlipDataByte, kCompleteWithoutDigest };

// One plaintext migration of `src` (data from offset 0, so the first disk frame is a 1 MiB Disk frame) into `dst`,
// the target offering at most `target_max`; `tamper` flips a byte in that frame's data in flight, or replaces the
// source's DiskDigest + Complete by a bare Complete.
DigestRun MigratePlain(TempFile& src, TempFile& dst, uint16_t target_max, Tamper tamper) {
  std::vector<uint8_t> src_ram(8 * 4096), dst_ram(8 * 4096);
  RamLayout src_layout({{0, src_ram.size(), src_ram.data(), false}});
  RamLayout dst_layout({{0, dst_ram.size(), dst_ram.data(), false}});
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  FdChannel a(sv[0]), b(sv[1]);
  CorruptingChannel ca(a);
  DigestRun run;
  uint64_t size = static_cast<uint64_t>(lseek(src.fd, 0, SEEK_END));
  std::thread target([&] {
    IncomingMigration in(b, dst_layout, "k", true, SystemRandom);
    in.SetMaxVersion(target_max);
    in.SetDisks({{0, dst.fd, size}});
    run.target = in.ReceiveUntilComplete();
    if (run.target.ok()) run.target = in.ConfirmResumed();
    run.in = in.stats();
    b.Shutdown();
  });
  auto disk = DiskSource::Open(0, src.path);
  CHECK(disk.ok());
  OutgoingMigration out(ca, src_layout, "k", SystemRandom);
  out.SetDisks({{0, size}});
  Status s = out.Handshake();
  if (s.ok()) s = out.SendRanges({{0, src_ram.size()}}, SendOptions{});
  uint64_t disk_frame_at = ca.written;
  if (tamper == Tamper::kFlipDataByte) ca.flip_at = disk_frame_at + kHeaderSize + kDiskExtentBytes + 777;
  if (s.ok()) s = disk.value().SendAll(out, 0, nullptr);
  if (ca.log.size() > disk_frame_at + 2) run.first_disk_flags = ca.log[disk_frame_at + 2];
  if (s.ok()) s = out.Sync();
  if (s.ok()) s = out.SendState(reinterpret_cast<const uint8_t*>("s"), 1);
  if (s.ok() && tamper == Tamper::kCompleteWithoutDigest) {
    auto complete = EncodeFrame(Command::kComplete, nullptr, 0);
    s = WriteBytes(ca, complete.data(), complete.size());
    std::vector<uint8_t> rest(64);
    if (s.ok()) (void)ReadBytes(ca, rest.data(), rest.size());  // the target's Abandon, then EOF
  } else if (s.ok()) {
    s = out.Complete();
  }
  if (!s.ok()) a.Shutdown();
  target.join();
  run.source = s;
  return run;
}

}  // namespace

TEST(disk_plaintext_version_6_checks_disk_data_by_one_digest_and_a_flipped_data_byte_fails_the_target) {
  TempFile src(4 * kMiB), dst(4 * kMiB);
  src.Fill(0, 3 * kMiB + 4096, 11);
  auto run = MigratePlain(src, dst, kProtocolVersion, Tamper::kNone);
  CHECK(run.source.ok());
  CHECK(run.target.ok());
  CHECK_EQ(run.in.version, uint16_t(6));
  CHECK_EQ(run.first_disk_flags, uint8_t(0));  // the frame's CRC covers the extent only
  CHECK(src.All() == dst.All());

  TempFile dst2(4 * kMiB);
  auto bad = MigratePlain(src, dst2, kProtocolVersion, Tamper::kFlipDataByte);
  CHECK(!bad.target.ok());  // the frame's CRC passed (extent only): the digest before Complete caught it
  if (!bad.target.ok()) {
    CHECK_EQ(bad.target.error().err, EBADMSG);
    CHECK(Has(bad.target.error(), "copied disk data corrupted in transit"));
    CHECK(Has(bad.target.error(), "over 3149824 bytes, this side received"));
  }
  CHECK(!bad.source.ok());  // Complete got the target's Abandon, not Resumed: the source's guest runs on
  if (!bad.source.ok()) CHECK(Has(bad.source.error(), "target abandoned: target: migration: copied disk data corrupted"));
  CHECK_EQ(bad.in.disk_bytes, 3 * kMiB + 4096);  // everything arrived; only the digest told the byte apart
}

TEST(disk_a_version_5_target_gets_crc_checked_disk_frames_and_catches_the_flipped_byte_there) {
  TempFile src(2 * kMiB), dst(2 * kMiB), dst2(2 * kMiB);
  src.Fill(0, 2 * kMiB, 21);
  auto run = MigratePlain(src, dst, 5, Tamper::kNone);
  CHECK(run.source.ok());
  CHECK(run.target.ok());
  CHECK_EQ(run.in.version, uint16_t(5));
  CHECK_EQ(run.first_disk_flags, kFlagPayloadChecked);
  CHECK(src.All() == dst.All());
  auto bad = MigratePlain(src, dst2, 5, Tamper::kFlipDataByte);
  CHECK(!bad.target.ok());
  if (!bad.target.ok()) CHECK(Has(bad.target.error(), "CRC mismatch in Disk frame"));
  CHECK(!bad.source.ok());
}

TEST(disk_a_version_5_source_is_served_version_5_by_a_version_6_target) {
  TempFile src(kMiB), dst(kMiB);
  src.Fill(0, kMiB, 31);
  auto run = MigrateDisks({{0, &src}}, {{0, dst.fd, kMiB}}, [](OutgoingMigration&) {}, {}, 5);
  CHECK(run.source.ok());
  CHECK(run.target.ok());
  CHECK_EQ(run.in.version, uint16_t(5));
  CHECK(src.All() == dst.All());
}

TEST(disk_a_plaintext_version_6_complete_without_the_disk_digest_fails_the_target) {
  TempFile src(kMiB), dst(kMiB);
  src.Fill(0, kMiB, 41);
  auto run = MigratePlain(src, dst, kProtocolVersion, Tamper::kCompleteWithoutDigest);
  CHECK(!run.target.ok());
  if (!run.target.ok()) CHECK(Has(run.target.error(), "Complete without the copied disks' digest (DiskDigest)"));
}
