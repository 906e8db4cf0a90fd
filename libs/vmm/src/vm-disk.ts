/**
 * Disks of a Linux boot (`boot.disks`): virtio-blk devices on the guest's PCI bus, disk i at 00:(i+1).0, which
 * Linux names /dev/vda, /dev/vdb, ... (native/src/vmm/machine_virtio.cc; the device in native/src/devices/virtio).
 * Validated here; the native constructor gets `[path, readOnly, serial, copy]` tuples that are already valid.
 *
 *   boot.disks[i] { path, readOnly?, serial?, migrate? } --parseVmDisks--> defaults filled --nativeDisks-->
 *   [path, readOnly, serial, migrate === "copy"] --> new NativeVm(..., linuxPlatform, disks)
 *
 * `migrate` says what a live migration does with the disk: "shared" (the default) = both sides open the same file
 * (an RWX volume) and nothing is copied; "copy" = a local disk (containerDisk overlay, emptyDisk, ephemeral): its
 * contents travel in the migration stream with dirty-block tracking, into the target's own file of the same path
 * option, which the target's launcher creates at the source's size before the migration (a fresh sparse file is
 * best: holes cost nothing). A target older than migration protocol 4 refuses such a migration.
 * `base` makes the disk copy-on-write (a containerDisk's overlay): `path` is then a private sparse file of the base's
 * size that holds the guest's writes in 64 KiB granules, and every granule not written yet reads from `base`, a raw
 * file opened read-only and never written (native/src/devices/virtio/blk_overlay.h). A live migration that copies
 * such a disk sends only the granules the overlay holds; the target's disk must be an overlay over the same base.
 *   guest: /dev/vd<a+i>, /sys/block/vd<a+i>/serial = serial, /dev/disk/by-id/virtio-<serial> (with udev)
 */
import { readFileSync, statSync } from "node:fs";

/** One virtio-blk disk. */
export interface VmDisk {
  /** A raw image file or a block device; its size (rounded down to 512-byte sectors) is the disk's capacity. */
  readonly path: string;
  /** Opened read-only and offered as read-only (VIRTIO_BLK_F_RO): the guest's writes fail. Default false. */
  readonly readOnly?: boolean;
  /** What the guest reads as the disk's serial (virtio-blk GET_ID): printable ASCII, at most 20 bytes. Default "". */
  readonly serial?: string;
  /** What a live migration does with the disk: "shared" (default: the target opens the same file) or "copy" (a
   *  local disk: its contents are copied to the target's file, with the blocks written meanwhile). */
  readonly migrate?: VmDiskMigrate;
  /**
   * A raw file or block device under a copy-on-write `path` (a regular file of the base's size, the disk writable);
   * "" or absent: none.
   */
  readonly base?: string;
}

/** How a live migration treats a disk: "shared" storage both sides open, or a local disk whose contents it copies. */
export type VmDiskMigrate = "shared" | "copy";

const DISK_MIGRATE_VALUES: readonly VmDiskMigrate[] = ["shared", "copy"];

/** Most disks one VM takes (the native machine's limit: PCI slots 1..16). */
export const MAX_VM_DISKS = 16;
/** Longest disk serial: virtio-blk's GET_ID answer is 20 bytes. */
export const MAX_DISK_SERIAL_BYTES = 20;

/** A disk as the native constructor takes it. */
export type NativeDisk = [path: string, readOnly: boolean, serial: string, copyOnMigrate: boolean, base: string];

const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/**
 * Validates `boot.disks` (TypeError for a wrong type, RangeError for a value out of range, Error when the path is
 * not a usable file) and returns them with the defaults filled in.
 */
