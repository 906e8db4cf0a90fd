// VirtioNet: see net.h for the features, the config layout, the backend and the worker.
#include "devices/virtio/net.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "devices/virtio/byte_io.h"
#include "devices/virtio/eventfd.h"

namespace kvmts::devices::virtio {

namespace {

constexpr uint8_t kNetSaveVersion = 1;

bool ValidMac(const uint8_t* mac) {
  bool zero = true;
  for (size_t i = 0; i < kMacBytes; ++i) zero = zero && mac[i] == 0;
  return !zero && (mac[0] & 1) == 0;  // bit 0 of the first octet: multicast
}

// Attaches to (or creates) the tap `name` with virtio headers of 12 bytes; the fd is non-blocking.
Result<int> OpenTap(const std::string& name, std::string* ifname) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", "/dev/net/tun");
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.data(), name.size());  // name.size() < IFNAMSIZ: checked by Open
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    Error e = ErrnoError("TUNSETIFF", name);
    close(fd);
    return e;
  }
  int hdr = static_cast<int>(kNetHdrBytes);
  if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) != 0) {
    Error e = ErrnoError("TUNSETVNETHDRSZ", name);
    close(fd);
    return e;
  }
  // No offloads until a driver takes them (Activate): the kernel checksums and segments what it sends us. A kernel
  // without TUNSETOFFLOAD always sends plain frames, which every driver accepts, so its failure changes nothing.
  (void)ioctl(fd, TUNSETOFFLOAD, 0);
  *ifname = std::string(ifr.ifr_name, strnlen(ifr.ifr_name, IFNAMSIZ));
  return fd;
}

}  // namespace

Result<std::unique_ptr<VirtioNet>> VirtioNet::Open(const NetOptions& options) {
  uint16_t qs = options.queue_size;
  if (!ValidMac(options.mac) || qs < 2 || qs > kQueueSizeLimit || (qs & (qs - 1)) != 0 ||
      options.tap.size() >= IFNAMSIZ || (options.tap.empty() && options.fd < 0)) {
    if (options.tap.empty() && options.fd >= 0) close(options.fd);
    return Error{EINVAL, "virtio-net", "mac, tap name or queue_size"};
  }
  int fd = options.fd;
  std::string ifname;
  bool vnet_hdr = options.vnet_hdr;
  if (!options.tap.empty()) {
    auto tap = OpenTap(options.tap, &ifname);
    if (!tap.ok()) return tap.error();
    fd = tap.value();
    vnet_hdr = true;
  } else {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
      Error e = ErrnoError("fcntl");
      close(fd);
      return e;
    }
  }
  int fds[3];  // rx kick, tx kick, ctl
  if (Status st = OpenEventfds(fds, 3); !st.ok()) {
    close(fd);
    return st.error();
  }
  NetOptions o = options;
  o.vnet_hdr = vnet_hdr;
  o.fd = fd;
  return std::unique_ptr<VirtioNet>(new VirtioNet(o, fd, fds[0], fds[1], fds[2], ifname));
}

VirtioNet::VirtioNet(const NetOptions& options, int fd, int kick_rx, int kick_tx, int ctl, std::string ifname)
    : options_(options), fd_(fd), kick_fd_{kick_rx, kick_tx}, ctl_fd_(ctl), ifname_(std::move(ifname)),
      pending_(kNetMaxPacketBytes) {}

VirtioNet::~VirtioNet() {
  Reset();
  close(ctl_fd_);
  close(kick_fd_[0]);
  close(kick_fd_[1]);
  close(fd_);
}

uint64_t VirtioNet::device_features() const {
  uint64_t f = kFeatureVersion1 | kFeatureIndirectDesc | kFeatureEventIdx | kNetFeatureMac | kNetFeatureStatus;
  // Offloads need the header to reach the backend and come back from it: only a vnet-header fd carries NEEDS_CSUM
  // and gso_type either way.
  uint64_t offloads = kNetFeatureCsum | kNetFeatureHostTso4 | kNetFeatureHostTso6 | kNetFeatureGuestCsum |
                      kNetFeatureGuestTso4 | kNetFeatureGuestTso6 | kNetFeatureMrgRxbuf;
  return options_.vnet_hdr ? f | offloads : f;
}

bool VirtioNet::AcceptFeatures(uint64_t acked) {
  bool host_tso = (acked & (kNetFeatureHostTso4 | kNetFeatureHostTso6)) != 0;
  bool guest_tso = (acked & (kNetFeatureGuestTso4 | kNetFeatureGuestTso6)) != 0;
  return (!host_tso || (acked & kNetFeatureCsum) != 0) && (!guest_tso || (acked & kNetFeatureGuestCsum) != 0);
}

void VirtioNet::SetBackendOffloads(uint64_t acked) {
  if (!options_.vnet_hdr) return;
  unsigned flags = 0;
  if (acked & kNetFeatureGuestCsum) {
    flags |= TUN_F_CSUM;
    if (acked & kNetFeatureGuestTso4) flags |= TUN_F_TSO4;
    if (acked & kNetFeatureGuestTso6) flags |= TUN_F_TSO6;
  }
  // Not a tap (a test's socket pair: ENOTTY), or a kernel that refuses: the backend keeps sending plain frames,
  // which a driver with offloads accepts just the same.
  (void)ioctl(fd_, TUNSETOFFLOAD, flags);
}

