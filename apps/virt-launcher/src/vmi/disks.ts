/**
 * The VMI's disks as files on this node (pure planning in {@link planDisks}; file creation in {@link prepareDisks}).
 * Where each volume lives follows KubeVirt's launcher pod (virt-controller's pod-template.ts mounts them):
 *
 *   volume                  file                                                         created when missing
 *   persistentVolumeClaim   <VMI_DISKS_DIR>/<volume>/disk.img                            yes: claim size less fs overhead
 *     volumeMode Block      the raw device at /dev/<volume> (the pod's volumeDevice;     never: the device is the disk
 *                           KubeVirt's isBlockDeviceVolume: a block device there wins)
 *   hostDisk                <VMI_DISKS_DIR>/<volume>/<basename of path>                  with type DiskOrCreate
 *   emptyDisk               <EPHEMERAL_DISKS_DIR>/empty-disks/<volume>.img                always new, sparse
 *   ephemeral               the claim's disk.img (mounted read-only) under a copy-on-write layer at
 *                           <EPHEMERAL_DISKS_DIR>/ephemeral-volumes/<volume>.img          always: the claim stays unwritten
 *   containerDisk           the image's disk (image.json `disk`; raw or qcow2) under a copy-on-write layer at
 *                           <EPHEMERAL_DISKS_DIR>/container-disks/<volume>.img           always: the image stays unwritten
 *                           (volumes/container-disk-layer.ts, made for the chosen backend)
 *   cloudInitNoCloud,       an ISO 9660 image the launcher writes (volumes/, labels       always (the same bytes on a
 *   cloudInitConfigDrive    cidata / config-2), <work dir>/cloud-init/<volume>.iso       migration target), read-only
 *   configMap, secret,      an ISO 9660 image of the files the kubelet mounted at        always, read-only
 *   downwardAPI,            <CONFIG_MAP|SECRET|DOWNWARD_API_SOURCE_DIR>/<volume> or
 *   serviceAccount          SERVICE_ACCOUNT_SOURCE_DIR (one file per key, label volumeLabel
 *                           or cfgdata), <work dir>/config-disks/<volume>.iso
 *
 * An ephemeral volume's claim may be a Block claim too: its device is then the layer's base.
 *
 * Mount paths resolve through `KVT_VOLUME_MOUNTS` (the local process-kubelet's table of mountPath -> host path, since
 * its containers see the host's filesystem); on a real node the paths are used as they are. Disks keep spec order;
 * virtio disks run on both backends, sata and scsi disks (and CD-ROMs, sata by default) on QEMU (backend-choice.ts
 * sends such a VMI there); usb is refused with the reason.
 */
import {
  closeSync,
  existsSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import {
  blockDevicePath,
  CONFIG_MAP_SOURCE_DIR,
  DEFAULT_FILESYSTEM_OVERHEAD,
  DOWNWARD_API_SOURCE_DIR,
  diskBus,
  EPHEMERAL_DISKS_DIR,
  type PersistentVolumeClaimInfo,
  PVC_DISK_IMAGE,
  SECRET_SOURCE_DIR,
  SERVICE_ACCOUNT_SOURCE_DIR,
  tryParseQuantity,
  type VirtualMachineInstance,
  VMI_DISKS_DIR,
  type Volume,
  volumeStatuses,
} from "@kvt/api";
import type { MachineDisk } from "../machine/machine.ts";
import { isBlockDevice } from "../volumes/block-device.ts";
import { buildConfigDriveDisk, buildNoCloudDisk } from "../volumes/cloud-init-disks.ts";
import {
  buildConfigMapDisk,
  buildDownwardApiDisk,
  buildSecretDisk,
  buildServiceAccountDisk,
} from "../volumes/config-disks.ts";

// The disk-image reader (zlib, worker threads) is loaded only for a VMI with a containerDisk image to import: a
// launcher without one stays lean (tools/local-cluster launcher-image.test.ts holds its start-up modules to that).
type DiskImageModule = typeof import("../volumes/disk-image.ts");
let diskImage: Promise<DiskImageModule> | undefined;
function loadDiskImage(): Promise<DiskImageModule> {
  diskImage ??= import("../volumes/disk-image.ts");
  return diskImage;
}

import type { ImageResolver } from "./image-store.ts";

/** One entry of `KVT_VOLUME_MOUNTS`. */
export interface VolumeMount {
  readonly mountPath: string;
  readonly hostPath: string;
  readonly readOnly?: boolean;
}

/** A problem with one disk: the field and what is wrong (the spec's SpecCause shape). */
export interface DiskCause {
  readonly field: string;
  readonly message: string;
}

/** Reads `KVT_VOLUME_MOUNTS` (absent: none). Throws a TypeError naming the variable when it is malformed. */
export function parseVolumeMounts(value: string | undefined): VolumeMount[] {
  if (value === undefined || value === "") return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new TypeError("KVT_VOLUME_MOUNTS is not JSON");
  }
  if (!Array.isArray(parsed)) throw new TypeError("KVT_VOLUME_MOUNTS must be a JSON array");
  return parsed.map((m: unknown, i) => {
    const e = m as Partial<VolumeMount> | null;
    if (typeof e?.mountPath !== "string" || typeof e.hostPath !== "string" || !e.mountPath.startsWith("/"))
      throw new TypeError(`KVT_VOLUME_MOUNTS[${i}] needs an absolute mountPath and a hostPath`);
    return { mountPath: e.mountPath, hostPath: e.hostPath, readOnly: e.readOnly === true };
  });
}

