/**
 * A containerDisk's write layer, made once the backend is chosen (docs/decisions/0011-containerdisk-overlay.md). The
 * image (shared by every VMI of the node, under /disk/ in the image) is never written; each VMI writes to its own
 * copy-on-write layer in the pod's ephemeral-disks directory, made anew at every start:
 *
 *   backend  image   layer at disk.path                                  the machine opens
 *   native   raw     a sparse file of the image's size (our overlay:     path + base = image (virtio-blk reads
 *                    64 KiB granules, allocation map in the VMM)          unwritten granules from the image)
 *   native   qcow2   a private sparse raw import (docs/decisions/0009):   path (raw)
 *                    our VMM reads raw bases only
 *   qemu     any     a qcow2 overlay, backing = the image (qcow2-overlay)  path as qcow2 (QEMU opens the backing
 *                                                                        chain read-only)
 *   any, a read-only disk: no layer; the image itself, opened read-only.
 *
 * The base may be a raw block device (an ephemeral volume over a Block claim): it is raw, of the device's size, and
 * QEMU opens it (read-only, as any backing image) with host_device.
 *
 * A migration target (disk.incoming) makes the same layer empty; for the native qcow2 import an empty sparse file of
 * the image's size, which the source fills. Corrupt or truncated images are refused with a DiskImageError.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, rmSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { blockDeviceBytes } from "@kvt/vmm";
import type { MachineDisk } from "../machine/machine.ts";
import { isBlockDevice } from "./block-device.ts";
import { checkDiskImage, importDiskImage } from "./disk-image.ts";
import { writeQcow2Overlay } from "./qcow2-overlay.ts";

/** Which backend the layer is for. */
export type LayerBackend = "native" | "qemu";

/** Makes the write layer of every containerDisk in `disks` for `backend`; the disks as the backend opens them. */
export async function makeWriteLayers(disks: readonly MachineDisk[], backend: LayerBackend): Promise<MachineDisk[]> {
  const out: MachineDisk[] = [];
  for (const disk of disks) out.push(disk.copyFrom ? await makeWriteLayer(disk, backend) : disk);
  return out;
}

/** The write layer of one containerDisk (`disk.copyFrom` = its image). Throws DiskImageError for a bad image. */
export async function makeWriteLayer(disk: MachineDisk, backend: LayerBackend): Promise<MachineDisk> {
  const image = resolve(disk.copyFrom ?? "");
  // Every header of the chain, its depth and loops, and every backing file inside the image's directory, before a
  // guest or QEMU reads a byte (a chain naming a host file outside the image is refused).
  const device = isBlockDevice(image);
  const info = device
    ? { format: "raw" as const, virtualSize: blockDeviceBytes(image) }
    : await checkDiskImage(image, { allowedDir: dirname(image) });
  const { copyFrom: _image, ...rest } = disk;
  if (disk.readOnly) {
    if (backend === "qemu" || info.format === "raw")
      return { ...rest, path: image, format: info.format, ...(device ? { block: true } : {}) };
  }
  mkdirSync(dirname(disk.path), { recursive: true });
  rmSync(disk.path, { force: true }); // a layer left by an earlier start: never reused
  if (backend === "qemu") {
    writeQcow2Overlay(disk.path, image, info.format, info.virtualSize);
    return { ...rest, format: "qcow2" };
  }
  if (info.format === "raw") {
    sparseFile(disk.path, info.virtualSize);
    return { ...rest, base: image };
  }
  if (disk.incoming) sparseFile(disk.path, info.virtualSize);
  else await importDiskImage(image, disk.path, { allowedDir: dirname(image) });
  return rest;
}

function sparseFile(path: string, bytes: number): void {
  const fd = openSync(path, "wx");
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}
