// libFuzzer target: the virtio-pci transport driven by an arbitrary register sequence (config space, BAR: common
// config, ISR, device config, notify, MSI-X table and PBA; PCI BAR moves and sizing), over a virtio-blk device whose
// queue runs synchronously on each notify against a memfd disk, with save/restore round trips in between. Nothing
// may crash, hang, or touch memory outside the guest and the disk (ASan/UBSan); a restore of a fresh save must
// reproduce the same blob. Built with -DKVT_FUZZ_NET (virtio_net_pci_fuzz) the device is a virtio-net in inline
// mode over a SOCK_SEQPACKET pair with vnet headers: both queues run on each notify, device event 0 also makes the
// peer send a frame of a fuzzed length (runts and oversized ones too) and kicks the receive queue.
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "devices/virtio/blk.h"
#include "devices/virtio/net.h"
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

// A virtio-net in inline mode (its notify serves the queue on the calling thread) that a restore can freeze.
class SyncNet : public VirtioDevice {
 public:
  SyncNet() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) __builtin_trap();
    NetOptions o;
    o.fd = sv[0];
    o.vnet_hdr = true;
    const uint8_t mac[6] = {0x52, 0x54, 0, 0, 0, 1};
    std::memcpy(o.mac, mac, 6);
    o.queue_size = 16;
    o.inline_io = true;
    auto r = VirtioNet::Open(o);
    if (!r.ok()) __builtin_trap();
    net_ = std::move(r.value());
    peer = sv[1];
  }
  ~SyncNet() override {
    net_.reset();
    close(peer);
  }
  uint16_t device_type() const override { return net_->device_type(); }
  uint32_t pci_class_code() const override { return net_->pci_class_code(); }
  uint64_t device_features() const override { return net_->device_features(); }
  uint16_t queue_count() const override { return net_->queue_count(); }
  uint16_t queue_max_size() const override { return net_->queue_max_size(); }
  void ReadConfig(uint64_t o, uint8_t* d, size_t n) const override { net_->ReadConfig(o, d, n); }
  void WriteConfig(uint64_t o, const uint8_t* d, size_t n) override { net_->WriteConfig(o, d, n); }
  bool AcceptFeatures(uint64_t acked) override { return net_->AcceptFeatures(acked); }
  kvmts::Status Activate(const ActivateContext& ctx) override { return net_->Activate(ctx); }
  void QueueNotify(uint16_t q) override {
    if (!frozen) net_->QueueNotify(q);
  }
  void Reset() override { net_->Reset(); }
  void Quiesce() override { net_->Quiesce(); }
  void Resume() override { net_->Resume(); }
  std::vector<uint8_t> SaveState() const override { return net_->SaveState(); }
  bool RestoreState(const uint8_t* d, size_t n) override { return net_->RestoreState(d, n); }
  // Whatever the device sent, read and dropped (the pair's buffer never fills).
  void DrainPeer() {
    uint8_t buf[2048];
    while (recv(peer, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
  }
  bool frozen = false;
  int peer = -1;

 private:
  std::unique_ptr<VirtioNet> net_;
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

#ifdef KVT_FUZZ_NET
using FuzzDevice = SyncNet;
FuzzDevice* NewDevice() { return new SyncNet(); }
// Device event 0: the peer sends a frame of (value >> 8) % 1600 bytes (virtio header included), the tap is readable.
void Inject(SyncNet& dev, uint64_t value) {
  static uint8_t frame[1600];
  size_t len = (value >> 8) % sizeof frame;
  std::memset(frame, static_cast<int>(value), len);
  (void)send(dev.peer, frame, len, MSG_DONTWAIT);
  dev.QueueNotify(kNetRxQueue);
}
#else
using FuzzDevice = SyncBlock;
FuzzDevice* NewDevice() { return new SyncBlock(Disk()); }
void Inject(SyncBlock&, uint64_t) {}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FlatGuestMemory mem(pcifuzz::kMemBytes);
  std::unique_ptr<FuzzDevice> owned(NewDevice());
  FuzzDevice& dev = *owned;
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
        if (value % 3 == 0) Inject(dev, value);
        if (value % 3 == 0) t.SignalQueue(0);
        else if (value % 3 == 1) t.SignalConfig();
        else t.MarkBroken("fuzz");
        break;
      default: {
        std::vector<uint8_t> blob = t.Save();
        std::unique_ptr<FuzzDevice> dev2(NewDevice());
        dev2->frozen = true;
        VirtioPciTransport t2(dev2.get(), &mem, &msi, pcifuzz::kBar);
        if (!t2.Restore(blob.data(), blob.size()).ok()) __builtin_trap();
        if (t2.Save() != blob) __builtin_trap();
        t.Resume();
        break;
      }
    }
#ifdef KVT_FUZZ_NET
    dev.DrainPeer();
#endif
  }
  if (std::getenv("KVT_FUZZ_VERBOSE") != nullptr) {  // seed debugging: how deep did this input get?
    TransportStats st = t.stats();
    std::printf("status 0x%02x (%s) msi %llu notifies %llu broken %llu bad %llu requests %llu\n", t.status(), t.broken_reason(),
                static_cast<unsigned long long>(msi.sent), static_cast<unsigned long long>(st.notifies),
                static_cast<unsigned long long>(st.broken), static_cast<unsigned long long>(st.bad_accesses),
                static_cast<unsigned long long>(Disk()->stats().requests));  // 0 for the net target
  }
  return 0;
}
