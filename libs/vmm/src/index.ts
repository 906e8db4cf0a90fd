/**
 * @kvt/vmm: the typed TypeScript layer over the native VMM addon (the only importer of @kvt/native).
 * See README.md for an example.
 */

/** Errors naming the failed operation: `KVM_SET_USER_MEMORY_REGION: EEXIST` with code/errno/syscall. */
export { VmmError, type VmmErrorFields } from "./errors.ts";
/** Typed events and a serial line splitter. */
export {
  type DeviceErrorEvent,
  LineSplitter,
  type ShutdownEvent,
  type ShutdownReason,
  type VcpuExitEvent,
  type VmEvents,
} from "./events.ts";
/** In-memory VMs for app tests. */
export { FakeVm, FakeVmm } from "./fake/fake-vmm.ts";
/** Guest physical addresses (branded bigint). */
export { type Gpa, gpa, MAX_GPA } from "./gpa.ts";
// What this host's KVM is (none, hardware-assisted, PVM) and whether it runs a stock Linux guest.
export {
  type BenchLane,
  benchLane,
  type HostVirt,
  type HostVirtPaths,
  kvmRunsLinux,
  probeHostVirt,
} from "./host-virt.ts";
export { hasKvm, kvmApiVersion } from "./kvm.ts";
/** Direct Linux boot (bzImage + initramfs, the x86 64-bit boot protocol): the `boot` option of Vm.create. */
export {
  joinInitrd,
  linuxCmdline,
  MAX_LINUX_CMDLINE_BYTES,
  parseLinuxBoot,
  type VmLinuxBoot,
} from "./linux-boot.ts";
/** A cloud-init NoCloud seed as an initramfs segment (for `boot.extraInitrd`). */
export { type NoCloudSeed, noCloudSeedInitrd, SEED_DIR } from "./linux-seed.ts";
/** The live-migration stream: source and target halves (policy lives in @kvt/migration). */
export {
  type MigrationCollectStats,
  type MigrationConnectOptions,
  type MigrationDowntimePhases,
  type MigrationRoundStats,
  MigrationSourceStream,
  type MigrationStreamTotals,
  type MigrationSwitchStats,
  type MigrationTargetStats,
  MigrationTargetStream,
  type MigrationTlsIdentity,
  type MigrationTlsInfo,
  type MigrationTlsPinned,
} from "./migration-stream.ts";
/** The test guest binary (a PVH ELF QEMU boots too) and the KVM API version. */
export { testGuestPath } from "./native.ts";
/** A KVM guest: create, start, pause, resume, stop, events, serial in/out, stats, state save/restore, dirty log. */
export { nativeVmm, Vm } from "./vm.ts";
/** The interface Vm and FakeVm share, and the factory apps are handed. */
export {
  type DirtyRegion,
  type MemoryRegionInfo,
  NO_DISK_STATS,
  NO_NET_STATS,
  type VmControl,
  type Vmm,
  type VmState,
  type VmStats,
} from "./vm-control.ts";
/** Disks of a Linux boot (`boot.disks`: virtio-blk, /dev/vda ...), their validation, and a block device's size. */
export {
  blockDeviceBytes,
  MAX_DISK_SERIAL_BYTES,
  MAX_VM_DISKS,
  parseVmDisks,
  type VmDisk,
  type VmDiskMigrate,
} from "./vm-disk.ts";
/** NICs of a Linux boot (`boot.nics`: virtio-net on a host tap, eth0 ...) and their validation. */
export { MAX_TAP_NAME_BYTES, MAX_VM_PCI_DEVICES, parseMac, parseVmNics, type VmNic } from "./vm-nic.ts";
/** Options of Vm.create and their validation. */
export {
  MAX_CMDLINE_BYTES,
  MAX_MEMORY_BYTES,
  type MemoryBacking,
  MIN_MEMORY_BYTES,
  type ParsedVmOptions,
  parseVmOptions,
  type VmKernel,
  type VmOptions,
} from "./vm-options.ts";
