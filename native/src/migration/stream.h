// The migration wire format: framed messages over one TCP connection (Cloud Hypervisor's vm-migration protocol,
// plus authentication, zero-page markers and a per-frame CRC). Pure encoding/decoding; no I/O here. By default the
// frames travel inside TLS 1.3 (tls.h: a handshake with pinned per-migration certificates before the Hello below);
// under KubeVirt's migrations.disableTLS they go plain, from the Hello on. A target refuses a source in the other
// mode by its first bytes, with a plaintext Abandon naming the setting (CheckStreamMode).
//
//  source (running guest)                                 target (empty guest, listening)
//    |  Hello    {magic "KVTMIGR\0", minVer, maxVer, nonceS[32]}  |
//    |----------------------------------------------------------->|
//    |  Challenge {ver, nonceT[32], macT}                          |  macT = HMAC(secret, "kvt-migration target" ver nonceS nonceT)
//    |<-----------------------------------------------------------|
//    |  Auth     {macS}                                            |  macS = HMAC(secret, "kvt-migration source" ver nonceT nonceS)
//    |----------------------------------------------------------->|  wrong mac: Abandon "authentication failed" + close
//    |  AuthOk   {}                                                |  (nothing but Hello/Auth is read before this point)
//    |<-----------------------------------------------------------|
//    |  Start    {ver, flags, memoryBytes, pageSize                |  layout must match the target's guest
//    |            [, n, disks[n] {index, flags, sizeBytes}]}       |  (flags: kDiskFlagOverlay or 0)  (version >= 4: the copied disks; each must be a
//    |                                                             |   copied disk of the target, of the same size;
//    |                                                             |   the source then Syncs: a refusal comes back now)
//    |  Populate {n, ranges[n]}                 (version >= 3, bulk pass only, before its data: the pages that will
//    |                                           come with data; a hint, no data: the target faults them in on a
//    |                                           helper thread, top down, while it receives bottom up, and backs
//    |                                           sparse 2 MiB chunks with 4 KiB pages instead of huge pages)
//    |  Memory   {n, ranges[n]} page data ...   (bulk pass, then dirty rounds; written straight into guest memory)
//    |  Zero     {n, ranges[n]}                 (pages that are all zeros: a marker, no data; version >= 2 only)
//    |  Disk     {disk, offset, length} data[length]  (version >= 4: bytes of a copied disk, pwrite() on the target)
//    |  DiskZero {disk, offset, length}       (version >= 4: a range that reads as zeros: a hole, or zero blocks)
//    |                                         bulk pass: every copied disk after the memory (SEEK_DATA/SEEK_HOLE:
//    |                                         holes go as DiskZero); rounds: the blocks the guest wrote since the
//    |                                         last collection (64 KiB granules); switch-over: the last ones
//    |  Sync     {}  -> the target answers Sync {} once everything before it is in guest memory (version >= 2):
//    |                  the source syncs before each dirty-log collection, so a switch-over never starts with
//    |                  megabytes still queued in socket buffers (they would count as downtime)
//    |  -- source pauses the guest --                              |
//    |  Memory/Zero (final dirty pages), State {machine state}     |
//    |  DiskDigest {digest, bytes}   (version >= 6, plaintext, with copied disks: XXH64 chained over every Disk
//    |                                 and DiskZero frame's extent and data in stream order, and the data bytes;
//    |                                 the target compares it with its own and abandons on a mismatch, so a disk
//    |                                 byte corrupted in flight never runs a guest: it runs on at the source)
//    |  Complete {}                                                |
//    |----------------------------------------------------------->|  target fdatasyncs its copied disks (also at
//    |                                                             |  each Sync), restores state, resumes the guest
//    |  Resumed  {}                                                |
//    |<-----------------------------------------------------------|  only now does the source release its guest
//    Abandon {code, reason} may be sent by either side at any point; both close; the source resumes its guest.
//
// Every frame starts with a 16-byte little-endian header:
//    offset 0  u16 command      (Command below)
//    offset 2  u8  flags        bit 0 kFlagPayloadChecked: the CRC covers the whole payload
//    offset 3  u8  reserved     0
//    offset 4  u32 crc32c       CRC-32C of the header with this field zeroed, then of the checked payload bytes
//    offset 8  u64 length       payload bytes after the header
// All frames but Memory must set kFlagPayloadChecked. A Memory frame sent while the guest runs checks only its range
// table: its pages may legitimately change while the kernel copies them (they are dirty again and sent in a later
// round), so a data CRC would be a race, not an integrity check. Memory frames sent while the guest is paused (the
// final round) check their data too. TCP's own checksum covers the bytes on the wire either way. In an encrypted
// stream (TLS, tls.h) every record's AES-GCM tag already authenticates every byte, so there a Disk frame checks
// only its extent prefix (like a Memory frame's range table) and the final round does not check page data: a second
// check would cost a CRC pass per byte on each side (in the nested lane's emulated CPU as much as the copy itself).
// From version 6 a plaintext stream's Disk frames check their extent only too, and the data is covered end to end
// instead: TCP's checksum per segment on the wire, and one running XXH64 digest of every disk frame (DiskDigest,
// above) that the target checks before it takes the guest over; a CRC-32C per frame cost a pass over every disk byte
// on each side at ~340 MB/s in the nested lane's emulated CPU, XXH64 runs at ~8x that (xxh64.h;
// docs/decisions/0013-migration-stream-encryption.md). A Disk frame without the data check in a plaintext version < 6
// stream, or in a version < 5 stream, is a protocol error; so is a plaintext version 6 stream with copied disks whose
// Complete comes without a DiskDigest.
//
// Versions: the current version (6) and the older ones down to 2 are accepted; 2 has no Populate command (the
// target then faults its memory in as the data arrives), 3 has no disk frames, 4 checks every Disk frame's data, 5
// checks only the extent of an encrypted stream's Disk frames.
// Hello carries each side's range; the target picks the highest common version and names it in Challenge. A source
// with copied disks needs version 4: against an older target it stops after the handshake with "the target cannot
// receive copied disks" (Abandon);
// without copied disks it speaks 3 with an old peer as before. Disk and DiskZero frames are fully checked (the source
// reads the disk into a buffer first, so the CRC covers stable bytes), except Disk frames of an encrypted version 5
// stream (above).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvm/result.h"
#include "migration/range_table.h"
#include "migration/sha256.h"

