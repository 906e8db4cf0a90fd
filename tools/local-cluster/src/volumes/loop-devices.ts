/**
 * Loop devices over files, through util-linux's losetup (root only): the block devices the local-block provisioner
 * hands out. Loop devices are global to the machine, so everything here is keyed by the backing file: a device is
 * ours only when its backing file is one of ours, and nothing else is ever detached.
 *
 *   attach(file)        -> the device already attached to it (not pending auto-clear), else `losetup --find --show`
 *   detach(file)        -> `losetup --detach` of every device attached to it (a device still open, e.g. by QEMU,
 *                          goes when it is last closed: the kernel's auto-clear)
 *   attachedUnder(dir)  -> the devices whose backing file lies inside dir (deleted files included)
 */
import { execFileSync } from "node:child_process";
import { realpathSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";

/** One attached loop device. */
export interface LoopDevice {
  /** The device node, e.g. /dev/loop3. */
  readonly device: string;
  /** The absolute backing file as the kernel records it (without losetup's " (deleted)"). */
  readonly file: string;
  /** The backing file was removed while attached. */
  readonly deleted: boolean;
  /** Detached by the kernel once the device is last closed (a detach while it was open). */
  readonly autoclear: boolean;
}

/** A losetup failure, with its stderr as the message. */
export class LoopDeviceError extends Error {
  override readonly name = "LoopDeviceError";
}

const DELETED = " (deleted)";

function losetup(args: readonly string[]): string {
  try {
    return execFileSync("losetup", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 30_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    const detail = (e.stderr ?? "").trim() || e.message;
    throw new LoopDeviceError(`losetup ${args.join(" ")}: ${detail}`, { cause: err });
  }
}

/** Parses `losetup --list --json --output NAME,BACK-FILE,AUTOCLEAR` (empty output: no devices). */
export function parseLoopList(text: string): LoopDevice[] {
  if (text.trim() === "") return [];
  const parsed = JSON.parse(text) as {
    loopdevices?: { name?: string; "back-file"?: string | null; autoclear?: boolean | string }[];
  };
  return (parsed.loopdevices ?? []).flatMap((d) => {
    const back = d["back-file"];
    if (!d.name || !back) return [];
    const deleted = back.endsWith(DELETED);
    return [
      {
        device: d.name,
        file: deleted ? back.slice(0, -DELETED.length) : back,
        deleted,
        autoclear: d.autoclear === true || d.autoclear === "1",
      },
    ];
  });
}

/** Every loop device of the machine with a backing file. */
export function listLoopDevices(): LoopDevice[] {
  return parseLoopList(losetup(["--list", "--json", "--output", "NAME,BACK-FILE,AUTOCLEAR"]));
}

/** The absolute path the kernel records for `file` (losetup canonicalizes it): its directory's real path. */
export function canonicalFile(file: string): string {
  const abs = resolve(file);
  return join(realpathSync(dirname(abs)), basename(abs));
}

/** The devices attached to `file` (which must exist). */
export function devicesOf(file: string): LoopDevice[] {
  const path = canonicalFile(file);
  return listLoopDevices().filter((d) => d.file === path && !d.deleted);
}

/**
 * The loop device of `file`: the one attached already (a restarted API server finds its own), else a new one. A
 * device pending auto-clear is left to go and a new one made.
 */
export function attach(file: string): string {
  const existing = devicesOf(file).find((d) => !d.autoclear);
  if (existing) return existing.device;
  return losetup(["--find", "--show", canonicalFile(file)]).trim();
}

/** Detaches every device attached to `file`; returns them. */
export function detach(file: string): string[] {
  const devices = devicesOf(file).map((d) => d.device);
  for (const device of devices) losetup(["--detach", device]);
  return devices;
}

/** The devices whose backing file lies inside `dir` (`dir` itself excluded), deleted files included. */
export function attachedUnder(dir: string): LoopDevice[] {
  let root: string;
  try {
    root = realpathSync(dir);
  } catch {
    return [];
  }
  return listLoopDevices().filter((d) => {
    const rel = relative(root, d.file);
    return rel !== "" && !rel.startsWith("..") && !rel.startsWith("/");
  });
}

/** Detaches one device by its node (for devices found by {@link attachedUnder}). */
export function detachDevice(device: string): void {
  losetup(["--detach", device]);
}
