/**
 * Direct Linux boot (the x86 64-bit boot protocol, as Firecracker does it): `Vm.create({ boot: { kind: "linux", ... } })`
 * creates the machine with the PC platform a stock kernel expects (in-kernel PIC/IOAPIC/PIT, the UART on IRQ 4,
 * ACPI power-off, the i8042 reset line) and loads a bzImage plus an initramfs (native/src/vmm/machine_linux.cc).
 * The kernel may also be an uncompressed ELF vmlinux (what Firecracker boots): its segments are placed at their
 * physical addresses and the kernel proper is entered directly, which skips the bzImage's self-decompression.
 *
 *   kernelPath (bzImage) --+
 *   initrdPath (cpio[.gz]) +--> concatenated initramfs segments, each 4-byte aligned --> loadLinux(vm, ...)
 *   extraInitrd[] (cpio) --+    (the kernel unpacks them in order; later files win)
 *   cmdline ---------------+--> console=ttyS0 added when missing
 *   disks[] ------------------> virtio-blk at PCI 00:01.0, 00:02.0, ... (/dev/vda, /dev/vdb, ...; vm-disk.ts)
 *   nics[] -------------------> virtio-net after the disks, each on a host tap (eth0, eth1, ...; vm-nic.ts)
 *
 * Guest power-off ends the VM with a "shutdown" event { reason: "guest-exit", code: 0 }; a reboot gives
 * { reason: "reset" } (the caller decides whether to boot again: see the launcher's native machine).
 */
import { readFileSync } from "node:fs";
import { type NativeEventCallback, type NativeVm, nativeAddon } from "./native.ts";
import { type NativeDisk, nativeDisks, parseVmDisks, type VmDisk } from "./vm-disk.ts";
import { type NativeNic, nativeNics, parseVmNics, type VmNic } from "./vm-nic.ts";

