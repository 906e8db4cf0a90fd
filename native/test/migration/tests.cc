// Pure C++ tests of the migration building blocks: SHA-256/HMAC, CRC-32C, range tables, frame codec (golden bytes).
// `migration_tests` runs every case; `migration_tests --hmac KEYHEX MSGHEX` / `--sha256 HEX` / `--crc32c HEX` print
// one digest (checked against node:crypto by test/migration.test.ts); `--golden` prints the golden frames.
#include <algorithm>
#include <cstring>
#include <random>

#include "migration/crc32c.h"
#include "migration/range_table.h"
#include "migration/sha256.h"
#include "migration/stream.h"
#include "migration/xxh64.h"
#include "test_util.h"

using namespace kvmts::migration;
using mtest::Hex;


namespace {

std::string DigestHex(const Digest& d) { return Hex(d.data(), d.size()); }

// The golden frames shared with libs/migration's wire test: fixed nonces (0..31 and 32..63), secret "s3cret".
std::vector<std::pair<std::string, std::vector<uint8_t>>> GoldenFrames() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  Hello hello;
  for (int i = 0; i < 32; i++) hello.nonce[i] = static_cast<uint8_t>(i);
  auto p = EncodeHello(hello);
  out.push_back({"hello", EncodeFrame(Command::kHello, p.data(), p.size())});
  Challenge ch;
  ch.version = 2;
  for (int i = 0; i < 32; i++) ch.nonce[i] = static_cast<uint8_t>(32 + i);
  ch.mac = HandshakeMac("s3cret", kTargetLabel, 2, hello.nonce, ch.nonce);
  p = EncodeChallenge(ch);
  out.push_back({"challenge", EncodeFrame(Command::kChallenge, p.data(), p.size())});
  Digest mac = HandshakeMac("s3cret", kSourceLabel, 2, ch.nonce, hello.nonce);
  out.push_back({"auth", EncodeFrame(Command::kAuth, mac.data(), mac.size())});
  out.push_back({"authOk", EncodeFrame(Command::kAuthOk, nullptr, 0)});
  p = EncodeStart(Start{2, 0, uint64_t{1} << 30, 4096});
  out.push_back({"start", EncodeFrame(Command::kStart, p.data(), p.size())});
  p = EncodeRangeTable({{0x1000, 0x2000}, {0x100000, 0x1000}});
  out.push_back({"zero", EncodeFrame(Command::kZero, p.data(), p.size())});
  out.push_back({"populate", EncodeFrame(Command::kPopulate, p.data(), p.size())});
  p = EncodeDiskExtent({0, 0x10000, 0x20000});
  out.push_back({"diskZero", EncodeFrame(Command::kDiskZero, p.data(), p.size())});
  p = EncodeDiskExtent({1, 512, 4});
  p.insert(p.end(), {0xde, 0xad, 0xbe, 0xef});
  out.push_back({"disk", EncodeFrame(Command::kDisk, p.data(), p.size())});
  p = EncodeDiskDigest({0x0123456789abcdefULL, 0x100000});
  out.push_back({"diskDigest", EncodeFrame(Command::kDiskDigest, p.data(), p.size())});
  p = EncodeAbandon({1, "source: canceled"});
  out.push_back({"abandon", EncodeFrame(Command::kAbandon, p.data(), p.size())});
  return out;
}

const char* const kGoldenHello =
    "0100010099958cec30000000000000004b56544d494752000200060000000000000102030405060708090a0b0c0d0e0f1011121314151617"
    "18191a1b1c1d1e1f";
const char* const kGoldenStart = "0500010024d6d3631800000000000000020000000000000000000040000000000010000000000000";

