/**
 * The qemu-system-x86_64 command line for a MachineSpec (pure). Software emulation (`-accel tcg`; the launcher's
 * only use), or KVM with the host's CPU model for the benches that compare our VMM with QEMU on the same KVM; direct
 * kernel boot, serial console on stdio, QMP on a unix socket, the VMI's disks (cloud-init's ISO among them) as
 * virtio-blk-pci devices in spec order, so the guest names them as it does on the native VMM.
 *
 * Disk cache modes as libvirt maps KubeVirt's: none = O_DIRECT with the guest's write cache (flushes reach the
 * disk), writethrough = host page cache, every write flushed, writeback = host page cache; unset = writethrough
 * (KubeVirt picks none where the file system takes O_DIRECT, else writethrough: the data is equally safe). io=native
 * needs O_DIRECT, so it applies with cache none only.
 *
 * Machine type: `pc` by default. Measured here (TCG, 1 vCPU, 256 MiB, demo image, to the boot marker, one run each
 * on a loaded 2-core host): `pc` + SeaBIOS 7.5 s, `pc` + qboot 13.7 s, `microvm` 6.0 s. But microvm has no
 * i8042 (no Ctrl-Alt-Del), no HPET or ACPI PM timer, and under heavier host load its kernel stalled calibrating the
 * TSC and never reached init in 60 s; `pc` boots reliably, so it is the default and `microvm` only an option.
 * Graceful shutdown on `pc`: ACPI power button (the demo image's acpid powers off; measured 2.6 s) and
 * Ctrl-Alt-Del through the i8042 (the demo image's init powers off).
 *
 * TCG's translation cache: QEMU's default reserves up to 1 GiB and keeps what it touches. For a small guest
 * ({@link SMALL_GUEST_MIB}) it is capped at 32 MiB: the demo VM (128 MiB) then holds 206 instead of 228 MiB of RSS
 * with the same boot time (5.6-6.1 s to the boot marker both ways, two runs side by side). Larger guests (a
 * distribution with systemd) translate more code, so they keep QEMU's default rather than risk cache flushes.
 */
import type { MachineDisk, MachineSpec } from "../machine.ts";

/** Guests up to this much memory (MiB) get a {@link SMALL_GUEST_TB_MIB} MiB translation cache. */
export const SMALL_GUEST_MIB = 256;
const SMALL_GUEST_TB_MIB = 32;

/** `-accel` for a guest of `memMiB`: TCG, with a small translation cache for a small guest. */
function tcgAccel(memMiB: number): string {
  return memMiB <= SMALL_GUEST_MIB ? `tcg,tb-size=${SMALL_GUEST_TB_MIB}` : "tcg";
}

/** `-accel` (and `-cpu host` on KVM) for a guest of `memMiB`. */
function accelArgs(accel: QemuAccel | undefined, memMiB: number): string[] {
  return accel === "kvm" ? ["-accel", "kvm", "-cpu", "host"] : ["-accel", tcgAccel(memMiB)];
}

/** QEMU machine types this backend knows how to wire. */
export type QemuMachineType = "pc" | "microvm";

/** Where the backend's files live for one QEMU process. */
export interface QemuPaths {
  /** QMP unix socket. */
  readonly qmpSocket: string;
}

/** Extra knobs for {@link qemuArgs}. */
export interface QemuArgOptions {
  readonly machineType: QemuMachineType;
  /** Start as a migration target (`-incoming defer`); the guest runs once the incoming stream completes. */
  readonly incoming: boolean;
  /** Default `tcg` (software emulation); `kvm` runs the guest on this host's KVM with `-cpu host` (benches). */
  readonly accel?: QemuAccel;
  /** This host's /dev/vhost-net opens: a NIC whose `vhost` is "auto" (the default) gets `vhost=on`. */
  readonly vhostNet?: boolean;
}

/** How QEMU runs the guest's code. */
export type QemuAccel = "tcg" | "kvm";

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** The kernel command line: the image's, plus `console=ttyS0` when it names no console. */
export function kernelCmdline(cmdline: string): string {
  const trimmed = cmdline.trim();
  return /(^|\s)console=/.test(trimmed) ? trimmed : `console=ttyS0 ${trimmed}`.trim();
}

