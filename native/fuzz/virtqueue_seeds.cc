// Writes the virtqueue fuzz seeds (layout in virtqueue_fuzz.h): well-formed rings a driver would build, so mutations
// start from deep in the walker: a direct blk read, an indirect blk write, a discard, two chains across wraparound.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devices/virtio/split_queue.h"
#include "virtqueue_fuzz.h"

using namespace kvmts::devices::virtio;

namespace {

struct Seed {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(vqfuzz::kHeaderBytes + 0x3000, 0);
  uint8_t* mem() { return bytes.data() + vqfuzz::kHeaderBytes; }
  template <typename T>
  void Put(uint64_t gpa, T v) { std::memcpy(mem() + gpa, &v, sizeof v); }
  void Desc(uint64_t table, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next) {
    Put<uint64_t>(table + 16ull * i, addr);
    Put<uint32_t>(table + 16ull * i + 8, len);
    Put<uint16_t>(table + 16ull * i + 12, flags);
    Put<uint16_t>(table + 16ull * i + 14, next);
  }
  void Header(uint64_t gpa, uint32_t type, uint64_t sector) {
    Put<uint32_t>(gpa, type);
    Put<uint64_t>(gpa + 8, sector);
  }
};

void Write(const std::string& dir, const char* name, const Seed& s) {
  std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  std::fwrite(s.bytes.data(), 1, s.bytes.size(), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  using vqfuzz::kAvail, vqfuzz::kBuffers, vqfuzz::kDesc;
  {  // size 8, one direct IN: header, 512 B data, status
    Seed s;
    s.bytes[0] = 3;
    s.Header(kBuffers, 0, 1);
    s.Desc(kDesc, 0, kBuffers, 16, kDescFlagNext, 1);
    s.Desc(kDesc, 1, kBuffers + 0x100, 512, kDescFlagNext | kDescFlagWrite, 2);
    s.Desc(kDesc, 2, kBuffers + 0x400, 1, kDescFlagWrite, 0);
    s.Put<uint16_t>(kAvail + 2, 1);
    Write(dir, "direct-read", s);
  }
  {  // size 16, event idx, one indirect OUT of 4 descriptors
    Seed s;
    s.bytes[0] = 4;
    s.bytes[1] = 1;
    uint64_t table = kBuffers + 0x800;
    s.Header(kBuffers, 1, 7);
    s.Desc(table, 0, kBuffers, 16, kDescFlagNext, 1);
    s.Desc(table, 1, kBuffers + 0x100, 512, kDescFlagNext, 2);
    s.Desc(table, 2, kBuffers + 0x300, 512, kDescFlagNext, 3);
    s.Desc(table, 3, kBuffers + 0x500, 1, kDescFlagWrite, 0);
    s.Desc(kDesc, 5, table, 64, kDescFlagIndirect, 0);
    s.Put<uint16_t>(kAvail + 4, 5);
    s.Put<uint16_t>(kAvail + 2, 1);
    Write(dir, "indirect-write", s);
  }
  {  // size 4, a discard with two segments, and a flush, starting at next_avail 65535 (wraps)
    Seed s;
    s.bytes[0] = 2;
    s.bytes[2] = 0xff;
    s.bytes[3] = 0xff;
    s.Header(kBuffers, 11, 0);
    s.Put<uint64_t>(kBuffers + 0x100, 8);
    s.Put<uint32_t>(kBuffers + 0x108, 8);
    s.Desc(kDesc, 0, kBuffers, 16, kDescFlagNext, 1);
    s.Desc(kDesc, 1, kBuffers + 0x100, 32, kDescFlagNext, 2);
    s.Desc(kDesc, 2, kBuffers + 0x400, 1, kDescFlagWrite, 0);
    s.Header(kBuffers + 0x40, 4, 0);
    s.Desc(kDesc, 3, kBuffers + 0x40, 16, kDescFlagNext, 2);
    s.Put<uint16_t>(kAvail + 4 + 2 * 3, 0);  // slot 65535 % 4 = 3
    s.Put<uint16_t>(kAvail + 4 + 2 * 0, 3);
    s.Put<uint16_t>(kAvail + 2, 1);
    Write(dir, "discard-flush-wrap", s);
  }
  {  // size 8, virtio-net: a transmit chain (header split 4 + 8, a 60-byte frame) and a receive chain of two
     // writable buffers; flags ask for a 12 + 23 x 10 byte receive packet
    Seed s;
    s.bytes[0] = 3;
    s.bytes[1] = 10 << 1;
    s.Desc(kDesc, 0, kBuffers, 4, kDescFlagNext, 1);
    s.Desc(kDesc, 1, kBuffers + 4, 8, kDescFlagNext, 2);
    s.Desc(kDesc, 2, kBuffers + 0x100, 60, 0, 0);
    s.Desc(kDesc, 3, kBuffers + 0x200, 12, kDescFlagNext | kDescFlagWrite, 4);
    s.Desc(kDesc, 4, kBuffers + 0x300, 1514, kDescFlagWrite, 0);
    s.Put<uint16_t>(kAvail + 4, 0);
    s.Put<uint16_t>(kAvail + 6, 3);
    s.Put<uint16_t>(kAvail + 2, 2);
    Write(dir, "net-tx-rx", s);
  }
  std::printf("wrote 4 seeds to %s\n", dir.c_str());
  return 0;
}
