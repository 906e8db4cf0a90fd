// The virtio-pci transport as Linux sees it: the host bridge and config mechanism #1, the capability list, BAR
// sizing, feature negotiation (FEATURES_OK refusal), queue setup, DRIVER_OK, notify, MSI-X (masking, PBA), ISR,
// NEEDS_RESET, reset, and save/restore. The device behind it is a fake that records the calls.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "devices/virtio/virtio_pci.h"
#include "virtio_test_ring.h"

using namespace kvmts::devices::virtio;
using kvt_test::TestRing;

namespace {

constexpr uint64_t kBar = 0xe0000000;
constexpr uint8_t kSlot = 1;

class FakeDevice : public VirtioDevice {
 public:
  uint16_t device_type() const override { return kDeviceTypeBlock; }
  uint32_t pci_class_code() const override { return 0x010000; }
  uint64_t device_features() const override { return kFeatureVersion1 | kFeatureEventIdx | (1ull << 9); }
  uint16_t queue_count() const override { return 2; }
  uint16_t queue_max_size() const override { return 64; }
  void ReadConfig(uint64_t offset, uint8_t* data, size_t len) const override {
    for (size_t i = 0; i < len; ++i) data[i] = offset + i < cfg.size() ? cfg[offset + i] : 0;
  }
  void WriteConfig(uint64_t offset, const uint8_t* data, size_t len) override {
    for (size_t i = 0; i < len; ++i) {
      if (offset + i < cfg.size()) cfg[offset + i] = data[i];
    }
  }
  kvmts::Status Activate(const ActivateContext& ctx) override {
    activations++;
    last = ctx;
    if (refuse_activate) return kvmts::Error{1, "fake", ""};
    return kvmts::OkStatus();
  }
  void QueueNotify(uint16_t q) override { notified.push_back(q); }
  int QueueKickFd(uint16_t q) const override { return q == 0 ? 100 : -1; }  // queue 1 has no eventfd
  void Reset() override { resets++; }
  void Quiesce() override { quiesced++; }
  void Resume() override { resumed++; }
  std::vector<uint8_t> SaveState() const override { return cfg; }
  bool RestoreState(const uint8_t* data, size_t len) override {
    if (len != cfg.size()) return false;
    cfg.assign(data, data + len);
    return true;
  }
  std::vector<uint8_t> cfg = std::vector<uint8_t>(8, 0x5a);
  int activations = 0, resets = 0, quiesced = 0, resumed = 0;
  bool refuse_activate = false;
  std::vector<uint16_t> notified;
  ActivateContext last;
};

struct FakeMsi : MsiSink {
  void SignalMsi(uint64_t address, uint32_t data) override { sent.push_back({address, data}); }
  std::vector<std::pair<uint64_t, uint32_t>> sent;
};

// The guest side: config space through 0xCF8/0xCFC, BAR0 through MMIO.
struct Driver {
  PciRootBus& bus;
  uint8_t slot;
  uint64_t bar = kBar;

