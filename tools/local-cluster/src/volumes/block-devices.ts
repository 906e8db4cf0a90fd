/**
 * The host side of a local-block volume (local-block.ts has the layout): a sparse file, a loop device over it and the
 * stable link to that device. Shared by the embedded API server's provisioner (local-block-provisioner.ts) and the
 * real-Kubernetes lane's host provisioner (tools/kube). Needs root (losetup).
 *
 *   makeBlockDevice(link, bytes)  -> <link>.img sized to bytes (kept if it exists: a retry reuses it), its loop device
 *                                    (the one attached already, else a new one), link -> device; returns the device
 *   removeBlockDevice(link)       -> detaches every device over <link>.img, removes the link and the file
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, readlinkSync, rmSync, symlinkSync } from "node:fs";
import { dirname } from "node:path";
import { backingFileOf } from "./local-block.ts";
import { attach, detach } from "./loop-devices.ts";

/** Makes (or finds again) the device behind `link`, `bytes` long; returns the loop device node. */
export function makeBlockDevice(link: string, bytes: bigint): string {
  const file = backingFileOf(link);
  mkdirSync(dirname(link), { recursive: true, mode: 0o700 });
  const fd = openSync(file, "a", 0o600); // kept if it exists: a retry after a failed PV create reuses it
  try {
    ftruncateSync(fd, Number(bytes));
  } finally {
    closeSync(fd);
  }
  const device = attach(file);
  linkDevice(link, device);
  return device;
}

/** Detaches the devices over `link`'s file, removes the link and the file; returns the devices detached. */
export function removeBlockDevice(link: string): string[] {
  const file = backingFileOf(link);
  const devices = safeDetach(file);
  rmSync(link, { force: true });
  rmSync(file, { force: true });
  return devices;
}

/** Points `link` at `device` (replacing a link to an older device). */
export function linkDevice(link: string, device: string): void {
  let current: string | undefined;
  try {
    current = readlinkSync(link);
  } catch {
    current = undefined;
  }
  if (current === device) return;
  rmSync(link, { force: true });
  symlinkSync(device, link);
}

/** Detaches the devices of `file`; none attached (or no file) is not an error. */
function safeDetach(file: string): string[] {
  try {
    return detach(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}
