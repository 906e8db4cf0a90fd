// OutgoingMigration's disk frames (protocol >= 4, stream.h): Disk {disk, offset, length} + data and DiskZero.
// DiskZero is always fully checked. A Disk frame's CRC covers its data too below version 5 (the caller hands a buffer
// it read from the disk, stable while it is sent); from version 5 in an encrypted stream it covers the extent only
// (the records' AES-GCM tags cover the data), and from version 6 in a plaintext one too: there every disk frame's
// extent and data go into a running XXH64 digest, sent as DiskDigest before Complete (stream.h).
#include <sys/uio.h>

#include <cerrno>

#include "migration/crc32c.h"
#include "migration/outgoing.h"

namespace kvmts::migration {

bool OutgoingMigration::CheckDiskData() const {
  if (stats_.version < kEncryptedDiskProtocolVersion) return true;
  return !encrypted_ && stats_.version < kDiskDigestProtocolVersion;
}

bool OutgoingMigration::DigestDisks() const { return !encrypted_ && stats_.version >= kDiskDigestProtocolVersion; }

Status OutgoingMigration::SendDiskData(uint32_t disk, uint64_t offset, const uint8_t* data, uint64_t len) {
  if (len == 0 || len > kMaxDiskFrameBytes) return Error{EINVAL, "migration", "disk frame length"};
  auto prefix = EncodeDiskExtent(DiskExtent{disk, offset, len});
  const bool check_data = CheckDiskData();
  FrameHeader h{static_cast<uint16_t>(Command::kDisk), static_cast<uint8_t>(check_data ? kFlagPayloadChecked : 0), 0, 0,
                kDiskExtentBytes + len};
  h.crc = Crc32c(HeaderCrc(h), prefix.data(), prefix.size());
  if (check_data) h.crc = Crc32c(h.crc, data, len);
  if (DigestDisks()) {
    disk_digest_.Add(prefix.data(), prefix.size());
    disk_digest_.Add(data, len);
  }
  uint8_t raw[kHeaderSize];
  EncodeHeader(h, raw);
  iovec iov[3] = {{raw, kHeaderSize}, {prefix.data(), prefix.size()}, {const_cast<uint8_t*>(data), len}};
  auto r = WriteAll(ch_, iov, 3);
  if (!r.ok()) return r;
  stats_.frames++;
  stats_.bytes += kHeaderSize + h.length;
  stats_.disk_bytes += len;
  paced_bytes_ += kHeaderSize + h.length;
  return OkStatus();
}

Status OutgoingMigration::SendDiskZero(uint32_t disk, uint64_t offset, uint64_t len) {
  auto p = EncodeDiskExtent(DiskExtent{disk, offset, len});
  if (DigestDisks()) disk_digest_.Add(p.data(), p.size());
  auto r = SendFrame(Command::kDiskZero, p.data(), p.size());
  if (!r.ok()) return r;
  stats_.disk_zero_bytes += len;
  paced_bytes_ += kHeaderSize + p.size();
  return OkStatus();
}

}  // namespace kvmts::migration