  void Address(uint16_t reg) {
    uint32_t a = kPciConfigEnableBit | static_cast<uint32_t>(slot) << 11 | (reg & 0xfc);
    bus.Write(0, reinterpret_cast<const uint8_t*>(&a), 4);
  }
  uint32_t Cfg(uint16_t reg, size_t len = 4) {
    Address(reg);
    uint32_t v = 0;
    bus.Read(static_cast<uint16_t>(4 + (reg & 3)), reinterpret_cast<uint8_t*>(&v), len);
    return v;
  }
  void SetCfg(uint16_t reg, uint32_t v, size_t len = 4) {
    Address(reg);
    bus.Write(static_cast<uint16_t>(4 + (reg & 3)), reinterpret_cast<const uint8_t*>(&v), len);
  }
  uint64_t Read(uint64_t off, size_t len) {
    uint64_t v = 0;
    CHECK(bus.MmioRead(bar + off, reinterpret_cast<uint8_t*>(&v), len));
    return v;
  }
  void Write(uint64_t off, uint64_t v, size_t len) {
    CHECK(bus.MmioWrite(bar + off, reinterpret_cast<const uint8_t*>(&v), len));
  }
  uint8_t Status() { return static_cast<uint8_t>(Read(kCommonDeviceStatus, 1)); }
  void SetStatus(uint8_t s) { Write(kCommonDeviceStatus, s, 1); }
  // Finds the vendor capability of cfg_type, as virtio_pci_find_capability does; returns its offset or 0.
  uint16_t FindVendorCap(uint8_t type) {
    for (uint16_t at = static_cast<uint16_t>(Cfg(kPciCapPointerOffset, 1)); at != 0;
         at = static_cast<uint16_t>(Cfg(static_cast<uint16_t>(at + 1), 1))) {
      if (Cfg(at, 1) == kPciCapVendor && Cfg(static_cast<uint16_t>(at + 3), 1) == type) return at;
    }
    return 0;
  }
  // Features negotiated and the queue 0 configured on ring; returns the status after DRIVER_OK.
  uint8_t Bringup(uint64_t features, uint16_t qsize) {
    SetCfg(kPciCommandOffset, kPciCommandMemory | kPciCommandBusMaster, 2);
    SetStatus(0);
    SetStatus(kStatusAcknowledge);
    SetStatus(kStatusAcknowledge | kStatusDriver);
    Write(kCommonDriverFeatureSelect, 0, 4);
    Write(kCommonDriverFeature, features & 0xffffffff, 4);
    Write(kCommonDriverFeatureSelect, 1, 4);
    Write(kCommonDriverFeature, features >> 32, 4);
    SetStatus(kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk);
    if (!(Status() & kStatusFeaturesOk)) return Status();
    Write(kCommonQueueSelect, 0, 2);
    Write(kCommonQueueSize, qsize, 2);
    Write(kCommonQueueDesc, TestRing::kDesc, 4);
    Write(kCommonQueueDesc + 4, 0, 4);
    Write(kCommonQueueDriver, TestRing::kAvail, 8);
    Write(kCommonQueueDevice, TestRing::kUsed, 4);
    Write(kCommonQueueDevice + 4, 0, 4);
    Write(kCommonQueueEnable, 1, 2);
    SetStatus(kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk);
    return Status();
  }
  // MSI-X on, vector v at (addr, data) unmasked.
  void ProgramMsix(uint16_t v, uint64_t addr, uint32_t data) {
    uint16_t cap = 0;
    for (uint16_t at = static_cast<uint16_t>(Cfg(kPciCapPointerOffset, 1)); at != 0;
         at = static_cast<uint16_t>(Cfg(static_cast<uint16_t>(at + 1), 1))) {
      if (Cfg(at, 1) == kPciCapMsix) cap = at;
    }
    SetCfg(static_cast<uint16_t>(cap + 2), kMsixControlEnable, 2);
    Write(kMsixTableOffset + 16ull * v, addr, 8);
    Write(kMsixTableOffset + 16ull * v + 8, data, 4);
    Write(kMsixTableOffset + 16ull * v + 12, 0, 4);
  }
};

struct Rig {
  FlatGuestMemory mem{1 << 20};
  FakeDevice dev;
  FakeMsi msi;
  VirtioPciTransport transport{&dev, &mem, &msi, kBar};
  PciRootBus bus;
  Driver drv{bus, kSlot};
  Rig() { CHECK(bus.AddDevice(kSlot, &transport)); }
};

}  // namespace

TEST(pci_host_bridge_answers_the_type1_probe) {
  PciRootBus bus;
  uint8_t b = 1;
  bus.Write(3, &b, 1);  // outb(0x01, 0xCFB): must not latch
  uint32_t a = kPciConfigEnableBit, v = 0;
  bus.Write(0, reinterpret_cast<uint8_t*>(&a), 4);
  bus.Read(0, reinterpret_cast<uint8_t*>(&v), 4);
  CHECK_EQ(v, kPciConfigEnableBit);
  Driver d{bus, 0};
  CHECK_EQ(d.Cfg(kPciVendorOffset), 0x0d578086u);
  CHECK_EQ(d.Cfg(0x08) >> 8, 0x060000u);  // class: host bridge
  CHECK_EQ(d.Cfg(kPciDeviceOffset, 2), kHostBridgeDevice);
  CHECK_EQ(d.Cfg(0x0b, 1), 0x06u);
  Driver empty{bus, 5};
  CHECK_EQ(empty.Cfg(0), 0xffffffffu);
  // bus 1 and function 1 are absent
  a = kPciConfigEnableBit | 1u << 16;
  bus.Write(0, reinterpret_cast<uint8_t*>(&a), 4);
  bus.Read(4, reinterpret_cast<uint8_t*>(&v), 4);
  CHECK_EQ(v, 0xffffffffu);
  a = kPciConfigEnableBit | 1u << 8;
  bus.Write(0, reinterpret_cast<uint8_t*>(&a), 4);
  bus.Read(4, reinterpret_cast<uint8_t*>(&v), 4);
  CHECK_EQ(v, 0xffffffffu);
  uint8_t straddle[4] = {1, 2, 3, 4};
  bus.Read(2, straddle, 4);  // half address register, half data window
  CHECK_EQ(straddle[1], 0x80);
  CHECK_EQ(straddle[2], 0xff);
  CHECK(!bus.AddDevice(0, nullptr));
  CHECK(!bus.AddDevice(32, nullptr));
}

