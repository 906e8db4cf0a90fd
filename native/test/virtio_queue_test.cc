// SplitQueue: good chains (direct, indirect), every malformed chain, the used ring, EVENT_IDX and dirty marking.
#include <cstdint>

#include "check.h"
#include "devices/virtio/split_queue.h"
#include "virtio_test_ring.h"

using namespace kvmts::devices::virtio;
using kvt_test::TestRing;

namespace {

constexpr uint64_t kMemBytes = 1 << 20;
constexpr uint64_t kData = 0x10000;
constexpr uint64_t kIndirect = 0x8000;

// Pops once and returns the error (kNone with *popped when a chain came out).
QueueError PopOnce(SplitQueue& q, FlatGuestMemory& mem, DescriptorChain* chain, bool* popped) {
  QueueError err = QueueError::kNone;
  *popped = q.Pop(mem, chain, &err);
  return err;
}

// Sets up a ring of `size`, lets `build` write descriptors and publish, and returns Pop's error.
template <typename F>
QueueError Malformed(uint16_t size, F build) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, size);
  build(ring);
  SplitQueue q = ring.MakeQueue();
  DescriptorChain chain;
  bool popped = false;
  QueueError err = PopOnce(q, mem, &chain, &popped);
  CHECK(!popped);
  CHECK_EQ(q.state().next_avail, 0);  // a bad chain is not consumed
  return err;
}

}  // namespace

TEST(virtio_queue_pops_a_direct_chain_in_order) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 16);
  ring.Desc(3, kData, 16, kDescFlagNext, 7);
  ring.Desc(7, kData + 0x100, 512, kDescFlagNext, 1);
  ring.Desc(1, kData + 0x400, 1, kDescFlagWrite, 0);
  ring.Publish(3);
  SplitQueue q = ring.MakeQueue();
  CHECK(q.Validate(mem) == QueueError::kNone);
  CHECK(q.HasAvailable(mem));
  DescriptorChain c;
  bool popped = false;
  CHECK(PopOnce(q, mem, &c, &popped) == QueueError::kNone);
  CHECK(popped);
  CHECK_EQ(c.head, 3);
  CHECK_EQ(c.buffers.size(), 3u);
  CHECK_EQ(c.buffers[1].gpa, kData + 0x100);
  CHECK_EQ(c.buffers[1].len, 512u);
  CHECK(!c.buffers[1].device_writable);
  CHECK(c.buffers[2].device_writable);
  CHECK_EQ(c.readable_bytes, 528u);
  CHECK_EQ(c.writable_bytes, 1u);
  CHECK_EQ(q.state().next_avail, 1);
  CHECK(PopOnce(q, mem, &c, &popped) == QueueError::kNone);
  CHECK(!popped);  // empty
  CHECK(!q.HasAvailable(mem));
}

TEST(virtio_queue_pops_an_indirect_chain) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 8);
  ring.Desc(0, kData, 16, kDescFlagNext, 2, kIndirect);
  ring.Desc(2, kData + 0x200, 4096, kDescFlagNext | kDescFlagWrite, 1, kIndirect);
  ring.Desc(1, kData + 0x2000, 1, kDescFlagWrite, 0, kIndirect);
  ring.Desc(5, kIndirect, 3 * 16, kDescFlagIndirect, 0);
  ring.Publish(5);
  SplitQueue q = ring.MakeQueue();
  DescriptorChain c;
  bool popped = false;
  CHECK(PopOnce(q, mem, &c, &popped) == QueueError::kNone);
  CHECK(popped);
  CHECK_EQ(c.head, 5);
  CHECK_EQ(c.buffers.size(), 3u);
  CHECK_EQ(c.buffers[1].len, 4096u);
  CHECK_EQ(c.writable_bytes, 4097u);
}

TEST(virtio_queue_pops_many_chains_across_index_wraparound) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 4);
  SplitQueue q = ring.MakeQueue();
  q.state().next_avail = 65534;
  q.state().next_used = 65534;
  ring.SetAvailIdx(65534);
  for (int i = 0; i < 4; ++i) {
    ring.Desc(static_cast<uint16_t>(i), kData + 64ull * i, 8, kDescFlagWrite, 0);
    ring.Publish(static_cast<uint16_t>(i));
  }
  for (int i = 0; i < 4; ++i) {
    DescriptorChain c;
    bool popped = false;
    CHECK(PopOnce(q, mem, &c, &popped) == QueueError::kNone);
    CHECK(popped);
    CHECK_EQ(c.head, i);
    CHECK(q.AddUsed(mem, c.head, 8) == QueueError::kNone);
  }
  CHECK_EQ(q.state().next_avail, 2);
  CHECK_EQ(ring.UsedIdx(), 2);
  CHECK_EQ(ring.UsedId(1), 3u);  // slot (65537 % 4)
}