TEST(sha256_matches_the_fips_180_2_vectors) {
  CHECK_EQ(DigestHex(Sha256Of("", 0)), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  CHECK_EQ(DigestHex(Sha256Of("abc", 3)), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  std::string m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK_EQ(DigestHex(Sha256Of(m.data(), m.size())),
           std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  Sha256 s;
  std::string a(1000, 'a');
  for (int i = 0; i < 1000; i++) s.Update(a.data(), a.size());
  CHECK_EQ(DigestHex(s.Final()), std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

TEST(hmac_sha256_matches_rfc_4231_cases_1_2_and_6) {
  std::vector<uint8_t> k1(20, 0x0b);
  CHECK_EQ(DigestHex(HmacSha256(k1.data(), k1.size(), "Hi There", 8)),
           std::string("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
  CHECK_EQ(DigestHex(HmacSha256("Jefe", 4, "what do ya want for nothing?", 28)),
           std::string("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
  std::vector<uint8_t> k6(131, 0xaa);
  std::string m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  CHECK_EQ(DigestHex(HmacSha256(k6.data(), k6.size(), m6.data(), m6.size())),
           std::string("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"));
  Digest a = Sha256Of("x", 1), b = a;
  CHECK(DigestEqual(a, b));
  b[31] ^= 1;
  CHECK(!DigestEqual(a, b));
}

TEST(crc32c_check_value_and_hardware_path_equal_the_table) {
  CHECK_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);
  CHECK_EQ(Crc32cPortable(0, "123456789", 9), 0xE3069283u);
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(5000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t len : {0, 1, 8, 15, 64, 4093}) {
      CHECK_EQ(Crc32c(0, buf.data() + off, len), Crc32cPortable(0, buf.data() + off, len));
    }
  }
  CHECK_EQ(Crc32c(Crc32c(0, buf.data(), 100), buf.data() + 100, 900), Crc32c(0, buf.data(), 1000));
}

TEST(crc32c_slicing_by_8_equals_the_table_and_crc32c_names_its_choice) {
  CHECK_EQ(Crc32cSlice8(0, "123456789", 9), 0xE3069283u);
  std::mt19937 rng(11);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off : {0, 1, 5, 7}) {
    for (size_t len : {0, 1, 7, 8, 9, 16, 63, 4096, 65537}) {
      CHECK_EQ(Crc32cSlice8(0x1234u, buf.data() + off, len), Crc32cPortable(0x1234u, buf.data() + off, len));
    }
  }
  CHECK_EQ(Crc32cSlice8(Crc32cSlice8(0, buf.data(), 13), buf.data() + 13, 987), Crc32c(0, buf.data(), 1000));
  std::string chosen = Crc32cImplementation();
  CHECK(chosen == "sse4.2" || chosen == "slice-by-8");
}

// Xxh64 against libxxhash 0.8.1's XXH64 (Debian's libxxhash-dev, XXH_INLINE_ALL) over bytes i*131 + (i>>8), every
// path: the short tails (1, 4 and 8 bytes), the 32-byte stripes, and both together; seed 0 and seed PRIME64_1.
TEST(xxh64_equals_libxxhash_and_the_chain_depends_on_order_and_boundaries) {
  struct Vector {
    size_t len;
    uint64_t seed0, seed_p1;
  };
  const Vector vectors[] = {
      {0, 0xef46db3751d8e999ULL, 0x6ec6d05f61c7e7a7ULL},          {1, 0xe934a84adb052768ULL, 0x60508b0ced72c717ULL},
      {3, 0xa83378d1eb86ec62ULL, 0xd098216c3d6d0538ULL},          {4, 0x9882e57ed36c4cfcULL, 0x02986cfa17db2048ULL},
      {7, 0xf0aef407b44730f8ULL, 0xd1a4e582e9b3ad75ULL},          {8, 0xa5bc8d8944331fe7ULL, 0xae69fbf9e101116bULL},
      {31, 0x1add2d10328c4897ULL, 0xa683abd2e152bf77ULL},         {32, 0x333288d992cf3b16ULL, 0x3eec333288c48a00ULL},
      {33, 0x379b60150f2cfc7fULL, 0xd3770a4ed3653abcULL},         {63, 0x230f593878fe3703ULL, 0x1920852fbf72c4a0ULL},
      {64, 0x60a3644ca073e2cbULL, 0x313dfb981ccef3dcULL},         {100, 0xacd07a6400e07defULL, 0x14a670bece4181d4ULL},
      {1000, 0xa2f5fad80629422eULL, 0x7c18bb71eb318edbULL},       {4096, 0xbfa412bdf2de8356ULL, 0xd39ac834f7765081ULL},
      {1048576, 0xdb9d70ec2be21cf3ULL, 0x7a79a3a2e61d2d85ULL},
  };
  std::vector<uint8_t> b(1 << 20);
  for (size_t i = 0; i < b.size(); i++) b[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
  for (const Vector& v : vectors) {
    CHECK_EQ(Xxh64(b.data(), v.len, 0), v.seed0);
    CHECK_EQ(Xxh64(b.data(), v.len, 0x9E3779B185EBCA87ULL), v.seed_p1);
  }
  const char* text = "kubevirt-ts migration disk digest";
  CHECK_EQ(Xxh64(text, std::strlen(text), 0), 0xedfc0ad9df17169dULL);
  ChainDigest ab, ba, whole;
  ab.Add(b.data(), 100);
  ab.Add(b.data() + 100, 100);
  ba.Add(b.data() + 100, 100);
  ba.Add(b.data(), 100);
  whole.Add(b.data(), 200);
  CHECK(ab.value() != ba.value());
  CHECK(ab.value() != whole.value());
  ChainDigest flipped;
  b[150] ^= 1;
  flipped.Add(b.data(), 100);
  flipped.Add(b.data() + 100, 100);
  CHECK(flipped.value() != ab.value());
}

TEST(range_table_bitmap_runs_merging_and_the_word_tail) {
  uint64_t bm[3] = {0b1011, ~uint64_t{0}, 0x8000000000000001ull};
  RangeTable t;
  t.AppendBitmap(bm, 190, 0x100000, 4096);
  // pages 0-1, 3, then 64..128 (64 pages + page 128 from word 2 bit 0), bit 191 is beyond 190 bits
  std::vector<PageRange> want = {{0x100000, 0x2000}, {0x103000, 0x1000}, {0x100000 + 64 * 4096, 65 * 4096}};
  CHECK(t.ranges() == want);
  CHECK_EQ(t.Bytes(), uint64_t(68 * 4096));
  RangeTable all;
  uint64_t full[2] = {~uint64_t{0}, ~uint64_t{0}};
  all.AppendBitmap(full, 128, 0, 4096);
  CHECK_EQ(all.ranges().size(), size_t(1));
  CHECK_EQ(all.Bytes(), uint64_t(128 * 4096));
  RangeTable none;
  uint64_t empty[1] = {0};
  none.AppendBitmap(empty, 64, 0, 4096);
  CHECK(none.empty());
}

TEST(range_table_batches_respect_byte_and_count_limits) {
  std::vector<PageRange> ranges = {{0, 10 * 4096}, {20 * 4096, 4096}, {30 * 4096, 4096}, {40 * 4096, 4096}};
  auto batches = SplitIntoBatches(ranges, 4 * 4096, 2, 4096);
  uint64_t total = 0;
  for (const Batch& b : batches) {
    CHECK(b.bytes <= 4 * 4096);
    CHECK(b.ranges.size() <= 2);
    total += b.bytes;
  }
  CHECK_EQ(total, uint64_t(13 * 4096));
  CHECK((batches.front().ranges.front() == PageRange{0, 4 * 4096}));
}

TEST(zero_page_classification) {
  std::vector<uint8_t> mem(4 * 4096, 0);
  mem[4096 + 4095] = 1;
  mem[3 * 4096] = 9;
  RangeTable data, zeros;
  ClassifyZeroPages(mem.data(), {0x10000, 4 * 4096}, 4096, &data, &zeros);
  CHECK((data.ranges() == std::vector<PageRange>{{0x11000, 4096}, {0x13000, 4096}}));
  CHECK((zeros.ranges() == std::vector<PageRange>{{0x10000, 4096}, {0x12000, 4096}}));
}

TEST(frame_header_golden_bytes_round_trip_validation) {
  auto frames = GoldenFrames();
  CHECK_EQ(Hex(frames[0].second.data(), frames[0].second.size()), std::string(kGoldenHello));
  CHECK_EQ(Hex(frames[4].second.data(), frames[4].second.size()), std::string(kGoldenStart));
  FrameHeader h = DecodeHeader(frames[0].second.data());
  CHECK_EQ(h.command, uint16_t(1));
  CHECK_EQ(h.length, uint64_t(48));
  CHECK(ValidateHeader(h).ok());
  uint8_t raw[16];
  EncodeHeader(h, raw);
  CHECK(std::memcmp(raw, frames[0].second.data(), 16) == 0);
  CHECK(!ValidateHeader(FrameHeader{99, 1, 0, 0, 0}).ok());                 // unknown command
  CHECK(!ValidateHeader(FrameHeader{1, 1, 1, 0, 48}).ok());                 // reserved byte
  CHECK(!ValidateHeader(FrameHeader{1, 0, 0, 0, 48}).ok());                 // unchecked Hello
  CHECK(!ValidateHeader(FrameHeader{3, 1, 0, 0, 33}).ok());                 // Auth too long
  CHECK(ValidateHeader(FrameHeader{6, 0, 0, 0, 24 + 4096}).ok());           // unchecked Memory is fine
  CHECK(!ValidateHeader(FrameHeader{6, 0, 0, 0, uint64_t{1} << 40}).ok());  // Memory too long
}

TEST(messages_decode_rejects_malformed_payloads) {
  auto hello = EncodeHello(Hello{});
  CHECK(DecodeHello(hello.data(), hello.size()).ok());
  hello[0] = 'X';
  CHECK(!DecodeHello(hello.data(), hello.size()).ok());
  CHECK(!DecodeHello(hello.data(), 47).ok());
  auto start = EncodeStart(Start{2, 0, 1 << 20, 4096});
  CHECK_EQ(DecodeStart(start.data(), start.size()).value().memory_bytes, uint64_t(1 << 20));
  start = EncodeStart(Start{2, 0, 1 << 20, 4095});
  CHECK(!DecodeStart(start.data(), start.size()).ok());
  auto table = EncodeRangeTable({{0x1000, 0x1000}});
  CHECK(DecodeRangeCount(table.data()).ok());
  CHECK(DecodeRanges(table.data() + 8, 1, 0x2000, 4096).ok());
  CHECK(!DecodeRanges(table.data() + 8, 1, 0x1000, 4096).ok());  // outside memory
  table = EncodeRangeTable({{0x1001, 0x1000}});
  CHECK(!DecodeRanges(table.data() + 8, 1, 0x10000, 4096).ok());  // unaligned
  table = EncodeRangeTable({{0x1000, ~uint64_t{0} - 0xfff}});
  CHECK(!DecodeRanges(table.data() + 8, 1, 0x10000, 4096).ok());  // overflow
  uint8_t zero_count[8] = {0};
  CHECK(!DecodeRangeCount(zero_count).ok());
  auto dd = EncodeDiskDigest({0xfeedfacecafef00dULL, 12345});
  CHECK_EQ(DecodeDiskDigest(dd.data(), dd.size()).value().digest, 0xfeedfacecafef00dULL);
  CHECK_EQ(DecodeDiskDigest(dd.data(), dd.size()).value().bytes, uint64_t(12345));
  CHECK(!DecodeDiskDigest(dd.data(), 15).ok());
  CHECK(!ValidateHeader(FrameHeader{16, 0, 0, 0, 16}).ok());  // DiskDigest unchecked
  CHECK(!ValidateHeader(FrameHeader{16, 1, 0, 0, 17}).ok());  // too long
  CHECK(ValidateHeader(FrameHeader{16, 1, 0, 0, 16}).ok());
  CHECK(!ValidateHeader(FrameHeader{17, 1, 0, 0, 0}).ok());   // past the last command
  auto ab = EncodeAbandon({7, std::string("bad\x01") + "x"});
  CHECK_EQ(DecodeAbandon(ab.data(), ab.size()).value().reason, std::string("bad?x"));
}

int Cli(int argc, char** argv) {
  std::string mode = argv[1];
  if (mode == "--golden") {
    for (auto& [name, bytes] : GoldenFrames()) std::printf("%s %s\n", name.c_str(), Hex(bytes.data(), bytes.size()).c_str());
    return 0;
  }
  if (mode == "--hmac" && argc == 4) {
    auto k = mtest::Unhex(argv[2]), m = mtest::Unhex(argv[3]);
    std::printf("%s\n", DigestHex(HmacSha256(k.data(), k.size(), m.data(), m.size())).c_str());
    return 0;
  }
  if (mode == "--sha256" && argc == 3) {
    auto m = mtest::Unhex(argv[2]);
    std::printf("%s\n", DigestHex(Sha256Of(m.data(), m.size())).c_str());
    return 0;
  }
  if (mode == "--crc32c" && argc == 3) {
    auto m = mtest::Unhex(argv[2]);
    std::printf("%08x\n", Crc32c(0, m.data(), m.size()));
    return 0;
  }
  std::fprintf(stderr, "usage: migration_tests [--golden | --hmac K M | --sha256 M | --crc32c M]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return Cli(argc, argv);
  int failed_cases = 0;
  for (auto& c : kvt_test::Registry()) {
    int before = kvt_test::Failures();
    c.fn();
    bool ok = kvt_test::Failures() == before;
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", c.name);
    if (!ok) failed_cases++;
  }
  std::printf("%zu cases, %d failed\n", kvt_test::Registry().size(), failed_cases);
  return failed_cases ? 1 : 0;
}
