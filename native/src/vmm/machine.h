// Machine: one KVM virtual machine (VM fd, guest memory + slots, N vCPU threads, the device bus). The builder and
// the owner of everything; the napi layer holds one per JS Vm and the migration code drives it through this API.
//
//            Create()            Start()              Pause()
//   (none) ----------> kCreated ---------> kRunning ----------> kPaused
//                        |  LoadElf()        ^   |  <----------   |
//                        |  RestoreState()   |   |   Resume()     |  SaveState(), RestoreState()
//                        |  memory() fill    |   v                v
//                        +-------------------+-> kStopped <-------+   (Stop(), guest shutdown/reset, a fatal exit)
//
// Pause() returns only when every vCPU has left KVM_RUN and acknowledged (Firecracker's Pause command + kick), so
// registers, memory and devices are at a consistent point until Resume(). Stop() finishes and joins the threads;
// the destructor stops too, then closes fds (vCPUs, VM) and unmaps memory in reverse order.
//
// Dirty log (any one thread at a time, e.g. an AsyncWorker; vCPUs may keep running):
//   StartDirtyLog()  sets KVM_MEM_LOG_DIRTY_PAGES on every slot and clears the VMM bitmaps
//   CollectDirty()   per region: KVM's log for the slot (fetch-and-clear) OR the pages the VMM wrote since the
//                    last call; a page written after a CollectDirty shows up in the next one
//   StopDirtyLog()   clears the flag again
// The first migration pass sends everything (DirtyBitmap::SetAll), so call StartDirtyLog() BEFORE it, then send,
// then CollectDirty() per round; the last round runs after Pause().
//
// Migration, source side:  StartDirtyLog -> bulk copy -> CollectDirty rounds -> Pause -> CollectDirty (final)
//                          -> SaveState -> send; on failure Resume() (the guest runs on untouched); on success Stop().
// Migration, target side:  Create(same memory size, vcpu count) WITHOUT LoadElf -> write pages into memory()
//                          -> RestoreState(blob) -> Start() (vCPUs run from the restored registers).
// SaveState/RestoreState need kPaused or kCreated; they run on the caller's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "devices/virtio/blk_overlay.h"
#include "devices/virtio/vhost_net.h"
#include "kvm/result.h"
#include "memory/guest_memory.h"