TEST(virtio_pci_config_space_and_capabilities_read_as_linux_expects) {
  Rig r;
  Driver& d = r.drv;
  CHECK_EQ(d.Cfg(kPciVendorOffset, 2), 0x1af4u);
  CHECK_EQ(d.Cfg(kPciDeviceOffset, 2), 0x1042u);
  CHECK_EQ(d.Cfg(kPciRevisionOffset, 1), 1u);
  CHECK_EQ(d.Cfg(kPciSubsystemVendorOffset, 2), 0x1af4u);
  CHECK_EQ(d.Cfg(0x08) >> 8, 0x010000u);
  CHECK(d.Cfg(kPciStatusOffset, 2) & kPciStatusCapList);
  CHECK_EQ(d.Cfg(kPciInterruptPinOffset, 1), 0u);
  struct Want { uint8_t type; uint32_t offset; uint32_t min_len; };
  for (Want w : {Want{kCapCommonCfg, 0x0, 0x38}, Want{kCapNotifyCfg, 0x6000, 8}, Want{kCapIsrCfg, 0x2000, 1},
                 Want{kCapDeviceCfg, 0x4000, 60}}) {
    uint16_t cap = d.FindVendorCap(w.type);
    CHECK(cap >= 0x40);
    CHECK_EQ(cap % 4, 0);
    CHECK_EQ(d.Cfg(static_cast<uint16_t>(cap + 4), 1), 0u);  // BAR 0
    CHECK_EQ(d.Cfg(static_cast<uint16_t>(cap + 8)), w.offset);
    CHECK(d.Cfg(static_cast<uint16_t>(cap + 12)) >= w.min_len);
    CHECK(d.Cfg(static_cast<uint16_t>(cap + 2), 1) >= 16u);
  }
  uint16_t notify = d.FindVendorCap(kCapNotifyCfg);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(notify + 2), 1), 20u);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(notify + 16)), kNotifyOffMultiplier);
  CHECK(d.FindVendorCap(kCapPciCfg) != 0);
  // MSI-X: 3 vectors (2 queues + config), table and PBA in BAR 0.
  uint16_t msix = 0;
  for (uint16_t at = static_cast<uint16_t>(d.Cfg(kPciCapPointerOffset, 1)); at != 0;
       at = static_cast<uint16_t>(d.Cfg(static_cast<uint16_t>(at + 1), 1))) {
    if (d.Cfg(at, 1) == kPciCapMsix) msix = at;
  }
  CHECK(msix != 0);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(msix + 2), 2) & 0x7ff, 2u);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(msix + 4)), 0x8000u);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(msix + 8)), 0x48000u);
}

