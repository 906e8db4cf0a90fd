// Byte channels the migration stream runs over: a socket (FdChannel) or memory (MemoryChannel, for tests and the
// fuzzer). Vectored I/O so page data goes between guest memory and the kernel without a staging copy.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvm/result.h"

namespace kvmts::migration {

/** A bidirectional byte stream. Writev/Readv may transfer fewer bytes than asked; Readv returns 0 at end of stream. */
class Channel {
 public:
  virtual ~Channel() = default;
  virtual Result<size_t> Writev(const iovec* iov, int n) = 0;
  virtual Result<size_t> Readv(const iovec* iov, int n) = 0;
  /** Makes pending and future I/O fail promptly; safe from another thread (cancel). */
  virtual void Shutdown() {}
};

/** Writes every byte of `iov[0..n)` (any n: split at IOV_MAX). The array is modified. */
Status WriteAll(Channel& ch, iovec* iov, size_t n);
/** Fills every byte of `iov[0..n)`; end of stream first is an error "connection closed by peer". */
Status ReadAll(Channel& ch, iovec* iov, size_t n);
/** Convenience wrappers for one buffer. */
Status WriteBytes(Channel& ch, const void* p, size_t len);
Status ReadBytes(Channel& ch, void* p, size_t len);

/** A connected socket; owns the fd. Writes use MSG_NOSIGNAL (a dead peer is EPIPE, not SIGPIPE). */
class FdChannel : public Channel {
 public:
  explicit FdChannel(int fd);
  ~FdChannel() override;
  FdChannel(const FdChannel&) = delete;
  FdChannel& operator=(const FdChannel&) = delete;
  Result<size_t> Writev(const iovec* iov, int n) override;
  Result<size_t> Readv(const iovec* iov, int n) override;
  void Shutdown() override;
  int fd() const { return fd_; }

 private:
  int fd_;
};

/** Reads from a fixed buffer, appends writes to `written`. Optionally reads in chunks of at most `max_read`. */
class MemoryChannel : public Channel {
 public:
  MemoryChannel(const uint8_t* data, size_t len, size_t max_read = 0) : data_(data), len_(len), max_read_(max_read) {}
  Result<size_t> Writev(const iovec* iov, int n) override;
  Result<size_t> Readv(const iovec* iov, int n) override;
  std::vector<uint8_t> written;

 private:
  const uint8_t* data_;
  size_t len_;
  size_t pos_ = 0;
  size_t max_read_;
};

}  // namespace kvmts::migration
