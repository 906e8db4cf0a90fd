// VhostNet: see vhost_net.h.
#include "devices/virtio/vhost_net.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/ioctl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "devices/virtio/eventfd.h"
#include "devices/virtio/net.h"
#include "devices/virtio/virtio_device.h"

namespace kvmts::devices::virtio {

namespace {

// The vhost ABI (linux/vhost.h and vhost_types.h). Those headers cannot be included from C++: vhost_types.h pulls in
// linux/virtio_ring.h, whose inline vring_init converts void* implicitly. Layouts and numbers as the kernel's uapi.
struct vhost_vring_state {
  unsigned int index;
  unsigned int num;
};
struct vhost_vring_file {
  unsigned int index;
  int fd;
};
struct vhost_vring_addr {
  unsigned int index;
  unsigned int flags;
  uint64_t desc_user_addr, used_user_addr, avail_user_addr, log_guest_addr;
};
struct vhost_memory_region {
  uint64_t guest_phys_addr, memory_size, userspace_addr, flags_padding;
};
struct vhost_memory {
  uint32_t nregions;
  uint32_t padding;
  vhost_memory_region regions[];
};
static_assert(sizeof(vhost_vring_addr) == 40 && sizeof(vhost_memory_region) == 32 && sizeof(vhost_memory) == 8);

constexpr unsigned kVhostVirtio = 0xAF;
constexpr unsigned long VHOST_GET_FEATURES = _IOR(kVhostVirtio, 0x00, uint64_t);
constexpr unsigned long VHOST_SET_FEATURES = _IOW(kVhostVirtio, 0x00, uint64_t);
constexpr unsigned long VHOST_SET_OWNER = _IO(kVhostVirtio, 0x01);
constexpr unsigned long VHOST_SET_MEM_TABLE = _IOW(kVhostVirtio, 0x03, vhost_memory);
constexpr unsigned long VHOST_SET_VRING_NUM = _IOW(kVhostVirtio, 0x10, vhost_vring_state);
constexpr unsigned long VHOST_SET_VRING_ADDR = _IOW(kVhostVirtio, 0x11, vhost_vring_addr);
constexpr unsigned long VHOST_SET_VRING_BASE = _IOW(kVhostVirtio, 0x12, vhost_vring_state);
constexpr unsigned long VHOST_GET_VRING_BASE = _IOWR(kVhostVirtio, 0x12, vhost_vring_state);
constexpr unsigned long VHOST_SET_VRING_KICK = _IOW(kVhostVirtio, 0x20, vhost_vring_file);
constexpr unsigned long VHOST_SET_VRING_CALL = _IOW(kVhostVirtio, 0x21, vhost_vring_file);
constexpr unsigned long VHOST_SET_VRING_ERR = _IOW(kVhostVirtio, 0x22, vhost_vring_file);
constexpr unsigned long VHOST_NET_SET_BACKEND = _IOW(kVhostVirtio, 0x30, vhost_vring_file);

// A /proc file's text, at most `max` bytes ("" when it cannot be read).
std::string ReadProcText(const std::string& path, size_t max) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  for (ssize_t n; text.size() < max && (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd);
  if (text.size() > max) text.resize(max);
  return text;
}

}  // namespace

uint64_t VhostRingFeatures() {
  return kFeatureVersion1 | kFeatureIndirectDesc | kFeatureEventIdx | kNetFeatureMrgRxbuf;
}

bool ParseProcNetDev(const char* text, const std::string& ifname, TapCounters* out) {
  // "Inter-|   Receive ... |  Transmit ...\n face |bytes packets errs drop fifo frame compressed multicast|bytes
  // packets ...\n  tap0: 1 2 0 0 0 0 0 0 3 4 ...": eight receive fields, then transmit bytes and packets.
  for (const char* line = text; line != nullptr && *line != '\0';) {
    const char* end = std::strchr(line, '\n');
    std::string l(line, end != nullptr ? static_cast<size_t>(end - line) : std::strlen(line));
    line = end != nullptr ? end + 1 : nullptr;
    size_t colon = l.find(':');
    if (colon == std::string::npos) continue;
    size_t start = l.find_first_not_of(' ');
    if (start >= colon || l.compare(start, colon - start, ifname) != 0 || colon - start != ifname.size()) continue;
    uint64_t f[10] = {};
    const char* p = l.c_str() + colon + 1;
    for (uint64_t& v : f) {
      char* next = nullptr;
      v = std::strtoull(p, &next, 10);
      if (next == p) return false;
      p = next;
    }
    *out = TapCounters{f[0], f[1], f[8], f[9]};
    return true;
  }
  return false;
}

TapCounters ReadTapCounters(const std::string& ifname) {
  TapCounters c;
  (void)ParseProcNetDev(ReadProcText("/proc/net/dev", 1u << 20).c_str(), ifname, &c);
  return c;
}

namespace {

// The comm of /proc/<dir>/comm without its newline, or "" when it cannot be read.
std::string Comm(const std::string& dir) {
  std::string c = ReadProcText(dir + "/comm", 31);
  if (!c.empty() && c.back() == '\n') c.pop_back();
  return c;
}

// Puts every vhost worker this process owns under SCHED_BATCH, as VirtioNet's own worker (net.h): its wake-ups (a
// kick, a frame from the tap) then do not preempt the vCPU thread, so the guest queues frames until it waits and
// vhost takes them in one turn. The kernel names the worker "vhost-<id of the thread that called SET_OWNER>" (a
// vCPU thread when the driver's DRIVER_OK activates the device): a kernel thread before Linux 6.4, a thread of
// this process since. Call it on the thread that called SET_OWNER. Returns how many were set.
int BatchVhostWorkers() {
  std::string name = "vhost-" + std::to_string(gettid());
  int set = 0;
  sched_param normal{};
  for (const char* root : {"/proc", "/proc/self/task"}) {
    DIR* d = opendir(root);
    if (d == nullptr) continue;
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long tid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0') continue;
      if (Comm(std::string(root) + "/" + e->d_name) != name) continue;
      if (sched_setscheduler(static_cast<pid_t>(tid), SCHED_BATCH, &normal) == 0) set++;
    }
    closedir(d);
  }
  return set;
}

}  // namespace

