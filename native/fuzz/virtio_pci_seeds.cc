// Writes the virtio-pci fuzz seeds (op encoding in virtio_pci_fuzz.h): a driver's bring-up as Linux does it
// (features, queue 0 at 0x1000/0x2000/0x3000, MSI-X vector 0 and 1, DRIVER_OK), then a blk read request in RAM
// and its notify, a save/restore, a reset. Mutations start from a live device. With "net" as the second argument,
// the virtio-net target's seeds: both queues (rx 0 at 0x1000.., tx 1 at 0x6000..), two receive buffers, a
// transmit chain and its notify, frames from the peer, a save/restore, a reset.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devices/virtio/blk.h"
#include "devices/virtio/net.h"
#include "devices/virtio/virtio_pci.h"
#include "virtio_pci_fuzz.h"

using namespace kvmts::devices::virtio;

namespace {

struct Ops {
  std::vector<uint8_t> bytes;
  void Op(uint8_t kind, uint8_t size_code, uint32_t offset, uint64_t value) {
    bytes.push_back(kind);
    bytes.push_back(size_code);
    for (int i = 0; i < 3; ++i) bytes.push_back(static_cast<uint8_t>(offset >> (8 * i)));
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
  void Bar(uint64_t off, uint64_t v, uint8_t code) { Op(pcifuzz::kBarWrite, code, static_cast<uint32_t>(off), v); }
  void Ram(uint64_t gpa, uint64_t v) { Op(pcifuzz::kRamWrite, 0, static_cast<uint32_t>(gpa), v); }
};

// One descriptor at table + 16 i.
void Desc(Ops& o, uint64_t table, int i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next) {
  o.Ram(table + 16ull * i, addr);
  o.Ram(table + 16ull * i + 8, len | static_cast<uint64_t>(flags) << 32 | static_cast<uint64_t>(next) << 48);
}

void Write(const std::string& dir, const char* name, const Ops& o) {
  FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(o.bytes.data(), 1, o.bytes.size(), f);
  std::fclose(f);
}

Ops Bringup() {
  Ops o;
  o.Op(pcifuzz::kCfgWrite, 1, 0x98 + 2, kMsixControlEnable);  // MSI-X control (capability at 0x98 here)
  o.Bar(kMsixTableOffset, 0xfee00000, 3);
  o.Bar(kMsixTableOffset + 8, 0x41, 2);
  o.Bar(kMsixTableOffset + 12, 0, 2);
  o.Bar(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver, 0);
  uint64_t f = kFeatureVersion1 | kFeatureEventIdx | kFeatureIndirectDesc | kBlkFeatureFlush | kBlkFeatureDiscard;
  o.Bar(kCommonDriverFeatureSelect, 0, 2);
  o.Bar(kCommonDriverFeature, f & 0xffffffff, 2);
  o.Bar(kCommonDriverFeatureSelect, 1, 2);
  o.Bar(kCommonDriverFeature, f >> 32, 2);
  o.Bar(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk, 0);
  o.Bar(kCommonMsixConfig, 1, 1);
  o.Bar(kCommonQueueSelect, 0, 1);
  o.Bar(kCommonQueueSize, 8, 1);
  o.Bar(kCommonQueueMsixVector, 0, 1);
  o.Bar(kCommonQueueDesc, 0x1000, 3);
  o.Bar(kCommonQueueDriver, 0x2000, 3);
  o.Bar(kCommonQueueDevice, 0x3000, 3);
  o.Bar(kCommonQueueEnable, 1, 1);
  o.Bar(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk, 0);
  return o;
}

}  // namespace

Ops NetBringup() {
  Ops o;
  o.Op(pcifuzz::kCfgWrite, 1, 0x98 + 2, kMsixControlEnable);
  for (uint64_t v = 0; v < 3; ++v) {
    o.Bar(kMsixTableOffset + 16 * v, 0xfee00000, 3);
    o.Bar(kMsixTableOffset + 16 * v + 8, 0x41 + v, 2);
    o.Bar(kMsixTableOffset + 16 * v + 12, 0, 2);
  }
  o.Bar(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver, 0);
  uint64_t f = kFeatureVersion1 | kFeatureEventIdx | kFeatureIndirectDesc | kNetFeatureMac | kNetFeatureStatus |
               kNetFeatureCsum | kNetFeatureHostTso4;
  o.Bar(kCommonDriverFeatureSelect, 0, 2);
  o.Bar(kCommonDriverFeature, f & 0xffffffff, 2);
  o.Bar(kCommonDriverFeatureSelect, 1, 2);
  o.Bar(kCommonDriverFeature, f >> 32, 2);
  o.Bar(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk, 0);
  o.Bar(kCommonMsixConfig, 2, 1);
  for (uint64_t q = 0; q < 2; ++q) {
    uint64_t base = q == 0 ? 0x1000 : 0x6000;
    o.Bar(kCommonQueueSelect, q, 1);
    o.Bar(kCommonQueueSize, 8, 1);
    o.Bar(kCommonQueueMsixVector, q, 1);
    o.Bar(kCommonQueueDesc, base, 3);
    o.Bar(kCommonQueueDriver, base + 0x1000, 3);
    o.Bar(kCommonQueueDevice, base + 0x2000, 3);
    o.Bar(kCommonQueueEnable, 1, 1);
  }
  o.Bar(kCommonDeviceStatus, kStatusAcknowledge | kStatusDriver | kStatusFeaturesOk | kStatusDriverOk, 0);
  return o;
}

// Device event 0 (value % 3 == 0) with a frame of `len` bytes from the peer ((value >> 8) % 1600).
void Frame(Ops& o, uint64_t len) {
  uint64_t v = len << 8;
  o.Op(pcifuzz::kEvent, 0, 0, v + (3 - v % 3) % 3);
}

void NetSeeds(const std::string& dir) {
  Write(dir, "net-bringup", NetBringup());
  Ops o = NetBringup();
  // Two receive buffers of 1526 bytes (header + a full frame), then a frame from the peer.
  Desc(o, 0x1000, 0, 0x9000, 1526, kDescFlagWrite, 0);
  Desc(o, 0x1000, 1, 0xa000, 1526, kDescFlagWrite, 0);
  o.Ram(0x2000, 2ull << 16 | 0ull << 32 | 1ull << 48);  // avail: flags 0, idx 2, ring = 0, 1
  o.Bar(kNotifyOffset, 0, 1);
  Frame(o, 98);                                        // a 98-byte packet (12-byte header + 86)
  // A transmit chain: the 12-byte header, then 60 bytes of frame.
  Desc(o, 0x6000, 0, 0xc000, 12, kDescFlagNext, 1);
  Desc(o, 0x6000, 1, 0xc100, 60, 0, 0);
  o.Ram(0x7000, 1ull << 16);
  o.Bar(kNotifyOffset + 4, 0, 1);
  Frame(o, 1500);                                      // fills the second buffer
  Frame(o, 5);                                         // a runt, skipped
  Frame(o, 600);                                       // waits for a buffer: travels in the save
  o.Op(pcifuzz::kCfgRead, 0, 0, 0);
  o.Op(pcifuzz::kSaveRestore, 0, 0, 0);
  o.Bar(kCommonDeviceStatus, 0, 0);
  Write(dir, "net-traffic", o);
  std::printf("wrote 2 net seeds to %s\n", dir.c_str());
}

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  if (argc > 2 && std::string(argv[2]) == "net") {
    NetSeeds(dir);
    return 0;
  }
  Write(dir, "bringup", Bringup());
  Ops o = Bringup();
  o.Ram(0x4000, kBlkTypeIn);                         // header: IN, sector 2
  o.Ram(0x4008, 2);
  Desc(o, 0x1000, 0, 0x4000, 16, kDescFlagNext, 1);
  Desc(o, 0x1000, 1, 0x5000, 1024, kDescFlagNext | kDescFlagWrite, 2);
  Desc(o, 0x1000, 2, 0x6000, 1, kDescFlagWrite, 0);
  o.Ram(0x2000, 1ull << 16);                         // avail: flags 0, idx 1, ring[0] = 0
  o.Bar(kNotifyOffset, 0, 1);
  o.Op(pcifuzz::kSaveRestore, 0, 0, 0);
  o.Bar(kCommonDeviceStatus, 0, 0);
  Write(dir, "read-request", o);
  std::printf("wrote 2 seeds to %s\n", dir.c_str());
  return 0;
}
