// libFuzzer target: the migration target's whole receive path (frame headers, handshake, range tables, page
// writes into guest memory, Zero/State/Complete, Disk/DiskZero into a memfd disk) fed arbitrary bytes as the "source". Must never crash, hang, read
// or write outside the guest buffers (ASan), or accept memory before authentication.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_guest.h"
#include "migration/channel.h"
#include "migration/incoming.h"

// Each input runs against a target without copied disks; when its Start names copied disks (a protocol 4 stream
// that carries Disk/DiskZero frames), it runs again against a target with a 64 KiB copied disk in a memfd.
static bool RunOnce(const uint8_t* data, size_t size, bool with_disk) {
  using namespace kvmts::migration;
  fuzzguest::Guest guest;
  std::unique_ptr<fuzzguest::Disk> disk;
  MemoryChannel ch(data, size, 4099);  // odd read sizes exercise partial reads
  IncomingMigration in(ch, guest.Layout(), fuzzguest::kSecret, true, fuzzguest::FixedRandom);
  if (with_disk) {
    disk = std::make_unique<fuzzguest::Disk>();
    in.SetDisks(disk->Targets());
  }
  auto r = in.ReceiveUntilComplete();
  if (r.ok()) (void)in.ConfirmResumed();
  // Memory may only change after authentication (stats().version is set when AuthOk goes out).
  if (in.stats().version == 0) {
    for (uint8_t b : guest.low) {
      if (b != 0) __builtin_trap();
    }
  }
  return !r.ok() && r.error().detail.find("is copied by the source but is not a copied disk here") != std::string::npos;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (RunOnce(data, size, false)) RunOnce(data, size, true);
  return 0;
}
