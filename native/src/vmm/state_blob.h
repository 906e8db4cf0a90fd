// StateBlob: the byte format of Machine::SaveState, a tagged-section container (Firecracker `Persist` snapshots,
// reduced). Pure; tested on its own.
//
//   "KVTS" | u32 version (1) | u32 vcpu_count | section* 
//   section = u32 tag | u32 vcpu (or 0xffffffff for machine-wide) | u64 length | length bytes
// All integers little-endian (x86 host order). Unknown tags are an error on restore (no silent partial state).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvmts::vmm {

inline constexpr uint32_t kStateVersion = 1;
inline constexpr uint32_t kMachineWide = 0xffffffffu;

enum StateTag : uint32_t {
  kTagRegs = 1, kTagSregs, kTagXsave, kTagXcrs, kTagLapic, kTagEvents, kTagMpState, kTagDebugRegs, kTagMsrs,
  kTagClock = 100, kTagSerial,
};

class StateWriter {
 public:
  StateWriter(uint32_t vcpus) {
    buf_.insert(buf_.end(), {'K', 'V', 'T', 'S'});
    Put32(kStateVersion);
    Put32(vcpus);
  }
  void Section(uint32_t tag, uint32_t vcpu, const void* data, uint64_t len) {
    Put32(tag);
    Put32(vcpu);
    Put64(len);
    const auto* p = static_cast<const uint8_t*>(data);
    buf_.insert(buf_.end(), p, p + len);
  }
  std::vector<uint8_t> Take() { return std::move(buf_); }

 private:
  void Put32(uint32_t v) { for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void Put64(uint64_t v) { for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  std::vector<uint8_t> buf_;
};

struct StateSection {
  uint32_t tag = 0;
  uint32_t vcpu = 0;
  const uint8_t* data = nullptr;
  uint64_t len = 0;
};

// Parses the header and every section; returns false (with *why) on any malformation.
inline bool ParseState(const uint8_t* data, size_t len, uint32_t* vcpus, std::vector<StateSection>* out,
                       std::string* why) {
  auto get32 = [&](size_t off) { uint32_t v; std::memcpy(&v, data + off, 4); return v; };
  if (len < 12 || std::memcmp(data, "KVTS", 4) != 0) return *why = "bad magic", false;
  if (get32(4) != kStateVersion) return *why = "unsupported version " + std::to_string(get32(4)), false;
  *vcpus = get32(8);
  size_t off = 12;
  while (off < len) {
    if (len - off < 16) return *why = "truncated section header", false;
    StateSection s;
    s.tag = get32(off);
    s.vcpu = get32(off + 4);
    std::memcpy(&s.len, data + off + 8, 8);
    off += 16;
    if (s.len > len - off) return *why = "truncated section", false;
    s.data = data + off;
    off += s.len;
    out->push_back(s);
  }
  return true;
}

}  // namespace kvmts::vmm
