// virtio-blk against a temp file: every request type through HandleChain (read, write, flush, get_id, discard,
// write_zeroes, unknown, out of range, read-only refusal, split headers, unanswerable chains), the config layout,
// then the whole path through the transport and the worker thread (notify -> I/O -> used ring -> MSI), a broken
// chain, and save/restore with the worker quiesced.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "devices/virtio/blk.h"
#include "devices/virtio/virtio_pci.h"
#include "sched_policy.h"
#include "virtio_test_ring.h"

using namespace kvmts::devices::virtio;
using kvt_test::BatchThreads;
using kvt_test::TestRing;

namespace {

constexpr uint64_t kDiskBytes = 1 << 20;  // 2048 sectors
constexpr uint64_t kHdr = 0x10000, kBuf = 0x11000, kStatusGpa = 0x20000;
constexpr uint64_t kAllBlk = kFeatureVersion1 | kBlkFeatureFlush | kBlkFeatureDiscard | kBlkFeatureWriteZeroes;

uint8_t Pattern(uint64_t i) { return static_cast<uint8_t>(i * 7 + 3); }

// A temp file of kDiskBytes filled with Pattern; removed with the object.
struct TempDisk {
  std::string path;
  TempDisk() {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir != nullptr ? dir : "/tmp") + "/kvt-blk-XXXXXX";
    int fd = mkstemp(path.data());
    std::vector<uint8_t> data(kDiskBytes);
    for (uint64_t i = 0; i < kDiskBytes; ++i) data[i] = Pattern(i);
    CHECK(fd >= 0 && write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    close(fd);
  }
  ~TempDisk() { unlink(path.c_str()); }
  std::vector<uint8_t> Read(uint64_t off, size_t len) const {
    std::vector<uint8_t> out(len);
    int fd = open(path.c_str(), O_RDONLY);
    CHECK(pread(fd, out.data(), len, static_cast<off_t>(off)) == static_cast<ssize_t>(len));
    close(fd);
    return out;
  }
};

std::unique_ptr<VirtioBlock> OpenDisk(const TempDisk& disk, bool ro = false, std::string serial = "kvt-serial-1") {
  BlockOptions o;
  o.path = disk.path;
  o.read_only = ro;
  o.serial = std::move(serial);
  auto r = VirtioBlock::Open(o);
  CHECK(r.ok());
  return r.ok() ? std::move(r.value()) : nullptr;
}

void Header(FlatGuestMemory& mem, uint32_t type, uint64_t sector) {
  std::memcpy(mem.bytes().data() + kHdr, &type, 4);
  std::memset(mem.bytes().data() + kHdr + 4, 0, 4);
  std::memcpy(mem.bytes().data() + kHdr + 8, &sector, 8);
  mem.bytes()[kStatusGpa] = 0xee;
}

DescriptorChain Chain(std::vector<DescBuffer> buffers) {
  DescriptorChain c;
  c.head = 0;
  c.buffers = std::move(buffers);
  for (const auto& b : c.buffers) (b.device_writable ? c.writable_bytes : c.readable_bytes) += b.len;
  return c;
}

// header | data (writable or readable) | status
DescriptorChain Request(uint64_t data_len, bool data_writable) {
  std::vector<DescBuffer> b{{kHdr, 16, false}};
  if (data_len) b.push_back({kBuf, static_cast<uint32_t>(data_len), data_writable});
  b.push_back({kStatusGpa, 1, true});
  return Chain(b);
}

uint8_t Run(VirtioBlock& blk, FlatGuestMemory& mem, const DescriptorChain& c, uint32_t* used = nullptr,
            uint64_t acked = kAllBlk) {
  uint32_t len = 0;
  CHECK(blk.HandleChain(mem, c, acked, &len));
  if (used != nullptr) *used = len;
  return mem.bytes()[kStatusGpa];
}

void PutSegment(FlatGuestMemory& mem, uint64_t at, uint64_t sector, uint32_t n, uint32_t flags) {
  std::memcpy(mem.bytes().data() + at, &sector, 8);
  std::memcpy(mem.bytes().data() + at + 8, &n, 4);
  std::memcpy(mem.bytes().data() + at + 12, &flags, 4);
}

}  // namespace

