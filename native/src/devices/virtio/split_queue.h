// SplitQueue: the device side of a virtio 1.x split virtqueue (the ring layouts of the virtio spec, section 2.7),
// pure code over GuestAccess. Every address and index here is guest-controlled: each is bounds-checked and a bad
// value is a QueueError, never a crash, an assert or an endless walk.
//
//   descriptor table (16-aligned)  size x { le64 addr, le32 len, le16 flags (NEXT 1, WRITE 2, INDIRECT 4), le16 next }
//   available ring   (2-aligned)   le16 flags (NO_INTERRUPT 1) | le16 idx | le16 ring[size] | le16 used_event
//   used ring        (4-aligned)   le16 flags (NO_NOTIFY 1) | le16 idx | {le32 id, le32 len}[size] | le16 avail_event
//
//   Pop():   acquire avail.idx; (avail.idx - next_avail) > size is kAvailIndex; head = ring[next_avail % size];
//            walk the chain (below); next_avail++
//   walk:    head < size; each buffer's [addr, addr+len) must be RAM (kDescriptorAddress); device-readable buffers
//            come before device-writable ones (kDirection); next < table size (kNextIndex); more steps than the
//            table has entries is a loop (kLoop); more buffers than the queue size is kTooLong.
//            INDIRECT: only in the main table (kIndirectInIndirect), never with NEXT (kIndirectWithNext), len a
//            non-zero multiple of 16 (kIndirectSize); its table is walked from entry 0 with the same checks.
//   AddUsed(): write used.ring[next_used % size] = {head, len}, release-store used.idx = ++next_used, mark dirty.
//   NeedsNotification(): full fence; EVENT_IDX: notify iff (u16)(new - used_event - 1) < (u16)(new - old), where
//            old is used.idx at the previous decision; otherwise notify unless avail.flags has NO_INTERRUPT.
//   EnableNotification(): EVENT_IDX: avail_event = next_avail; full fence; true when more buffers arrived (the
//            caller processes them, so a kick that raced the update is never lost).
//   Unpop(n) + EnableNotificationAfter(posted): a device that needs more buffers for one packet than are posted
//            (virtio-net's MRG_RXBUF) gives back the chains it took and asks for a kick when avail.idx moves past
//            `posted`; true when it already has.
//
// Threading: one thread at a time (the device's worker while the device is active, the transport otherwise).
#pragma once

#include <cstdint>
#include <vector>

#include "devices/virtio/guest_access.h"

namespace kvmts::devices::virtio {

inline constexpr uint16_t kDescFlagNext = 1, kDescFlagWrite = 2, kDescFlagIndirect = 4;
inline constexpr uint16_t kAvailFlagNoInterrupt = 1;
inline constexpr uint64_t kDescriptorBytes = 16;
inline constexpr uint64_t kUsedElementBytes = 8;
inline constexpr uint16_t kQueueSizeLimit = 32768;  // the spec's maximum split-queue size

// Why a queue operation failed. Each one means the driver broke the protocol: the device goes NEEDS_RESET.
enum class QueueError : uint8_t {
  kNone = 0,
  kNotReady,            // not enabled, or a size that is zero, above the maximum or not a power of two
  kRingAddress,         // a ring outside RAM or misaligned
  kAvailIndex,          // avail.idx moved more than size ahead of what the device has consumed
  kHeadIndex,           // a head index >= size
  kDescriptorAddress,   // a buffer (or indirect table) not inside RAM
  kNextIndex,           // a next index past the end of its table
  kLoop,                // the next chain revisits a descriptor
  kTooLong,             // more buffers than the queue size
  kDirection,           // a device-readable buffer after a device-writable one
  kIndirectInIndirect,  // an INDIRECT descriptor inside an indirect table
  kIndirectWithNext,    // INDIRECT together with NEXT
  kIndirectSize,        // an indirect table length of 0 or not a multiple of 16
  kUsedIndex,           // AddUsed with a head >= size
};

// A short stable name ("loop", "descriptor-address", ...) for events and test messages.
const char* QueueErrorName(QueueError e);

// One buffer of a chain: guest address, length, and whether the device writes it (WRITE flag).
struct DescBuffer {
  uint64_t gpa = 0;
  uint32_t len = 0;
  bool device_writable = false;
};

// A popped chain: the head index (given back in AddUsed) and its buffers in chain order.
struct DescriptorChain {
  uint16_t head = 0;
  std::vector<DescBuffer> buffers;
  uint64_t readable_bytes = 0;
  uint64_t writable_bytes = 0;
};

// The queue's registers and progress; what save/restore carries.
struct QueueState {
  uint16_t size = 0;        // as negotiated (the transport's queue_size register)
  bool ready = false;       // queue_enable
  uint64_t desc_gpa = 0, avail_gpa = 0, used_gpa = 0;
  uint16_t next_avail = 0;  // next avail.ring slot to consume
  uint16_t next_used = 0;   // next used.ring slot to fill (= used.idx)
  uint16_t signalled_used = 0;
  bool signalled_valid = false;  // false: the next NeedsNotification() notifies whatever used_event says
};

class SplitQueue {
 public:
  // max_size: a power of two <= kQueueSizeLimit (the transport's queue_size reads it after reset).
  explicit SplitQueue(uint16_t max_size = 256) : max_size_(max_size) { Reset(); }

  uint16_t max_size() const { return max_size_; }
  QueueState& state() { return state_; }
  const QueueState& state() const { return state_; }
  void set_state(const QueueState& s) { state_ = s; }
  // VIRTIO_F_EVENT_IDX negotiated.
  void set_event_idx(bool on) { event_idx_ = on; }
  bool event_idx() const { return event_idx_; }

  // Back to the reset values (size = max_size, not ready, addresses 0, indices 0).
  void Reset();
  // Checks a ready queue before use: the size, and the three rings inside RAM and aligned.
  QueueError Validate(const GuestAccess& mem) const;
  // Pops the next chain into *out: true when one was popped; false with *err kNone when the ring is empty, or
  // with the reason when the driver broke the protocol (next_avail then stays where it was).
  bool Pop(const GuestAccess& mem, DescriptorChain* out, QueueError* err);
  // Whether avail.idx is ahead of next_avail (no validation; Pop decides).
  bool HasAvailable(const GuestAccess& mem) const;
  // Returns chain `head` to the driver with `len` bytes written by the device.
  QueueError AddUsed(GuestAccess& mem, uint16_t head, uint32_t len);
  // Whether the driver wants an interrupt for what AddUsed published since the last call.
  bool NeedsNotification(const GuestAccess& mem);
  // Re-arms kicks (EVENT_IDX: avail_event = next_avail); true when buffers are already waiting.
  bool EnableNotification(GuestAccess& mem);
  // Gives back the last `n` chains Pop returned (they stay posted, to be popped again): only before AddUsed of any
  // of them, and n at most what was popped since.
  void Unpop(uint16_t n) { state_.next_avail = static_cast<uint16_t>(state_.next_avail - n); }
  // Re-arms kicks for buffers posted after avail.idx `posted` (EVENT_IDX: avail_event = posted); true when avail.idx
  // has already moved past it (the caller tries again, so a kick that raced the update is never lost).
  bool EnableNotificationAfter(GuestAccess& mem, uint16_t posted);

 private:
  QueueError WalkChain(const GuestAccess& mem, uint16_t head, DescriptorChain* out) const;
  uint16_t max_size_;
  bool event_idx_ = false;
  QueueState state_;
};

}  // namespace kvmts::devices::virtio