namespace kvmts::vmm {

class VcpuThread;
class DeviceBus;
struct MachineImpl;

enum class MachineState { kCreated, kRunning, kPaused, kStopped };
const char* MachineStateName(MachineState s);

// How CollectDirty reads KVM's log: classic KVM_GET_DIRTY_LOG (fetch, clear and write-protect in one call under
// the MMU lock) or manual protect (KVM_GET_DIRTY_LOG without clearing, then KVM_CLEAR_DIRTY_LOG for exactly the
// pages returned). kAuto = manual protect when KVM offers it (measured faster here; see native/README.md).
enum class DirtyLogMode { kAuto, kClassic, kManualProtect };

// A virtio-blk disk (devices/virtio/blk.h) on the machine's PCI bus. Linux platform only.
struct DiskConfig {
  std::string path;        // raw image file or block device
  bool read_only = false;  // opened O_RDONLY, offered VIRTIO_BLK_F_RO
  std::string serial;      // GET_ID (/dev/disk/by-id/virtio-<serial>); cut to 20 bytes
  bool copy_on_migrate = false;  // a local disk (migrate "copy"): a live migration sends its contents and tracks
                                 // the blocks the guest writes meanwhile; false = shared storage, not copied
  std::string base_path;  // non-empty: path is a copy-on-write overlay over this read-only raw file
                          // (devices/virtio/blk_overlay.h); a migration then copies the overlay's granules only
};

// A disk whose contents a live migration copies (DiskConfig::copy_on_migrate), as the migration stream sees it.
struct CopiedDisk {
  uint32_t index = 0;  // position in MachineConfig::disks (PCI 00:(index+1).0)
  std::string path;
  // A copy-on-write disk's allocation map (null for a plain disk): the source sends the allocated granules only,
  // the target marks the granules it receives (its overlay sits over its own copy of the same base).
  std::shared_ptr<devices::virtio::OverlayMap> overlay;
};

// A virtio-net NIC (devices/virtio/net.h) on the machine's PCI bus, backed by a tap. Linux platform only.
struct NicConfig {
  std::string tap;      // tap name: an existing (persistent) tap is attached, otherwise the kernel creates one
                        // that lives as long as the machine (needs CAP_NET_ADMIN either way)
  uint8_t mac[6] = {};  // unicast, non-zero: what the guest reads as eth0's address
  devices::virtio::VhostMode vhost = devices::virtio::VhostMode::kOff;  // the in-kernel data path (net.h)
};

struct MachineConfig {
  uint64_t memory_bytes = 0;                   // > 0, multiple of 4 KiB
  uint32_t vcpu_count = 1;                     // 1..64
  memory::Backing backing = memory::Backing::kAnonymous;
  bool huge_pages = true;
  DirtyLogMode dirty_log_mode = DirtyLogMode::kAuto;
  // The PC platform a stock Linux kernel expects (vmm/machine_linux.cc): the full in-kernel irqchip (PIC + IOAPIC +
  // LAPICs) instead of the split one, the PIT, the UART on ISA IRQ 4, ACPI power-off. Set for LoadLinux guests.
  bool linux_platform = false;
  // virtio-blk disks, in order at PCI 00:01.0, 00:02.0, ... (needs linux_platform). Empty: no PCI bus at all
  // (nothing changes for a machine without disks: no 0xCF8 ports, no SSDT, no MMIO handling).
  std::vector<DiskConfig> disks;
  // virtio-net NICs, after the disks: nic j at PCI 00:(disks + j + 1).0 (needs linux_platform). Disks + NICs <= 16.
  std::vector<NicConfig> nics;
};

// Why the guest stopped by itself.
enum class ShutdownReason { kGuestExit, kReset, kTripleFault, kFatalExit };
const char* ShutdownReasonName(ShutdownReason r);

// Callbacks from vCPU threads. Must not block and must not touch JS (the napi layer forwards them through a
// thread-safe function with NonBlockingCall). Called with no machine lock held.
class MachineEvents {
 public:
  virtual ~MachineEvents() = default;
  // New serial output is waiting; fetch it with Machine::TakeSerialOutput (output batches while nobody fetches).
  virtual void OnSerialOutput() = 0;
  // A vCPU exit the VMM does not handle (reason e.g. "KVM_EXIT_MMIO write 0xfee00000 len 4", "KVM_EXIT_INTERNAL_ERROR").
  // fatal = the vCPU stopped; the machine then shuts down with kFatalExit.
  virtual void OnVcpuExit(uint32_t vcpu, const std::string& reason, bool fatal) = 0;
  // The guest stopped: test-port exit (code = the value written), i8042 reset, triple fault, fatal exit.
  virtual void OnShutdown(ShutdownReason reason, uint32_t code) = 0;
  // A device stopped because the guest broke its protocol, e.g. ("virtio-blk 00:01.0", "loop"): the device reads
  // NEEDS_RESET until the guest resets it; the machine runs on. Also from device worker threads. Default: ignored.
  virtual void OnDeviceError(const std::string& /*device*/, const std::string& /*reason*/) {}
};

// One region's dirty pages, as collected.
struct RegionDirty {
  uint32_t region = 0;      // index into memory().regions()
  memory::Gpa base;         // GPA of page 0 of the bitmap
  memory::DirtyBitmap bitmap;
};
using DirtySnapshot = std::vector<RegionDirty>;

struct MachineStats {
  uint64_t exits = 0;          // all KVM_RUN returns, all vCPUs
  uint64_t io_exits = 0;
  uint64_t mmio_exits = 0;
  uint64_t serial_bytes_out = 0;
  uint64_t serial_bytes_in = 0;
  uint64_t serial_bytes_dropped = 0;  // output dropped while nobody drained it (buffer full)
  uint64_t kicks = 0;
  uint64_t dirty_log_collections = 0;
  std::vector<double> vcpu_seconds;  // CPU time of each vCPU thread, by vCPU index
  // virtio disks (MachineConfig::disks), summed over the disks; all 0 without disks.
  uint64_t disk_requests = 0;       // requests answered (any status)
  uint64_t disk_read_bytes = 0;
  uint64_t disk_write_bytes = 0;
  uint64_t disk_errors = 0;         // answered IOERR or UNSUPP
  uint64_t disk_broken = 0;         // times a disk stopped on a protocol error (NEEDS_RESET)
  uint64_t disk_kicks_exited = 0;   // notifies (disks and NICs) that came through an MMIO exit (no ioeventfd)
  // virtio NICs (MachineConfig::nics), summed over the NICs; all 0 without NICs.
  uint64_t net_rx_frames = 0;       // frames delivered to the guest
  uint64_t net_rx_bytes = 0;
  uint64_t net_tx_frames = 0;       // frames the guest sent that reached the tap
  uint64_t net_tx_bytes = 0;
  uint64_t net_errors = 0;          // frames dropped: refused by the tap, or cut to fit a receive buffer
  uint64_t net_broken = 0;          // times a NIC stopped on a protocol error (NEEDS_RESET)
  uint64_t net_vhost = 0;           // NICs whose frames vhost-net carries now
  uint64_t net_vhost_fallbacks = 0; // times a NIC wanted vhost-net and ran its userspace path instead
  uint64_t irqfd_routes = 0;        // device eventfds KVM raises as MSIs itself now (vhost-net's, unmasked)
  uint64_t irqfd_failures = 0;      // routes KVM refused (those interrupts are relayed instead)
  uint64_t msi_failures = 0;        // KVM_SIGNAL_MSI errors
  uint64_t ioeventfd_failures = 0;  // KVM_IOEVENTFD errors (the kick then exits instead)
};

class Machine {
 public:
  // Opens /dev/kvm, creates the VM, maps memory and registers the slots, creates the vCPUs (CPUID from
  // KVM_GET_SUPPORTED_CPUID, threads not started) and the devices. events must outlive the machine.
  static Result<std::unique_ptr<Machine>> Create(const MachineConfig& config, MachineEvents* events);
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // Loads a 64-bit ELF (PT_LOAD segments at their physical addresses), writes a PVH hvm_start_info with `cmdline`,
  // and sets vCPU 0 up in 64-bit long mode at e_entry (identity paging of the low 4 GiB, flat GDT), RBX = start
  // info (the PVH convention). kCreated only.
  Status LoadElf(const uint8_t* image, size_t len, const std::string& cmdline);
  // Loads a Linux bzImage and an initramfs (may be empty) with the 64-bit boot protocol (vmm/linux_boot.h): kernel
  // at 1 MiB, zero page with the e820 map, command line, ACPI tables; vCPU 0 at the 64-bit entry, boot CPUID/MSRs
  // on every vCPU, SMBIOS tables at 0xf0000 (vmm/smbios.h) with `uuid` (canonical text; empty = none, the
  // guest then has no product_uuid) as the system UUID. Needs config.linux_platform. kCreated only. Errors:
  // EINVAL for a malformed uuid. Defined in machine_linux.cc.
  Status LoadLinux(const uint8_t* kernel, size_t kernel_len, const uint8_t* initrd, size_t initrd_len,
                   const std::string& cmdline, const std::string& uuid = {});
  // Linux platform: presses and releases Ctrl-Alt-Del on the guest's PS/2 keyboard (its init decides: the demo image
  // powers off). EAGAIN when the guest has not enabled its keyboard yet. Any state. Defined in machine_linux.cc.
  Status SendCtrlAltDel();
  // kCreated -> kRunning: starts one thread per vCPU.
  Status Start();
  // kRunning -> kPaused, synchronously (kicks every vCPU, waits for each acknowledgement). No-op when paused.
  Status Pause();
  // kPaused -> kRunning.
  Status Resume();
  // Any state -> kStopped; joins the vCPU threads. Idempotent, also called by the destructor.
  void Stop();
  MachineState state() const;

