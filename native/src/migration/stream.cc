#include "migration/stream.h"

#include <cerrno>
#include <cstring>

#include "migration/crc32c.h"

namespace kvmts::migration {
namespace {

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

uint64_t MaxPayload(uint16_t command) {
  switch (static_cast<Command>(command)) {
    case Command::kHello:
      return 48;
    case Command::kChallenge:
      return 72;
    case Command::kAuth:
      return 32;
    case Command::kStart:
      return 32 + 16 * kMaxStartDisks;
    case Command::kMemory:
      return RangeTableBytes(kMaxRangesPerFrame) + kMaxMemoryFrameBytes;
    case Command::kZero:
    case Command::kPopulate:
      return RangeTableBytes(kMaxRangesPerFrame);
    case Command::kState:
      return kMaxStateBytes;
    case Command::kDisk:
      return kDiskExtentBytes + kMaxDiskFrameBytes;
    case Command::kDiskZero:
      return kDiskExtentBytes;
    case Command::kDiskDigest:
      return kDiskDigestBytes;
    case Command::kAbandon:
      return 4 + kMaxReasonBytes;
    case Command::kAuthOk:
    case Command::kComplete:
    case Command::kResumed:
    case Command::kSync:
      return 0;
  }
  return 0;
}

}  // namespace

Error ProtocolError(const std::string& detail) { return Error{EPROTO, "migration stream", detail}; }

const char* CommandName(uint16_t command) {
  static const char* const kNames[] = {"unknown", "Hello",    "Challenge", "Auth",     "AuthOk",  "Start",
                                       "Memory",  "Zero",     "State",     "Complete", "Resumed", "Abandon", "Sync",
                                       "Populate", "Disk",     "DiskZero",  "DiskDigest"};
  return command < sizeof(kNames) / sizeof(kNames[0]) ? kNames[command] : "unknown";
}

void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderSize]) {
  Put16(out, h.command);
  out[2] = h.flags;
  out[3] = h.reserved;
  Put32(out + 4, h.crc);
  Put64(out + 8, h.length);
}

FrameHeader DecodeHeader(const uint8_t in[kHeaderSize]) {
  FrameHeader h;
  h.command = Get16(in);
  h.flags = in[2];
  h.reserved = in[3];
  h.crc = Get32(in + 4);
  h.length = Get64(in + 8);
  return h;
}

uint32_t HeaderCrc(const FrameHeader& h) {
  FrameHeader z = h;
  z.crc = 0;
  uint8_t bytes[kHeaderSize];
  EncodeHeader(z, bytes);
  return Crc32c(0, bytes, kHeaderSize);
}

Status ValidateHeader(const FrameHeader& h) {
  if (h.command < static_cast<uint16_t>(Command::kHello) || h.command > static_cast<uint16_t>(Command::kDiskDigest)) {
    return ProtocolError("unknown command " + std::to_string(h.command));
  }
  if (h.reserved != 0 || (h.flags & ~kFlagPayloadChecked) != 0) {
    return ProtocolError(std::string("reserved header bits set in ") + CommandName(h.command));
  }
  if (h.length > MaxPayload(h.command)) {
    return ProtocolError(std::string(CommandName(h.command)) + " frame too long: " + std::to_string(h.length));
  }
  // Memory frames, and Disk frames of an encrypted or version 6 stream (the receiver checks which), may check less.
  Command c = static_cast<Command>(h.command);
  if (c != Command::kMemory && c != Command::kDisk && !(h.flags & kFlagPayloadChecked)) {
    return ProtocolError(std::string(CommandName(h.command)) + " frame without payload check");
  }
  return OkStatus();
}

std::vector<uint8_t> EncodeFrame(Command command, const void* payload, size_t len) {
  std::vector<uint8_t> out(kHeaderSize + len);
  FrameHeader h{static_cast<uint16_t>(command), kFlagPayloadChecked, 0, 0, len};
  if (len > 0) std::memcpy(out.data() + kHeaderSize, payload, len);
  h.crc = Crc32c(HeaderCrc(h), out.data() + kHeaderSize, len);
  EncodeHeader(h, out.data());
  return out;
}