void VirtioNet::ReadConfig(uint64_t offset, uint8_t* data, size_t len) const {
  uint8_t cfg[kNetConfigBytes] = {};
  std::memcpy(cfg + kNetCfgMac, options_.mac, kMacBytes);
  cfg[kNetCfgStatus] = static_cast<uint8_t>(link_status_);
  cfg[kNetCfgStatus + 1] = static_cast<uint8_t>(link_status_ >> 8);
  cfg[kNetCfgMaxPairs] = 1;
  for (size_t i = 0; i < len; ++i) data[i] = offset + i < kNetConfigBytes ? cfg[offset + i] : 0;
}

void VirtioNet::WriteConfig(uint64_t, const uint8_t*, size_t) {}  // the MAC is read-only (no CTRL_MAC_ADDR)

void VirtioNet::Broken(const char* why) {
  broken_ = true;
  counters_.broken++;
  ctx_.irq->MarkBroken(why);
}

void VirtioNet::Announce() {
  // virtio header (vnet backends only) | Ethernet: broadcast, the guest's MAC, 0x8035 | RARP (RFC 903): Ethernet,
  // IPv4, 6, 4, op 3 (reverse request), sender = target = the guest's MAC, addresses 0 | padding to 60 bytes.
  uint8_t frame[kNetHdrBytes + 60] = {};
  uint8_t* eth = frame + kNetHdrBytes;
  std::memset(eth, 0xff, kMacBytes);
  std::memcpy(eth + 6, options_.mac, kMacBytes);
  const uint8_t rarp[] = {0x80, 0x35, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x03};
  std::memcpy(eth + 12, rarp, sizeof rarp);
  std::memcpy(eth + 22, options_.mac, kMacBytes);
  std::memcpy(eth + 32, options_.mac, kMacBytes);
  const uint8_t* start = options_.vnet_hdr ? frame : eth;
  size_t len = options_.vnet_hdr ? sizeof frame : 60;
  if (!backend_dead_ && write(fd_, start, len) == static_cast<ssize_t>(len)) {
    counters_.announces++;
  } else {
    counters_.tx_errors++;  // the network learns the port when the guest next sends instead
  }
}

NetStats VirtioNet::stats() const {
  NetStats s;
  s.rx_frames = counters_.rx_frames;
  s.rx_bytes = counters_.rx_bytes;
  s.tx_frames = counters_.tx_frames;
  s.tx_bytes = counters_.tx_bytes;
  s.rx_truncated = counters_.rx_truncated;
  s.tx_errors = counters_.tx_errors;
  s.broken = counters_.broken;
  s.announces = counters_.announces;
  s.rx_dropped = counters_.rx_dropped;
  s.vhost_starts = counters_.vhost_starts;
  s.vhost_fallbacks = counters_.vhost_fallbacks;
  s.vhost_active = vhost_ != nullptr && vhost_->started();
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (s.vhost_active) {  // the frames vhost moved since it started, not yet folded into counters_
    GuestFrameCounts d = GuestFramesBetween(vhost_base_, ReadTapCounters(ifname_));
    s.rx_frames += d.rx_frames;
    s.rx_bytes += d.rx_bytes;
    s.tx_frames += d.tx_frames;
    s.tx_bytes += d.tx_bytes;
  }
  return s;
}

void VirtioNet::FoldVhostCounters() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  TapCounters now = ReadTapCounters(ifname_);
  GuestFrameCounts d = GuestFramesBetween(vhost_base_, now);
  counters_.rx_frames += d.rx_frames;
  counters_.rx_bytes += d.rx_bytes;
  counters_.tx_frames += d.tx_frames;
  counters_.tx_bytes += d.tx_bytes;
  vhost_base_ = now;
}

std::vector<uint8_t> VirtioNet::SaveState() const {
  ByteWriter w;
  w.U8(kNetSaveVersion);
  w.Raw(options_.mac, kMacBytes);
  w.U16(link_status_);
  w.U32(static_cast<uint32_t>(pending_len_));
  w.Raw(pending_.data(), pending_len_);
  return w.Take();
}

bool VirtioNet::RestoreState(const uint8_t* data, size_t len) {
  ByteReader r(data, len);
  if (r.U8() != kNetSaveVersion) return false;
  const uint8_t* mac = r.Raw(kMacBytes);
  uint16_t link = r.U16();
  uint32_t pending = r.U32();
  if (r.failed() || pending > kNetMaxPacketBytes || (pending != 0 && pending < kNetHdrBytes)) return false;
  const uint8_t* frame = r.Raw(pending);
  if (r.failed() || !r.at_end() || std::memcmp(mac, options_.mac, kMacBytes) != 0) return false;
  link_status_ = link;
  std::memcpy(pending_.data(), frame, pending);
  pending_len_ = pending;
  announce_ = true;  // the guest now lives behind this backend: tell the network (net_worker.cc Announce)
  return true;
}

}  // namespace kvmts::devices::virtio
