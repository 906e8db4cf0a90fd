// libFuzzer target: the migration target's whole receive path (frame headers, handshake, range tables, page
// writes into guest memory, Zero/State/Complete) fed arbitrary bytes as the "source". Must never crash, hang, read
// or write outside the guest buffers (ASan), or accept memory before authentication.
#include <cstddef>
#include <cstdint>

#include "fuzz_guest.h"
#include "migration/channel.h"
#include "migration/incoming.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvmts::migration;
  fuzzguest::Guest guest;
  MemoryChannel ch(data, size, 4099);  // odd read sizes exercise partial reads
  IncomingMigration in(ch, guest.Layout(), fuzzguest::kSecret, true, fuzzguest::FixedRandom);
  auto r = in.ReceiveUntilComplete();
  if (r.ok()) (void)in.ConfirmResumed();
  // Memory may only change after authentication (stats().version is set when AuthOk goes out).
  if (in.stats().version == 0) {
    for (uint8_t b : guest.low) {
      if (b != 0) __builtin_trap();
    }
  }
  return 0;
}