TEST(virtio_blk_reads_into_guest_memory_and_marks_it_dirty) {
  TempDisk disk;
  auto blk = OpenDisk(disk);
  FlatGuestMemory mem(1 << 20);
  Header(mem, kBlkTypeIn, 3);
  uint32_t used = 0;
  CHECK_EQ(Run(*blk, mem, Request(1024, true), &used), kBlkStatusOk);
  CHECK_EQ(used, 1025u);
  bool same = true;
  for (uint64_t i = 0; i < 1024; ++i) same = same && mem.bytes()[kBuf + i] == Pattern(3 * 512 + i);
  CHECK(same);
  bool data_dirty = false, status_dirty = false;
  for (auto [gpa, len] : mem.dirty()) {
    data_dirty = data_dirty || (gpa == kBuf && len == 1024);
    status_dirty = status_dirty || (gpa == kStatusGpa && len == 1);
  }
  CHECK(data_dirty);
  CHECK(status_dirty);
  CHECK_EQ(blk->stats().read_bytes, 1024u);
  // Past the end, and a length that is not whole sectors: IOERR.
  Header(mem, kBlkTypeIn, 2047);
  CHECK_EQ(Run(*blk, mem, Request(1024, true), &used), kBlkStatusIoErr);
  CHECK_EQ(used, 1u);
  Header(mem, kBlkTypeIn, ~0ull);
  CHECK_EQ(Run(*blk, mem, Request(512, true)), kBlkStatusIoErr);
  Header(mem, kBlkTypeIn, 0);
  CHECK_EQ(Run(*blk, mem, Request(100, true)), kBlkStatusIoErr);
  CHECK_EQ(blk->stats().io_errors, 3u);

}

TEST(virtio_blk_writes_flushes_and_handles_split_headers) {
  TempDisk disk;
  auto blk = OpenDisk(disk);
  FlatGuestMemory mem(1 << 20);
  for (int i = 0; i < 512; ++i) mem.bytes()[kBuf + i] = static_cast<uint8_t>(0xa0 + i % 7);
  Header(mem, kBlkTypeOut, 5);
  CHECK_EQ(Run(*blk, mem, Request(512, false)), kBlkStatusOk);
  auto back = disk.Read(5 * 512, 512);
  CHECK(std::memcmp(back.data(), mem.bytes().data() + kBuf, 512) == 0);
  CHECK_EQ(disk.Read(4 * 512 + 511, 1)[0], Pattern(4 * 512 + 511));  // neighbours untouched
  // The header in two descriptors (8 + 8), the data sharing none of them.
  Header(mem, kBlkTypeOut, 6);
  DescriptorChain split = Chain({{kHdr, 8, false}, {kHdr + 8, 8, false}, {kBuf, 512, false}, {kStatusGpa, 1, true}});
  CHECK_EQ(Run(*blk, mem, split), kBlkStatusOk);
  CHECK(disk.Read(6 * 512, 512) == back);
  // Header and data in one descriptor.
  std::memcpy(mem.bytes().data() + kHdr + 16, mem.bytes().data() + kBuf, 512);
  Header(mem, kBlkTypeOut, 7);
  CHECK_EQ(Run(*blk, mem, Chain({{kHdr, 16 + 512, false}, {kStatusGpa, 1, true}})), kBlkStatusOk);
  CHECK(disk.Read(7 * 512, 512) == back);
  Header(mem, kBlkTypeFlush, 0);
  CHECK_EQ(Run(*blk, mem, Request(0, false)), kBlkStatusOk);
  CHECK_EQ(blk->stats().flushes, 1u);
  CHECK_EQ(blk->stats().write_bytes, 1536u);
  Header(mem, 99, 0);
  CHECK_EQ(Run(*blk, mem, Request(0, false)), kBlkStatusUnsupp);
}

