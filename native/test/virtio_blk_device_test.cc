// virtio-blk on raw block devices (a Block claim's device, KubeVirt's type='block' disk): the capacity comes from
// BLKGETSIZE64 (a device's st_size is 0), requests reach the device, and a device can be the read-only base of a
// copy-on-write overlay (an ephemeral volume over a Block claim). The devices are loop devices over temp files, made
// with util-linux's losetup: root only (CI runs as root); elsewhere the checks say they were skipped.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "devices/virtio/blk.h"
#include "virtio_test_ring.h"

using namespace kvmts::devices::virtio;

namespace {

constexpr uint64_t kBytes = 3 * 1024 * 1024;  // 6144 sectors
constexpr uint64_t kHdr = 0x10000, kBuf = 0x11000, kStatus = 0x40000;

uint8_t Pattern(uint64_t i) { return static_cast<uint8_t>(i * 13 + (i >> 9) + 5); }

// A temp file of kBytes (Pattern) and a loop device over it; both gone with the object.
struct LoopDisk {
  std::string file, device;
  LoopDisk() {
    const char* dir = std::getenv("TMPDIR");
    file = std::string(dir != nullptr ? dir : "/tmp") + "/kvt-blkdev-XXXXXX";
    int fd = mkstemp(file.data());
    std::vector<uint8_t> data(kBytes);
    for (uint64_t i = 0; i < kBytes; ++i) data[i] = Pattern(i);
    CHECK(fd >= 0 && write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    close(fd);
    std::string cmd = "losetup --find --show '" + file + "' 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    char line[64] = {};
    if (p != nullptr && std::fgets(line, sizeof line, p) != nullptr) device = std::string(line, std::strcspn(line, "\n"));
    if (p != nullptr) pclose(p);
  }
  ~LoopDisk() {
    if (!device.empty()) CHECK_EQ(std::system(("losetup --detach " + device).c_str()), 0);
    unlink(file.c_str());
  }
  std::vector<uint8_t> FileBytes(uint64_t off, size_t len) const {
    std::vector<uint8_t> out(len);
    int fd = open(file.c_str(), O_RDONLY);
    CHECK(pread(fd, out.data(), len, static_cast<off_t>(off)) == static_cast<ssize_t>(len));
    close(fd);
    return out;
  }
};

// Root, util-linux's losetup, and a kernel with loop devices (the nested lane's L1 kernel has none: `losetup --find`
// then fails, and the device tests are skipped there; they run on the host).
bool CanMakeLoopDevices(const char* what) {
  if (geteuid() == 0 && std::system("losetup --find >/dev/null 2>&1") == 0) return true;
  std::printf("*** not root, no losetup or no loop devices: %s is SKIPPED ***\n", what);
  return false;
}

struct Requests {
  FlatGuestMemory mem{1 << 20};
  VirtioBlock& blk;
  explicit Requests(VirtioBlock& b) : blk(b) {}
  uint8_t Run(uint32_t type, uint64_t sector, uint32_t len, bool writable) {
    std::memcpy(mem.bytes().data() + kHdr, &type, 4);
    std::memset(mem.bytes().data() + kHdr + 4, 0, 4);
    std::memcpy(mem.bytes().data() + kHdr + 8, &sector, 8);
    DescriptorChain c;
    c.head = 0;
    c.buffers = {{kHdr, 16, false}};
    if (len > 0) c.buffers.push_back({kBuf, len, writable});
    c.buffers.push_back({kStatus, 1, true});
    for (const auto& b : c.buffers) (b.device_writable ? c.writable_bytes : c.readable_bytes) += b.len;
    uint32_t used = 0;
    CHECK(blk.HandleChain(mem, c, kFeatureVersion1 | kBlkFeatureFlush, &used));
    return mem.bytes()[kStatus];
  }
};

uint64_t Capacity(const VirtioBlock& blk) {
  uint8_t cfg[8];
  blk.ReadConfig(kBlkCfgCapacity, cfg, sizeof cfg);
  uint64_t cap;
  std::memcpy(&cap, cfg, 8);
  return cap;
}

}  // namespace

TEST(virtio_blk_on_a_block_device_takes_its_size_from_blkgetsize64) {
  if (!CanMakeLoopDevices("the block device capacity check")) return;
  LoopDisk disk;
  CHECK(!disk.device.empty());
  if (disk.device.empty()) return;
  struct stat st {};
  CHECK(stat(disk.device.c_str(), &st) == 0 && S_ISBLK(st.st_mode) && st.st_size == 0);
  BlockOptions o;
  o.path = disk.device;
  auto r = VirtioBlock::Open(o);
  CHECK(r.ok());
  if (!r.ok()) return;
  auto& blk = *r.value();
  CHECK_EQ(Capacity(blk), kBytes / 512);
  Requests q(blk);
  // The last sector reads the file's bytes; one past the end is refused.
  CHECK_EQ(q.Run(kBlkTypeIn, kBytes / 512 - 1, 512, true), kBlkStatusOk);
  CHECK(std::memcmp(q.mem.bytes().data() + kBuf, disk.FileBytes(kBytes - 512, 512).data(), 512) == 0);
  CHECK_EQ(q.Run(kBlkTypeIn, kBytes / 512, 512, true), kBlkStatusIoErr);
  // A write and a flush reach the file under the device.
  std::memset(q.mem.bytes().data() + kBuf, 0xc3, 4096);
  CHECK_EQ(q.Run(kBlkTypeOut, 8, 4096, false), kBlkStatusOk);
  CHECK_EQ(q.Run(kBlkTypeFlush, 0, 0, false), kBlkStatusOk);
  CHECK(disk.FileBytes(8 * 512, 4096) == std::vector<uint8_t>(4096, 0xc3));
}

TEST(virtio_blk_overlay_over_a_block_device_base_never_writes_the_device) {
  if (!CanMakeLoopDevices("the block device base check")) return;
  LoopDisk base;
  CHECK(!base.device.empty());
  if (base.device.empty()) return;
  const char* dir = std::getenv("TMPDIR");
  std::string overlay = std::string(dir != nullptr ? dir : "/tmp") + "/kvt-blkdev-top-XXXXXX";
  int fd = mkstemp(overlay.data());
  CHECK(fd >= 0 && ftruncate(fd, kBytes) == 0);
  close(fd);
  {
    BlockOptions o;
    o.path = overlay;
    o.base_path = base.device;
    auto r = VirtioBlock::Open(o);
    CHECK(r.ok());
    if (r.ok()) {
      auto& blk = *r.value();
      CHECK_EQ(Capacity(blk), kBytes / 512);
      Requests q(blk);
      std::memset(q.mem.bytes().data() + kBuf, 0x77, 512);
      CHECK_EQ(q.Run(kBlkTypeOut, 3, 512, false), kBlkStatusOk);
      CHECK_EQ(q.Run(kBlkTypeIn, 2, 1536, true), kBlkStatusOk);
      const uint8_t* got = q.mem.bytes().data() + kBuf;
      CHECK(std::memcmp(got, base.FileBytes(2 * 512, 512).data(), 512) == 0);  // from the device
      CHECK(got[512] == 0x77 && got[1023] == 0x77);                            // the write, in the overlay
      CHECK(std::memcmp(got + 1024, base.FileBytes(4 * 512, 512).data(), 512) == 0);
      CHECK_EQ(q.Run(kBlkTypeFlush, 0, 0, false), kBlkStatusOk);
      std::vector<uint8_t> expect(512);
      for (uint64_t i = 0; i < 512; ++i) expect[i] = Pattern(3 * 512 + i);
      CHECK(base.FileBytes(3 * 512, 512) == expect);  // the device under the overlay is untouched
    }
  }
  // An overlay of another size than the device is refused.
  CHECK_EQ(truncate(overlay.c_str(), kBytes + 512), 0);
  BlockOptions bad;
  bad.path = overlay;
  bad.base_path = base.device;
  CHECK(!VirtioBlock::Open(bad).ok());
  unlink(overlay.c_str());
}
