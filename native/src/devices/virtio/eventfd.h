// The eventfds the virtio devices wake their workers with (kicks, control) and vhost signals them through: one home
// for opening a set of them, signalling one and draining one.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "kvm/result.h"

namespace kvmts::devices::virtio {

// Opens n non-blocking, close-on-exec eventfds into fds. On failure none stays open (fds are all -1) and the error
// is returned.
inline Status OpenEventfds(int* fds, size_t n) {
  for (size_t i = 0; i < n; ++i) fds[i] = -1;
  for (size_t i = 0; i < n; ++i) {
    fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fds[i] >= 0) continue;
    Error err = ErrnoError("eventfd");
    for (size_t j = 0; j < i; ++j) {
      close(fds[j]);
      fds[j] = -1;
    }
    return err;
  }
  return OkStatus();
}

// Adds 1 to the eventfd's counter. A write only fails when the counter would overflow (2^64 - 2 unread signals):
// the wake is there either way.
inline void SignalEventfd(int efd) {
  uint64_t one = 1;
  ssize_t n = write(efd, &one, sizeof one);
  (void)n;
}

// Reads and clears the eventfd's counter; true when it was signalled.
inline bool DrainEventfd(int efd) {
  uint64_t count = 0;
  return read(efd, &count, sizeof count) == static_cast<ssize_t>(sizeof count) && count != 0;
}

}  // namespace kvmts::devices::virtio
