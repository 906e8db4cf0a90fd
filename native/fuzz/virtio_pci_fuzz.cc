// libFuzzer target: the virtio-pci transport driven by an arbitrary register sequence (config space, BAR: common
// config, ISR, device config, notify, MSI-X table and PBA; PCI BAR moves and sizing), over a virtio-blk device whose
// queue runs synchronously on each notify against a memfd disk, with save/restore round trips in between. Nothing
// may crash, hang, or touch memory outside the guest and the disk (ASan/UBSan); a restore of a fresh save must
// reproduce the same blob.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "devices/virtio/blk.h"
#include "devices/virtio/virtio_pci.h"
#include "virtio_pci_fuzz.h"

namespace kvmts {
// kvm/system.cc (the home of ErrnoError) pulls in KVM; the fuzz binary has its own.
Error ErrnoError(const char* op, std::string detail) { return Error{errno, op, std::move(detail)}; }
}  // namespace kvmts

using namespace kvmts::devices::virtio;

namespace {

// A virtio-blk whose notify serves the queue at once on the calling thread (deterministic, no worker).
class SyncBlock : public VirtioDevice {
 public:
  explicit SyncBlock(VirtioBlock* blk) : blk_(blk) {}
  uint16_t device_type() const override { return blk_->device_type(); }
  uint32_t pci_class_code() const override { return blk_->pci_class_code(); }
  uint64_t device_features() const override { return blk_->device_features(); }
  uint16_t queue_count() const override { return blk_->queue_count(); }
  uint16_t queue_max_size() const override { return 16; }
  void ReadConfig(uint64_t o, uint8_t* d, size_t n) const override { blk_->ReadConfig(o, d, n); }
  void WriteConfig(uint64_t o, const uint8_t* d, size_t n) override { blk_->WriteConfig(o, d, n); }
  kvmts::Status Activate(const ActivateContext& ctx) override {
    ctx_ = ctx;
    broken_ = false;
    return kvmts::OkStatus();
  }
  void QueueNotify(uint16_t q) override {
    if (frozen || broken_ || q >= ctx_.queues.size() || !ctx_.queues[q]->state().ready) return;
    SplitQueue& queue = *ctx_.queues[q];
    for (int round = 0; round < 64; ++round) {
      DescriptorChain chain;
      QueueError err = QueueError::kNone;
      uint32_t used = 0;
      if (!queue.Pop(*ctx_.mem, &chain, &err)) {
        if (err != QueueError::kNone) Break(QueueErrorName(err));
        if (!queue.EnableNotification(*ctx_.mem)) break;
        continue;
      }
      if (!blk_->HandleChain(*ctx_.mem, chain, ctx_.acked_features, &used)) return Break("blk-request");
      if (queue.AddUsed(*ctx_.mem, chain.head, used) != QueueError::kNone) return Break("used");
      if (queue.NeedsNotification(*ctx_.mem)) ctx_.irq->SignalQueue(q);
    }
  }
  void Reset() override { ctx_ = ActivateContext{}; }
  void Quiesce() override {}
  void Resume() override {}
  std::vector<uint8_t> SaveState() const override { return blk_->SaveState(); }
  bool RestoreState(const uint8_t* d, size_t n) override { return blk_->RestoreState(d, n); }
  bool frozen = false;  // notifies do nothing (a restore's re-kick must not change what is compared)

 private:
  void Break(const char* why) {
    broken_ = true;
    ctx_.irq->MarkBroken(why);
  }
  VirtioBlock* blk_;
  ActivateContext ctx_;
  bool broken_ = false;
};

struct CountingMsi : MsiSink {
  void SignalMsi(uint64_t, uint32_t) override { sent++; }
  uint64_t sent = 0;
};

// One memfd disk for the whole process (opened through /proc/self/fd like any path).
VirtioBlock* Disk() {
  static VirtioBlock* blk = [] {
    int fd = memfd_create("vq-fuzz-disk", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(pcifuzz::kDiskBytes)) != 0) __builtin_trap();
    BlockOptions o;
    o.path = "/proc/self/fd/" + std::to_string(fd);
    o.serial = "fuzz";
    o.queue_size = 16;
    auto r = VirtioBlock::Open(o);
    if (!r.ok()) __builtin_trap();
    return r.value().release();
  }();
  return blk;
}

size_t BarLen(const uint8_t* op) { return size_t{1} << (op[1] % 4); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FlatGuestMemory mem(pcifuzz::kMemBytes);
  SyncBlock dev(Disk());
  CountingMsi msi;
  VirtioPciTransport t(&dev, &mem, &msi, pcifuzz::kBar);
  uint16_t cmd = kPciCommandMemory | kPciCommandBusMaster;
  t.ConfigWrite(kPciCommandOffset, reinterpret_cast<uint8_t*>(&cmd), 2);
  for (size_t at = 0; at + pcifuzz::kOpBytes <= size; at += pcifuzz::kOpBytes) {
    const uint8_t* op = data + at;
    uint8_t kind = op[0] % pcifuzz::kKinds;
    uint32_t offset = static_cast<uint32_t>(op[2] | op[3] << 8 | op[4] << 16);
    uint64_t value;
    std::memcpy(&value, op + 5, 8);
    uint8_t buf[8];
    std::memcpy(buf, &value, 8);
    switch (kind) {
      case pcifuzz::kCfgRead: t.ConfigRead(static_cast<uint16_t>(offset % 256), buf, 1u << (op[1] % 3)); break;
      case pcifuzz::kCfgWrite: t.ConfigWrite(static_cast<uint16_t>(offset % 256), buf, 1u << (op[1] % 3)); break;
      case pcifuzz::kBarRead: (void)t.MmioRead(t.bar_address() + offset % kVirtioBarSize, buf, BarLen(op)); break;
      case pcifuzz::kBarWrite: (void)t.MmioWrite(t.bar_address() + offset % kVirtioBarSize, buf, BarLen(op)); break;
      case pcifuzz::kRamWrite: {
        uint64_t gpa = offset % (pcifuzz::kMemBytes - 8);
        std::memcpy(mem.bytes().data() + gpa, buf, 8);
        break;
      }
      case pcifuzz::kEvent:
        if (value % 3 == 0) t.SignalQueue(0);
        else if (value % 3 == 1) t.SignalConfig();
        else t.MarkBroken("fuzz");
        break;
      default: {
        std::vector<uint8_t> blob = t.Save();
        SyncBlock dev2(Disk());
        dev2.frozen = true;
        VirtioPciTransport t2(&dev2, &mem, &msi, pcifuzz::kBar);
        if (!t2.Restore(blob.data(), blob.size()).ok()) __builtin_trap();
        if (t2.Save() != blob) __builtin_trap();
        t.Resume();
        break;
      }
    }
  }
  if (std::getenv("KVT_FUZZ_VERBOSE") != nullptr) {  // seed debugging: how deep did this input get?
    TransportStats st = t.stats();
    std::printf("status 0x%02x msi %llu notifies %llu broken %llu bad %llu requests %llu\n", t.status(),
                static_cast<unsigned long long>(msi.sent), static_cast<unsigned long long>(st.notifies),
                static_cast<unsigned long long>(st.broken), static_cast<unsigned long long>(st.bad_accesses),
                static_cast<unsigned long long>(Disk()->stats().requests));
  }
  return 0;
}
