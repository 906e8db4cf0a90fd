#include "migration/channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace kvmts::migration {
namespace {

// Advances an iovec array past `done` bytes; returns the index of the first unfinished entry.
size_t Advance(iovec* iov, size_t n, size_t i, size_t done) {
  while (i < n && done >= iov[i].iov_len) {
    done -= iov[i].iov_len;
    i++;
  }
  if (i < n && done > 0) {
    iov[i].iov_base = static_cast<uint8_t*>(iov[i].iov_base) + done;
    iov[i].iov_len -= done;
  }
  return i;
}

size_t SkipEmpty(const iovec* iov, size_t n, size_t i) {
  while (i < n && iov[i].iov_len == 0) i++;
  return i;
}

}  // namespace

Status WriteAll(Channel& ch, iovec* iov, size_t n) {
  size_t i = SkipEmpty(iov, n, 0);
  while (i < n) {
    int count = static_cast<int>(std::min<size_t>(n - i, IOV_MAX));
    auto r = ch.Writev(iov + i, count);
    if (!r.ok()) return r.error();
    i = SkipEmpty(iov, n, Advance(iov, n, i, r.value()));
  }
  return OkStatus();
}

Status ReadAll(Channel& ch, iovec* iov, size_t n) {
  size_t i = SkipEmpty(iov, n, 0);
  while (i < n) {
    int count = static_cast<int>(std::min<size_t>(n - i, IOV_MAX));
    auto r = ch.Readv(iov + i, count);
    if (!r.ok()) return r.error();
    if (r.value() == 0) return Error{ECONNRESET, "recv", "connection closed by peer"};
    i = SkipEmpty(iov, n, Advance(iov, n, i, r.value()));
  }
  return OkStatus();
}

Status WriteBytes(Channel& ch, const void* p, size_t len) {
  iovec v{const_cast<void*>(p), len};
  return WriteAll(ch, &v, 1);
}

Status ReadBytes(Channel& ch, void* p, size_t len) {
  iovec v{p, len};
  return ReadAll(ch, &v, 1);
}

FdChannel::FdChannel(int fd) : fd_(fd) {}

FdChannel::~FdChannel() {
  if (fd_ >= 0) close(fd_);
}

Result<size_t> FdChannel::Writev(const iovec* iov, int n) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(n);
  for (;;) {
    ssize_t r = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno != EINTR) return Error{errno, "sendmsg", "migration stream"};
  }
}

Result<size_t> FdChannel::Readv(const iovec* iov, int n) {
  for (;;) {
    ssize_t r = readv(fd_, iov, n);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno != EINTR) return Error{errno, "readv", "migration stream"};
  }
}

void FdChannel::Shutdown() { shutdown(fd_, SHUT_RDWR); }

Result<size_t> MemoryChannel::Writev(const iovec* iov, int n) {
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    const uint8_t* p = static_cast<const uint8_t*>(iov[i].iov_base);
    written.insert(written.end(), p, p + iov[i].iov_len);
    total += iov[i].iov_len;
  }
  return total;
}

Result<size_t> MemoryChannel::Readv(const iovec* iov, int n) {
  size_t budget = max_read_ ? max_read_ : SIZE_MAX;
  size_t total = 0;
  for (int i = 0; i < n && pos_ < len_ && budget > 0; i++) {
    size_t take = std::min({iov[i].iov_len, len_ - pos_, budget});
    std::memcpy(iov[i].iov_base, data_ + pos_, take);
    pos_ += take;
    total += take;
    budget -= take;
  }
  return total;
}

}  // namespace kvmts::migration