TEST(virtio_pci_bar_sizes_moves_and_decodes_only_with_memory_enabled) {
  Rig r;
  Driver& d = r.drv;
  CHECK_EQ(d.Cfg(kPciBar0Offset), static_cast<uint32_t>(kBar) | kPciBarMem64);
  CHECK_EQ(d.Cfg(kPciBar0Offset + 4), 0u);
  uint8_t buf[4];
  CHECK(!r.bus.MmioRead(kBar, buf, 4));  // memory decode is off after power-on
  d.SetCfg(kPciBar0Offset, 0xffffffff);
  d.SetCfg(kPciBar0Offset + 4, 0xffffffff);
  CHECK_EQ(d.Cfg(kPciBar0Offset), 0xfff80000u | kPciBarMem64);  // 512 KiB
  CHECK_EQ(d.Cfg(kPciBar0Offset + 4), 0xffffffffu);
  d.SetCfg(kPciBar0Offset, 0x40000000);  // Linux moves it (64-bit, above 4 GiB)
  d.SetCfg(kPciBar0Offset + 4, 0x1);
  CHECK_EQ(r.transport.bar_address(), 0x140000000ull);
  d.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  d.bar = 0x140000000ull;
  CHECK_EQ(d.Read(kCommonNumQueues, 2), 2u);
  CHECK(!r.bus.MmioRead(kBar, buf, 4));
  CHECK(!r.bus.MmioRead(0x140000000ull + kVirtioBarSize - 2, buf, 4));  // straddles the end
}

TEST(virtio_pci_negotiates_features_and_refuses_bad_sets) {
  Rig r;
  Driver& d = r.drv;
  d.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  d.Write(kCommonDeviceFeatureSelect, 0, 4);
  CHECK_EQ(d.Read(kCommonDeviceFeature, 4), (kFeatureEventIdx | (1ull << 9)) & 0xffffffff);
  d.Write(kCommonDeviceFeatureSelect, 1, 4);
  CHECK_EQ(d.Read(kCommonDeviceFeature, 4), 1u);  // VERSION_1 = bit 32
  d.Write(kCommonDeviceFeatureSelect, 2, 4);
  CHECK_EQ(d.Read(kCommonDeviceFeature, 4), 0u);
  // Without VERSION_1: refused.
  CHECK(!(d.Bringup(kFeatureEventIdx, 8) & kStatusFeaturesOk));
  CHECK_EQ(r.transport.stats().features_refused, 1u);
  // A feature the device does not offer: refused.
  CHECK(!(d.Bringup(kFeatureVersion1 | (1ull << 3), 8) & kStatusFeaturesOk));
  CHECK_EQ(r.transport.stats().features_refused, 2u);
  // A subset with VERSION_1: accepted, and the device becomes live.
  uint8_t st = d.Bringup(kFeatureVersion1 | kFeatureEventIdx, 8);
  CHECK_EQ(st, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk);
  CHECK_EQ(r.transport.acked_features(), kFeatureVersion1 | kFeatureEventIdx);
  CHECK_EQ(r.dev.activations, 1);
  CHECK_EQ(r.dev.last.acked_features, kFeatureVersion1 | kFeatureEventIdx);
  CHECK(r.dev.last.queues[0]->event_idx());
  // Features are frozen after FEATURES_OK.
  d.Write(kCommonDriverFeatureSelect, 0, 4);
  d.Write(kCommonDriverFeature, 0, 4);
  CHECK_EQ(r.transport.acked_features(), kFeatureVersion1 | kFeatureEventIdx);
  // Clearing a bit without a reset is ignored.
  d.SetStatus(kStatusAcknowledge);
  CHECK(d.Status() & kStatusDriverOk);
}