/** The host path of `path` inside the container: through the longest mount that holds it, else `path` itself. */
export function hostPathOf(path: string, mounts: readonly VolumeMount[]): string {
  let best: VolumeMount | undefined;
  for (const m of mounts) {
    const inside = path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, "")}/`);
    if (inside && (!best || m.mountPath.length > best.mountPath.length)) best = m;
  }
  return best ? join(best.hostPath, path.slice(best.mountPath.length)) : path;
}

/**
 * KubeVirt's isBlockDeviceVolume: the host path of volume `name`'s raw device at /dev/<name> when a block device is
 * there, else undefined (the volume is a filesystem). Under the process-kubelet (mounts given) only a device it
 * handed over through KVT_VOLUME_MOUNTS counts: its containers see the host's own /dev.
 */
export function blockDeviceOf(name: string, mounts: readonly VolumeMount[]): string | undefined {
  const path = blockDevicePath(name);
  const host = mounts.find((m) => m.mountPath === path)?.hostPath ?? (mounts.length === 0 ? path : undefined);
  if (host === undefined) return undefined;
  try {
    return statSync(host).isBlockDevice() ? host : undefined;
  } catch {
    return undefined;
  }
}

/** What {@link planDisks} needs besides the VMI. */
export interface DiskContext {
  readonly resolveImage: ImageResolver;
  readonly mounts: readonly VolumeMount[];
  /** Where ephemeral disks go when the pod mounts no ephemeral-disks volume (a launcher run by hand). */
  readonly workDir: string;
}

const MiB = 1024 * 1024;

/** The VMI's disks in spec order; problems are pushed to `causes` (the disk is then left out). */
export function planDisks(vmi: VirtualMachineInstance, ctx: DiskContext, causes: DiskCause[]): MachineDisk[] {
  const volumes = new Map((vmi.spec.volumes ?? []).map((v, i) => [v.name, { v, i }]));
  const status = new Map(volumeStatuses(vmi.status).map((s) => [s.name, s]));
  const ephemeralDir = (): string => {
    const dir = hostPathOf(EPHEMERAL_DISKS_DIR, ctx.mounts);
    return dir === EPHEMERAL_DISKS_DIR && !existsSync(dir) ? join(ctx.workDir, "ephemeral-disks") : dir;
  };
  const out: MachineDisk[] = [];
  (vmi.spec.domain.devices.disks ?? []).forEach((disk, d) => {
    const entry = volumes.get(disk.name);
    if (!entry) return;
    const { v, i } = entry;
    const field = `spec.volumes[${i}]`;
    const bus = diskBus(disk);
    const base = {
      name: v.name,
      readOnly: disk.disk?.readonly === true || disk.cdrom !== undefined,
      ...(disk.serial ? { serial: disk.serial } : {}),
      ...(disk.cache ? { cache: disk.cache as MachineDisk["cache"] } : {}),
      ...(disk.io ? { io: disk.io as MachineDisk["io"] } : {}),
      ...(disk.bootOrder !== undefined ? { bootOrder: disk.bootOrder } : {}),
    };
    let planned: MachineDisk | undefined;
    if (v.persistentVolumeClaim) {
      planned = claimDisk(v, base, ctx, status.get(v.name)?.persistentVolumeClaimInfo);
    } else if (v.hostDisk) {
      const dir = hostPathOf(`${VMI_DISKS_DIR}/${v.name}`, ctx.mounts);
      const size = tryParseQuantity(v.hostDisk.capacity)?.value();
      if (v.hostDisk.type !== "Disk" && v.hostDisk.type !== "DiskOrCreate") {
        causes.push({ field: `${field}.hostDisk.type`, message: `"${v.hostDisk.type}" is not Disk or DiskOrCreate` });
        return;
      }
      if (v.hostDisk.type === "DiskOrCreate" && size === undefined) {
        causes.push({ field: `${field}.hostDisk.capacity`, message: "DiskOrCreate needs a capacity" });
        return;
      }
      planned = {
        ...base,
        path: join(dir, basename(v.hostDisk.path)),
        kind: "hostDisk",
        shared: v.hostDisk.shared === true,
        ...(v.hostDisk.type === "DiskOrCreate" && size !== undefined ? { createBytes: alignDown(Number(size)) } : {}),
        requireDir: dir,
      };
    } else if (v.ephemeral?.persistentVolumeClaim) {
      planned = ephemeralDisk(v, base, ctx, ephemeralDir());
    } else if (v.emptyDisk) {
      const size = tryParseQuantity(v.emptyDisk.capacity)?.value();
      if (size === undefined || size < 1n) {
        causes.push({
          field: `${field}.emptyDisk.capacity`,
          message: `"${String(v.emptyDisk.capacity)}" is not a size`,
        });
        return;
      }
      planned = {
        ...base,
        path: join(ephemeralDir(), "empty-disks", `${v.name}.img`),
        kind: "emptyDisk",
        shared: false,
        createBytes: Math.max(512, Number(size) - (Number(size) % 512)),
        fresh: true,
      };
    } else if (v.containerDisk) {
      let image: ReturnType<ImageResolver>;
      try {
        image = ctx.resolveImage(v.containerDisk.image);
      } catch (error) {
        causes.push({ field: `${field}.containerDisk.image`, message: (error as Error).message });
        return;
      }
      // An image with only a kernel and an initramfs (the demo) boots directly and has no disk.
      if (!image.diskPath) return;
      planned = {
        ...base,
        path: join(ephemeralDir(), "container-disks", `${v.name}.img`),
        kind: "containerDisk",
        shared: false,
        copyFrom: image.diskPath,
        fresh: true,
      };
    } else if (v.cloudInitNoCloud || v.cloudInitConfigDrive) {
      const contents = cloudInitIso(vmi, i, ctx.mounts, causes);
      if (!contents) return;
      planned = {
        ...base,
        readOnly: true,
        path: join(ctx.workDir, "cloud-init", `${v.name}.iso`),
        kind: v.cloudInitNoCloud ? "cloudInitNoCloud" : "cloudInitConfigDrive",
        shared: true,
        contents,
        fresh: true,
      };
    } else if (v.configMap || v.secret || v.serviceAccount || v.downwardAPI) {
      const config = configIso(v, i, ctx.mounts, causes);
      if (!config) return;
      planned = {
        ...base,
        // Read-only, except a sata hard disk (KubeVirt's default bus): QEMU's ide-hd cannot be read-only, and
        // KubeVirt leaves config disks writable unless the disk says readonly. Writes reach only this fresh copy.
        readOnly: base.readOnly || bus !== "sata",
        path: join(ctx.workDir, "config-disks", `${v.name}.iso`),
        kind: config.kind,
        shared: true,
        contents: config.contents,
        fresh: true,
      };
    } else {
      return;
    }
    if (bus !== "virtio" && bus !== "sata" && bus !== "scsi") {
      causes.push({
        field: `spec.domain.devices.disks[${d}]`,
        message: `bus ${bus} is not supported by this launcher; use virtio, sata or scsi`,
      });
      return;
    }
    out.push({ ...planned, ...(bus !== "virtio" ? { bus } : {}), ...(disk.cdrom ? { cdrom: true } : {}) });
  });
  return out;
}

/** The disk fields every volume kind shares (from the VMI's disk). */
type BaseDisk = Pick<MachineDisk, "name" | "readOnly" | "serial" | "cache" | "io" | "bootOrder">;

/**
 * A persistentVolumeClaim's disk: its raw device when the claim is Block (the device is the disk; nothing made),
 * else its disk.img, created at the claim's size less the filesystem overhead when missing.
 */
function claimDisk(
  v: Volume,
  base: BaseDisk,
  ctx: DiskContext,
  info: PersistentVolumeClaimInfo | undefined,
): MachineDisk {
  const common = {
    ...base,
    readOnly: base.readOnly || v.persistentVolumeClaim?.readOnly === true,
    kind: "persistentVolumeClaim" as const,
    shared: (info?.accessModes ?? []).includes("ReadWriteMany"),
  };
  const device = blockDeviceOf(v.name, ctx.mounts);
  if (device) return { ...common, path: device, block: true };
  const dir = hostPathOf(`${VMI_DISKS_DIR}/${v.name}`, ctx.mounts);
  const capacity = tryParseQuantity(info?.capacity?.storage ?? info?.requests?.storage)?.value();
  const overhead = Number(info?.filesystemOverhead ?? DEFAULT_FILESYSTEM_OVERHEAD);
  const size = capacity === undefined ? undefined : alignDown(Number(capacity) * (1 - overhead));
  return {
    ...common,
    path: join(dir, PVC_DISK_IMAGE),
    ...(size !== undefined && size > 0 ? { createBytes: size } : {}),
    requireDir: dir,
  };
}

/**
 * KubeVirt's ephemeral volume: the claim (read-only) holds the image, its disk.img or, for a Block claim, its raw
 * device; the VMI writes to its own copy-on-write layer in `dir`, gone at the next start, exactly as a containerDisk's
 * (container-disk-layer.ts).
 */
function ephemeralDisk(v: Volume, base: BaseDisk, ctx: DiskContext, dir: string): MachineDisk {
  const device = blockDeviceOf(v.name, ctx.mounts);
  const claimDir = hostPathOf(`${VMI_DISKS_DIR}/${v.name}`, ctx.mounts);
  return {
    ...base,
    path: join(dir, "ephemeral-volumes", `${v.name}.img`),
    kind: "ephemeral",
    shared: false,
    copyFrom: device ?? join(claimDir, PVC_DISK_IMAGE),
    fresh: true,
    ...(device ? {} : { requireDir: claimDir }),
  };
}

/** A fixed date for every cloud-init ISO: the same VMI makes the same bytes on every node. */
const ISO_TIMESTAMP = new Date("2000-01-01T00:00:00Z");

/** The cloud-init ISO of volume `i` (KubeVirt's layout and metadata), or undefined with the causes pushed. */
function cloudInitIso(
  vmi: VirtualMachineInstance,
  i: number,
  mounts: readonly VolumeMount[],
  causes: DiskCause[],
): Buffer | undefined {
  const v = vmi.spec.volumes?.[i];
  const source = v?.cloudInitNoCloud ?? v?.cloudInitConfigDrive;
  if (!v || !source) return undefined;
  const field = `spec.volumes[${i}].${v.cloudInitNoCloud ? "cloudInitNoCloud" : "cloudInitConfigDrive"}`;
  if (source.secretRef || source.networkDataSecretRef) {
    causes.push({ field, message: "secret references are not supported by this launcher; inline the data" });
    return undefined;
  }
  const keys = accessCredentialKeys(vmi, v.cloudInitNoCloud ? "noCloud" : "configDrive", mounts, causes);
  if (!keys) return undefined;
  const identity = {
    name: vmi.metadata?.name ?? "",
    namespace: vmi.metadata?.namespace ?? "default",
    firmwareUuid: vmi.spec.domain.firmware?.uuid ?? vmi.metadata?.uid ?? "",
    ...(vmi.spec.hostname ? { hostname: vmi.spec.hostname } : {}),
    ...(keys.length > 0 ? { publicSshKeys: keys } : {}),
  };
  try {
    return v.cloudInitNoCloud
      ? buildNoCloudDisk(source, identity, { timestamp: ISO_TIMESTAMP })
      : buildConfigDriveDisk(source, identity, { timestamp: ISO_TIMESTAMP });
  } catch (error) {
    causes.push({ field, message: (error as Error).message });
    return undefined;
  }
}

/**
 * The SSH public keys of the access credentials propagated by `method` (KubeVirt's resolveSSHPublicKeys): every file
 * of each credential's Secret, mounted at SECRET_SOURCE_DIR `/<secret>-access-cred`, in name order, empty ones
 * left out. Undefined, with a cause, when a Secret's files cannot be read.
 */
export function accessCredentialKeys(
  vmi: VirtualMachineInstance,
  method: "noCloud" | "configDrive",
  mounts: readonly VolumeMount[],
  causes: DiskCause[],
): string[] | undefined {
  const keys: string[] = [];
  for (const [idx, cred] of (vmi.spec.accessCredentials ?? []).entries()) {
    const secretName = cred.sshPublicKey?.source?.secret?.secretName;
    if (!secretName || cred.sshPublicKey?.propagationMethod?.[method] === undefined) continue;
    const dir = hostPathOf(`${SECRET_SOURCE_DIR}/${secretName}-access-cred`, mounts);
    try {
      for (const entry of readdirSync(dir).sort()) {
        if (entry.startsWith("..") || statSync(join(dir, entry)).isDirectory()) continue;
        const key = readFileSync(join(dir, entry), "utf8");
        if (key !== "") keys.push(key);
      }
    } catch (error) {
      causes.push({
        field: `spec.accessCredentials[${idx}].sshPublicKey.source.secret`,
        message: `Unable to read public keys found at volume: ${dir}: ${(error as Error).message}`,
      });
      return undefined;
    }
  }
  return keys;
}

type ConfigKind = "configMap" | "secret" | "serviceAccount" | "downwardAPI";

/** Where the kubelet mounted a config volume's files, its kind and its volume label (KubeVirt's pkg/config). */
function configSource(v: Volume): { kind: ConfigKind; dir: string; volumeLabel?: string } {
  if (v.configMap)
    return { kind: "configMap", dir: `${CONFIG_MAP_SOURCE_DIR}/${v.name}`, volumeLabel: v.configMap.volumeLabel };
  if (v.secret) return { kind: "secret", dir: `${SECRET_SOURCE_DIR}/${v.name}`, volumeLabel: v.secret.volumeLabel };
  if (v.serviceAccount) return { kind: "serviceAccount", dir: SERVICE_ACCOUNT_SOURCE_DIR };
  const label = (v.downwardAPI as { volumeLabel?: unknown } | undefined)?.volumeLabel;
  return {
    kind: "downwardAPI",
    dir: `${DOWNWARD_API_SOURCE_DIR}/${v.name}`,
    ...(typeof label === "string" ? { volumeLabel: label } : {}),
  };
}

/**
 * The files of a mounted config volume, keys relative to `dir` ("sub/key" for an items path with a directory). The
 * kubelet's atomic-writer entries (`..data`, `..<timestamp>`) are skipped; the key symlinks are followed.
 */
export function readConfigFiles(dir: string, prefix = ""): Record<string, Uint8Array> {
  const files: Record<string, Uint8Array> = {};
  for (const entry of readdirSync(dir).sort()) {
    if (entry.startsWith("..")) continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) Object.assign(files, readConfigFiles(path, `${prefix}${entry}/`));
    else files[`${prefix}${entry}`] = readFileSync(path);
  }
  return files;
}

/** The ISO of config volume `i` from its mounted files, or undefined with the cause pushed (naming the volume). */
function configIso(
  v: Volume,
  i: number,
  mounts: readonly VolumeMount[],
  causes: DiskCause[],
): { kind: ConfigKind; contents: Buffer } | undefined {
  const { kind, dir, volumeLabel } = configSource(v);
  const field = `spec.volumes[${i}].${kind}`;
  const hostDir = hostPathOf(dir, mounts);
  if (!isDir(hostDir)) {
    causes.push({ field, message: `volume ${v.name}: its files are not mounted at ${dir}` });
    return undefined;
  }
  try {
    const files = readConfigFiles(hostDir);
    const options = { timestamp: ISO_TIMESTAMP, ...(volumeLabel ? { volumeLabel } : {}) };
    let contents: Buffer;
    if (kind === "serviceAccount") {
      const text = (key: string): string => Buffer.from(files[key] ?? new Uint8Array()).toString("utf8");
      contents = buildServiceAccountDisk(
        { token: text("token"), namespace: text("namespace"), "ca.crt": files["ca.crt"] ?? new Uint8Array() },
        { timestamp: ISO_TIMESTAMP },
      );
    } else if (kind === "configMap") contents = buildConfigMapDisk(files, options);
    else if (kind === "secret") contents = buildSecretDisk(files, options);
    else contents = buildDownwardApiDisk(files, options);
    return { kind, contents };
  } catch (error) {
    causes.push({ field, message: `volume ${v.name}: ${(error as Error).message}` });
    return undefined;
  }
}

function alignDown(bytes: number): number {
  return Math.floor(bytes / MiB) * MiB;
}

/**
 * Makes the planned disks exist: a claim's or hostDisk's image when missing (sparse, at the planned size), a fresh
 * sparse emptyDisk; checks a containerDisk's image (its write layer comes with the backend: create-machine.ts).
 * Problems come back as causes (nothing half-made is left for a disk that failed).
 */
export async function prepareDisks(disks: readonly MachineDisk[]): Promise<DiskCause[]> {
  const causes: DiskCause[] = [];
  for (const disk of disks) {
    const field = `volume ${disk.name}`;
    try {
      if (disk.requireDir && !isDir(disk.requireDir)) {
        causes.push({ field, message: `its volume is not mounted at ${disk.requireDir}` });
        continue;
      }
      if (disk.block) {
        if (!isBlockDevice(disk.path)) causes.push({ field, message: `${disk.path} is not a block device` });
      } else if (disk.contents) {
        mkdirSync(dirname(disk.path), { recursive: true });
        writeFileSync(disk.path, disk.contents);
      } else if (disk.copyFrom && isBlockDevice(disk.copyFrom)) {
        // A Block claim's device under an ephemeral volume's layer: raw, used as it is.
      } else if (disk.copyFrom) {
        // raw or qcow2 (a backing chain inside the image's directory): every header checked, corrupt or truncated
        // images refused here; the write layer over it is made once the backend is chosen (container-disk-layer.ts).
        const { checkDiskImage } = await loadDiskImage();
        await checkDiskImage(disk.copyFrom, { allowedDir: dirname(disk.copyFrom) });
      } else if (disk.fresh || (!existsSync(disk.path) && disk.createBytes !== undefined)) {
        if (disk.createBytes === undefined) throw new Error("no size to create it with");
        createSparseFile(disk.path, disk.createBytes, disk.fresh ? "w" : "wx");
      } else if (!existsSync(disk.path)) {
        causes.push({ field, message: `${disk.path} does not exist` });
      }
    } catch (error) {
      const message =
        error instanceof Error && error.name === "DiskImageError"
          ? `its image is not usable: ${error.message}`
          : `cannot prepare ${disk.path}: ${(error as Error).message}`;
      causes.push({ field, message });
    }
  }
  return causes;
}

/** Makes `path` (and its directory) a sparse file of `bytes`: "w" replaces one that exists, "wx" refuses to. */
function createSparseFile(path: string, bytes: number, flag: "w" | "wx"): void {
  mkdirSync(dirname(path), { recursive: true });
  const fd = openSync(path, flag);
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** True for a cloud-init ISO (NoCloud or ConfigDrive): the guest finds it by its label, whatever its bus or slot. */
export function isCloudInitDisk(disk: MachineDisk): boolean {
  return disk.kind === "cloudInitNoCloud" || disk.kind === "cloudInitConfigDrive";
}

/** True for a disk a live migration copies to the target (writable and on this node only); false: it is shared. */
export function copiedOnMigration(disk: MachineDisk): boolean {
  return !disk.shared && !disk.readOnly;
}

/**
 * Why these disks forbid a live migration on the QEMU backend, or undefined. Local writable disks (emptyDisk,
 * containerDisk overlay, a claim that is not ReadWriteMany) travel in QEMU's block migration, which copies every
 * writable disk: a VMI that also has a writable disk on shared storage (an RWX claim, a shared hostDisk) would have
 * it overwritten while the source still runs, so that mix stays put. (Our VMM copies only the local disks: no limit.)
 */
export function localDisksBlocker(disks: readonly MachineDisk[]): string | undefined {
  const local = disks.filter(copiedOnMigration);
  const shared = disks.filter(
    (d) => d.shared && !d.readOnly && (d.kind === "persistentVolumeClaim" || d.kind === "hostDisk"),
  );
  if (local.length === 0 || shared.length === 0) return undefined;
  const names = (list: MachineDisk[]): string => list.map((d) => `${d.name}: ${d.kind}`).join(", ");
  return `cannot migrate VMI: local disks (${names(local)}) are copied by QEMU's block migration, which would also overwrite the shared disks (${names(shared)})`;
}

/**
 * Why these disks need the QEMU backend (a bus our VMM does not have), or undefined. A cloud-init ISO is found by its
 * label whatever its bus (KubeVirt defaults an unset bus to sata on amd64), so our VMM gives it as a virtio disk.
 */
export function disksNeedQemu(disks: readonly MachineDisk[]): string | undefined {
  const other = disks.filter((d) => (d.bus ?? "virtio") !== "virtio" && !isCloudInitDisk(d));
  if (other.length === 0) return undefined;
  return `disk ${other.map((d) => `${d.name} (bus ${d.bus})`).join(", ")} needs a device only QEMU provides`;
}