TEST(virtio_blk_get_id_returns_the_serial) {
  TempDisk disk;
  FlatGuestMemory mem(1 << 20);
  auto blk = OpenDisk(disk, false, "disk-0001");
  std::memset(mem.bytes().data() + kBuf, 0xff, 32);
  Header(mem, kBlkTypeGetId, 0);
  uint32_t used = 0;
  CHECK_EQ(Run(*blk, mem, Request(20, true), &used), kBlkStatusOk);
  CHECK_EQ(used, 21u);
  CHECK(std::string(reinterpret_cast<char*>(mem.bytes().data() + kBuf)) == "disk-0001");
  CHECK_EQ(mem.bytes()[kBuf + 19], 0);
  auto long_serial = OpenDisk(disk, false, "0123456789abcdefghijKLMN");
  CHECK_EQ(Run(*long_serial, mem, Request(20, true)), kBlkStatusOk);
  CHECK(std::memcmp(mem.bytes().data() + kBuf, "0123456789abcdefghij", 20) == 0);  // cut, not terminated
  CHECK_EQ(mem.bytes()[kBuf + 20], 0xff);
}

TEST(virtio_blk_discards_and_writes_zeroes) {
  TempDisk disk;
  auto blk = OpenDisk(disk);
  FlatGuestMemory mem(1 << 20);
  PutSegment(mem, kBuf, 8, 8, 0);
  PutSegment(mem, kBuf + 16, 32, 8, kBlkSegmentUnmap);
  Header(mem, kBlkTypeWriteZeroes, 0);
  CHECK_EQ(Run(*blk, mem, Request(32, false)), kBlkStatusOk);
  CHECK(disk.Read(8 * 512, 4096) == std::vector<uint8_t>(4096, 0));
  CHECK(disk.Read(32 * 512, 4096) == std::vector<uint8_t>(4096, 0));
  CHECK_EQ(disk.Read(16 * 512, 1)[0], Pattern(16 * 512));
  CHECK_EQ(blk->stats().write_zeroes, 2u);
  Header(mem, kBlkTypeDiscard, 0);
  PutSegment(mem, kBuf, 64, 16, 0);
  CHECK_EQ(Run(*blk, mem, Request(16, false)), kBlkStatusOk);
  CHECK_EQ(blk->stats().discards, 1u);
  // unmap on discard, reserved flag bits, a bad segment length, past the end, not negotiated
  PutSegment(mem, kBuf, 64, 16, kBlkSegmentUnmap);
  CHECK_EQ(Run(*blk, mem, Request(16, false)), kBlkStatusUnsupp);
  Header(mem, kBlkTypeWriteZeroes, 0);
  PutSegment(mem, kBuf, 64, 16, 4);
  CHECK_EQ(Run(*blk, mem, Request(16, false)), kBlkStatusUnsupp);
  CHECK_EQ(Run(*blk, mem, Request(15, false)), kBlkStatusUnsupp);
  PutSegment(mem, kBuf, 2040, 16, 0);
  CHECK_EQ(Run(*blk, mem, Request(16, false)), kBlkStatusIoErr);
  PutSegment(mem, kBuf, 0, 16, 0);
  CHECK_EQ(Run(*blk, mem, Request(16, false), nullptr, kFeatureVersion1), kBlkStatusUnsupp);
  CHECK(Run(*blk, mem, Request(16 * 33, false)) == kBlkStatusUnsupp);  // more than max_discard_seg
  // WRITE_ZEROES over its bound (it may turn into real writes): IOERR before anything is zeroed.
  Header(mem, kBlkTypeWriteZeroes, 0);
  PutSegment(mem, kBuf, 0, 1024, 0);
  PutSegment(mem, kBuf + 16, 1024, kBlkMaxWriteZeroesSectors, 0);
  CHECK_EQ(Run(*blk, mem, Request(32, false)), kBlkStatusIoErr);
  CHECK_EQ(disk.Read(0, 1)[0], Pattern(0));
}

TEST(virtio_blk_read_only_refuses_writes) {
  TempDisk disk;
  auto blk = OpenDisk(disk, true);
  CHECK(blk->device_features() & kBlkFeatureRo);
  CHECK(!(blk->device_features() & kBlkFeatureDiscard));
  CHECK(!(blk->device_features() & kBlkFeatureWriteZeroes));
  FlatGuestMemory mem(1 << 20);
  Header(mem, kBlkTypeOut, 0);
  uint64_t acked = kFeatureVersion1 | kBlkFeatureRo | kBlkFeatureFlush;
  CHECK_EQ(Run(*blk, mem, Request(512, false), nullptr, acked), kBlkStatusIoErr);
  CHECK_EQ(disk.Read(0, 1)[0], Pattern(0));
  Header(mem, kBlkTypeDiscard, 0);
  PutSegment(mem, kBuf, 0, 8, 0);
  CHECK_EQ(Run(*blk, mem, Request(16, false), nullptr, acked), kBlkStatusUnsupp);
  Header(mem, kBlkTypeWriteZeroes, 0);
  CHECK_EQ(Run(*blk, mem, Request(16, false), nullptr, acked), kBlkStatusUnsupp);
  CHECK_EQ(disk.Read(0, 1)[0], Pattern(0));
  Header(mem, kBlkTypeIn, 0);
  CHECK_EQ(Run(*blk, mem, Request(512, true), nullptr, acked), kBlkStatusOk);
  Header(mem, kBlkTypeFlush, 0);
  CHECK_EQ(Run(*blk, mem, Request(0, false), nullptr, acked), kBlkStatusOk);
}

