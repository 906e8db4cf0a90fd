// Writes the virtio-pci fuzz seeds (op encoding in virtio_pci_fuzz.h): a driver's bring-up as Linux does it
// (features, queue 0 at 0x1000/0x2000/0x3000, MSI-X vector 0 and 1, DRIVER_OK), then a blk read request in RAM
// and its notify, a save/restore, a reset. Mutations start from a live device.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devices/virtio/blk.h"
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

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
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
