// virtio-net frame handling: see net_frame.h.
#include "devices/virtio/net_frame.h"

#include <algorithm>
#include <cstring>

namespace kvmts::devices::virtio {

const char* NetChainErrorName(NetChainError e) {
  switch (e) {
    case NetChainError::kNone: return "none";
    case NetChainError::kTxWritable: return "tx-writable";
    case NetChainError::kTxShort: return "tx-short";
    case NetChainError::kTxTooLong: return "tx-too-long";
    case NetChainError::kRxReadable: return "rx-readable";
    case NetChainError::kRxShort: return "rx-short";
    case NetChainError::kAddress: return "net-address";
  }
  return "unknown";
}

NetChainError TxPacketIovecs(const GuestAccess& mem, const DescriptorChain& chain, std::vector<iovec>* out,
                             uint64_t* bytes) {
  out->clear();
  *bytes = 0;
  uint64_t total = 0;
  for (const DescBuffer& b : chain.buffers) {
    if (b.device_writable) return NetChainError::kTxWritable;
    total += b.len;  // at most queue size x 4 GiB: no overflow in 64 bits
    if (total > kNetMaxPacketBytes) return NetChainError::kTxTooLong;
  }
  if (total < kNetHdrBytes) return NetChainError::kTxShort;
  for (const DescBuffer& b : chain.buffers) {
    if (b.len == 0) continue;
    uint8_t* p = mem.HostPtr(b.gpa, b.len);
    if (p == nullptr) return NetChainError::kAddress;
    out->push_back(iovec{p, b.len});
  }
  *bytes = total;
  return NetChainError::kNone;
}

void SkipIovecBytes(std::vector<iovec>* iov, size_t n) {
  size_t drop = 0;
  while (drop < iov->size() && n >= (*iov)[drop].iov_len) n -= (*iov)[drop++].iov_len;
  iov->erase(iov->begin(), iov->begin() + static_cast<std::ptrdiff_t>(drop));
  if (!iov->empty() && n > 0) {
    (*iov)[0].iov_base = static_cast<uint8_t*>((*iov)[0].iov_base) + n;
    (*iov)[0].iov_len -= n;
  }
}

NetChainError WriteRxPacket(GuestAccess& mem, const DescriptorChain& chain, const uint8_t* packet, size_t len,
                            uint32_t* used, bool* truncated) {
  *used = 0;
  *truncated = false;
  uint64_t room = 0;
  for (const DescBuffer& b : chain.buffers) {
    if (!b.device_writable) return NetChainError::kRxReadable;
    room += b.len;
  }
  if (room < kNetHdrBytes) return NetChainError::kRxShort;
  size_t at = 0;
  for (const DescBuffer& b : chain.buffers) {
    if (at == len) break;
    size_t n = std::min<size_t>(b.len, len - at);
    if (n == 0) continue;
    if (!WriteGuest(mem, b.gpa, packet + at, n)) return NetChainError::kAddress;
    at += n;
  }
  *truncated = at < len;
  *used = static_cast<uint32_t>(at);  // at <= len <= kNetMaxPacketBytes
  return NetChainError::kNone;
}

NetChainError WriteRxPacketMergeable(GuestAccess& mem, const std::vector<DescriptorChain>& chains,
                                     const uint8_t* packet, size_t len, std::vector<uint32_t>* used,
                                     bool* truncated) {
  used->clear();
  *truncated = false;
  // How many chains the packet needs (each checked as the spec asks of a mergeable buffer).
  size_t needed = 0;
  uint64_t room = 0;
  for (const DescriptorChain& chain : chains) {
    if (room >= len) break;
    for (const DescBuffer& b : chain.buffers) {
      if (!b.device_writable) return NetChainError::kRxReadable;
    }
    if (chain.writable_bytes < kNetHdrBytes) return NetChainError::kRxShort;
    room += chain.writable_bytes;
    needed++;
  }
  if (needed == 0) return NetChainError::kRxShort;
  // The header as the first chain gets it: num_buffers (le16) = the chains this packet fills.
  uint8_t hdr[kNetHdrBytes];
  std::memcpy(hdr, packet, kNetHdrBytes);
  hdr[kNetHdrNumBuffersOffset] = static_cast<uint8_t>(needed);
  hdr[kNetHdrNumBuffersOffset + 1] = static_cast<uint8_t>(needed >> 8);
  size_t at = 0;
  for (size_t c = 0; c < needed; ++c) {
    uint32_t wrote = 0;
    for (const DescBuffer& b : chains[c].buffers) {
      if (at == len) break;
      size_t n = std::min<size_t>(b.len, len - at);
      if (n == 0) continue;
      // The header's bytes come from hdr (num_buffers set), the rest from the packet.
      size_t from_hdr = at < kNetHdrBytes ? std::min<size_t>(n, kNetHdrBytes - at) : 0;
      if (from_hdr > 0 && !WriteGuest(mem, b.gpa, hdr + at, from_hdr)) return NetChainError::kAddress;
      if (n > from_hdr && !WriteGuest(mem, b.gpa + from_hdr, packet + at + from_hdr, n - from_hdr))
        return NetChainError::kAddress;
      at += n;
      wrote += static_cast<uint32_t>(n);  // n <= len <= kNetMaxPacketBytes
    }
    used->push_back(wrote);
  }
  *truncated = at < len;
  return NetChainError::kNone;
}

}  // namespace kvmts::devices::virtio
