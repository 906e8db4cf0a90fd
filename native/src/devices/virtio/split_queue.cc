// SplitQueue: see split_queue.h for the ring layouts and the checks.
#include "devices/virtio/split_queue.h"

#include <atomic>
#include <cstring>

namespace kvmts::devices::virtio {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "virtio rings are little-endian; this code assumes a LE host");

namespace {

// Host pointers to the three rings of a queue, each checked to lie in RAM.
struct Rings {
  uint8_t* desc = nullptr;
  uint8_t* avail = nullptr;
  uint8_t* used = nullptr;
};

uint64_t DescTableBytes(uint16_t size) { return kDescriptorBytes * size; }
uint64_t AvailRingBytes(uint16_t size) { return 6 + 2ull * size; }
uint64_t UsedRingBytes(uint16_t size) { return 6 + kUsedElementBytes * size; }

bool SizeOk(uint16_t size, uint16_t max) { return size != 0 && size <= max && (size & (size - 1)) == 0; }

QueueError MapRings(const GuestAccess& mem, const QueueState& s, uint16_t max, Rings* r) {
  if (!s.ready || !SizeOk(s.size, max)) return QueueError::kNotReady;
  if ((s.desc_gpa & 15) != 0 || (s.avail_gpa & 1) != 0 || (s.used_gpa & 3) != 0) return QueueError::kRingAddress;
  r->desc = mem.HostPtr(s.desc_gpa, DescTableBytes(s.size));
  r->avail = mem.HostPtr(s.avail_gpa, AvailRingBytes(s.size));
  r->used = mem.HostPtr(s.used_gpa, UsedRingBytes(s.size));
  if (r->desc == nullptr || r->avail == nullptr || r->used == nullptr) return QueueError::kRingAddress;
  return QueueError::kNone;
}

uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  // SAFETY: p points inside a ring that MapRings bounds-checked.
  std::memcpy(&v, p, 2);
  return v;
}

uint16_t LoadAcquire16(const uint8_t* p) {
  // SAFETY: p is a 2-aligned field inside a bounds-checked ring (avail_gpa is 2-aligned, RAM regions page-aligned).
  return __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_ACQUIRE);
}

struct RawDesc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags;
  uint16_t next;
};

RawDesc LoadDesc(const uint8_t* table, uint32_t index) {
  RawDesc d;
  const uint8_t* p = table + kDescriptorBytes * index;
  // SAFETY: index < the table's entry count, and the table [table, table + 16 * count) was bounds-checked.
  std::memcpy(&d.addr, p, 8);
  std::memcpy(&d.len, p + 8, 4);
  std::memcpy(&d.flags, p + 12, 2);
  std::memcpy(&d.next, p + 14, 2);
  return d;
}

}  // namespace

const char* QueueErrorName(QueueError e) {
  switch (e) {
    case QueueError::kNone: return "none";
    case QueueError::kNotReady: return "not-ready";
    case QueueError::kRingAddress: return "ring-address";
    case QueueError::kAvailIndex: return "avail-index";
    case QueueError::kHeadIndex: return "head-index";
    case QueueError::kDescriptorAddress: return "descriptor-address";
    case QueueError::kNextIndex: return "next-index";
    case QueueError::kLoop: return "loop";
    case QueueError::kTooLong: return "too-long";
    case QueueError::kDirection: return "direction";
    case QueueError::kIndirectInIndirect: return "indirect-in-indirect";
    case QueueError::kIndirectWithNext: return "indirect-with-next";
    case QueueError::kIndirectSize: return "indirect-size";
    case QueueError::kUsedIndex: return "used-index";
  }
  return "unknown";
}

void SplitQueue::Reset() {
  state_ = QueueState{};
  state_.size = max_size_;
  event_idx_ = false;
}

QueueError SplitQueue::Validate(const GuestAccess& mem) const {
  Rings r;
  return MapRings(mem, state_, max_size_, &r);
}

bool SplitQueue::HasAvailable(const GuestAccess& mem) const {
  Rings r;
  if (MapRings(mem, state_, max_size_, &r) != QueueError::kNone) return false;
  return LoadAcquire16(r.avail + 2) != state_.next_avail;
}

bool SplitQueue::Pop(const GuestAccess& mem, DescriptorChain* out, QueueError* err) {
  *err = QueueError::kNone;
  Rings r;
  if (QueueError e = MapRings(mem, state_, max_size_, &r); e != QueueError::kNone) {
    *err = e;
    return false;
  }
  uint16_t avail_idx = LoadAcquire16(r.avail + 2);
  uint16_t pending = static_cast<uint16_t>(avail_idx - state_.next_avail);
  if (pending == 0) return false;
  if (pending > state_.size) {
    *err = QueueError::kAvailIndex;
    return false;
  }
  uint16_t slot = static_cast<uint16_t>(state_.next_avail & (state_.size - 1));
  uint16_t head = Load16(r.avail + 4 + 2u * slot);
  if (head >= state_.size) {
    *err = QueueError::kHeadIndex;
    return false;
  }
  if (QueueError e = WalkChain(mem, head, out); e != QueueError::kNone) {
    *err = e;
    return false;
  }
  state_.next_avail++;
  return true;
}