TEST(virtio_pci_configures_queues_and_forwards_notifies) {
  Rig r;
  Driver& d = r.drv;
  d.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  d.Write(kCommonQueueSelect, 1, 2);
  CHECK_EQ(d.Read(kCommonQueueSize, 2), 64u);  // max after reset
  CHECK_EQ(d.Read(kCommonQueueNotifyOff, 2), 1u);
  CHECK_EQ(d.Read(kCommonQueueMsixVector, 2), kMsixNoVector);
  d.Write(kCommonQueueMsixVector, 2, 2);
  CHECK_EQ(d.Read(kCommonQueueMsixVector, 2), 2u);
  d.Write(kCommonQueueMsixVector, 3, 2);  // only 3 vectors: refused, reads back NO_VECTOR
  CHECK_EQ(d.Read(kCommonQueueMsixVector, 2), kMsixNoVector);
  d.Write(kCommonQueueSelect, 9, 2);  // no such queue: reads 0
  CHECK_EQ(d.Read(kCommonQueueSize, 2), 0u);
  CHECK_EQ(d.Bringup(kFeatureVersion1, 16) & kStatusDriverOk, kStatusDriverOk);
  d.Write(kCommonQueueSelect, 0, 2);
  CHECK_EQ(d.Read(kCommonQueueSize, 2), 16u);
  CHECK_EQ(d.Read(kCommonQueueDesc, 8), TestRing::kDesc);
  CHECK_EQ(d.Read(kCommonQueueDriver, 4), TestRing::kAvail);
  CHECK_EQ(d.Read(kCommonQueueDevice + 4, 4), 0u);
  CHECK_EQ(d.Read(kCommonQueueEnable, 2), 1u);
  d.Write(kCommonQueueSize, 8, 2);  // after DRIVER_OK: read-only
  CHECK_EQ(d.Read(kCommonQueueSize, 2), 16u);
  CHECK(r.transport.stats().bad_accesses > 0);
  d.Write(kNotifyOffset, 0, 2);
  d.Write(kNotifyOffset + 4, 1, 2);  // queue 1 is not enabled: dropped
  CHECK_EQ(r.dev.notified.size(), 1u);
  CHECK_EQ(r.dev.notified[0], 0);
  CHECK_EQ(r.transport.stats().notifies, 1u);
  // device config region
  CHECK_EQ(d.Read(kDeviceCfgOffset, 4), 0x5a5a5a5au);
  d.Write(kDeviceCfgOffset + 1, 0x11, 1);
  CHECK_EQ(r.dev.cfg[1], 0x11);
  // reset
  d.SetStatus(0);
  CHECK_EQ(d.Status(), 0);
  CHECK_EQ(r.dev.resets, 1);
  CHECK_EQ(d.Read(kCommonQueueSize, 2), 64u);
  CHECK_EQ(d.Read(kCommonQueueEnable, 2), 0u);
  d.Write(kNotifyOffset, 0, 2);
  CHECK_EQ(r.dev.notified.size(), 1u);  // not live any more
}

TEST(virtio_pci_bad_queue_or_refusal_at_driver_ok_sets_needs_reset) {
  {
    Rig r;
    r.drv.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
    uint8_t st = r.drv.Bringup(kFeatureVersion1, 12);  // not a power of two
    CHECK(st & kStatusNeedsReset);
    CHECK_EQ(r.dev.activations, 0);
    CHECK_EQ(r.transport.stats().activate_failed, 1u);
    CHECK(std::string(r.transport.broken_reason()) == "not-ready");
    CHECK_EQ(r.drv.Bringup(kFeatureVersion1, 8) & (kStatusDriverOk | kStatusNeedsReset), kStatusDriverOk);
  }
  {
    Rig r;
    r.dev.refuse_activate = true;
    CHECK(r.drv.Bringup(kFeatureVersion1, 8) & kStatusNeedsReset);
  }
  {
    Rig r;  // DRIVER_OK without FEATURES_OK
    r.drv.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
    r.drv.SetStatus(kStatusAcknowledge | kStatusDriver | kStatusDriverOk);
    CHECK(r.drv.Status() & kStatusNeedsReset);
    CHECK_EQ(r.dev.activations, 0);
  }
}

