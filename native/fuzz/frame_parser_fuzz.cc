// libFuzzer target: the migration target's whole receive path (frame headers, handshake, range tables, page
// writes into guest memory, Zero/State/Complete, Disk/DiskZero into a memfd disk) fed arbitrary bytes as the "source". Must never crash, hang, read
// or write outside the guest buffers (ASan), or accept memory before authentication.
#include <cstddef>
#include <cstdint>

#include "fuzz_guest.h"
#include "migration/channel.h"
#include "migration/incoming.h"

// Each input runs twice: against a target without copied disks (protocols 2-4) and one with a 64 KiB copied disk
// (protocol 4 streams that carry Disk/DiskZero frames; the others then stop at Start).
static void RunOnce(const uint8_t* data, size_t size, bool with_disk) {
  using namespace kvmts::migration;
  fuzzguest::Guest guest;
  fuzzguest::Disk disk;
  MemoryChannel ch(data, size, 4099);  // odd read sizes exercise partial reads
  IncomingMigration in(ch, guest.Layout(), fuzzguest::kSecret, true, fuzzguest::FixedRandom);
  if (with_disk) in.SetDisks(disk.Targets());
  auto r = in.ReceiveUntilComplete();
  if (r.ok()) (void)in.ConfirmResumed();
  // Memory may only change after authentication (stats().version is set when AuthOk goes out).
  if (in.stats().version == 0) {
    for (uint8_t b : guest.low) {
      if (b != 0) __builtin_trap();
    }
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunOnce(data, size, false);
  RunOnce(data, size, true);
  return 0;
}