std::vector<uint8_t> EncodeHello(const Hello& m) {
  std::vector<uint8_t> p(48, 0);
  std::memcpy(p.data(), kMagic, 8);
  Put16(&p[8], m.min_version);
  Put16(&p[10], m.max_version);
  std::memcpy(&p[16], m.nonce, kNonceSize);
  return p;
}

Result<Hello> DecodeHello(const uint8_t* p, size_t len) {
  if (len != 48) return ProtocolError("Hello: bad length");
  if (std::memcmp(p, kMagic, 8) != 0) return ProtocolError("Hello: not a kubevirt-ts migration stream");
  Hello m;
  m.min_version = Get16(p + 8);
  m.max_version = Get16(p + 10);
  if (m.min_version > m.max_version) return ProtocolError("Hello: empty version range");
  std::memcpy(m.nonce, p + 16, kNonceSize);
  return m;
}

std::vector<uint8_t> EncodeChallenge(const Challenge& m) {
  std::vector<uint8_t> p(72, 0);
  Put16(&p[0], m.version);
  std::memcpy(&p[8], m.nonce, kNonceSize);
  std::memcpy(&p[40], m.mac.data(), 32);
  return p;
}

Result<Challenge> DecodeChallenge(const uint8_t* p, size_t len) {
  if (len != 72) return ProtocolError("Challenge: bad length");
  Challenge m;
  m.version = Get16(p);
  std::memcpy(m.nonce, p + 8, kNonceSize);
  std::memcpy(m.mac.data(), p + 40, 32);
  return m;
}

std::vector<uint8_t> EncodeStart(const Start& m) {
  std::vector<uint8_t> p(m.disks.empty() ? 24 : 32 + 16 * m.disks.size(), 0);
  Put16(&p[0], m.version);
  Put32(&p[4], m.flags);
  Put64(&p[8], m.memory_bytes);
  Put32(&p[16], m.page_size);
  if (m.disks.empty()) return p;
  Put32(&p[24], static_cast<uint32_t>(m.disks.size()));
  for (size_t i = 0; i < m.disks.size(); i++) {
    Put32(&p[32 + 16 * i], m.disks[i].index);
    Put32(&p[36 + 16 * i], m.disks[i].flags);
    Put64(&p[40 + 16 * i], m.disks[i].size_bytes);
  }
  return p;
}

Result<Start> DecodeStart(const uint8_t* p, size_t len) {
  if (len != 24 && len < 32) return ProtocolError("Start: bad length");
  Start m;
  m.version = Get16(p);
  m.flags = Get32(p + 4);
  m.memory_bytes = Get64(p + 8);
  m.page_size = Get32(p + 16);
  if (m.page_size == 0 || (m.page_size & (m.page_size - 1)) != 0) return ProtocolError("Start: bad page size");
  if (len == 24) return m;
  uint32_t n = Get32(p + 24);
  if (Get32(p + 28) != 0) return ProtocolError("Start: reserved word set");
  if (n == 0 || n > kMaxStartDisks || len != 32 + 16 * uint64_t{n}) return ProtocolError("Start: bad disk table");
  for (uint32_t i = 0; i < n; i++) {
    DiskSpec d{Get32(p + 32 + 16 * i), Get64(p + 40 + 16 * i), Get32(p + 36 + 16 * i)};
    if ((d.flags & ~kDiskFlagOverlay) != 0) return ProtocolError("Start: unknown disk flags set");
    for (const DiskSpec& e : m.disks) {
      if (e.index == d.index) return ProtocolError("Start: disk " + std::to_string(d.index) + " named twice");
    }
    m.disks.push_back(d);
  }
  return m;
}

std::vector<uint8_t> EncodeDiskExtent(const DiskExtent& e) {
  std::vector<uint8_t> p(kDiskExtentBytes, 0);
  Put32(&p[0], e.disk);
  Put64(&p[8], e.offset);
  Put64(&p[16], e.length);
  return p;
}