TEST(virtio_pci_msix_delivers_masks_and_replays_pending) {
  Rig r;
  Driver& d = r.drv;
  d.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  d.Bringup(kFeatureVersion1, 8);
  // No MSI-X yet: ISR only.
  r.transport.SignalQueue(0);
  CHECK_EQ(r.transport.stats().interrupts_dropped, 1u);
  CHECK_EQ(d.Read(kIsrOffset, 1), kIsrQueue);
  CHECK_EQ(d.Read(kIsrOffset, 1), 0u);  // read clears
  d.ProgramMsix(1, 0xfee00000, 0x4021);
  d.Write(kCommonQueueSelect, 0, 2);
  d.Write(kCommonQueueMsixVector, 1, 2);  // allowed after DRIVER_OK (vectors are not queue config)
  r.transport.SignalQueue(0);
  CHECK_EQ(r.msi.sent.size(), 1u);
  CHECK_EQ(r.msi.sent[0].first, 0xfee00000ull);
  CHECK_EQ(r.msi.sent[0].second, 0x4021u);
  CHECK_EQ(d.Read(kMsixTableOffset + 16 + 8, 4), 0x4021u);
  // Masked: pending bit, delivered on unmask.
  d.Write(kMsixTableOffset + 16 + 12, kMsixVectorMasked, 4);
  r.transport.SignalQueue(0);
  CHECK_EQ(r.msi.sent.size(), 1u);
  CHECK_EQ(d.Read(kMsixPbaOffset, 8), 2u);
  d.Write(kMsixTableOffset + 16 + 12, 0, 4);
  CHECK_EQ(r.msi.sent.size(), 2u);
  CHECK_EQ(d.Read(kMsixPbaOffset, 8), 0u);
  CHECK_EQ(r.transport.stats().interrupts, 2u);
  CHECK_EQ(r.transport.stats().interrupts_masked, 1u);
  // Function mask through the capability.
  uint16_t cap = 0;
  for (uint16_t at = static_cast<uint16_t>(d.Cfg(kPciCapPointerOffset, 1)); at != 0;
       at = static_cast<uint16_t>(d.Cfg(static_cast<uint16_t>(at + 1), 1))) {
    if (d.Cfg(at, 1) == kPciCapMsix) cap = at;
  }
  d.SetCfg(static_cast<uint16_t>(cap + 2), kMsixControlEnable | kMsixControlFunctionMask, 2);
  r.transport.SignalQueue(0);
  CHECK_EQ(r.msi.sent.size(), 2u);
  d.SetCfg(static_cast<uint16_t>(cap + 2), kMsixControlEnable, 2);
  CHECK_EQ(r.msi.sent.size(), 3u);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(cap + 2), 2) & 0x7ff, 2u);  // table size is read-only
  // Config vector + MarkBroken -> NEEDS_RESET and a config interrupt.
  d.ProgramMsix(0, 0xfee01000, 0x30);
  d.Write(kCommonMsixConfig, 0, 2);
  CHECK_EQ(d.Read(kCommonMsixConfig, 2), 0u);
  r.transport.MarkBroken("loop");
  CHECK(d.Status() & kStatusNeedsReset);
  CHECK_EQ(r.msi.sent.back().second, 0x30u);
  CHECK(std::string(r.transport.broken_reason()) == "loop");
  d.Write(kNotifyOffset, 0, 2);
  CHECK_EQ(r.dev.notified.size(), 0u);  // broken: kicks are dropped
  d.SetStatus(0);
  CHECK_EQ(d.Status(), 0);
}

namespace {

// Records what the transport routes: eventfd -> (address, data) while attached.
struct FakeRouter : MsiRouter {
  bool Attach(int fd, uint64_t address, uint32_t data) override {
    attaches++;
    if (refuse) return false;
    routes[fd] = {address, data};
    return true;
  }
  void Detach(int fd) override { routes.erase(fd); }
  std::map<int, std::pair<uint64_t, uint32_t>> routes;
  int attaches = 0;
  bool refuse = false;
};

}  // namespace

