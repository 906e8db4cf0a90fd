// The driver side of a split virtqueue in a FlatGuestMemory, for the virtio unit tests: fills descriptors, publishes
// heads, reads the used ring back. Layout: descriptor table 0x1000, avail 0x3000, used 0x4000 (size <= 256).
#pragma once

#include <cstdint>
#include <cstring>

#include "devices/virtio/guest_access.h"
#include "devices/virtio/split_queue.h"

namespace kvt_test {

using kvmts::devices::virtio::FlatGuestMemory;
using kvmts::devices::virtio::SplitQueue;

struct TestRing {
  static constexpr uint64_t kDesc = 0x1000, kAvail = 0x3000, kUsed = 0x4000;
  FlatGuestMemory& mem;
  uint16_t size;
  uint16_t avail_idx = 0;

  TestRing(FlatGuestMemory& m, uint16_t s) : mem(m), size(s) {}

  template <typename T>
  void Put(uint64_t gpa, T v) { std::memcpy(mem.bytes().data() + gpa, &v, sizeof v); }
  template <typename T>
  T Get(uint64_t gpa) const {
    T v;
    std::memcpy(&v, const_cast<FlatGuestMemory&>(mem).bytes().data() + gpa, sizeof v);
    return v;
  }
  // Writes descriptor i of the table at `table` (the main table by default).
  void Desc(uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next, uint64_t table = kDesc) {
    uint64_t at = table + 16ull * i;
    Put<uint64_t>(at, addr);
    Put<uint32_t>(at + 8, len);
    Put<uint16_t>(at + 12, flags);
    Put<uint16_t>(at + 14, next);
  }
  // Makes head available (avail.ring[idx % size] = head; idx++).
  // The index fields are accessed as a driver does: release-store avail.idx, acquire-load used.idx (the device
  // thread reads and writes the same memory).
  uint16_t* Field(uint64_t gpa) { return reinterpret_cast<uint16_t*>(mem.bytes().data() + gpa); }
  uint16_t LoadAcquire(uint64_t gpa) const {
    return __atomic_load_n(const_cast<TestRing*>(this)->Field(gpa), __ATOMIC_ACQUIRE);
  }
  void Publish(uint16_t head) {
    Put<uint16_t>(kAvail + 4 + 2ull * (avail_idx % size), head);
    avail_idx++;
    __atomic_store_n(Field(kAvail + 2), avail_idx, __ATOMIC_RELEASE);
  }
  void SetAvailIdx(uint16_t v) { avail_idx = v; Put<uint16_t>(kAvail + 2, v); }
  void SetAvailFlags(uint16_t f) { Put<uint16_t>(kAvail, f); }
  void SetUsedEvent(uint16_t v) { __atomic_store_n(Field(kAvail + 4 + 2ull * size), v, __ATOMIC_RELEASE); }
  uint16_t UsedIdx() const { return LoadAcquire(kUsed + 2); }
  uint32_t UsedId(uint16_t slot) const { return Get<uint32_t>(kUsed + 4 + 8ull * (slot % size)); }
  uint32_t UsedLen(uint16_t slot) const { return Get<uint32_t>(kUsed + 8 + 8ull * (slot % size)); }
  uint16_t AvailEvent() const { return LoadAcquire(kUsed + 4 + 8ull * size); }

  // A ready queue over this ring.
  SplitQueue MakeQueue(uint16_t max = 256) const {
    SplitQueue q(max);
    q.state().size = size;
    q.state().ready = true;
    q.state().desc_gpa = kDesc;
    q.state().avail_gpa = kAvail;
    q.state().used_gpa = kUsed;
    return q;
  }
};

}  // namespace kvt_test