Result<DiskExtent> DecodeDiskExtent(const uint8_t* p, const std::vector<DiskSpec>& disks, uint64_t max_length) {
  DiskExtent e{Get32(p), Get64(p + 8), Get64(p + 16)};
  if (Get32(p + 4) != 0) return ProtocolError("disk extent: reserved word set");
  const DiskSpec* spec = nullptr;
  for (const DiskSpec& d : disks) {
    if (d.index == e.disk) spec = &d;
  }
  if (spec == nullptr) return ProtocolError("disk extent: unknown disk " + std::to_string(e.disk));
  if (e.length == 0 || e.length > max_length) {
    return ProtocolError("disk extent: bad length " + std::to_string(e.length));
  }
  if (e.offset >= spec->size_bytes || e.length > spec->size_bytes - e.offset) {
    return ProtocolError("disk extent: outside disk " + std::to_string(e.disk) + " (" +
                         std::to_string(spec->size_bytes) + " bytes)");
  }
  return e;
}

std::vector<uint8_t> EncodeDiskDigest(const DiskDigest& m) {
  std::vector<uint8_t> p(kDiskDigestBytes, 0);
  Put64(&p[0], m.digest);
  Put64(&p[8], m.bytes);
  return p;
}

Result<DiskDigest> DecodeDiskDigest(const uint8_t* p, size_t len) {
  if (len != kDiskDigestBytes) return ProtocolError("DiskDigest: bad length");
  return DiskDigest{Get64(p), Get64(p + 8)};
}

std::vector<uint8_t> EncodeAbandon(const Abandon& m) {
  size_t n = m.reason.size() < kMaxReasonBytes ? m.reason.size() : kMaxReasonBytes;
  std::vector<uint8_t> p(4 + n);
  Put32(p.data(), m.code);
  std::memcpy(p.data() + 4, m.reason.data(), n);
  return p;
}

Result<Abandon> DecodeAbandon(const uint8_t* p, size_t len) {
  if (len < 4 || len > 4 + kMaxReasonBytes) return ProtocolError("Abandon: bad length");
  Abandon m;
  m.code = Get32(p);
  for (size_t i = 4; i < len; i++) {
    char c = static_cast<char>(p[i]);
    m.reason.push_back(c >= 0x20 && c < 0x7f ? c : '?');  // printable only: it ends up in logs
  }
  return m;
}

std::vector<uint8_t> EncodeRangeTable(const std::vector<PageRange>& ranges) {
  std::vector<uint8_t> p(RangeTableBytes(ranges.size()), 0);
  Put32(p.data(), static_cast<uint32_t>(ranges.size()));
  for (size_t i = 0; i < ranges.size(); i++) {
    Put64(&p[8 + 16 * i], ranges[i].gpa);
    Put64(&p[16 + 16 * i], ranges[i].length);
  }
  return p;
}

Result<uint32_t> DecodeRangeCount(const uint8_t* p8) {
  uint32_t n = Get32(p8);
  if (Get32(p8 + 4) != 0) return ProtocolError("range table: reserved word set");
  if (n == 0 || n > kMaxRangesPerFrame) return ProtocolError("range table: bad count " + std::to_string(n));
  return n;
}

Result<std::vector<PageRange>> DecodeRanges(const uint8_t* p, uint32_t n, uint64_t memory_bytes,
                                            uint32_t page_size) {
  std::vector<PageRange> out(n);
  uint64_t mask = uint64_t{page_size} - 1;
  for (uint32_t i = 0; i < n; i++) {
    PageRange r{Get64(p + 16 * i), Get64(p + 8 + 16 * i)};
    if (r.length == 0 || (r.gpa & mask) != 0 || (r.length & mask) != 0) {
      return ProtocolError("range table: unaligned or empty range");
    }
    if (r.gpa >= memory_bytes || r.length > memory_bytes - r.gpa) {
      return ProtocolError("range table: range outside guest memory");
    }
    out[i] = r;
  }
  return out;
}

Digest HandshakeMac(const std::string& secret, const char* label, uint16_t version, const uint8_t* first_nonce,
                    const uint8_t* second_nonce) {
  std::vector<uint8_t> msg(label, label + std::strlen(label));
  msg.push_back(static_cast<uint8_t>(version));
  msg.push_back(static_cast<uint8_t>(version >> 8));
  msg.insert(msg.end(), first_nonce, first_nonce + kNonceSize);
  msg.insert(msg.end(), second_nonce, second_nonce + kNonceSize);
  return HmacSha256(secret.data(), secret.size(), msg.data(), msg.size());
}

}  // namespace kvmts::migration
