#include "kvm/system.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace kvmts::kvm {

Result<int> QueryApiVersion() {
  int fd = open(kKvmPath, O_RDWR | O_CLOEXEC);
  if (fd < 0) return Error{errno, "open", kKvmPath};
  int version = ioctl(fd, KVM_GET_API_VERSION, 0);
  int saved = errno;
  close(fd);
  if (version < 0) return Error{saved, "KVM_GET_API_VERSION", ""};
  return version;
}

}  // namespace kvmts::kvm

namespace kvmts {

Error ErrnoError(const char* op, std::string detail) { return Error{errno, op, std::move(detail)}; }

}  // namespace kvmts
