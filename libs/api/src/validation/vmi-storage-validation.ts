/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString) exactly as KubeVirt formats paths into its messages. */
/**
 * VMI disks and volumes (KubeVirt `storage/admitters/disks.go` and `validateVolumes`): every disk names an existing
 * volume and every volume is used by a disk, names are unique DNS labels, one target per disk, one source per volume,
 * valid buses, boot orders, cloud-init data. Messages are KubeVirt's.
 */
import { DISK_BUSES, MAX_VOLUMES } from "../constants.ts";
import type { Disk, ValidationCause, VirtualMachineInstanceSpec, Volume } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";
import { dns1123LabelErrors } from "./dns.ts";
import { readQuantity } from "./quantities.ts";

const notFound = (f: FieldPath | string, name: string): string => `${f} '${name}' not found.`;
const CLOUD_INIT_MAX_LEN = 2048;
const SERIAL_RE = /^[A-Za-z0-9_.+-]+$/;
const MAX_SERIAL_LEN = 256;
const SOURCES = [
  "persistentVolumeClaim",
  "cloudInitNoCloud",
  "cloudInitConfigDrive",
  "containerDisk",
  "ephemeral",
  "emptyDisk",
  "hostDisk",
  "dataVolume",
  "configMap",
  "secret",
  "downwardAPI",
  "serviceAccount",
] as const;

function diskTarget(d: Disk): { type: "disk" | "cdrom" | "lun" | ""; bus: string } {
  if (d.disk) return { type: "disk", bus: d.disk.bus ?? "" };
  if (d.lun) return { type: "lun", bus: d.lun.bus ?? "" };
  if (d.cdrom) return { type: "cdrom", bus: d.cdrom.bus ?? "" };
  return { type: "", bus: "" };
}

