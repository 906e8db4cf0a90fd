// The copy-on-write disk (devices/virtio/blk_overlay.h), directly and through virtio-blk: reads fall through to the
// base until a granule is written, partial writes copy the granule up, whole granules are written straight, write-
// zeroes and discard keep the base hidden or untouched, and the base file's bytes never change. A model (a plain
// byte vector that takes every write) is compared with the disk after a pseudo-random mix of requests.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "devices/virtio/blk.h"
#include "devices/virtio/blk_overlay.h"
#include "virtio_test_ring.h"

using namespace kvmts::devices::virtio;

namespace {

constexpr uint64_t G = OverlayMap::kGranuleBytes;
constexpr uint64_t kDisk = 16 * G + 8 * 512;  // a short last granule

struct TempPair {
  std::string base, overlay;
  std::vector<uint8_t> base_bytes;
  TempPair() {
    const char* dir = std::getenv("TMPDIR");
    std::string d = dir != nullptr ? dir : "/tmp";
    base = d + "/kvt-ovl-base-XXXXXX";
    overlay = d + "/kvt-ovl-top-XXXXXX";
    int b = mkstemp(base.data());
    int o = mkstemp(overlay.data());
    base_bytes.resize(kDisk);
    for (uint64_t i = 0; i < kDisk; ++i) base_bytes[i] = static_cast<uint8_t>(i * 31 + (i >> 12) + 1);
    CHECK(b >= 0 && write(b, base_bytes.data(), kDisk) == static_cast<ssize_t>(kDisk));
    CHECK(o >= 0 && ftruncate(o, kDisk) == 0);
    close(b);
    close(o);
    chmod(base.c_str(), 0444);
  }
  ~TempPair() {
    unlink(base.c_str());
    unlink(overlay.c_str());
  }
  std::vector<uint8_t> Base() const {
    std::vector<uint8_t> out(kDisk);
    int fd = open(base.c_str(), O_RDONLY);
    CHECK(pread(fd, out.data(), kDisk, 0) == static_cast<ssize_t>(kDisk));
    close(fd);
    return out;
  }
};

std::vector<uint8_t> ReadAll(BlockOverlay& ov) {
  std::vector<uint8_t> out(kDisk);
  CHECK(ov.Read({iovec{out.data(), kDisk}}, 0, kDisk));
  return out;
}

}  // namespace

TEST(blk_overlay_reads_the_base_until_written_and_never_writes_it) {
  TempPair t;
  int o = open(t.overlay.c_str(), O_RDWR), b = open(t.base.c_str(), O_RDONLY);
  BlockOverlay ov(o, b, kDisk);
  CHECK(ReadAll(ov) == t.base_bytes);
  CHECK_EQ(ov.map()->allocated_granules(), 0u);
  // A 512-byte write inside granule 2: copied up (the rest of the granule is the base's), one granule allocated.
  std::vector<uint8_t> data(512, 0xab);
  CHECK(ov.Write({iovec{data.data(), 512}}, 2 * G + 1024, 512));
  CHECK_EQ(ov.copy_ups(), 1u);
  CHECK(ov.map()->Allocated(2));
  CHECK(!ov.map()->Allocated(1) && !ov.map()->Allocated(3));
  auto model = t.base_bytes;
  std::memset(model.data() + 2 * G + 1024, 0xab, 512);
  CHECK(ReadAll(ov) == model);
  // Whole granules 4-5 in two iovecs: no copy-up. A write spanning granules 6 (partial) to 8 (partial): two copy-ups.
  std::vector<uint8_t> a(G, 1), c(G, 2);
  CHECK(ov.Write({iovec{a.data(), G}, iovec{c.data(), G}}, 4 * G, 2 * G));
  CHECK_EQ(ov.copy_ups(), 1u);
  std::memcpy(model.data() + 4 * G, a.data(), G);
  std::memcpy(model.data() + 5 * G, c.data(), G);
  std::vector<uint8_t> span(2 * G + 4096, 3);
  CHECK(ov.Write({iovec{span.data(), span.size()}}, 6 * G + G / 2, span.size()));
  CHECK_EQ(ov.copy_ups(), 3u);
  std::memset(model.data() + 6 * G + G / 2, 3, span.size());
  CHECK(ReadAll(ov) == model);
  // The short last granule, written whole (to the end of the disk): no copy-up.
  std::vector<uint8_t> tail(8 * 512, 4);
  CHECK(ov.Write({iovec{tail.data(), tail.size()}}, 16 * G, tail.size()));
  CHECK_EQ(ov.copy_ups(), 3u);
  std::memset(model.data() + 16 * G, 4, tail.size());
  // Write-zeroes over a partial unallocated granule (copy-up with zeroes) and a whole one (a hole, still held).
  CHECK(ov.WriteZeroes(10 * G + 512, G - 512 + G));
  std::memset(model.data() + 10 * G + 512, 0, 2 * G - 512);
  CHECK(ov.map()->Allocated(10) && ov.map()->Allocated(11));
  CHECK(ReadAll(ov) == model);
  CHECK(t.Base() == t.base_bytes);
  close(o);
  close(b);
}