TEST(virtio_pci_routes_a_bound_queue_eventfd_while_its_vector_is_deliverable) {
  Rig r;
  FakeRouter router;
  r.transport.SetMsiRouter(&router);
  Driver& d = r.drv;
  d.Bringup(kFeatureVersion1, 8);
  // Bound before MSI-X is on: nothing to route yet (the device's relay sees its signals).
  r.transport.BindQueueEventfd(0, 77);
  CHECK(router.routes.empty());
  d.ProgramMsix(1, 0xfee00000, 0x4021);
  CHECK(router.routes.empty());  // the queue has no vector yet
  d.Write(kCommonQueueSelect, 0, 2);
  d.Write(kCommonQueueMsixVector, 1, 2);
  CHECK(router.routes.count(77) == 1);
  CHECK_EQ(router.routes[77].first, 0xfee00000ull);
  CHECK_EQ(router.routes[77].second, 0x4021u);
  // The vector masked: detached; unmasked: attached again. A new message (an affinity change) follows.
  d.Write(kMsixTableOffset + 16 + 12, kMsixVectorMasked, 4);
  CHECK(router.routes.empty());
  d.Write(kMsixTableOffset + 16 + 12, 0, 4);
  CHECK(router.routes.count(77) == 1);
  d.Write(kMsixTableOffset + 16 + 8, 0x4022, 4);
  CHECK_EQ(router.routes[77].second, 0x4022u);
  // The function masked through the capability, then MSI-X off: detached.
  uint16_t cap = 0;
  for (uint16_t at = static_cast<uint16_t>(d.Cfg(kPciCapPointerOffset, 1)); at != 0;
       at = static_cast<uint16_t>(d.Cfg(static_cast<uint16_t>(at + 1), 1))) {
    if (d.Cfg(at, 1) == kPciCapMsix) cap = at;
  }
  d.SetCfg(static_cast<uint16_t>(cap + 2), kMsixControlEnable | kMsixControlFunctionMask, 2);
  CHECK(router.routes.empty());
  d.SetCfg(static_cast<uint16_t>(cap + 2), kMsixControlEnable, 2);
  CHECK(router.routes.count(77) == 1);
  // The queue's vector taken away, then given back; the eventfd unbound; bound again; a reset.
  d.Write(kCommonQueueMsixVector, kMsixNoVector, 2);
  CHECK(router.routes.empty());
  d.Write(kCommonQueueMsixVector, 1, 2);
  CHECK(router.routes.count(77) == 1);
  r.transport.BindQueueEventfd(0, -1);
  CHECK(router.routes.empty());
  r.transport.BindQueueEventfd(0, 78);
  CHECK(router.routes.count(78) == 1);
  d.SetStatus(0);
  CHECK(router.routes.empty());
  // A router that cannot route leaves the queue to the relay: SignalQueue still delivers through the sink.
  router.refuse = true;
  d.Bringup(kFeatureVersion1, 8);
  d.ProgramMsix(1, 0xfee00000, 0x4021);
  d.Write(kCommonQueueSelect, 0, 2);
  d.Write(kCommonQueueMsixVector, 1, 2);
  CHECK(router.routes.empty());
  size_t sent = r.msi.sent.size();
  r.transport.SignalQueue(0);
  CHECK_EQ(r.msi.sent.size(), sent + 1);
  CHECK(router.attaches > 0);
  r.transport.SetMsiRouter(nullptr);
}

TEST(virtio_pci_config_window_capability_reads_the_bar) {
  Rig r;
  Driver& d = r.drv;
  uint16_t cap = d.FindVendorCap(kCapPciCfg);
  d.SetCfg(static_cast<uint16_t>(cap + 4), 0, 1);
  d.SetCfg(static_cast<uint16_t>(cap + 8), kCommonNumQueues);
  d.SetCfg(static_cast<uint16_t>(cap + 12), 2);
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(cap + 16), 2), 2u);
  d.SetCfg(static_cast<uint16_t>(cap + 8), kVirtioBarSize);  // out of the BAR: reads 0
  CHECK_EQ(d.Cfg(static_cast<uint16_t>(cap + 16), 2), 0u);
}

TEST(virtio_pci_save_restore_round_trips_a_live_device) {
  Rig a;
  a.drv.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  a.drv.Bringup(kFeatureVersion1 | kFeatureEventIdx, 8);
  a.drv.ProgramMsix(1, 0xfee00000, 0x41);
  a.drv.Write(kCommonQueueSelect, 0, 2);
  a.drv.Write(kCommonQueueMsixVector, 1, 2);
  a.dev.last.queues[0]->state().next_avail = 7;
  a.dev.last.queues[0]->state().next_used = 6;
  a.dev.cfg[0] = 0x99;
  std::vector<uint8_t> blob = a.transport.Save();
  CHECK_EQ(a.dev.quiesced, 1);
  CHECK_EQ(a.dev.resumed, 0);  // stays quiesced: the source must not run requests the target will run
  a.transport.Quiesce();
  CHECK_EQ(a.dev.quiesced, 1);  // idempotent
  a.transport.Resume();
  CHECK_EQ(a.dev.resumed, 1);
  a.transport.Resume();
  CHECK_EQ(a.dev.resumed, 1);

  Rig b;
  CHECK(b.transport.Restore(blob.data(), blob.size()).ok());
  CHECK_EQ(b.dev.activations, 1);
  CHECK_EQ(b.dev.notified.size(), 1u);  // the ready queue is looked at once
  CHECK_EQ(b.dev.cfg[0], 0x99);
  CHECK_EQ(b.dev.last.queues[0]->state().next_avail, 7);
  CHECK_EQ(b.dev.last.queues[0]->state().next_used, 6);
  CHECK(b.dev.last.queues[0]->event_idx());
  CHECK_EQ(b.drv.Status(), kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk);
  CHECK_EQ(b.drv.Read(kCommonQueueMsixVector, 2), 1u);
  CHECK(b.transport.Save() == blob);
  b.transport.SignalQueue(0);
  CHECK_EQ(b.msi.sent.size(), 1u);
  CHECK_EQ(b.msi.sent[0].second, 0x41u);

  // Every truncation and a bad version are refused without touching the device.
  Rig c;
  for (size_t n = 0; n < blob.size(); n += 7) CHECK(!c.transport.Restore(blob.data(), n).ok());
  std::vector<uint8_t> bad = blob;
  bad[0] = 9;
  CHECK(!c.transport.Restore(bad.data(), bad.size()).ok());
  CHECK_EQ(c.dev.activations, 0);
  CHECK_EQ(c.transport.status(), 0);
}