/** Builds the argv (without the binary). Throws on a spec QEMU cannot express (bad UUID, sizes). */
export function qemuArgs(spec: MachineSpec, paths: QemuPaths, options: QemuArgOptions): string[] {
  if (!Number.isInteger(spec.vcpus) || spec.vcpus < 1 || spec.vcpus > 255)
    throw new Error(`invalid vCPU count ${spec.vcpus}`);
  const memMiB = Math.ceil(spec.memoryBytes / 1048576);
  if (!Number.isFinite(memMiB) || memMiB < 16)
    throw new Error(`guest memory ${spec.memoryBytes} bytes is below 16 MiB`);
  if (spec.firmwareUuid !== undefined && !UUID.test(spec.firmwareUuid))
    throw new Error(`invalid firmware UUID "${spec.firmwareUuid}"`);
  const args = [
    ...accelArgs(options.accel, memMiB),
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-m",
    `${memMiB}M`,
    "-smp",
    String(spec.vcpus),
    "-chardev",
    "stdio,id=console,signal=off",
    "-serial",
    "chardev:console",
    "-qmp",
    `unix:${paths.qmpSocket},server=on,wait=off`,
    "-kernel",
    spec.boot.kernelPath,
    "-append",
    kernelCmdline(spec.boot.cmdline),
  ];
  if (options.machineType === "microvm") args.unshift("-M", "microvm");
  else args.unshift("-M", "pc");
  if (spec.boot.initrdPath) args.push("-initrd", spec.boot.initrdPath);
  if (spec.firmwareUuid) args.push("-uuid", spec.firmwareUuid);
  if ((spec.disks ?? []).length > 0 && options.machineType === "microvm")
    throw new Error("disks need the pc machine type (virtio-blk-pci)");
  const disks = spec.disks ?? [];
  if (disks.some((d) => d.bus === "sata")) args.push("-device", "ahci,id=sata0");
  if (disks.some((d) => d.bus === "scsi")) args.push("-device", "virtio-scsi-pci,id=scsi0");
  args.push(...disks.flatMap((disk, i) => diskArgs(disk, i, disks.slice(0, i))));
  if ((spec.nics ?? []).length > 0 && options.machineType === "microvm")
    throw new Error("NICs need the pc machine type (virtio-net-pci)");
  // virtio-net on the tap the launcher wired in the pod (network/masquerade.ts); QEMU only opens it.
  (spec.nics ?? []).forEach((nic, i) => {
    const vhost = nic.vhost === "on" || (nic.vhost !== "off" && options.vhostNet === true);
    const netdev = `tap,id=net${i},ifname=${optionValue(nic.tap)},script=no,downscript=no`;
    args.push("-netdev", `${netdev},vhost=${vhost ? "on" : "off"}`);
    const device = !nic.model || nic.model === "virtio" ? "virtio-net-pci" : nic.model;
    args.push("-device", `${device},netdev=net${i},mac=${nic.mac}`);
  });
  // A source starts paused (QMP connects, then `cont`); a target runs by itself once the incoming stream completes.
  if (options.incoming) args.push("-incoming", "defer");
  else args.push("-S");
  return args;
}

/** A value inside QEMU's key=value option syntax: commas doubled. */
function optionValue(value: string): string {
  return value.replaceAll(",", ",,");
}

/**
 * Where the drive's bytes are: a file (QEMU's file protocol), or a block device through the host_device protocol
 * (libvirt's `type='block'` source: block-device ioctls, the device's own size).
 */
function fileOption(disk: MachineDisk): string {
  return disk.block
    ? `file.driver=host_device,file.filename=${optionValue(disk.path)}`
    : `file=${optionValue(disk.path)}`;
}

/** The -drive and -device arguments of disk `i` (`before`: the disks ahead of it). */
export function diskArgs(disk: MachineDisk, i: number, before: readonly MachineDisk[] = []): string[] {
  const cache = disk.cache ?? "writethrough";
  const direct = cache === "none";
  const aio = direct && disk.io === "native" ? "native" : "threads";
  const bus = disk.bus ?? "virtio";
  // QEMU refuses a read-only ide-hd, and KubeVirt refuses `readonly` on a sata hard disk at admission: a sata disk the
  // launcher made read-only itself (a cloud-init or config ISO, rebuilt at every start) is left writable there.
  const ro = disk.cdrom || (disk.readOnly && bus !== "sata") ? ",read-only=on" : "";
  // sata: one AHCI port per disk; scsi: one LUN per disk on the virtio-scsi controller.
  const port = before.filter((d) => (d.bus ?? "virtio") === bus).length;
  const device =
    bus === "sata"
      ? [disk.cdrom ? "ide-cd" : "ide-hd", `bus=sata0.${port}`]
      : bus === "scsi"
        ? [disk.cdrom ? "scsi-cd" : "scsi-hd", "bus=scsi0.0", `lun=${port}`]
        : ["virtio-blk-pci"];
  device.push(
    `drive=disk${i}`,
    `id=ua-${disk.name}`,
    `write-cache=${cache === "writethrough" ? "off" : "on"}`,
    ...(disk.serial ? [`serial=${optionValue(disk.serial.slice(0, 20))}`] : []),
    ...(disk.bootOrder !== undefined ? [`bootindex=${disk.bootOrder}`] : []),
  );
  return [
    // One -drive (a named block backend, "disk<i>") rather than -blockdev nodes: QEMU's block migration, which copies
    // local disks during a live migration (qemu-migration.ts), matches disks by that name on the target. A qcow2
    // overlay opens its backing image (the containerDisk) from its header, read-only.
    "-drive",
    `if=none,id=disk${i},${fileOption(disk)},format=${disk.format ?? "raw"},cache.direct=${direct ? "on" : "off"},aio=${aio}${ro}`,
    "-device",
    device.join(","),
  ];
}
