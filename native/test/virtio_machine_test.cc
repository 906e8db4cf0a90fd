// The pure parts of the virtio wiring in src/vmm: the SSDT with the PCI root bridge (byte layout as iasl
// disassembles it), the ACPI blob with and without it, and KVM_EXIT_MMIO dispatch into a PCI BAR.
#include <linux/kvm.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "devices/virtio/virtio_pci.h"
#include "vmm/exit_handler.h"
#include "vmm/linux_acpi.h"

using namespace kvmts;
using namespace kvmts::vmm;
namespace dv = kvmts::devices::virtio;

namespace {

template <typename T>
T At(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

uint8_t Sum(const std::vector<uint8_t>& b, size_t off, size_t len) {
  uint8_t s = 0;
  for (size_t i = 0; i < len; ++i) s = static_cast<uint8_t>(s + b[off + i]);
  return s;
}

size_t Find(const std::vector<uint8_t>& hay, const std::vector<uint8_t>& needle) {
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (std::memcmp(hay.data() + i, needle.data(), needle.size()) == 0) return i;
  }
  return std::string::npos;
}

class NullDevice : public dv::VirtioDevice {
 public:
  uint16_t device_type() const override { return dv::kDeviceTypeBlock; }
  uint32_t pci_class_code() const override { return 0x010000; }
  uint64_t device_features() const override { return dv::kFeatureVersion1; }
  uint16_t queue_count() const override { return 1; }
  uint16_t queue_max_size() const override { return 128; }
  void ReadConfig(uint64_t, uint8_t* data, size_t len) const override { std::memset(data, 0, len); }
  void WriteConfig(uint64_t, const uint8_t*, size_t) override {}
  Status Activate(const dv::ActivateContext&) override { return OkStatus(); }
  void QueueNotify(uint16_t) override {}
  void Reset() override {}
  void Quiesce() override {}
  void Resume() override {}
  std::vector<uint8_t> SaveState() const override { return {}; }
  bool RestoreState(const uint8_t*, size_t) override { return true; }
};

struct PciPeripherals : Peripherals {
  devices::PioBus pio;
  dv::PciRootBus* pci = nullptr;
  std::vector<std::string> reports;
  devices::PioBus& bus() override { return pio; }
  void ReportExit(uint32_t, const std::string& reason, bool) override { reports.push_back(reason); }
  void RequestShutdown(ShutdownReason, uint32_t) override {}
  bool MmioRead(uint64_t addr, uint8_t* data, size_t len) override { return pci->MmioRead(addr, data, len); }
  bool MmioWrite(uint64_t addr, const uint8_t* data, size_t len) override { return pci->MmioWrite(addr, data, len); }
};

struct RunPage {
  alignas(4096) uint8_t bytes[8192] = {};
  kvm_run* run() { return reinterpret_cast<kvm_run*>(bytes); }
};

}  // namespace

TEST(acpi_eisa_ids_compress_as_aml_stores_them) {
  CHECK_EQ(EisaId("PNP0A03"), 0x030ad041u);
  CHECK_EQ(EisaId("PNP0A08"), 0x080ad041u);
}

TEST(acpi_pci_root_ssdt_declares_the_bridge_and_its_window) {
  std::vector<uint8_t> t = BuildPciRootSsdt();
  CHECK(std::memcmp(t.data(), "SSDT", 4) == 0);
  CHECK_EQ(At<uint32_t>(t, 4), t.size());
  CHECK_EQ(Sum(t, 0, t.size()), 0);
  // Scope (\_SB) { Device (PCI0) { ... } }
  CHECK_EQ(t[36], 0x10);
  CHECK(Find(t, {0x5c, '_', 'S', 'B', '_', 0x5b, 0x82}) != std::string::npos);
  CHECK(Find(t, {'P', 'C', 'I', '0', 0x08, '_', 'H', 'I', 'D', 0x0c, 0x41, 0xd0, 0x0a, 0x03}) != std::string::npos);
  CHECK(Find(t, {0x08, '_', 'S', 'E', 'G', 0x00}) != std::string::npos);
  // _CRS: bus 0..0 (length 1), the config ports, the 32-bit MMIO window, the end tag.
  CHECK(Find(t, {0x88, 0x0d, 0x00, 0x02, 0x0c, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}) != std::string::npos);
  CHECK(Find(t, {0x47, 0x01, 0xf8, 0x0c, 0xf8, 0x0c, 0x01, 0x08}) != std::string::npos);
  size_t mem = Find(t, {0x87, 0x17, 0x00, 0x00, 0x0c, 0x01});
  CHECK(mem != std::string::npos);
  CHECK_EQ(At<uint32_t>(t, mem + 10), static_cast<uint32_t>(kPciMmioWindowBase));
  CHECK_EQ(At<uint32_t>(t, mem + 14), static_cast<uint32_t>(kPciMmioWindowBase + kPciMmioWindowBytes - 1));
  CHECK_EQ(At<uint32_t>(t, mem + 22), static_cast<uint32_t>(kPciMmioWindowBytes));
  CHECK_EQ(t[t.size() - 2], 0x79);
  // The window holds 16 disks' BARs and stays below the IOAPIC.
  CHECK(kPciMmioWindowBase + 16 * dv::kVirtioBarSize <= kPciMmioWindowBase + kPciMmioWindowBytes);
  CHECK(kPciMmioWindowBase + kPciMmioWindowBytes <= kIoapicAddr);
}