/** What to boot directly: a bzImage, its initramfs and command line. */
export interface VmLinuxBoot {
  readonly kind: "linux";
  /** Path of a bzImage with the 64-bit entry (any x86-64 distribution kernel), or of its uncompressed ELF vmlinux. */
  readonly kernelPath: string;
  /** Path of the initramfs (newc cpio, compressed or not). */
  readonly initrdPath?: string;
  /** More initramfs segments appended after initrdPath (e.g. a NoCloud seed as a cpio archive). */
  readonly extraInitrd?: readonly Uint8Array[];
  /** Kernel command line; `console=ttyS0` is appended when it names no console. */
  readonly cmdline?: string;
  /** The SMBIOS system UUID the guest sees (/sys/class/dmi/id/product_uuid): KubeVirt's spec.domain.firmware.uuid. */
  readonly uuid?: string;
  /** virtio-blk disks, at most 16 (vm-disk.ts): the guest sees disk i as /dev/vd<a+i>. */
  readonly disks?: readonly VmDisk[];
  /** virtio-net NICs on host taps (vm-nic.ts), after the disks; disks + NICs at most 16. */
  readonly nics?: readonly VmNic[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Longest command line accepted here (Linux's COMMAND_LINE_SIZE is 2048 with the NUL). */
export const MAX_LINUX_CMDLINE_BYTES = 2047;

/** Validates a Linux boot option (TypeError/RangeError); returns it with the command line completed. */
export function parseLinuxBoot(boot: VmLinuxBoot): VmLinuxBoot {
  if (typeof boot !== "object" || boot === null || boot.kind !== "linux") {
    throw new TypeError('boot must be { kind: "linux", kernelPath, ... }');
  }
  if (typeof boot.kernelPath !== "string" || boot.kernelPath === "") {
    throw new TypeError("boot.kernelPath must be a path");
  }
  if (boot.initrdPath !== undefined && typeof boot.initrdPath !== "string") {
    throw new TypeError("boot.initrdPath must be a string");
  }
  if (boot.extraInitrd !== undefined) {
    if (!Array.isArray(boot.extraInitrd) || !boot.extraInitrd.every((s) => s instanceof Uint8Array)) {
      throw new TypeError("boot.extraInitrd must be an array of Uint8Array");
    }
  }
  if (boot.uuid !== undefined && (typeof boot.uuid !== "string" || !UUID.test(boot.uuid))) {
    throw new TypeError("boot.uuid must be a UUID like 5d307ca9-b3ef-428c-8861-06e72d69f223");
  }
  const cmdline = linuxCmdline(boot.cmdline ?? "");
  if (new TextEncoder().encode(cmdline).length > MAX_LINUX_CMDLINE_BYTES) {
    throw new RangeError(`boot.cmdline must be at most ${MAX_LINUX_CMDLINE_BYTES} bytes`);
  }
  const disks = boot.disks === undefined ? undefined : parseVmDisks(boot.disks);
  const nics = boot.nics === undefined ? undefined : parseVmNics(boot.nics, disks?.length ?? 0);
  return { ...boot, cmdline, ...(disks ? { disks } : {}), ...(nics ? { nics } : {}) };
}

/** The command line the guest gets: the given one plus `console=ttyS0` when it has no console= argument. */
export function linuxCmdline(cmdline: string): string {
  const trimmed = cmdline.trim();
  if (/(^|\s)console=/.test(trimmed)) return trimmed;
  return trimmed === "" ? "console=ttyS0" : `${trimmed} console=ttyS0`;
}

/** Concatenates initramfs segments, padding each to a 4-byte boundary as the kernel's unpacker expects. */
export function joinInitrd(segments: readonly Uint8Array[]): Uint8Array {
  const padded = segments.map((s) => s.byteLength + ((4 - (s.byteLength % 4)) % 4));
  const out = new Uint8Array(padded.reduce((a, b) => a + b, 0));
  let at = 0;
  segments.forEach((s, i) => {
    out.set(s, at);
    at += padded[i] ?? 0;
  });
  return out;
}

type LinuxNativeVmCtor = new (
  memoryBytes: number,
  vcpuCount: number,
  memfd: boolean,
  onEvent: NativeEventCallback,
  linuxPlatform: boolean,
  disks?: NativeDisk[],
  nics?: NativeNic[],
) => NativeVm;

/** The virtio devices of a Linux machine (both parsed): disks first on the PCI bus, then NICs. */
export interface LinuxDevices {
  readonly disks?: readonly VmDisk[] | undefined;
  readonly nics?: readonly VmNic[] | undefined;
}

/** Creates the native machine with the Linux platform (PIC/IOAPIC/PIT, UART IRQ, ACPI) and its disks and NICs. */
export function createLinuxNativeVm(
  memoryBytes: number,
  vcpus: number,
  memfd: boolean,
  onEvent: NativeEventCallback,
  devices: LinuxDevices = {},
): NativeVm {
  const Ctor = nativeAddon().NativeVm as LinuxNativeVmCtor;
  const disks = devices.disks ?? [];
  const nics = devices.nics ?? [];
  if (disks.length === 0 && nics.length === 0) return new Ctor(memoryBytes, vcpus, memfd, onEvent, true);
  if (nics.length === 0) return new Ctor(memoryBytes, vcpus, memfd, onEvent, true, nativeDisks(disks));
  return new Ctor(memoryBytes, vcpus, memfd, onEvent, true, nativeDisks(disks), nativeNics(nics));
}

/** Reads the kernel and initramfs segments and loads them into a machine from {@link createLinuxNativeVm}. */
export function loadLinuxBoot(native: NativeVm, boot: VmLinuxBoot): void {
  const loadLinux = nativeAddon().loadLinux as (
    vm: NativeVm,
    kernel: Uint8Array,
    initrd: Uint8Array,
    cmdline: string,
    uuid?: string,
  ) => void;
  const kernel = readFileSync(boot.kernelPath);
  const segments: Uint8Array[] = [];
  if (boot.initrdPath) segments.push(readFileSync(boot.initrdPath));
  segments.push(...(boot.extraInitrd ?? []));
  const cmdline = boot.cmdline ?? linuxCmdline("");
  if (boot.uuid) loadLinux(native, kernel, joinInitrd(segments), cmdline, boot.uuid);
  else loadLinux(native, kernel, joinInitrd(segments), cmdline);
}

/** Ctrl-Alt-Del on the PS/2 keyboard of a machine from {@link createLinuxNativeVm}. */
export function sendCtrlAltDelTo(native: NativeVm): void {
  const send = nativeAddon().sendCtrlAltDel as (vm: NativeVm) => void;
  send(native);
}
