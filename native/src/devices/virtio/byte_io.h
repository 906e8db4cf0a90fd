// ByteWriter / ByteReader: little-endian fields for the virtio save blobs. The reader never reads past its end:
// a short blob sets failed() and yields zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kvmts::devices::virtio {

class ByteWriter {
 public:
  void U8(uint8_t v) { buf_.push_back(v); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  // A u32 length, then the bytes.
  void Blob(const std::vector<uint8_t>& b) {
    U32(static_cast<uint32_t>(b.size()));
    buf_.insert(buf_.end(), b.begin(), b.end());
  }
  void Raw(const uint8_t* p, size_t n) { buf_.insert(buf_.end(), p, p + n); }
  std::vector<uint8_t> Take() { return std::move(buf_); }

 private:
  void Le(uint64_t v, int n) { for (int i = 0; i < n; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t len) : data_(data), len_(len) {}
  uint8_t U8() { return static_cast<uint8_t>(Le(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Le(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Le(4)); }
  uint64_t U64() { return Le(8); }
  // A u32 length, then that many bytes (pointer into the blob, nullptr on failure).
  const uint8_t* Blob(size_t* len) {
    uint32_t n = U32();
    const uint8_t* p = Raw(n);
    *len = p != nullptr ? n : 0;
    return p;
  }
  const uint8_t* Raw(size_t n) {
    if (failed_ || n > len_ - off_) {
      failed_ = true;
      return nullptr;
    }
    const uint8_t* p = data_ + off_;
    off_ += n;
    return p;
  }
  bool failed() const { return failed_; }
  bool at_end() const { return off_ == len_; }

 private:
  uint64_t Le(size_t n) {
    const uint8_t* p = Raw(n);
    uint64_t v = 0;
    for (size_t i = 0; p != nullptr && i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }
  const uint8_t* data_;
  size_t len_;
  size_t off_ = 0;
  bool failed_ = false;
};

}  // namespace kvmts::devices::virtio