TEST(virtio_blk_refuses_chains_it_cannot_answer) {
  TempDisk disk;
  auto blk = OpenDisk(disk);
  FlatGuestMemory mem(1 << 20);
  uint32_t used = 0;
  Header(mem, kBlkTypeIn, 0);
  CHECK(!blk->HandleChain(mem, Chain({{kHdr, 16, false}, {kBuf, 512, false}}), kAllBlk, &used));  // no status
  CHECK(!blk->HandleChain(mem, Chain({{kHdr, 8, false}, {kStatusGpa, 1, true}}), kAllBlk, &used));  // short header
  CHECK(!blk->HandleChain(mem, Chain({{kHdr, 16, false}, {kStatusGpa, 0, true}}), kAllBlk, &used));  // empty status
  CHECK(!blk->HandleChain(mem, Chain({}), kAllBlk, &used));
  // An unknown request with extra data is still answered (UNSUPP), as is an IN with readable data.
  Header(mem, 42, 0);
  CHECK_EQ(Run(*blk, mem, Request(512, false)), kBlkStatusUnsupp);
}

TEST(virtio_blk_config_space_reports_capacity_and_limits) {
  TempDisk disk;
  auto blk = OpenDisk(disk);
  uint8_t cfg[kBlkConfigBytes + 4];
  blk->ReadConfig(0, cfg, sizeof cfg);
  uint64_t cap;
  uint32_t seg_max, blk_size, max_discard_seg;
  std::memcpy(&cap, cfg + kBlkCfgCapacity, 8);
  std::memcpy(&seg_max, cfg + kBlkCfgSegMax, 4);
  std::memcpy(&blk_size, cfg + kBlkCfgBlkSize, 4);
  std::memcpy(&max_discard_seg, cfg + kBlkCfgMaxDiscardSeg, 4);
  CHECK_EQ(cap, 2048u);
  CHECK_EQ(seg_max, 254u);
  uint32_t size_max;
  std::memcpy(&size_max, cfg + kBlkCfgSizeMax, 4);
  CHECK_EQ(size_max, kBlkSizeMax);
  CHECK(blk->device_features() & kBlkFeatureSizeMax);
  CHECK(uint64_t{seg_max} * size_max <= kBlkMaxRequestBytes);  // Linux's largest request is always served
  CHECK_EQ(blk_size, 512u);
  CHECK_EQ(max_discard_seg, kBlkMaxDiscardSegments);
  CHECK_EQ(cfg[kBlkConfigBytes], 0);
  uint8_t b = 0xff;
  blk->ReadConfig(1000, &b, 1);
  CHECK_EQ(b, 0);
  BlockOptions bad;
  bad.path = disk.path;
  bad.queue_size = 100;
  CHECK(!VirtioBlock::Open(bad).ok());
  bad.queue_size = 256;
  bad.path = "/nonexistent/disk.img";
  auto r = VirtioBlock::Open(bad);
  CHECK(!r.ok());
  CHECK(r.error().op == "open");
}

namespace {

struct LockedMsi : MsiSink {
  void SignalMsi(uint64_t, uint32_t data) override {
    std::lock_guard<std::mutex> l(mu);
    sent.push_back(data);
  }
  size_t count() {
    std::lock_guard<std::mutex> l(mu);
    return sent.size();
  }
  std::mutex mu;
  std::vector<uint32_t> sent;
};

constexpr uint64_t kBar = 0xe0000000;

struct Live {
  TempDisk disk;
  FlatGuestMemory mem{1 << 20};
  TestRing ring{mem, 16};
  LockedMsi msi;
  std::unique_ptr<VirtioBlock> blk = OpenDisk(disk);
  std::unique_ptr<VirtioPciTransport> t = std::make_unique<VirtioPciTransport>(blk.get(), &mem, &msi, kBar);