namespace {

struct FakeRegistrar : NotifyRegistrar {
  void AddNotify(uint64_t gpa, int fd) override { log.push_back("+" + At(gpa, fd)); }
  void RemoveNotify(uint64_t gpa, int fd) override { log.push_back("-" + At(gpa, fd)); }
  static std::string At(uint64_t gpa, int fd) { return std::to_string(gpa) + "/" + std::to_string(fd); }
  std::vector<std::string> log;
};

std::string At(uint64_t gpa, int fd) { return FakeRegistrar::At(gpa, fd); }

}  // namespace

TEST(virtio_pci_binds_notify_eventfds_while_decoding_and_follows_bar_moves) {
  Rig r;
  FakeRegistrar reg;
  r.transport.SetNotifyRegistrar(&reg);
  CHECK(reg.log.empty());  // memory decode is off after power-on
  r.drv.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  CHECK_EQ(reg.log.size(), 1u);
  CHECK(reg.log[0] == "+" + At(kBar + kNotifyOffset, 100));
  r.drv.SetCfg(kPciCommandOffset, kPciCommandMemory | kPciCommandBusMaster, 2);
  CHECK_EQ(reg.log.size(), 1u);  // unchanged address: nothing to do
  r.drv.SetCfg(kPciBar0Offset + 4, 0x2);  // the BAR moves to 0x2_e0000000 while decoding
  CHECK_EQ(reg.log.size(), 3u);
  CHECK(reg.log[1] == "-" + At(kBar + kNotifyOffset, 100));
  CHECK(reg.log[2] == "+" + At(0x2e0000000ull + kNotifyOffset, 100));
  r.drv.SetCfg(kPciCommandOffset, 0, 2);
  CHECK(reg.log.back() == "-" + At(0x2e0000000ull + kNotifyOffset, 100));
  r.drv.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  std::vector<uint8_t> blob = r.transport.Save();
  r.transport.SetNotifyRegistrar(nullptr);
  CHECK(reg.log.back() == "-" + At(0x2e0000000ull + kNotifyOffset, 100));
  // A restored transport binds where the saved BAR was.
  Rig b;
  FakeRegistrar reg2;
  b.transport.SetNotifyRegistrar(&reg2);
  CHECK(b.transport.Restore(blob.data(), blob.size()).ok());
  CHECK_EQ(reg2.log.size(), 1u);
  CHECK(reg2.log[0] == "+" + At(0x2e0000000ull + kNotifyOffset, 100));
}

TEST(virtio_pci_tells_its_listener_when_the_device_breaks) {
  struct Listener : TransportListener {
    void OnBroken(const char* why) override { reasons.push_back(why); }
    std::vector<std::string> reasons;
  } listener;
  Rig r;
  r.transport.SetListener(&listener);
  r.drv.SetCfg(kPciCommandOffset, kPciCommandMemory, 2);
  CHECK(r.drv.Bringup(kFeatureVersion1, 12) & kStatusNeedsReset);  // a bad queue size at DRIVER_OK
  CHECK_EQ(listener.reasons.size(), 1u);
  CHECK(listener.reasons[0] == "not-ready");
  CHECK_EQ(r.drv.Bringup(kFeatureVersion1, 8) & kStatusDriverOk, kStatusDriverOk);
  r.transport.MarkBroken("direction");  // what a worker does on a bad chain
  CHECK_EQ(listener.reasons.size(), 2u);
  CHECK(listener.reasons[1] == "direction");
}
