// DirtyBitmap and GuestMemory (vm-memory's tests, reduced). GuestMemory maps anonymous memory with MAP_NORESERVE,
// so even a 5 GiB layout costs nothing until touched.
#include <cstring>
#include <vector>

#include "check.h"
#include "memory/dirty_bitmap.h"
#include "memory/guest_memory.h"

using namespace kvmts::memory;

TEST(dirty_bitmap_sets_ranges_across_words_and_clips_at_the_end) {
  DirtyBitmap b(130);
  b.SetRange(60, 10);
  b.SetRange(128, 10);  // clipped to pages 128, 129
  b.Set(500);           // ignored
  CHECK_EQ(b.Count(), 12u);
  CHECK(b.Test(60) && b.Test(69) && !b.Test(70) && b.Test(129));
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  b.ForEachRun([&](uint64_t first, uint64_t n) { runs.emplace_back(first, n); });
  CHECK_EQ(runs.size(), 2u);
  CHECK_EQ(runs[0].first, 60u);
  CHECK_EQ(runs[0].second, 10u);
  CHECK_EQ(runs[1].first, 128u);
  CHECK_EQ(runs[1].second, 2u);
}

TEST(dirty_bitmap_set_all_is_one_run_and_take_into_moves_bits) {
  DirtyBitmap a(200), b(200);
  a.SetAll();
  CHECK_EQ(a.Count(), 200u);
  int runs = 0;
  a.ForEachRun([&](uint64_t first, uint64_t n) {
    runs++;
    CHECK_EQ(first, 0u);
    CHECK_EQ(n, 200u);
  });
  CHECK_EQ(runs, 1);
  a.TakeInto(b);
  CHECK(!a.Any());
  CHECK_EQ(b.Count(), 200u);
}

TEST(dirty_bitmap_or_words_merges_a_kvm_log_without_bits_past_the_end) {
  DirtyBitmap b(70);
  b.Set(1);
  uint64_t kvm[2] = {0x4, ~uint64_t{0}};
  b.OrWords(kvm, 2);
  CHECK(b.Test(1) && b.Test(2) && b.Test(69));
  CHECK_EQ(b.Count(), 2u + 6u);
}

TEST(guest_memory_below_3g_is_one_region_and_above_splits_around_the_hole) {
  auto small = GuestMemory::Create({64ull << 20, Backing::kAnonymous, false});
  CHECK(small.ok());
  CHECK_EQ(small.value()->region_count(), 1u);
  auto big = GuestMemory::Create({5ull << 30, Backing::kAnonymous, false});
  CHECK(big.ok());
  if (!big.ok()) return;
  CHECK_EQ(big.value()->region_count(), 2u);
  CHECK_EQ(big.value()->region(0).size_bytes, kMmioHoleStart);
  CHECK_EQ(big.value()->region(1).base.value, kMmioHoleEnd);
  CHECK_EQ(big.value()->region(1).size_bytes, 2ull << 30);
  CHECK_EQ(big.value()->RegionIndex(Gpa(kMmioHoleStart)), -1);
  CHECK(big.value()->HostPtr(Gpa(kMmioHoleStart - 4096), 8192) == nullptr);  // spans into the hole
}

TEST(guest_memory_rejects_bad_sizes) {
  CHECK(!GuestMemory::Create({0, Backing::kAnonymous, false}).ok());
  auto r = GuestMemory::Create({4097, Backing::kAnonymous, false});
  CHECK(!r.ok());
  if (!r.ok()) CHECK_EQ(r.error().op, std::string("guest-memory"));
}

TEST(guest_memory_access_is_bounds_checked_and_vmm_writes_are_dirty) {
  auto m = GuestMemory::Create({16ull << 20, Backing::kMemfd, false});
  CHECK(m.ok());
  if (!m.ok()) return;
  GuestMemory& mem = *m.value();
  CHECK(mem.region(0).fd >= 0);
  CHECK(mem.HostPtr(Gpa((16ull << 20) - 8), 8) != nullptr);
  CHECK(mem.HostPtr(Gpa((16ull << 20) - 8), 9) == nullptr);
  CHECK(mem.HostPtr(Gpa(~0ull), 2) == nullptr);  // no overflow
  uint32_t v = 0xdeadbeef, back = 0;
  CHECK(mem.Write(Gpa(0x5ffe), &v, 4).ok());  // spans pages 5 and 6
  CHECK(mem.Read(Gpa(0x5ffe), &back, 4).ok());
  CHECK_EQ(back, 0xdeadbeefu);
  CHECK(mem.vmm_dirty(0).Test(5) && mem.vmm_dirty(0).Test(6) && !mem.vmm_dirty(0).Test(7));
  auto bad = mem.Write(Gpa(16ull << 20), &v, 4);
  CHECK(!bad.ok());
  if (!bad.ok()) CHECK_EQ(bad.error().err, 14);  // EFAULT
}