  void W(uint64_t off, uint64_t v, size_t len) { CHECK(t->MmioWrite(kBar + off, reinterpret_cast<uint8_t*>(&v), len)); }
  uint64_t R(uint64_t off, size_t len) {
    uint64_t v = 0;
    CHECK(t->MmioRead(kBar + off, reinterpret_cast<uint8_t*>(&v), len));
    return v;
  }
  void Bringup() {
    uint16_t cmd = kPciCommandMemory | kPciCommandBusMaster;
    t->ConfigWrite(kPciCommandOffset, reinterpret_cast<uint8_t*>(&cmd), 2);
    uint16_t cap = 0;
    for (uint8_t at = 0, i = 0; i < 16; ++i) {
      t->ConfigRead(at == 0 ? kPciCapPointerOffset : static_cast<uint16_t>(at + 1), &at, 1);
      if (at == 0) break;
      uint8_t id = 0;
      t->ConfigRead(at, &id, 1);
      if (id == kPciCapMsix) cap = at;
    }
    uint16_t ctl = kMsixControlEnable;
    t->ConfigWrite(static_cast<uint16_t>(cap + 2), reinterpret_cast<uint8_t*>(&ctl), 2);
    W(kMsixTableOffset, 0xfee00000, 8);
    W(kMsixTableOffset + 8, 0x51, 4);
    W(kMsixTableOffset + 12, 0, 4);
    W(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver, 1);
    uint64_t f = kFeatureVersion1 | kFeatureEventIdx | kFeatureIndirectDesc | kBlkFeatureFlush;
    W(kCommonDriverFeatureSelect, 0, 4);
    W(kCommonDriverFeature, f & 0xffffffff, 4);
    W(kCommonDriverFeatureSelect, 1, 4);
    W(kCommonDriverFeature, f >> 32, 4);
    W(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk, 1);
    W(kCommonQueueSelect, 0, 2);
    W(kCommonQueueSize, 16, 2);
    W(kCommonQueueMsixVector, 0, 2);
    W(kCommonQueueDesc, TestRing::kDesc, 8);
    W(kCommonQueueDriver, TestRing::kAvail, 8);
    W(kCommonQueueDevice, TestRing::kUsed, 8);
    W(kCommonQueueEnable, 1, 2);
    W(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk, 1);
  }
  // Publishes a 3-descriptor IN request (header, 4 KiB at kBuf + 4096 * slot, status) at head 3 * slot, and kicks.
  void SubmitRead(uint16_t slot, uint64_t sector) {
    SubmitReadNoKick(slot, sector);
    W(kNotifyOffset, 0, 2);
  }
  void SubmitReadNoKick(uint16_t slot, uint64_t sector) {
    uint16_t h = static_cast<uint16_t>(3 * slot);
    uint64_t hdr = kHdr + 32ull * slot;
    uint32_t type = kBlkTypeIn;
    std::memcpy(mem.bytes().data() + hdr, &type, 4);
    std::memcpy(mem.bytes().data() + hdr + 8, &sector, 8);
    ring.Desc(h, hdr, 16, kDescFlagNext, static_cast<uint16_t>(h + 1));
    ring.Desc(static_cast<uint16_t>(h + 1), kBuf + 4096ull * slot, 4096, kDescFlagNext | kDescFlagWrite,
              static_cast<uint16_t>(h + 2));
    ring.Desc(static_cast<uint16_t>(h + 2), kStatusGpa + slot, 1, kDescFlagWrite, 0);
    mem.bytes()[kStatusGpa + slot] = 0xee;
    ring.SetUsedEvent(ring.UsedIdx());  // as Linux: interrupt me after the next completion
    ring.Publish(h);
  }
  template <typename F>
  bool WaitFor(F cond) {
    for (int i = 0; i < 5000; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
};

}  // namespace

TEST(virtio_blk_serves_a_queue_on_its_worker_thread) {
  Live v;
  v.Bringup();
  CHECK_EQ(v.t->status() & kStatusDriverOk, kStatusDriverOk);
  v.SubmitRead(0, 8);
  // avail_event is re-armed after the interrupt: wait for it too.
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 1 && v.msi.count() == 1 && v.ring.AvailEvent() == 1; }));
  CHECK_EQ(v.ring.UsedLen(0), 4097u);
  CHECK_EQ(v.mem.bytes()[kStatusGpa], kBlkStatusOk);
  CHECK_EQ(v.mem.bytes()[kBuf + 10], Pattern(8 * 512 + 10));
  CHECK_EQ(v.msi.sent[0], 0x51u);
  v.SubmitRead(1, 16);
  v.SubmitRead(2, 24);
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 3 && v.msi.count() >= 2; }));
  CHECK_EQ(v.mem.bytes()[kBuf + 2 * 4096], Pattern(24 * 512));
  v.W(kCommonDeviceStatus, 0, 1);  // reset joins the worker
  CHECK_EQ(v.t->status(), 0);
  bool dirty = false;
  for (auto [gpa, len] : v.mem.dirty()) dirty = dirty || (gpa == kBuf + 4096 && len == 4096);
  CHECK(dirty);
  CHECK_EQ(v.blk->stats().requests, 3u);
}

