// virtio-net frame handling (virtio spec 5.1.6), pure: a popped transmit chain becomes the host iovecs of one
// packet, and one received packet is copied into a popped receive chain. No fd, no threads; the device (net.h)
// does the I/O. Driven by the virtqueue fuzz target (fuzz/virtqueue_fuzz.cc) and test/virtio_net_test.cc.
//
//   every packet on both queues:  [ virtio_net_hdr_v1, 12 B ][ Ethernet frame ]   (VERSION_1: always 12 bytes)
//     hdr: u8 flags | u8 gso_type | le16 hdr_len | le16 gso_size | le16 csum_start | le16 csum_offset |
//          le16 num_buffers
//
//   transmit (queue 1)   chain = device-readable buffers only, >= 12 bytes, <= kNetMaxPacketBytes; the header may
//                        span buffers (ANY_LAYOUT). A writable buffer, a short or an oversized chain breaks the
//                        protocol (the device goes NEEDS_RESET).
//   receive (queue 0)    chain = device-writable buffers only, >= 12 bytes. The packet is copied in chain order and
//                        cut at the chain's end (counted: Linux posts 1518 + 12 bytes without GUEST_TSO, 64 KiB
//                        chains with it, so only a host frame above what the driver asked for is cut); num_buffers
//                        is 1. Every byte written is marked dirty (live migration resends those pages).
//   receive, MRG_RXBUF   one packet across several chains (each >= 12 bytes, writable only), in the order they were
//                        popped: the header (num_buffers = chains used) and the data continue from chain to chain,
//                        each chain's used length its own share; Linux posts 1.5-4 KiB buffers, so a 64 KiB GSO frame
//                        takes about 16-40 of them.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "devices/virtio/guest_access.h"
#include "devices/virtio/split_queue.h"

namespace kvmts::devices::virtio {

inline constexpr uint32_t kNetHdrBytes = 12;
inline constexpr uint32_t kNetHdrNumBuffersOffset = 10;
// The largest packet (header included) either queue carries: a 64 KiB GSO frame plus its Ethernet and VLAN headers
// and the virtio header. Without offloads Linux stays at MTU-sized frames.
inline constexpr uint32_t kNetMaxPacketBytes = kNetHdrBytes + 65536 + 18;

enum class NetChainError : uint8_t {
  kNone = 0,
  kTxWritable,      // a device-writable buffer in a transmit chain
  kTxShort,         // fewer bytes than the virtio header
  kTxTooLong,       // more than kNetMaxPacketBytes
  kRxReadable,      // a device-readable buffer in a receive chain
  kRxShort,         // room for less than the virtio header
  kAddress,         // a buffer not inside RAM (the queue walker checked it already: a guest racing itself)
};

// A short stable name ("tx-writable", ...) for events and test messages.
const char* NetChainErrorName(NetChainError e);

// The host iovecs of a transmit chain's packet (header included), in chain order, zero-length buffers skipped.
// *bytes is the packet length. out is cleared first.
NetChainError TxPacketIovecs(const GuestAccess& mem, const DescriptorChain& chain, std::vector<iovec>* out,
                             uint64_t* bytes);

// Drops the first `n` bytes of an iovec list (the virtio header, for a backend without vnet headers).
void SkipIovecBytes(std::vector<iovec>* iov, size_t n);

// Copies `len` bytes of `packet` (header included, len >= kNetHdrBytes) into a receive chain, marks what it wrote
// dirty, and gives the used length. *truncated: the chain was too short for the whole packet.
NetChainError WriteRxPacket(GuestAccess& mem, const DescriptorChain& chain, const uint8_t* packet, size_t len,
                            uint32_t* used, bool* truncated);

// MRG_RXBUF: copies `len` bytes of `packet` (header included, len >= kNetHdrBytes) across `chains` in order, with
// num_buffers set to the number of chains it needed, marks what it wrote dirty, and gives each used chain's length
// in *used (its size is the chains used: the first ones; any after them were not needed). *truncated: all of
// `chains` together were too short. A readable buffer, or a chain shorter than the header, is an error.
NetChainError WriteRxPacketMergeable(GuestAccess& mem, const std::vector<DescriptorChain>& chains,
                                     const uint8_t* packet, size_t len, std::vector<uint32_t>* used,
                                     bool* truncated);

}  // namespace kvmts::devices::virtio
