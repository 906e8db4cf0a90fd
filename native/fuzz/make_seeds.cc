// Writes the fuzz seed corpus: complete valid source streams (recorded from a real source talking to a real target
// over a socketpair, with the fuzz guest's deterministic nonces), one per protocol version.
#include <sys/socket.h>

#include <cstdio>
#include <string>
#include <thread>

#include "fuzz_guest.h"
#include "migration/outgoing.h"

using namespace kvmts::migration;

namespace {

class Recording : public Channel {
 public:
  explicit Recording(Channel& inner) : inner_(inner) {}
  kvmts::Result<size_t> Writev(const iovec* iov, int n) override {
    auto r = inner_.Writev(iov, n);
    if (!r.ok()) return r;
    size_t left = r.value();
    for (int i = 0; i < n && left > 0; i++) {
      size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
      auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
      bytes.insert(bytes.end(), p, p + take);
      left -= take;
    }
    return r;
  }
  kvmts::Result<size_t> Readv(const iovec* iov, int n) override { return inner_.Readv(iov, n); }
  std::vector<uint8_t> bytes;

 private:
  Channel& inner_;
};

bool Record(uint16_t version, const std::string& path, bool disk = false) {
  fuzzguest::Guest src, dst;
  fuzzguest::Disk target_disk;
  for (size_t i = 0; i < 4096; i++) src.low[4096 + i] = static_cast<uint8_t>(i * 7 + 1);
  src.high[100] = 5;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return false;
  FdChannel a(sv[0]), b(sv[1]);
  std::thread target([&] {
    IncomingMigration in(b, dst.Layout(), fuzzguest::kSecret, true, fuzzguest::FixedRandom);
    if (disk) in.SetDisks(target_disk.Targets());
    if (in.ReceiveUntilComplete().ok()) (void)in.ConfirmResumed();
  });
  Recording rec(a);
  OutgoingMigration out(rec, src.Layout(), fuzzguest::kSecret, fuzzguest::FixedRandom, version);
  if (disk) out.SetDisks({{0, fuzzguest::kDiskBytes}});
  bool ok = out.Handshake().ok();
  SendOptions bulk;
  bulk.populate_hint = true;  // version 3 streams carry Populate hints before the bulk pass's data
  ok = ok && out.SendRanges({{0, fuzzguest::kRegionBytes}, {uint64_t{1} << 32, fuzzguest::kRegionBytes}}, bulk).ok();
  if (disk) {
    std::vector<uint8_t> block(4096);
    for (size_t i = 0; i < block.size(); i++) block[i] = static_cast<uint8_t>(i * 3 + 1);
    ok = ok && out.SendDiskData(0, 8192, block.data(), block.size()).ok();
    ok = ok && out.SendDiskZero(0, 16384, 32768).ok();
  }
  ok = ok && out.Sync().ok();
  SendOptions paused;
  paused.check_data = true;
  ok = ok && out.SendRanges({{4096, 4096}}, paused).ok();
  ok = ok && out.SendState(reinterpret_cast<const uint8_t*>("state"), 5).ok();
  ok = ok && out.Complete().ok();
  target.join();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  std::fwrite(rec.bytes.data(), 1, rec.bytes.size(), f);
  std::fclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  bool ok = Record(4, dir + "/stream-v4-disk", true) && Record(4, dir + "/stream-v4") && Record(3, dir + "/stream-v3") &&
            Record(2, dir + "/stream-v2");
  std::printf("%s\n", ok ? "seeds written" : "seed recording failed");
  return ok ? 0 : 1;
}