TEST(virtio_queue_rejects_every_malformed_chain) {
  // head index >= size
  CHECK(Malformed(8, [](TestRing& r) { r.Publish(8); }) == QueueError::kHeadIndex);
  // avail.idx more than size ahead
  CHECK(Malformed(8, [](TestRing& r) { r.SetAvailIdx(9); }) == QueueError::kAvailIndex);
  // buffer outside RAM, and one whose end overflows
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kMemBytes - 4, 8, 0, 0); r.Publish(0); }) ==
        QueueError::kDescriptorAddress);
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, ~0ull - 3, 16, 0, 0); r.Publish(0); }) ==
        QueueError::kDescriptorAddress);
  // next past the table
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kData, 8, kDescFlagNext, 8); r.Publish(0); }) ==
        QueueError::kNextIndex);
  // loops: self, two-cycle, and a long cycle reached after a tail
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kData, 8, kDescFlagNext, 0); r.Publish(0); }) == QueueError::kLoop);
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kData, 8, kDescFlagNext, 1);
          r.Desc(1, kData, 8, kDescFlagNext, 0);
          r.Publish(0);
        }) == QueueError::kLoop);
  CHECK(Malformed(256, [](TestRing& r) {
          for (uint16_t i = 0; i < 256; ++i) {
            r.Desc(i, kData, 8, kDescFlagNext, static_cast<uint16_t>(i == 255 ? 10 : i + 1));
          }
          r.Publish(0);
        }) == QueueError::kLoop);
  // readable after writable
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kData, 8, kDescFlagNext | kDescFlagWrite, 1);
          r.Desc(1, kData, 8, 0, 0);
          r.Publish(0);
        }) == QueueError::kDirection);
  // indirect: more entries than the queue size, a bad length, with NEXT, nested, outside RAM, looping
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kIndirect, 9 * 16, kDescFlagIndirect, 0); r.Publish(0); }) ==
        QueueError::kTooLong);
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kIndirect, 0, kDescFlagIndirect, 0); r.Publish(0); }) ==
        QueueError::kIndirectSize);
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kIndirect, 17, kDescFlagIndirect, 0); r.Publish(0); }) ==
        QueueError::kIndirectSize);
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kIndirect, 32, kDescFlagIndirect | kDescFlagNext, 1);
          r.Publish(0);
        }) == QueueError::kIndirectWithNext);
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kIndirect + 0x100, 16, kDescFlagIndirect, 0, kIndirect);
          r.Desc(0, kIndirect, 16, kDescFlagIndirect, 0);
          r.Publish(0);
        }) == QueueError::kIndirectInIndirect);
  CHECK(Malformed(8, [](TestRing& r) { r.Desc(0, kMemBytes - 16, 32, kDescFlagIndirect, 0); r.Publish(0); }) ==
        QueueError::kDescriptorAddress);
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kData, 8, kDescFlagNext, 1, kIndirect);
          r.Desc(1, kData, 8, kDescFlagNext, 0, kIndirect);
          r.Desc(0, kIndirect, 32, kDescFlagIndirect, 0);
          r.Publish(0);
        }) == QueueError::kLoop);
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kData, 8, kDescFlagNext, 2, kIndirect);
          r.Desc(0, kIndirect, 32, kDescFlagIndirect, 0);
          r.Publish(0);
        }) == QueueError::kNextIndex);
  // a bad buffer inside an indirect table, and direction inside it
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kMemBytes, 1, 0, 0, kIndirect);
          r.Desc(0, kIndirect, 16, kDescFlagIndirect, 0);
          r.Publish(0);
        }) == QueueError::kDescriptorAddress);
  CHECK(Malformed(8, [](TestRing& r) {
          r.Desc(0, kData, 8, kDescFlagNext | kDescFlagWrite, 1, kIndirect);
          r.Desc(1, kData, 8, 0, 0, kIndirect);
          r.Desc(0, kIndirect, 32, kDescFlagIndirect, 0);
          r.Publish(0);
        }) == QueueError::kDirection);
  // direct buffers before the indirect one count towards the size limit
  CHECK(Malformed(4, [](TestRing& r) {
          r.Desc(0, kData, 8, kDescFlagNext, 1);
          r.Desc(1, kIndirect, 4 * 16, kDescFlagIndirect, 0);
          r.Publish(0);
        }) == QueueError::kTooLong);
}

