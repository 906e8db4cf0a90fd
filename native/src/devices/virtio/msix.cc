// MsixTable: see msix.h.
#include "devices/virtio/msix.h"

#include <cstring>

namespace kvmts::devices::virtio {

MsixTable::MsixTable(uint16_t vectors) : entries_(vectors), pending_(vectors, 0) {}

void MsixTable::Reset() {
  for (auto& e : entries_) e = Entry{};
  for (auto& p : pending_) p = 0;
  enabled_ = false;
  function_masked_ = false;
}

bool MsixTable::Deliverable(uint16_t v) const {
  return v < entries_.size() && enabled_ && !function_masked_ && !(entries_[v].control & kMsixVectorMasked);
}

uint32_t MsixTable::DeliverPending(MsiSink* sink) {
  uint32_t delivered = 0;
  for (uint16_t v = 0; v < entries_.size(); ++v) {
    if (pending_[v] && Deliverable(v)) {
      pending_[v] = 0;
      const Entry& e = entries_[v];
      if (sink != nullptr) sink->SignalMsi(static_cast<uint64_t>(e.addr_hi) << 32 | e.addr_lo, e.data);
      delivered++;
    }
  }
  return delivered;
}

uint32_t MsixTable::SetControl(bool enabled, bool function_masked, MsiSink* sink) {
  enabled_ = enabled;
  function_masked_ = function_masked;
  return DeliverPending(sink);
}

void MsixTable::TableRead(uint64_t offset, uint8_t* data, size_t len) const {
  std::memset(data, 0, len);
  if ((len != 4 && len != 8) || offset % len != 0 || offset + len > kMsixEntryBytes * entries_.size()) return;
  for (size_t done = 0; done < len; done += 4) {
    const Entry& e = entries_[(offset + done) / kMsixEntryBytes];
    uint32_t v = 0;
    switch ((offset + done) % kMsixEntryBytes) {
      case 0: v = e.addr_lo; break;
      case 4: v = e.addr_hi; break;
      case 8: v = e.data; break;
      default: v = e.control; break;
    }
    std::memcpy(data + done, &v, 4);
  }
}

uint32_t MsixTable::TableWrite(uint64_t offset, const uint8_t* data, size_t len, MsiSink* sink) {
  if ((len != 4 && len != 8) || offset % len != 0 || offset + len > kMsixEntryBytes * entries_.size()) return 0;
  for (size_t done = 0; done < len; done += 4) {
    Entry& e = entries_[(offset + done) / kMsixEntryBytes];
    uint32_t v;
    std::memcpy(&v, data + done, 4);
    switch ((offset + done) % kMsixEntryBytes) {
      case 0: e.addr_lo = v & ~3u; break;  // dword-aligned message address
      case 4: e.addr_hi = v; break;
      case 8: e.data = v; break;
      default: e.control = v & kMsixVectorMasked; break;
    }
  }
  return DeliverPending(sink);
}

void MsixTable::PbaRead(uint64_t offset, uint8_t* data, size_t len) const {
  std::memset(data, 0, len);
  if (offset >= PbaBytes() || len > PbaBytes() - offset) return;
  for (size_t i = 0; i < len; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      uint64_t v = (offset + i) * 8 + static_cast<uint64_t>(bit);
      if (v < pending_.size() && pending_[v]) data[i] = static_cast<uint8_t>(data[i] | (1u << bit));
    }
  }
}

bool MsixTable::Signal(uint16_t v, MsiSink* sink) {
  if (v >= entries_.size() || !enabled_) return false;
  if (!Deliverable(v)) {
    pending_[v] = 1;
    return false;
  }
  const Entry& e = entries_[v];
  if (sink != nullptr) sink->SignalMsi(static_cast<uint64_t>(e.addr_hi) << 32 | e.addr_lo, e.data);
  return true;
}

std::vector<uint8_t> MsixTable::Save() const {
  std::vector<uint8_t> out{1, static_cast<uint8_t>((enabled_ ? 1 : 0) | (function_masked_ ? 2 : 0)),
                           static_cast<uint8_t>(entries_.size()), static_cast<uint8_t>(entries_.size() >> 8)};
  for (const Entry& e : entries_) {
    for (uint32_t v : {e.addr_lo, e.addr_hi, e.data, e.control}) {
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
  }
  out.insert(out.end(), pending_.begin(), pending_.end());
  return out;
}

bool MsixTable::Restore(const uint8_t* data, size_t len) {
  size_t n = entries_.size();
  if (len != 4 + n * (kMsixEntryBytes + 1) || data[0] != 1 || (data[2] | data[3] << 8) != static_cast<int>(n)) {
    return false;
  }
  enabled_ = data[1] & 1;
  function_masked_ = (data[1] & 2) != 0;
  const uint8_t* p = data + 4;
  for (Entry& e : entries_) {
    uint32_t* fields[] = {&e.addr_lo, &e.addr_hi, &e.data, &e.control};
    for (uint32_t* f : fields) {
      std::memcpy(f, p, 4);
      p += 4;
    }
    e.control &= kMsixVectorMasked;
  }
  for (size_t i = 0; i < n; ++i) pending_[i] = p[i] ? 1 : 0;
  return true;
}

}  // namespace kvmts::devices::virtio