TEST(acpi_tables_list_the_ssdt_only_for_a_machine_with_pci) {
  std::vector<uint8_t> plain = BuildAcpiTables(2);
  std::vector<uint8_t> pci = BuildAcpiTables(2, true);
  CHECK_EQ(At<uint32_t>(plain, kXsdtOffset + 4), 52u);
  CHECK(plain.size() < kSsdtOffset);
  CHECK_EQ(At<uint32_t>(pci, kXsdtOffset + 4), 60u);
  CHECK_EQ(Sum(pci, kXsdtOffset, 60), 0);
  CHECK_EQ(At<uint64_t>(pci, kXsdtOffset + 52), kAcpiTablesAddr + kSsdtOffset);
  CHECK(std::memcmp(pci.data() + kSsdtOffset, "SSDT", 4) == 0);
  CHECK_EQ(Sum(pci, kSsdtOffset, At<uint32_t>(pci, kSsdtOffset + 4)), 0);
  // Everything before the XSDT and the other tables are byte-identical.
  CHECK(std::memcmp(plain.data() + kFadtOffset, pci.data() + kFadtOffset, plain.size() - kFadtOffset) == 0);
  // 64 vCPUs' MADT still ends before the SSDT.
  CHECK(BuildAcpiTables(64).size() <= kSsdtOffset);
}

TEST(exit_mmio_reaches_a_pci_bar_and_unclaimed_addresses_still_read_ff) {
  dv::FlatGuestMemory mem(1 << 16);
  NullDevice dev;
  dv::VirtioPciTransport t(&dev, &mem, nullptr, kPciMmioWindowBase);
  dv::PciRootBus bus;
  CHECK(bus.AddDevice(1, &t));
  uint16_t cmd = dv::kPciCommandMemory;
  t.ConfigWrite(dv::kPciCommandOffset, reinterpret_cast<uint8_t*>(&cmd), 2);
  PciPeripherals p;
  p.pci = &bus;
  RunPage page;
  kvm_run* run = page.run();
  ExitCounters c;
  run->exit_reason = KVM_EXIT_MMIO;
  run->mmio.phys_addr = kPciMmioWindowBase + dv::kCommonNumQueues;
  run->mmio.len = 2;
  run->mmio.is_write = 0;
  CHECK(HandleExit(0, run, p, c) == ExitAction::kContinue);
  CHECK_EQ(At<uint16_t>(std::vector<uint8_t>(run->mmio.data, run->mmio.data + 8), 0), 1u);
  run->mmio.phys_addr = kPciMmioWindowBase + dv::kCommonDeviceStatus;
  run->mmio.len = 1;
  run->mmio.is_write = 1;
  run->mmio.data[0] = dv::kStatusAcknowledge;
  CHECK(HandleExit(0, run, p, c) == ExitAction::kContinue);
  CHECK_EQ(t.status(), dv::kStatusAcknowledge);
  CHECK(p.reports.empty());
  run->mmio.phys_addr = 0xfeb00000;
  run->mmio.is_write = 0;
  run->mmio.len = 4;
  CHECK(HandleExit(0, run, p, c) == ExitAction::kContinue);
  CHECK_EQ(run->mmio.data[0], 0xff);
  CHECK_EQ(p.reports.size(), 1u);
  run->mmio.len = 200;  // a bogus length from a broken exit is clipped, not trusted
  CHECK(HandleExit(0, run, p, c) == ExitAction::kContinue);
  CHECK_EQ(c.mmio, 4u);
}
