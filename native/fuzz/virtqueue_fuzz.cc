// libFuzzer target: the split-queue chain walker, the virtio-blk request parser and the virtio-net frame code
// (transmit iovecs, receive copies, one packet spread over every chain popped as MRG_RXBUF does) fed an arbitrary
// guest (rings, descriptors, indirect tables, headers). Every pop either yields a chain whose buffers all lie in RAM,
// no longer than the queue, readable before writable, or a QueueError; a chain given back (Unpop) pops again the
// same; every chain is parsed both as a blk request and as a net packet on either queue; nothing may crash, hang or
// touch memory outside the 16 KiB guest (ASan/UBSan).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "devices/virtio/blk_request.h"
#include "devices/virtio/net_frame.h"
#include "devices/virtio/split_queue.h"
#include "virtqueue_fuzz.h"

using namespace kvmts::devices::virtio;

namespace {

// The chain as a virtio-net transmit packet and as a receive buffer for a packet of rx_len bytes.
void NetChecks(FlatGuestMemory& mem, const DescriptorChain& chain, size_t rx_len) {
  std::vector<iovec> iov;
  uint64_t bytes = 0;
  if (TxPacketIovecs(mem, chain, &iov, &bytes) == NetChainError::kNone) {
    if (bytes < kNetHdrBytes || bytes > kNetMaxPacketBytes) __builtin_trap();
    uint64_t sum = 0;
    for (const iovec& v : iov) {
      auto* p = static_cast<uint8_t*>(v.iov_base);
      if (p < mem.bytes().data() || p + v.iov_len > mem.bytes().data() + mem.bytes().size()) __builtin_trap();
      sum += v.iov_len;
    }
    if (sum != bytes) __builtin_trap();
    SkipIovecBytes(&iov, kNetHdrBytes);
    sum = 0;
    for (const iovec& v : iov) sum += v.iov_len;
    if (sum != bytes - kNetHdrBytes) __builtin_trap();
  }
  std::vector<uint8_t> packet(rx_len);
  for (size_t i = 0; i < rx_len; ++i) packet[i] = static_cast<uint8_t>(i);
  uint32_t used = 0;
  bool truncated = false;
  if (WriteRxPacket(mem, chain, packet.data(), packet.size(), &used, &truncated) == NetChainError::kNone) {
    if (used > rx_len || used > chain.writable_bytes || truncated != (used < rx_len)) __builtin_trap();
  }
}

// The popped chains as one MRG_RXBUF packet of rx_len bytes: only the chains it needs, none past its room.
void MergeableChecks(FlatGuestMemory& mem, const std::vector<DescriptorChain>& chains, size_t rx_len) {
  std::vector<uint8_t> packet(rx_len);
  for (size_t i = 0; i < rx_len; ++i) packet[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint32_t> used;
  bool truncated = false;
  if (WriteRxPacketMergeable(mem, chains, packet.data(), packet.size(), &used, &truncated) != NetChainError::kNone)
    return;
  if (used.empty() || used.size() > chains.size()) __builtin_trap();
  uint64_t sum = 0;
  for (size_t i = 0; i < used.size(); ++i) {
    if (used[i] > chains[i].writable_bytes) __builtin_trap();
    sum += used[i];
  }
  if (sum > rx_len || truncated != (sum < rx_len)) __builtin_trap();
}

}  // namespace

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
  std::vector<DescriptorChain> popped;
  // At most two rounds of the ring: Pop must stop by itself (empty or error) well before.
  for (int round = 0; round < 2 * 256 + 1; ++round) {
    DescriptorChain chain;
    QueueError err = QueueError::kNone;
    if (!q.Pop(mem, &chain, &err)) break;
    if ((data[1] & 2) != 0) {
      // Given back, the chain pops again the same (a device short of receive buffers does this).
      q.Unpop(1);
      DescriptorChain again;
      if (!q.Pop(mem, &again, &err) || again.head != chain.head || again.buffers.size() != chain.buffers.size())
        __builtin_trap();
    }
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
    NetChecks(mem, chain, kNetHdrBytes + (data[1] >> 1) * 23u);
    if (popped.size() < 64) popped.push_back(chain);
    if (q.AddUsed(mem, chain.head, static_cast<uint32_t>(chain.writable_bytes)) != QueueError::kNone) __builtin_trap();
    (void)q.NeedsNotification(mem);
    if (round == 2 * 256) __builtin_trap();  // more chains than avail.idx can announce
  }
  if (!popped.empty()) MergeableChecks(mem, popped, kNetHdrBytes + (data[1] >> 1) * 97u);
  (void)q.EnableNotification(mem);
  (void)q.EnableNotificationAfter(mem, q.state().next_avail);
  return 0;
}