Result<std::unique_ptr<VhostNet>> VhostNet::Open() {
  int fd = open("/dev/vhost-net", O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", "/dev/vhost-net");
  uint64_t features = 0;
  if (ioctl(fd, VHOST_SET_OWNER) != 0) {
    Error e = ErrnoError("VHOST_SET_OWNER");
    close(fd);
    return e;
  }
  if (ioctl(fd, VHOST_GET_FEATURES, &features) != 0) {
    Error e = ErrnoError("VHOST_GET_FEATURES");
    close(fd);
    return e;
  }
  int efd[3];  // rx call, tx call, err
  if (Status st = OpenEventfds(efd, 3); !st.ok()) {
    close(fd);
    return st.error();
  }
  (void)BatchVhostWorkers();  // none found (another kernel's naming): vhost merely batches less
  return std::unique_ptr<VhostNet>(new VhostNet(fd, efd[0], efd[1], efd[2], features));
}

VhostNet::VhostNet(int fd, int call_rx, int call_tx, int err, uint64_t features)
    : fd_(fd), call_fd_{call_rx, call_tx}, err_fd_(err), features_(features) {}

VhostNet::~VhostNet() {
  close(fd_);  // the kernel detaches the tap and stops its worker
  close(call_fd_[0]);
  close(call_fd_[1]);
  close(err_fd_);
}

Status VhostNet::Start(const GuestAccess& mem, const std::vector<SplitQueue*>& queues, uint64_t acked,
                       const int* kick_fds, int tap_fd) {
  if (started_ || queues.size() != 2) return Error{EINVAL, "vhost-net", "start"};
  uint64_t ring = acked & VhostRingFeatures();
  if ((ring & ~features_) != 0) return Error{EOPNOTSUPP, "VHOST_SET_FEATURES", "the kernel lacks a ring feature"};
  if (ioctl(fd_, VHOST_SET_FEATURES, &ring) != 0) return ErrnoError("VHOST_SET_FEATURES");

  std::vector<GuestRegion> regions = mem.Regions();
  if (regions.empty()) return Error{EINVAL, "VHOST_SET_MEM_TABLE", "no RAM regions"};
  size_t bytes = sizeof(vhost_memory) + regions.size() * sizeof(vhost_memory_region);
  std::unique_ptr<uint8_t[]> table(new uint8_t[bytes]());
  auto* vm = reinterpret_cast<vhost_memory*>(table.get());
  vm->nregions = static_cast<uint32_t>(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    vm->regions[i].guest_phys_addr = regions[i].gpa;
    vm->regions[i].memory_size = regions[i].size;
    vm->regions[i].userspace_addr = reinterpret_cast<uint64_t>(regions[i].host);
  }
  if (ioctl(fd_, VHOST_SET_MEM_TABLE, vm) != 0) return ErrnoError("VHOST_SET_MEM_TABLE");

  for (unsigned q = 0; q < 2; ++q) {
    const QueueState& s = queues[q]->state();
    const uint8_t* desc = mem.HostPtr(s.desc_gpa, uint64_t{s.size} * kDescriptorBytes);
    const uint8_t* avail = mem.HostPtr(s.avail_gpa, 6 + uint64_t{s.size} * 2);
    const uint8_t* used = mem.HostPtr(s.used_gpa, 6 + uint64_t{s.size} * kUsedElementBytes);
    if (!s.ready || desc == nullptr || avail == nullptr || used == nullptr) {
      return Error{EINVAL, "vhost-net", "queue not ready"};  // the transport validated them: cannot happen
    }
    vhost_vring_state num{q, s.size};
    if (ioctl(fd_, VHOST_SET_VRING_NUM, &num) != 0) return ErrnoError("VHOST_SET_VRING_NUM");
    vhost_vring_state base{q, s.next_avail};
    if (ioctl(fd_, VHOST_SET_VRING_BASE, &base) != 0) return ErrnoError("VHOST_SET_VRING_BASE");
    vhost_vring_addr addr{};
    addr.index = q;
    addr.desc_user_addr = reinterpret_cast<uint64_t>(desc);
    addr.avail_user_addr = reinterpret_cast<uint64_t>(avail);
    addr.used_user_addr = reinterpret_cast<uint64_t>(used);
    if (ioctl(fd_, VHOST_SET_VRING_ADDR, &addr) != 0) return ErrnoError("VHOST_SET_VRING_ADDR");
    vhost_vring_file kick{q, kick_fds[q]};
    if (ioctl(fd_, VHOST_SET_VRING_KICK, &kick) != 0) return ErrnoError("VHOST_SET_VRING_KICK");
    vhost_vring_file call{q, call_fd_[q]};
    if (ioctl(fd_, VHOST_SET_VRING_CALL, &call) != 0) return ErrnoError("VHOST_SET_VRING_CALL");
    vhost_vring_file err{q, err_fd_};
    if (ioctl(fd_, VHOST_SET_VRING_ERR, &err) != 0) return ErrnoError("VHOST_SET_VRING_ERR");
  }
  started_ = true;  // from here on Stop must undo what follows, even half done
  for (unsigned q = 0; q < 2; ++q) {
    vhost_vring_file backend{q, tap_fd};
    if (ioctl(fd_, VHOST_NET_SET_BACKEND, &backend) != 0) {
      Error e = ErrnoError("VHOST_NET_SET_BACKEND");
      (void)Stop(mem, queues);
      return e;
    }
  }
  return OkStatus();
}

Status VhostNet::Stop(const GuestAccess& mem, const std::vector<SplitQueue*>& queues) {
  if (!started_) return OkStatus();
  started_ = false;
  Status result = OkStatus();
  for (unsigned q = 0; q < 2 && q < queues.size(); ++q) {
    vhost_vring_file backend{q, -1};
    if (ioctl(fd_, VHOST_NET_SET_BACKEND, &backend) != 0 && result.ok()) result = ErrnoError("VHOST_NET_SET_BACKEND");
  }
  for (unsigned q = 0; q < 2 && q < queues.size(); ++q) {
    QueueState s = queues[q]->state();
    vhost_vring_state base{q, 0};
    if (ioctl(fd_, VHOST_GET_VRING_BASE, &base) != 0) {
      if (result.ok()) result = ErrnoError("VHOST_GET_VRING_BASE");
      continue;
    }
    s.next_avail = static_cast<uint16_t>(base.num);
    uint16_t used_idx = 0;
    if (ReadGuest(mem, s.used_gpa + 2, &used_idx, sizeof used_idx)) s.next_used = used_idx;  // little-endian host
    s.signalled_valid = false;  // the next completion asks used_event afresh
    queues[q]->set_state(s);
  }
  return result;
}

}  // namespace kvmts::devices::virtio
