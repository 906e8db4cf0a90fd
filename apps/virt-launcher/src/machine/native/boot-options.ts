/**
 * What the native VMM boots for a MachineSpec: a 64-bit ELF (PVH, the test guest) is loaded as is; anything else
 * is booted as Linux (bzImage + initramfs, the x86 64-bit boot protocol) with the VMI's disks, cloud-init's ISO
 * among them, as virtio disks in spec order.
 *
 *   kernel starts with "\x7fELF" --> { kernel: { path, cmdline } }                    (no PCI bus: no disks)
 *   otherwise                    --> { boot: { kind: "linux", kernelPath, initrdPath, cmdline, disks } }
 *
 * A Linux guest whose image also ships its kernel uncompressed (BootSource.uncompressedKernelPath, an ELF vmlinux)
 * boots from that: the VMM loads its segments and enters the kernel proper, as Firecracker does, so the guest skips
 * its self-decompression (the largest part of a boot: 5 of 8 s in the nested lane). The bzImage stays the image's
 * `kernel` for QEMU.
 */
import { closeSync, openSync, readSync } from "node:fs";
import type { VmOptions } from "@kvt/vmm";
import { copiedOnMigration, isCloudInitDisk } from "../../vmi/disks.ts";
import { type MachineSpec, MachineUnsupportedError } from "../machine.ts";

/** True when the file at `path` is an ELF image (the test guest), false for a bzImage or anything else. */
export function isElfKernel(path: string): boolean {
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(4);
    readSync(fd, head, 0, 4, 0);
    return head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    closeSync(fd);
  }
}

/** True when `spec` boots as Linux on the native VMM (reset = reboot, power-off and Ctrl-Alt-Del apply). */
export function isLinuxBoot(spec: MachineSpec): boolean {
  return spec.boot.initrdPath !== undefined || !isElfKernel(spec.boot.kernelPath);
}

/** The Vm.create options for `spec`. */
export function nativeBootOptions(spec: MachineSpec): VmOptions {
  const base = { memoryBytes: spec.memoryBytes, vcpus: spec.vcpus };
  const all = spec.disks ?? [];
  if (!isLinuxBoot(spec)) {
    // The PVH test guest has no PCI bus to put a disk on: it reads no cloud-init, and a data disk is refused.
    const data = all.filter((d) => !isCloudInitDisk(d));
    if (data.length > 0)
      throw new MachineUnsupportedError(
        `this guest image boots without a PCI bus: it takes no disks (${data.map((d) => d.name).join(", ")})`,
      );
    return { ...base, kernel: { path: spec.boot.kernelPath, cmdline: spec.boot.cmdline } };
  }
  const disks = all;
  return {
    ...base,
    boot: {
      kind: "linux",
      // The kernel choice for the native VMM: the image's uncompressed sibling (ELF vmlinux, set by machine-spec.ts
      // only when the VMI boots the image's own kernel) over the bzImage, which then skips self-decompression.
      kernelPath: spec.boot.uncompressedKernelPath ?? spec.boot.kernelPath,
      ...(spec.boot.initrdPath ? { initrdPath: spec.boot.initrdPath } : {}),
      cmdline: spec.boot.cmdline,
      // virtio-blk disks in spec order (PCI 00:01.0, 00:02.0, ...: vda, vdb, ...); the serial is GET_ID's 20 bytes.
      ...(disks.length > 0
        ? {
            disks: disks.map((d) => ({
              path: d.path,
              readOnly: d.readOnly,
              serial: (d.serial ?? "").slice(0, 20),
              // A local writable disk goes to the target in the migration stream; a shared one is opened there.
              migrate: copiedOnMigration(d) ? ("copy" as const) : ("shared" as const),
              // A containerDisk's copy-on-write overlay reads unwritten blocks from its image (container-disk-layer.ts).
              ...(d.base ? { base: d.base } : {}),
            })),
          }
        : {}),
      // virtio-net NICs after the disks, each on the tap the launcher wired in the pod (network/masquerade.ts).
      ...(spec.nics?.length
        ? { nics: spec.nics.map((n) => ({ tap: n.tap, mac: n.mac, vhost: n.vhost ?? "auto" })) }
        : {}),
      // The SMBIOS system UUID (KubeVirt's firmware.uuid), as /sys/class/dmi/id/product_uuid shows it.
      ...(spec.firmwareUuid ? { uuid: spec.firmwareUuid } : {}),
    },
  };
}