  memory::GuestMemory& memory();
  uint32_t vcpu_count() const;

  Status StartDirtyLog();
  Result<DirtySnapshot> CollectDirty();
  Status StopDirtyLog();
  bool dirty_logging() const;

  // Copied disks (machine_disk.cc): the disks with copy_on_migrate, in index order; empty without any.
  std::vector<CopiedDisk> CopiedDisks() const;
  // Starts (clears and arms) / stops the dirty-block maps of the copied disks (devices/virtio/blk_dirty.h). Any state.
  void StartDiskDirtyLog();
  void StopDiskDirtyLog();
  // The 64 KiB granules of disk `index` written since the last take (or the start), cleared; empty for a disk that
  // is not copied. Final when taken after Pause() (the devices are quiesced: no request in flight).
  std::vector<uint64_t> TakeDiskDirty(uint32_t index);

  // The whole machine state (every vCPU: CPUID, TSC kHz, regs, sregs, FPU/XSAVE, XCRs, MSRs incl. kvmclock's,
  // LAPIC, vcpu events, MP state; for linux_platform the in-kernel PIC pair, IOAPIC and PIT; the devices; the
  // KVM clock) as an opaque versioned blob (vmm/state_blob.h; restore order: vmm/machine_state.cc). kPaused (or
  // kCreated: the state a Start() would begin with).
  Result<std::vector<uint8_t>> SaveState();
  // Restores a SaveState() blob (same vcpu count and platform). kCreated (then Start()) or kPaused (then
  // Resume(); the vCPUs keep their CPUID). Errors: EINVAL op "restore-state" for a malformed or foreign blob
  // (checked before anything changes), or the failing KVM_SET_* ioctl.
  Status RestoreState(const uint8_t* data, size_t len);

  // Serial input from the console (queued in the UART's receive FIFO; bytes beyond the FIFO are dropped).
  void WriteSerialInput(const uint8_t* data, size_t len);
  // Moves the pending serial output into *out (appends); returns the byte count.
  size_t TakeSerialOutput(std::string* out);

  // Auto-converge: each vCPU sleeps `percent` of every 10 ms slice (0 = off, max 99). Any state; any thread.
  void SetCpuThrottle(uint32_t percent);

  MachineStats stats() const;

 private:
  explicit Machine(std::unique_ptr<MachineImpl> impl);
  std::unique_ptr<MachineImpl> impl_;
};

}  // namespace kvmts::vmm