TEST(blk_overlay_matches_a_model_under_random_requests) {
  TempPair t;
  int o = open(t.overlay.c_str(), O_RDWR), b = open(t.base.c_str(), O_RDONLY);
  BlockOverlay ov(o, b, kDisk);
  auto model = t.base_bytes;
  std::mt19937_64 rng(17);
  std::vector<uint8_t> buf(3 * G);
  for (int i = 0; i < 300; ++i) {
    uint64_t sectors = kDisk / 512;
    uint64_t start = rng() % sectors;
    uint64_t n = 1 + rng() % std::min<uint64_t>(sectors - start, 3 * G / 512);
    uint64_t off = start * 512, len = n * 512;
    switch (rng() % 3) {
      case 0: {
        for (uint64_t k = 0; k < len; ++k) buf[k] = static_cast<uint8_t>(rng());
        // split into two iovecs at a sector boundary to cross granules inside one iovec and between two
        uint64_t cut = (rng() % n) * 512;
        std::vector<iovec> iov{iovec{buf.data(), cut}, iovec{buf.data() + cut, len - cut}};
        if (cut == 0) iov.erase(iov.begin());
        CHECK(ov.Write(iov, off, len));
        std::memcpy(model.data() + off, buf.data(), len);
        break;
      }
      case 1:
        CHECK(ov.WriteZeroes(off, len));
        std::memset(model.data() + off, 0, len);
        break;
      default: {
        CHECK(ov.Read({iovec{buf.data(), len}}, off, len));
        CHECK(std::memcmp(buf.data(), model.data() + off, len) == 0);
      }
    }
  }
  CHECK(ReadAll(ov) == model);
  CHECK(t.Base() == t.base_bytes);
  close(o);
  close(b);
}

TEST(virtio_blk_over_an_overlay_keeps_the_base_and_refuses_a_mismatched_one) {
  TempPair t;
  BlockOptions opt;
  opt.path = t.overlay;
  opt.base_path = t.base;
  auto r = VirtioBlock::Open(opt);
  CHECK(r.ok());
  if (!r.ok()) return;
  auto& blk = *r.value();
  CHECK(blk.overlay_map() != nullptr);
  FlatGuestMemory mem(1 << 20);
  constexpr uint64_t kHdr = 0x10000, kBuf = 0x11000, kStatus = 0x40000;
  auto header = [&](uint32_t type, uint64_t sector) {
    std::memcpy(mem.bytes().data() + kHdr, &type, 4);
    std::memset(mem.bytes().data() + kHdr + 4, 0, 4);
    std::memcpy(mem.bytes().data() + kHdr + 8, &sector, 8);
  };
  auto run = [&](uint32_t len, bool writable) {
    DescriptorChain c;
    c.head = 0;
    c.buffers = {{kHdr, 16, false}, {kBuf, len, writable}, {kStatus, 1, true}};
    for (const auto& b : c.buffers) (b.device_writable ? c.writable_bytes : c.readable_bytes) += b.len;
    uint32_t used = 0;
    CHECK(blk.HandleChain(mem, c, kFeatureVersion1 | kBlkFeatureDiscard | kBlkFeatureWriteZeroes, &used));
    return mem.bytes()[kStatus];
  };
  std::memset(mem.bytes().data() + kBuf, 0x5a, 4096);
  header(kBlkTypeOut, 130);  // inside granule 1
  CHECK_EQ(run(4096, false), kBlkStatusOk);
  header(kBlkTypeIn, 128);
  CHECK_EQ(run(8192, true), kBlkStatusOk);
  CHECK(std::memcmp(mem.bytes().data() + kBuf, t.base_bytes.data() + 128 * 512, 1024) == 0);
  CHECK(mem.bytes()[kBuf + 1024] == 0x5a && mem.bytes()[kBuf + 5119] == 0x5a);
  CHECK(std::memcmp(mem.bytes().data() + kBuf + 5120, t.base_bytes.data() + 130 * 512 + 4096, 3072) == 0);
  // Discard on an overlay is a hint that changes nothing (a hole would show the base again).
  uint64_t seg[2] = {130, 8};
  std::memcpy(mem.bytes().data() + kBuf, seg, 16);
  header(kBlkTypeDiscard, 0);
  CHECK_EQ(run(16, false), kBlkStatusOk);
  header(kBlkTypeIn, 130);
  CHECK_EQ(run(512, true), kBlkStatusOk);
  CHECK_EQ(mem.bytes()[kBuf], 0x5a);
  CHECK(t.Base() == t.base_bytes);
  // A base of another size, and a read-only overlay, are refused.
  TempPair other;
  CHECK_EQ(truncate(other.overlay.c_str(), kDisk + 512), 0);
  BlockOptions bad;
  bad.path = other.overlay;
  bad.base_path = other.base;
  CHECK(!VirtioBlock::Open(bad).ok());
  bad.path = t.overlay;
  bad.read_only = true;
  CHECK(!VirtioBlock::Open(bad).ok());
}
