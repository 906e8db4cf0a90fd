// BlockDirtyMap (devices/virtio/blk_dirty.h) and virtio-blk marking it: granules touched by a range, clipping at the
// end of the disk, take-and-clear, start/stop, marks racing takes, and the request types that mark (write,
// write-zeroes, discard) and those that do not (read, flush, any request while no migration runs).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "devices/virtio/blk.h"
#include "devices/virtio/blk_dirty.h"
#include "virtio_test_ring.h"

using namespace kvmts::devices::virtio;

namespace {

constexpr uint64_t kG = BlockDirtyMap::kGranuleBytes;

std::vector<uint64_t> Granules(const std::vector<uint64_t>& words) {
  std::vector<uint64_t> out;
  for (size_t w = 0; w < words.size(); w++) {
    for (int b = 0; b < 64; b++) {
      if ((words[w] >> b) & 1) out.push_back(w * 64 + static_cast<uint64_t>(b));
    }
  }
  return out;
}

}  // namespace

TEST(blk_dirty_marks_the_granules_a_range_touches_only_while_started) {
  BlockDirtyMap m(10 * kG + 512);  // 11 granules, the last one partial
  CHECK_EQ(m.granules(), 11u);
  m.Mark(0, 4096);
  CHECK(Granules(m.TakeAndClear()).empty());  // not started: nothing
  m.Start();
  CHECK(m.active());
  m.Mark(0, 1);
  m.Mark(kG - 1, 2);           // straddles granules 0 and 1
  m.Mark(5 * kG, 3 * kG);      // exactly 5, 6, 7
  m.Mark(10 * kG, 1 << 20);    // clipped to the last granule
  m.Mark(11 * kG, 512);        // past the end: ignored
  m.Mark(3 * kG, 0);           // empty: ignored
  auto words = m.TakeAndClear();
  CHECK(Granules(words) == (std::vector<uint64_t>{0, 1, 5, 6, 7, 10}));
  CHECK_EQ(BlockDirtyMap::Count(words), 6u);
  CHECK(Granules(m.TakeAndClear()).empty());  // taken means cleared
  m.Mark(2 * kG, 1);
  m.Stop();
  m.Mark(3 * kG, 1);  // stopped: not marked, but the earlier bit stays until taken
  CHECK(Granules(m.TakeAndClear()) == (std::vector<uint64_t>{2}));
  m.Mark(4 * kG, 1);
  m.Start();  // a new start forgets everything before it
  CHECK(Granules(m.TakeAndClear()).empty());
}

TEST(blk_dirty_a_mark_racing_takes_is_taken_exactly_once) {
  constexpr uint64_t kGranules = 4096;
  BlockDirtyMap m(kGranules * kG);
  m.Start();
  std::atomic<bool> done{false};
  std::vector<uint64_t> seen(kGranules, 0);
  std::thread taker([&] {
    while (!done.load()) {
      for (uint64_t g : Granules(m.TakeAndClear())) seen[g]++;
    }
  });
  std::thread a([&] {
    for (uint64_t g = 0; g < kGranules; g += 2) m.Mark(g * kG, 1);
  });
  std::thread b([&] {
    for (uint64_t g = 1; g < kGranules; g += 2) m.Mark(g * kG + 100, 10);
  });
  a.join();
  b.join();
  done.store(true);
  taker.join();
  for (uint64_t g : Granules(m.TakeAndClear())) seen[g]++;
  bool all_once = true;
  for (uint64_t n : seen) all_once = all_once && n == 1;
  CHECK(all_once);
}

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(uint64_t bytes) {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir != nullptr ? dir : "/tmp") + "/kvt-blkdirty-XXXXXX";
    int fd = mkstemp(path.data());
    CHECK(fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    close(fd);
  }
  ~TempFile() { unlink(path.c_str()); }
};

constexpr uint64_t kHdr = 0x10000, kBuf = 0x11000, kStatusGpa = 0x30000;

uint8_t Submit(VirtioBlock& blk, FlatGuestMemory& mem, uint32_t type, uint64_t sector, uint32_t data_len,
               bool writable) {
  std::memcpy(mem.bytes().data() + kHdr, &type, 4);
  std::memset(mem.bytes().data() + kHdr + 4, 0, 4);
  std::memcpy(mem.bytes().data() + kHdr + 8, &sector, 8);
  DescriptorChain c;
  c.buffers.push_back({kHdr, 16, false});
  if (data_len) c.buffers.push_back({kBuf, data_len, writable});
  c.buffers.push_back({kStatusGpa, 1, true});
  for (const auto& b : c.buffers) (b.device_writable ? c.writable_bytes : c.readable_bytes) += b.len;
  uint32_t used = 0;
  CHECK(blk.HandleChain(mem, c, kFeatureVersion1 | kBlkFeatureFlush | kBlkFeatureDiscard | kBlkFeatureWriteZeroes,
                        &used));
  return mem.bytes()[kStatusGpa];
}

void Segment(FlatGuestMemory& mem, uint64_t sector, uint32_t n) {
  std::memcpy(mem.bytes().data() + kBuf, &sector, 8);
  std::memcpy(mem.bytes().data() + kBuf + 8, &n, 4);
  std::memset(mem.bytes().data() + kBuf + 12, 0, 4);
}

}  // namespace

TEST(blk_dirty_virtio_blk_marks_writes_write_zeroes_and_discards_but_not_reads) {
  TempFile file(4 << 20);
  BlockOptions o;
  o.path = file.path;
  auto r = VirtioBlock::Open(o);
  CHECK(r.ok());
  if (!r.ok()) return;
  VirtioBlock& blk = *r.value();
  FlatGuestMemory mem(1 << 20);
  BlockDirtyMap& map = blk.dirty_map();
  CHECK_EQ(Submit(blk, mem, kBlkTypeOut, 0, 4096, false), kBlkStatusOk);
  CHECK(Granules(map.TakeAndClear()).empty());  // no migration: no marks
  map.Start();
  CHECK_EQ(Submit(blk, mem, kBlkTypeOut, 127, 1024, false), kBlkStatusOk);  // bytes 65024..66047: granules 0, 1
  CHECK_EQ(Submit(blk, mem, kBlkTypeIn, 1024, 4096, true), kBlkStatusOk);
  CHECK_EQ(Submit(blk, mem, kBlkTypeFlush, 0, 0, false), kBlkStatusOk);
  CHECK(Granules(map.TakeAndClear()) == (std::vector<uint64_t>{0, 1}));
  Segment(mem, 10 * 128, 256);  // granules 10, 11
  CHECK_EQ(Submit(blk, mem, kBlkTypeWriteZeroes, 0, 16, false), kBlkStatusOk);
  Segment(mem, 40 * 128, 1);  // granule 40
  CHECK_EQ(Submit(blk, mem, kBlkTypeDiscard, 0, 16, false), kBlkStatusOk);
  CHECK(Granules(map.TakeAndClear()) == (std::vector<uint64_t>{10, 11, 40}));
  CHECK_EQ(Submit(blk, mem, kBlkTypeOut, 8192, 512, false), kBlkStatusIoErr);  // past the end: refused, unmarked
  CHECK(Granules(map.TakeAndClear()).empty());
}
