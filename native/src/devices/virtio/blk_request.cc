// Block request parsing: see blk_request.h.
#include "devices/virtio/blk_request.h"

#include <cstring>

namespace kvmts::devices::virtio {

const char* BlkParseErrorName(BlkParseError e) {
  switch (e) {
    case BlkParseError::kNone: return "none";
    case BlkParseError::kNoHeader: return "blk-no-header";
    case BlkParseError::kNoStatus: return "blk-no-status";
  }
  return "unknown";
}

BlkParseError ParseBlkRequest(const GuestAccess& mem, const DescriptorChain& chain, BlkRequest* out) {
  *out = BlkRequest{};
  if (chain.readable_bytes < kBlkHeaderBytes) return BlkParseError::kNoHeader;
  if (chain.buffers.empty() || !chain.buffers.back().device_writable || chain.buffers.back().len == 0) {
    return BlkParseError::kNoStatus;
  }
  // The header: the first 16 readable bytes, possibly spread over several buffers.
  uint8_t header[kBlkHeaderBytes];
  uint64_t got = 0;
  size_t i = 0;
  uint64_t consumed_in_buffer = 0;
  for (; i < chain.buffers.size() && got < kBlkHeaderBytes; ++i) {
    const DescBuffer& b = chain.buffers[i];
    if (b.device_writable) return BlkParseError::kNoHeader;
    uint64_t n = b.len < kBlkHeaderBytes - got ? b.len : kBlkHeaderBytes - got;
    if (!ReadGuest(mem, b.gpa, header + got, n)) return BlkParseError::kNoHeader;
    got += n;
    consumed_in_buffer = n;
  }
  std::memcpy(&out->type, header, 4);
  std::memcpy(&out->sector, header + 8, 8);
  // Resume right after the header: the rest of buffer i-1 (if any), then the following buffers.
  const DescBuffer& last = chain.buffers.back();
  out->status_gpa = last.gpa + last.len - 1;
  bool wants_writable = out->type == kBlkTypeIn || out->type == kBlkTypeGetId;
  auto add = [&](uint64_t gpa, uint64_t len, bool writable) {
    if (len == 0 || writable != wants_writable) return;
    out->data.push_back(DescBuffer{gpa, static_cast<uint32_t>(len), writable});
    out->data_bytes += len;
  };
  size_t first = i - 1;
  for (size_t k = first; k < chain.buffers.size(); ++k) {
    const DescBuffer& b = chain.buffers[k];
    uint64_t skip = k == first ? consumed_in_buffer : 0;
    uint64_t len = b.len - skip;
    if (k + 1 == chain.buffers.size()) len -= 1;  // the status byte (b is writable, len >= 1)
    add(b.gpa + skip, len, b.device_writable);
  }
  if (out->type != kBlkTypeIn && out->type != kBlkTypeOut && out->type != kBlkTypeGetId &&
      out->type != kBlkTypeDiscard && out->type != kBlkTypeWriteZeroes) {
    out->data.clear();
    out->data_bytes = 0;
  }
  return BlkParseError::kNone;
}

bool ReadBlkSegments(const GuestAccess& mem, const BlkRequest& req, uint32_t max_segments,
                     std::vector<BlkSegment>* out) {
  out->clear();
  if (req.data_bytes == 0 || req.data_bytes % kBlkSegmentBytes != 0) return false;
  if (req.data_bytes / kBlkSegmentBytes > max_segments) return false;
  std::vector<uint8_t> raw(req.data_bytes);
  uint64_t at = 0;
  for (const DescBuffer& b : req.data) {
    if (!ReadGuest(mem, b.gpa, raw.data() + at, b.len)) return false;
    at += b.len;
  }
  for (uint64_t off = 0; off < raw.size(); off += kBlkSegmentBytes) {
    BlkSegment s;
    std::memcpy(&s.sector, raw.data() + off, 8);
    std::memcpy(&s.num_sectors, raw.data() + off + 8, 4);
    std::memcpy(&s.flags, raw.data() + off + 12, 4);
    out->push_back(s);
  }
  return true;
}

}  // namespace kvmts::devices::virtio