QueueError SplitQueue::WalkChain(const GuestAccess& mem, uint16_t head, DescriptorChain* out) const {
  out->head = head;
  out->buffers.clear();
  out->readable_bytes = 0;
  out->writable_bytes = 0;
  const uint8_t* table = mem.HostPtr(state_.desc_gpa, DescTableBytes(state_.size));
  if (table == nullptr) return QueueError::kRingAddress;
  uint32_t table_entries = state_.size;
  uint32_t index = head;
  uint32_t steps = 0;  // next-hops within the current table
  bool in_indirect = false;
  bool saw_writable = false;
  for (;;) {
    RawDesc d = LoadDesc(table, index);
    if (d.flags & kDescFlagIndirect) {
      if (in_indirect) return QueueError::kIndirectInIndirect;
      if (d.flags & kDescFlagNext) return QueueError::kIndirectWithNext;
      if (d.len == 0 || d.len % kDescriptorBytes != 0) return QueueError::kIndirectSize;
      uint32_t entries = d.len / kDescriptorBytes;
      if (entries + out->buffers.size() > state_.size) return QueueError::kTooLong;
      table = mem.HostPtr(d.addr, d.len);
      if (table == nullptr) return QueueError::kDescriptorAddress;
      table_entries = entries;
      index = 0;
      steps = 0;
      in_indirect = true;
      continue;
    }
    if (mem.HostPtr(d.addr, d.len) == nullptr) return QueueError::kDescriptorAddress;
    bool writable = (d.flags & kDescFlagWrite) != 0;
    if (!writable && saw_writable) return QueueError::kDirection;
    saw_writable = saw_writable || writable;
    if (out->buffers.size() >= state_.size) return QueueError::kTooLong;
    out->buffers.push_back(DescBuffer{d.addr, d.len, writable});
    (writable ? out->writable_bytes : out->readable_bytes) += d.len;
    if (!(d.flags & kDescFlagNext)) return QueueError::kNone;
    if (d.next >= table_entries) return QueueError::kNextIndex;
    // A chain inside one table visits each entry at most once, so it makes at most entries - 1 hops.
    if (++steps >= table_entries) return QueueError::kLoop;
    index = d.next;
  }
}

QueueError SplitQueue::AddUsed(GuestAccess& mem, uint16_t head, uint32_t len) {
  Rings r;
  if (QueueError e = MapRings(mem, state_, max_size_, &r); e != QueueError::kNone) return e;
  if (head >= state_.size) return QueueError::kUsedIndex;
  uint16_t slot = static_cast<uint16_t>(state_.next_used & (state_.size - 1));
  uint8_t* elem = r.used + 4 + kUsedElementBytes * slot;
  uint32_t id = head;
  // SAFETY: slot < size and the used ring [used, used + 6 + 8 * size) was bounds-checked by MapRings.
  std::memcpy(elem, &id, 4);
  std::memcpy(elem + 4, &len, 4);
  state_.next_used++;
  // SAFETY: used.idx is 2-aligned (used_gpa is 4-aligned) inside the checked ring. Release: the element first.
  __atomic_store_n(reinterpret_cast<uint16_t*>(r.used + 2), state_.next_used, __ATOMIC_RELEASE);
  mem.MarkDirty(state_.used_gpa, 4);
  mem.MarkDirty(state_.used_gpa + 4 + kUsedElementBytes * slot, kUsedElementBytes);
  return QueueError::kNone;
}

bool SplitQueue::NeedsNotification(const GuestAccess& mem) {
  Rings r;
  if (MapRings(mem, state_, max_size_, &r) != QueueError::kNone) return false;
  // The used.idx store must be visible before the driver's suppression fields are read (a Dekker pair with the
  // driver's "write used_event, fence, read used.idx").
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint16_t now = state_.next_used;
  if (!event_idx_) {
    // SAFETY: avail.flags is the first u16 of the checked avail ring; the driver flips it concurrently.
    return (__atomic_load_n(reinterpret_cast<const uint16_t*>(r.avail), __ATOMIC_RELAXED) & kAvailFlagNoInterrupt) == 0;
  }
  uint16_t old = state_.signalled_used;
  bool valid = state_.signalled_valid;
  state_.signalled_used = now;
  state_.signalled_valid = true;
  if (!valid) return true;
  // SAFETY: used_event is the last u16 of the checked avail ring, 2-aligned; the driver updates it concurrently.
  uint16_t used_event = __atomic_load_n(reinterpret_cast<const uint16_t*>(r.avail + 4 + 2u * state_.size),
                                        __ATOMIC_RELAXED);
  return static_cast<uint16_t>(now - used_event - 1) < static_cast<uint16_t>(now - old);
}

bool SplitQueue::EnableNotification(GuestAccess& mem) {
  Rings r;
  if (MapRings(mem, state_, max_size_, &r) != QueueError::kNone) return false;
  if (event_idx_) {
    uint8_t* avail_event = r.used + 4 + kUsedElementBytes * state_.size;
    // SAFETY: avail_event is the last u16 of the checked used ring, 2-aligned. Atomic: the driver reads it while
    // it runs (no torn value); the fence below orders it before the avail.idx re-check.
    __atomic_store_n(reinterpret_cast<uint16_t*>(avail_event), state_.next_avail, __ATOMIC_RELAXED);
    mem.MarkDirty(state_.used_gpa + 4 + kUsedElementBytes * state_.size, 2);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return LoadAcquire16(r.avail + 2) != state_.next_avail;
}

bool SplitQueue::EnableNotificationAfter(GuestAccess& mem, uint16_t posted) {
  Rings r;
  if (MapRings(mem, state_, max_size_, &r) != QueueError::kNone) return false;
  if (event_idx_) {
    uint8_t* avail_event = r.used + 4 + kUsedElementBytes * state_.size;
    // SAFETY: as in EnableNotification: the last u16 of the checked used ring, stored atomically, fenced below.
    __atomic_store_n(reinterpret_cast<uint16_t*>(avail_event), posted, __ATOMIC_RELAXED);
    mem.MarkDirty(state_.used_gpa + 4 + kUsedElementBytes * state_.size, 2);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return LoadAcquire16(r.avail + 2) != posted;
}

}  // namespace kvmts::devices::virtio