TEST(virtio_queue_validates_rings_and_size) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 8);
  SplitQueue q = ring.MakeQueue();
  CHECK(q.Validate(mem) == QueueError::kNone);
  q.state().size = 6;  // not a power of two
  CHECK(q.Validate(mem) == QueueError::kNotReady);
  q.state().size = 512;  // above max 256
  CHECK(q.Validate(mem) == QueueError::kNotReady);
  q.state().size = 8;
  q.state().ready = false;
  CHECK(q.Validate(mem) == QueueError::kNotReady);
  q.state().ready = true;
  q.state().desc_gpa = TestRing::kDesc + 8;  // misaligned
  CHECK(q.Validate(mem) == QueueError::kRingAddress);
  q.state().desc_gpa = TestRing::kDesc;
  q.state().used_gpa = kMemBytes - 8;  // runs off the end
  CHECK(q.Validate(mem) == QueueError::kRingAddress);
  DescriptorChain c;
  QueueError err = QueueError::kNone;
  CHECK(!q.Pop(mem, &c, &err));
  CHECK(err == QueueError::kRingAddress);
  CHECK(q.AddUsed(mem, 0, 0) == QueueError::kRingAddress);
  CHECK(!q.NeedsNotification(mem));
  CHECK(QueueErrorName(QueueError::kLoop) == std::string("loop"));
}

TEST(virtio_queue_add_used_publishes_and_marks_dirty) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 8);
  SplitQueue q = ring.MakeQueue();
  CHECK(q.AddUsed(mem, 5, 1234) == QueueError::kNone);
  CHECK_EQ(ring.UsedIdx(), 1);
  CHECK_EQ(ring.UsedId(0), 5u);
  CHECK_EQ(ring.UsedLen(0), 1234u);
  bool idx_dirty = false, elem_dirty = false;
  for (auto [gpa, len] : mem.dirty()) {
    idx_dirty = idx_dirty || (gpa <= TestRing::kUsed + 2 && gpa + len >= TestRing::kUsed + 4);
    elem_dirty = elem_dirty || (gpa <= TestRing::kUsed + 4 && gpa + len >= TestRing::kUsed + 12);
  }
  CHECK(idx_dirty);
  CHECK(elem_dirty);
  CHECK(q.AddUsed(mem, 8, 0) == QueueError::kUsedIndex);
  CHECK_EQ(ring.UsedIdx(), 1);
}

TEST(virtio_queue_event_idx_decides_notifications_with_wraparound) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 8);
  SplitQueue q = ring.MakeQueue();
  q.set_event_idx(true);
  CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);
  ring.SetUsedEvent(100);
  CHECK(q.NeedsNotification(mem));  // the first decision always notifies
  CHECK(!q.NeedsNotification(mem));  // nothing new since
  CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);  // used 1 -> 2; driver asked at 100
  CHECK(!q.NeedsNotification(mem));
  ring.SetUsedEvent(2);  // wants an interrupt once used.idx passes 2
  CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);  // 3
  CHECK(q.NeedsNotification(mem));
  ring.SetUsedEvent(3);  // batch: 3 -> 6 crosses used_event 3
  for (int i = 0; i < 3; ++i) CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);
  CHECK(q.NeedsNotification(mem));
  // Wraparound: old 65534, new 2, used_event 65535 lies in between.
  q.state().next_used = 65534;
  q.state().signalled_used = 65534;
  ring.SetUsedEvent(65535);
  for (int i = 0; i < 4; ++i) CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);
  CHECK_EQ(q.state().next_used, 2);
  CHECK(q.NeedsNotification(mem));
  // ...and one outside: used_event 5 is not crossed by 2 -> 4.
  ring.SetUsedEvent(5);
  for (int i = 0; i < 2; ++i) CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);
  CHECK(!q.NeedsNotification(mem));
}

TEST(virtio_queue_without_event_idx_follows_no_interrupt) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 8);
  SplitQueue q = ring.MakeQueue();
  CHECK(q.AddUsed(mem, 0, 0) == QueueError::kNone);
  CHECK(q.NeedsNotification(mem));
  ring.SetAvailFlags(kAvailFlagNoInterrupt);
  CHECK(!q.NeedsNotification(mem));
}

TEST(virtio_queue_enable_notification_writes_avail_event_and_sees_late_buffers) {
  FlatGuestMemory mem(kMemBytes);
  TestRing ring(mem, 8);
  SplitQueue q = ring.MakeQueue();
  q.set_event_idx(true);
  ring.Desc(0, kData, 8, 0, 0);
  ring.Publish(0);
  DescriptorChain c;
  QueueError err;
  CHECK(q.Pop(mem, &c, &err));
  CHECK(!q.EnableNotification(mem));
  CHECK_EQ(ring.AvailEvent(), 1);
  ring.Publish(0);  // arrives "late"
  CHECK(q.EnableNotification(mem));
  q.Reset();
  CHECK_EQ(q.state().size, 256);
  CHECK(!q.state().ready);
  CHECK(!q.event_idx());
}
