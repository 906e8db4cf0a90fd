// Copied disks in the migration stream (protocol 4) without KVM: the Disk/DiskZero extent codec and Start's disk
// table (malformed ones refused), then whole streams over a socketpair between two temp files: the bulk pass (holes
// as DiskZero, data as Disk), a dirty round, size and index mismatches refused in Start, a version 3 peer, and
// malformed frames (unknown disk, past the end) refused by the target.
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
  CHECK_EQ(run.in.version, uint16_t(5));
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

TEST(disk_an_encrypted_stream_carries_disk_data_checked_by_its_records_in_version_5_and_by_crc_in_4) {
  for (uint16_t version : {kProtocolVersion, uint16_t(4)}) {
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

TEST(disk_a_disk_frame_without_its_data_check_fails_a_plaintext_stream) {
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
  OutgoingMigration out(a, src_layout, "k", SystemRandom);
  out.SetDisks({{0, kMiB}});
  CHECK(out.Handshake().ok());
  auto prefix = EncodeDiskExtent(DiskExtent{0, 0, data.size()});
  FrameHeader h{static_cast<uint16_t>(Command::kDisk), 0, 0, 0, kDiskExtentBytes + data.size()};
  h.crc = Crc32c(HeaderCrc(h), prefix.data(), prefix.size());
  uint8_t raw[kHeaderSize];
  EncodeHeader(h, raw);
  iovec iov[3] = {{raw, kHeaderSize}, {prefix.data(), prefix.size()}, {data.data(), data.size()}};
  (void)WriteAll(a, iov, 3);
  target.join();
  CHECK(!t.ok());
  CHECK(Has(t.error(), "Disk frame without its data check in an unencrypted or version < 5 stream"));
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