TEST(virtio_blk_worker_keeps_the_default_policy_and_serves_a_kick_in_one_turn) {
  size_t batch_before = BatchThreads();
  Live v;
  v.Bringup();
  // Not SCHED_BATCH (blk.h: a kick must preempt a halt-polling vCPU thread, for QD1 latency).
  v.SubmitRead(4, 0);
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 1 && v.msi.count() == 1; }));
  CHECK_EQ(BatchThreads(), batch_before);
  // Four requests behind one kick: one turn of the worker, one interrupt (the driver asked after the first).
  for (uint16_t slot = 0; slot < 4; ++slot) v.SubmitReadNoKick(slot, 8u * slot);
  v.W(kNotifyOffset, 0, 2);
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 5 && v.msi.count() == 2; }));
  CHECK_EQ(v.mem.bytes()[kBuf + 3 * 4096 + 7], Pattern(24 * 512 + 7));
  BlockStats s = v.blk->stats();
  CHECK_EQ(s.requests, 5u);
  CHECK_EQ(s.batches, 2u);
  CHECK_EQ(s.interrupts, 2u);
  v.W(kCommonDeviceStatus, 0, 1);  // reset joins the worker
}

TEST(virtio_blk_broken_chain_sets_needs_reset_and_recovers_after_reset) {
  Live v;
  v.Bringup();
  v.ring.Desc(0, kHdr, 16, kDescFlagNext, 0);  // a loop
  v.ring.Publish(0);
  v.W(kNotifyOffset, 0, 2);
  CHECK(v.WaitFor([&] { return (v.t->status() & kStatusNeedsReset) != 0; }));
  CHECK(std::string(v.t->broken_reason()) == "loop");
  CHECK_EQ(v.blk->stats().broken, 1u);
  CHECK_EQ(v.t->stats().broken, 1u);
  v.W(kCommonDeviceStatus, 0, 1);
  v.ring.SetAvailIdx(0);
  std::memset(v.mem.bytes().data() + TestRing::kUsed, 0, 4);
  v.Bringup();
  v.SubmitRead(0, 1);
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 1; }));
  CHECK_EQ(v.mem.bytes()[kStatusGpa], kBlkStatusOk);
}