export function parseVmDisks(disks: unknown, label = "boot.disks"): Required<VmDisk>[] {
  if (!Array.isArray(disks)) throw new TypeError(`${label} must be an array`);
  if (disks.length > MAX_VM_DISKS) {
    throw new RangeError(`${label} must have at most ${MAX_VM_DISKS} disks, got ${disks.length}`);
  }
  return disks.map((disk: unknown, i): Required<VmDisk> => {
    const name = `${label}[${i}]`;
    if (typeof disk !== "object" || disk === null) throw new TypeError(`${name} must be an object`);
    const {
      path,
      readOnly = false,
      serial = "",
      migrate = "shared",
      base = "",
    } = disk as Partial<Record<keyof VmDisk, unknown>>;
    if (typeof path !== "string" || path === "") throw new TypeError(`${name}.path must be a non-empty string`);
    if (typeof readOnly !== "boolean") throw new TypeError(`${name}.readOnly must be a boolean`);
    if (typeof serial !== "string") throw new TypeError(`${name}.serial must be a string`);
    if (typeof migrate !== "string") throw new TypeError(`${name}.migrate must be a string`);
    if (!DISK_MIGRATE_VALUES.includes(migrate as VmDiskMigrate)) {
      throw new RangeError(`${name}.migrate must be "shared" or "copy", got "${migrate}"`);
    }
    if (!PRINTABLE_ASCII.test(serial)) throw new RangeError(`${name}.serial must be printable ASCII`);
    if (serial.length > MAX_DISK_SERIAL_BYTES) {
      throw new RangeError(`${name}.serial must be at most ${MAX_DISK_SERIAL_BYTES} bytes, got ${serial.length}`);
    }
    let stats: ReturnType<typeof statSync>;
    try {
      stats = statSync(path);
    } catch (err) {
      throw new Error(`Cannot use ${name}.path "${path}": ${(err as NodeJS.ErrnoException).code ?? "stat failed"}`, {
        cause: err,
      });
    }
    if (!stats.isFile() && !stats.isBlockDevice()) {
      throw new Error(`Cannot use ${name}.path "${path}": not a regular file or block device`);
    }
    if (typeof base !== "string") throw new TypeError(`${name}.base must be a string`);
    if (base !== "") checkBase(name, path, base, readOnly);
    return { path, readOnly, serial, migrate: migrate as VmDiskMigrate, base };
  });
}

/**
 * A copy-on-write disk's base: a regular file or a block device (an ephemeral volume over a Block claim) of the
 * overlay's size, under a writable regular-file overlay.
 */
function checkBase(name: string, path: string, base: string, readOnly: boolean): void {
  if (readOnly) throw new RangeError(`${name}.base needs a writable disk: a read-only disk reads its image directly`);
  let stats: ReturnType<typeof statSync>;
  try {
    stats = statSync(base);
  } catch (err) {
    throw new Error(`Cannot use ${name}.base "${base}": ${(err as NodeJS.ErrnoException).code ?? "stat failed"}`, {
      cause: err,
    });
  }
  const overlay = statSync(path);
  if (!(stats.isFile() || stats.isBlockDevice()) || !overlay.isFile()) {
    throw new Error(
      `Cannot use ${name}.base "${base}": the base must be a regular file or a block device, the overlay a regular file`,
    );
  }
  const size = stats.isBlockDevice() ? blockDeviceBytes(base) : stats.size;
  if (size !== overlay.size) {
    throw new Error(`Cannot use ${name}.base "${base}": ${size} bytes, the overlay has ${overlay.size}`);
  }
}

/**
 * The size in bytes of block device `path`: the kernel's `/sys/dev/block/<major>:<minor>/size`, in 512-byte sectors
 * whatever the device's logical block size (a device's st_size is 0; the VMM asks BLKGETSIZE64). Throws an Error
 * naming the path when it is not a block device.
 */
export function blockDeviceBytes(path: string): number {
  const st = statSync(path, { bigint: true });
  if (!st.isBlockDevice()) throw new Error(`${path} is not a block device`);
  // glibc's gnu_dev_major / gnu_dev_minor.
  const major = ((st.rdev >> 8n) & 0xfffn) | ((st.rdev >> 32n) & ~0xfffn);
  const minor = (st.rdev & 0xffn) | ((st.rdev >> 12n) & ~0xffn);
  return Number(readFileSync(`/sys/dev/block/${major}:${minor}/size`, "utf8").trim()) * 512;
}

/** Parsed disks as the native constructor takes them. */
export function nativeDisks(disks: readonly VmDisk[]): NativeDisk[] {
  return disks.map((d) => [d.path, d.readOnly ?? false, d.serial ?? "", d.migrate === "copy", d.base ?? ""]);
}
