// libFuzzer target: the split-queue chain walker and the virtio-blk request parser fed an arbitrary guest (rings,
// descriptors, indirect tables, headers). Every pop either yields a chain whose buffers all lie in RAM, no longer
// than the queue, readable before writable, or a QueueError; nothing may crash, hang or touch memory outside the
// 16 KiB guest (ASan/UBSan).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "devices/virtio/blk_request.h"
#include "devices/virtio/split_queue.h"
#include "virtqueue_fuzz.h"

using namespace kvmts::devices::virtio;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < vqfuzz::kHeaderBytes) return 0;
  FlatGuestMemory mem(vqfuzz::kMemBytes);
  size_t image = size - vqfuzz::kHeaderBytes < vqfuzz::kMemBytes ? size - vqfuzz::kHeaderBytes : vqfuzz::kMemBytes;
  std::memcpy(mem.bytes().data(), data + vqfuzz::kHeaderBytes, image);
  SplitQueue q(256);
  q.state().size = static_cast<uint16_t>(1u << (data[0] % 9));
  q.state().ready = true;
  q.state().desc_gpa = vqfuzz::kDesc;
  q.state().avail_gpa = vqfuzz::kAvail;
  q.state().used_gpa = vqfuzz::kUsed;
  std::memcpy(&q.state().next_avail, data + 2, 2);
  q.state().next_used = q.state().next_avail;
  q.set_event_idx((data[1] & 1) != 0);
  if (q.Validate(mem) != QueueError::kNone) __builtin_trap();  // the fixed layout is always valid
  // At most two rounds of the ring: Pop must stop by itself (empty or error) well before.
  for (int round = 0; round < 2 * 256 + 1; ++round) {
    DescriptorChain chain;
    QueueError err = QueueError::kNone;
    if (!q.Pop(mem, &chain, &err)) break;
    if (chain.head >= q.state().size || chain.buffers.size() > q.state().size) __builtin_trap();
    bool seen_writable = false;
    for (const DescBuffer& b : chain.buffers) {
      if (mem.HostPtr(b.gpa, b.len) == nullptr) __builtin_trap();
      if (!b.device_writable && seen_writable) __builtin_trap();
      seen_writable = seen_writable || b.device_writable;
    }
    BlkRequest req;
    if (ParseBlkRequest(mem, chain, &req) == BlkParseError::kNone) {
      for (const DescBuffer& b : req.data) {
        if (mem.HostPtr(b.gpa, b.len) == nullptr) __builtin_trap();
      }
      if (mem.HostPtr(req.status_gpa, 1) == nullptr) __builtin_trap();
      std::vector<BlkSegment> segments;
      (void)ReadBlkSegments(mem, req, 32, &segments);
    }
    if (q.AddUsed(mem, chain.head, static_cast<uint32_t>(chain.writable_bytes)) != QueueError::kNone) __builtin_trap();
    (void)q.NeedsNotification(mem);
    if (round == 2 * 256) __builtin_trap();  // more chains than avail.idx can announce
  }
  (void)q.EnableNotification(mem);
  return 0;
}