namespace kvmts::migration {

inline constexpr uint16_t kProtocolVersion = 6;
inline constexpr uint16_t kDiskProtocolVersion = 4;  // the first version with copied disks
inline constexpr uint16_t kEncryptedDiskProtocolVersion = 5;  // encrypted: Disk frames check their extent only
inline constexpr uint16_t kDiskDigestProtocolVersion = 6;  // plaintext too, and a DiskDigest before Complete
inline constexpr uint16_t kMinProtocolVersion = 2;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kNonceSize = 32;
inline constexpr uint8_t kFlagPayloadChecked = 1;
inline constexpr char kMagic[8] = {'K', 'V', 'T', 'M', 'I', 'G', 'R', '\0'};
inline constexpr uint64_t kMaxMemoryFrameBytes = uint64_t{256} << 20;  // data bytes of one Memory frame
inline constexpr uint32_t kMaxRangesPerFrame = 65536;
inline constexpr uint64_t kMaxStateBytes = uint64_t{64} << 20;
inline constexpr size_t kMaxReasonBytes = 1024;
inline constexpr uint64_t kMaxDiskFrameBytes = uint64_t{4} << 20;  // data bytes of one Disk frame
inline constexpr uint32_t kMaxStartDisks = 16;                      // the machine's PCI limit
inline constexpr size_t kDiskExtentBytes = 24;                      // {u32 disk, u32 reserved, u64 offset, u64 length}
inline constexpr size_t kDiskDigestBytes = 16;                      // {u64 digest, u64 data bytes}

/** Frame commands. Values are wire constants: never renumber. */
enum class Command : uint16_t {
  kHello = 1,
  kChallenge = 2,
  kAuth = 3,
  kAuthOk = 4,
  kStart = 5,
  kMemory = 6,
  kZero = 7,
  kState = 8,
  kComplete = 9,
  kResumed = 10,
  kAbandon = 11,
  kSync = 12,
  kPopulate = 13,
  kDisk = 14,
  kDiskZero = 15,
  kDiskDigest = 16,
};

/** Printable command name ("Memory"), or "unknown". */
const char* CommandName(uint16_t command);

/** A decoded frame header. */
struct FrameHeader {
  uint16_t command = 0;
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint32_t crc = 0;
  uint64_t length = 0;
};

/** Writes `h` to 16 bytes (crc field as given). */
void EncodeHeader(const FrameHeader& h, uint8_t out[kHeaderSize]);
/** Reads 16 bytes into a header (no validation). */
FrameHeader DecodeHeader(const uint8_t in[kHeaderSize]);
/** The CRC of the header (crc field taken as zero), to be extended over the checked payload bytes. */
uint32_t HeaderCrc(const FrameHeader& h);
/** Rejects unknown commands, nonzero reserved bits, lengths over the command's limit, and unchecked non-Memory frames. */
Status ValidateHeader(const FrameHeader& h);

/** A whole small frame (header + payload) with its CRC filled in; for everything but Memory data. */
std::vector<uint8_t> EncodeFrame(Command command, const void* payload, size_t len);

/** Hello: the source's version range and nonce. */
struct Hello {
  uint16_t min_version = kMinProtocolVersion;
  uint16_t max_version = kProtocolVersion;
  uint8_t nonce[kNonceSize] = {0};
};
/** Challenge: the chosen version, the target's nonce and its proof. */
struct Challenge {
  uint16_t version = 0;
  uint8_t nonce[kNonceSize] = {0};
  Digest mac{};
};
/** DiskSpec flag: a copy-on-write overlay (devices/virtio/blk_overlay.h): only the granules the overlay holds are
 *  sent, each frame whole 64 KiB granules; the target's disk must be an overlay too, and marks what it receives. */
inline constexpr uint32_t kDiskFlagOverlay = 1;
/** A copied disk as Start names it: its index in the machine's disk list, its size and flags. */
struct DiskSpec {
  uint32_t index = 0;
  uint64_t size_bytes = 0;
  uint32_t flags = 0;
};
/** Start: what the source is about to send. `disks` only in version >= 4 (encoded only when nonempty). */
struct Start {
  uint16_t version = 0;
  uint32_t flags = 0;
  uint64_t memory_bytes = 0;
  uint32_t page_size = 0;
  std::vector<DiskSpec> disks{};
};
/** The prefix of a Disk frame and the whole payload of DiskZero: a byte range of copied disk `disk`. */
struct DiskExtent {
  uint32_t disk = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};
/** DiskDigest: the source's running digest of the copied disks' frames (xxh64.h ChainDigest) and the data bytes it
 *  covers (Disk frames' data; extents are 24 bytes each on top). */
struct DiskDigest {
  uint64_t digest = 0;
  uint64_t bytes = 0;
};
/** Abandon: why a side gives up. */
struct Abandon {
  uint32_t code = 0;
  std::string reason;
};

std::vector<uint8_t> EncodeHello(const Hello& m);
Result<Hello> DecodeHello(const uint8_t* p, size_t len);
std::vector<uint8_t> EncodeChallenge(const Challenge& m);
Result<Challenge> DecodeChallenge(const uint8_t* p, size_t len);
std::vector<uint8_t> EncodeStart(const Start& m);
Result<Start> DecodeStart(const uint8_t* p, size_t len);
std::vector<uint8_t> EncodeDiskDigest(const DiskDigest& m);
Result<DiskDigest> DecodeDiskDigest(const uint8_t* p, size_t len);
std::vector<uint8_t> EncodeAbandon(const Abandon& m);
Result<Abandon> DecodeAbandon(const uint8_t* p, size_t len);

/** Encodes a Disk prefix / DiskZero payload (kDiskExtentBytes). */
std::vector<uint8_t> EncodeDiskExtent(const DiskExtent& e);
/** Decodes kDiskExtentBytes and checks them against the copied disks of the stream: a known disk index, a nonzero
 *  length of at most `max_length`, inside [0, size) of that disk; a nonzero reserved word is refused. */
Result<DiskExtent> DecodeDiskExtent(const uint8_t* p, const std::vector<DiskSpec>& disks, uint64_t max_length);

/** Bytes of a range table of `n` entries: u32 n, u32 reserved, n x {u64 gpa, u64 length}. */
inline uint64_t RangeTableBytes(uint64_t n) { return 8 + 16 * n; }
/** Encodes a range table (the prefix of Memory and the whole payload of Zero and Populate). */
std::vector<uint8_t> EncodeRangeTable(const std::vector<PageRange>& ranges);
/** Reads the count of a table from its first 8 bytes; rejects counts over the limit or a nonzero reserved word. */
Result<uint32_t> DecodeRangeCount(const uint8_t* p8);
/** Decodes `n` entries and checks each: page aligned, nonempty, inside [0, memory_bytes), no overflow. */
Result<std::vector<PageRange>> DecodeRanges(const uint8_t* p, uint32_t n, uint64_t memory_bytes, uint32_t page_size);

/** MAC input of either side: label || u16 version || first nonce || second nonce. */
Digest HandshakeMac(const std::string& secret, const char* label, uint16_t version, const uint8_t* first_nonce,
                    const uint8_t* second_nonce);
inline constexpr const char* kTargetLabel = "kvt-migration target";
inline constexpr const char* kSourceLabel = "kvt-migration source";

/** Makes a protocol Error (err = EPROTO) with `detail`. */
Error ProtocolError(const std::string& detail);

}  // namespace kvmts::migration