function validateDisk(field: FieldPath, idx: number, disks: Disk[]): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const disk = disks[idx];
  if (!disk) return [];
  const f = field.index(idx);
  const first = disks.findIndex((d) => d.name === disk.name);
  if (first < idx)
    causes.push(
      cause(CAUSE_TYPE.invalid, `${f} and ${field.index(first)} must not have the same Name.`, f.child("name")),
    );
  if ([disk.disk, disk.lun, disk.cdrom].filter(Boolean).length > 1) {
    causes.push(cause(CAUSE_TYPE.invalid, `${f} can only have a single target type defined`, f));
  }
  if (disk.bootOrder !== undefined && disk.bootOrder < 1) {
    causes.push(cause(CAUSE_TYPE.invalid, `${f} must have a boot order > 0, if supplied`, f.child("bootOrder")));
  }
  const { type, bus } = diskTarget(disk);
  if (bus === "ide") causes.push(cause(CAUSE_TYPE.invalid, "IDE bus is not supported", f.child(type, "bus")));
  else if (bus === "virtio" && type === "cdrom") {
    causes.push(cause(CAUSE_TYPE.invalid, `Bus type ${bus} is invalid for CD-ROM device`, f.child("cdrom", "bus")));
  } else if (bus === "sata" && disk.disk?.readonly) {
    causes.push(cause(CAUSE_TYPE.invalid, `${bus} hard-disks do not support read-only.`, f.child("disk", "bus")));
  } else if (bus !== "" && !(DISK_BUSES as readonly string[]).includes(bus)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${f} is set with an unrecognized bus ${bus}, must be one of: [virtio scsi sata usb]`,
        f.child(type, "bus"),
      ),
    );
  }
  if (disk.serial && !SERIAL_RE.test(disk.serial)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${f} must be made up of the following characters [A-Za-z0-9_.+-], if specified`,
        f.child("serial"),
      ),
    );
  }
  if (disk.serial && [...disk.serial].length > MAX_SERIAL_LEN) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${f} must be less than or equal to ${MAX_SERIAL_LEN} in length, if specified`,
        f.child("serial"),
      ),
    );
  }
  if (disk.cache && !["none", "writethrough", "writeback"].includes(disk.cache)) {
    causes.push(cause(CAUSE_TYPE.invalid, `${f.child("cache")} has invalid value ${disk.cache}`, f.child("cache")));
  }
  if (disk.io && !["native", "threads"].includes(disk.io)) {
    causes.push(
      cause(
        CAUSE_TYPE.notSupported,
        `Disk IO mode for ${field} is not supported. Supported modes are: native, threads.`,
        f.child("io"),
      ),
    );
  }
  // The disk name becomes a container name, so it must be a DNS label (KubeVirt reports apimachinery's text).
  for (const msg of dns1123LabelErrors(disk.name)) causes.push(cause(CAUSE_TYPE.invalid, msg, f.child("name")));
  return causes;
}

/** Disks: the per-disk rules, each disk backed by a volume, unique boot orders (disks then interfaces). */
export function validateDisks(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const disks = spec.domain.devices.disks ?? [];
  const disksField = field.child("domain", "devices", "disks");
  for (let i = 0; i < disks.length; i++) causes.push(...validateDisk(disksField, i, disks));
  const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
  const bootOrders = new Set<number>();
  disks.forEach((disk, idx) => {
    const f = disksField.index(idx);
    const volume = volumes.get(disk.name);
    if (!volume && !disk.cdrom)
      causes.push(cause(CAUSE_TYPE.invalid, notFound(f.child("Name"), disk.name), f.child("name")));
    if (disk.lun && volume && !volume.persistentVolumeClaim && !volume.dataVolume) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `${f.child("lun")} can only be mapped to a DataVolume or PersistentVolumeClaim volume.`,
          f.child("lun"),
        ),
      );
    }
    if (disk.bootOrder !== undefined) {
      if (bootOrders.has(disk.bootOrder)) {
        causes.push(
          cause(
            CAUSE_TYPE.invalid,
            `Boot order for ${f.child("bootOrder")} already set for a different device.`,
            f.child("bootOrder"),
          ),
        );
      }
      bootOrders.add(disk.bootOrder);
    }
  });
  (spec.domain.devices.interfaces ?? []).forEach((iface, idx) => {
    if (iface.bootOrder === undefined) return;
    const f = field.child("domain", "devices", "interfaces").index(idx);
    if (iface.bootOrder < 1)
      causes.push(cause(CAUSE_TYPE.invalid, `${f} must have a boot order > 0, if supplied`, f.child("bootOrder")));
    else if (bootOrders.has(iface.bootOrder)) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `Boot order for ${f.child("bootOrder")} already set for a different device.`,
          f.child("bootOrder"),
        ),
      );
    }
    bootOrders.add(iface.bootOrder);
  });
  return causes;
}

function decodeBase64(s: string): Uint8Array | undefined {
  // Go's StdEncoding: padded standard alphabet only.
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return undefined;
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

function validateCloudInit(f: FieldPath, volume: Volume): ValidationCause[] {
  const type = volume.cloudInitNoCloud ? "cloudInitNoCloud" : "cloudInitConfigDrive";
  const ci = volume.cloudInitNoCloud ?? volume.cloudInitConfigDrive;
  if (!ci) return [];
  const causes: ValidationCause[] = [];
  const src = f.child(type);
  const count = (kind: "user" | "network"): { n: number; len: number } => {
    const plain = kind === "user" ? ci.userData : ci.networkData;
    const b64 = kind === "user" ? ci.userDataBase64 : ci.networkDataBase64;
    const ref = kind === "user" ? ci.secretRef : ci.networkDataSecretRef;
    let n = ref?.name ? 1 : 0;
    let len = 0;
    if (b64) {
      n++;
      const bytes = decodeBase64(b64);
      const key = kind === "user" ? "userDataBase64" : "networkDataBase64";
      if (!bytes)
        causes.push(
          cause(CAUSE_TYPE.invalid, `${src.child(key)}.${type}.${key} is not a valid base64 value.`, src.child(key)),
        );
      len = bytes?.length ?? 0;
    }
    if (plain) {
      n++;
      len = new TextEncoder().encode(plain).length;
    }
    return { n, len };
  };
  const user = count("user");
  if (user.n > 1) causes.push(cause(CAUSE_TYPE.invalid, `${src} must have only one userdatasource set.`, src));
  if (user.len > CLOUD_INIT_MAX_LEN) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${src} userdata exceeds ${CLOUD_INIT_MAX_LEN} byte limit. Should use UserDataSecretRef for larger data.`,
        src,
      ),
    );
  }
  const net = count("network");
  if (net.n > 1) causes.push(cause(CAUSE_TYPE.invalid, `${src} must have only one networkdata source set.`, src));
  if (net.len > CLOUD_INIT_MAX_LEN) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${src} networkdata exceeds ${CLOUD_INIT_MAX_LEN} byte limit. Should use NetworkDataSecretRef for larger data.`,
        src,
      ),
    );
  }
  if (user.n + net.n === 0) {
    causes.push(
      cause(CAUSE_TYPE.invalid, `${src} must have at least one userdatasource or one networkdatasource set.`, src),
    );
  }
  return causes;
}

/** Volumes: at most 256, unique names used by a disk, exactly one source, sane sources. */
export function validateVolumes(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const volumes = spec.volumes ?? [];
  const vf = field.child("volumes");
  if (volumes.length > MAX_VOLUMES) {
    causes.push(cause(CAUSE_TYPE.invalid, `${vf} must contain at most ${MAX_VOLUMES} items.`, vf));
  }
  const diskNames = new Set((spec.domain.devices.disks ?? []).map((d) => d.name));
  const seen = new Map<string, number>();
  volumes.forEach((volume, idx) => {
    const f = vf.index(idx);
    if (!diskNames.has(volume.name)) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          notFound(field.child("domain", "volumes").index(idx).child("name"), volume.name),
          f.child("name"),
        ),
      );
    }
    const other = seen.get(volume.name);
    if (other === undefined) seen.set(volume.name, idx);
    else
      causes.push(
        cause(CAUSE_TYPE.invalid, `${f} and ${vf.index(other)} must not have the same Name.`, f.child("name")),
      );
    const sources = SOURCES.filter((s) => volume[s] !== undefined && volume[s] !== null);
    if (sources.length !== 1) causes.push(cause(CAUSE_TYPE.invalid, `${f} must have exactly one source type set`, f));
    causes.push(...validateCloudInit(f, volume));
    if (volume.containerDisk && !volume.containerDisk.image) {
      causes.push(
        cause(
          CAUSE_TYPE.required,
          `${f.child("containerDisk", "image")} is a required field`,
          f.child("containerDisk", "image"),
        ),
      );
    }
    if (volume.emptyDisk) {
      const cf = f.child("emptyDisk", "capacity");
      const cap = readQuantity(volume.emptyDisk.capacity, cf, causes);
      if (!cap || cap.value() <= 0n) causes.push(cause(CAUSE_TYPE.invalid, `${cf} must be a positive quantity`, cf));
    }
    if (volume.configMap && !volume.configMap.name) {
      causes.push(
        cause(CAUSE_TYPE.invalid, `${f.child("configMap", "name")} is a required field`, f.child("configMap", "name")),
      );
    }
    if (volume.secret && !volume.secret.secretName) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `${f.child("secret", "secretName")} is a required field`,
          f.child("secret", "secretName"),
        ),
      );
    }
    if (volume.dataVolume && !volume.dataVolume.name)
      causes.push(cause(CAUSE_TYPE.required, "DataVolume 'name' must be set", f.child("name")));
  });
  return causes;
}