TEST(virtio_blk_save_restore_round_trip_resumes_the_queue) {
  Live v;
  v.Bringup();
  v.SubmitRead(0, 2);
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 1; }));
  std::vector<uint8_t> blob = v.t->Save();  // quiesced: nothing in flight
  // The target: a new device on the same disk and the same memory (migration copied it).
  std::unique_ptr<VirtioBlock> blk2 = OpenDisk(v.disk, false, "other-serial");
  LockedMsi msi2;
  VirtioPciTransport t2(blk2.get(), &v.mem, &msi2, kBar);
  v.W(kCommonDeviceStatus, 0, 1);  // the source stops
  v.t.reset();
  // A request published while the machine was stopped: its kick is lost, restore must still serve it.
  v.SubmitReadNoKick(1, 4);
  CHECK(t2.Restore(blob.data(), blob.size()).ok());
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 2 && msi2.count() == 1; }));
  CHECK_EQ(v.mem.bytes()[kBuf + 4096], Pattern(4 * 512));
  CHECK_EQ(t2.status() & kStatusDriverOk, kStatusDriverOk);
  // The serial the guest saw travels with the state.
  uint8_t id[20] = {};
  uint32_t used = 0;
  uint32_t type = kBlkTypeGetId;
  t2.Save();  // quiesce/resume cycle on a live device
  t2.Resume();
  FlatGuestMemory mem(1 << 20);
  std::memcpy(mem.bytes().data() + kHdr, &type, 4);
  CHECK(blk2->HandleChain(mem, Request(20, true), kAllBlk, &used));
  std::memcpy(id, mem.bytes().data() + kBuf, 20);
  CHECK(std::string(reinterpret_cast<char*>(id)) == "kvt-serial-1");
  // A disk of another size is refused.
  std::vector<uint8_t> dev_state = blk2->SaveState();
  dev_state[1] ^= 1;
  CHECK(!blk2->RestoreState(dev_state.data(), dev_state.size()));
}

TEST(virtio_blk_quiesced_device_leaves_requests_in_the_ring_until_resume) {
  Live v;
  v.Bringup();
  v.t->Quiesce();
  v.SubmitRead(0, 3);  // the kick arrives while parked
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_EQ(v.ring.UsedIdx(), 0);
  CHECK_EQ(v.mem.bytes()[kStatusGpa], 0xee);  // guest memory untouched while quiesced
  v.t->Resume();
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 1; }));
  CHECK_EQ(v.mem.bytes()[kStatusGpa], kBlkStatusOk);
}

TEST(virtio_blk_kick_eventfd_wakes_the_worker_as_an_ioeventfd_would) {
  Live v;
  v.Bringup();
  int kick = v.blk->QueueKickFd(0);
  CHECK(kick >= 0);
  CHECK_EQ(v.blk->QueueKickFd(1), -1);
  v.SubmitReadNoKick(0, 5);
  uint64_t one = 1;
  CHECK(write(kick, &one, sizeof one) == static_cast<ssize_t>(sizeof one));  // what KVM does on the notify write
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 1; }));
  CHECK_EQ(v.mem.bytes()[kBuf + 1], Pattern(5 * 512 + 1));
  // Kicks while quiesced wait in the counter and are served on resume.
  v.t->Quiesce();
  v.SubmitReadNoKick(1, 6);
  CHECK(write(kick, &one, sizeof one) == static_cast<ssize_t>(sizeof one));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK_EQ(v.ring.UsedIdx(), 1);
  v.t->Resume();
  CHECK(v.WaitFor([&] { return v.ring.UsedIdx() == 2; }));
}

TEST(virtio_blk_refuses_requests_above_the_size_cap_on_a_large_disk) {
  // A sparse 512 MiB disk, so only the cap (not the capacity) can refuse a 257 MiB read.
  TempDisk disk;
  CHECK(truncate(disk.path.c_str(), 512ll << 20) == 0);
  auto blk = OpenDisk(disk);
  CHECK_EQ(blk->capacity_sectors(), (512ull << 20) / 512);
  FlatGuestMemory mem(2 << 20);
  Header(mem, kBlkTypeIn, 0);
  auto request = [](int segments) {  // the same 1 MiB of RAM named again and again, as a guest may
    std::vector<DescBuffer> b{{kHdr, 16, false}};
    for (int i = 0; i < segments; ++i) b.push_back({0x100000, kBlkSizeMax, true});
    b.push_back({kStatusGpa, 1, true});
    return Chain(b);
  };
  uint32_t used = 0;
  CHECK(blk->HandleChain(mem, request(257), kAllBlk, &used));
  CHECK_EQ(mem.bytes()[kStatusGpa], kBlkStatusIoErr);
  CHECK_EQ(blk->stats().read_bytes, 0u);
  CHECK(blk->HandleChain(mem, request(256), kAllBlk, &used));  // exactly the cap
  CHECK_EQ(mem.bytes()[kStatusGpa], kBlkStatusOk);
  CHECK_EQ(blk->stats().read_bytes, 256ull << 20);
}
