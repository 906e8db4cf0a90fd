/**
 * cloudInitNoCloud and cloudInitConfigDrive volumes as disks, laid out as KubeVirt's pkg/cloud-init
 * (GenerateLocalData) lays them out and written as ISO 9660 with Joliet and Rock Ridge (KubeVirt runs
 * `xorrisofs -volid <label> -joliet -rock -partition_cyl_align on`; we write the same kind of image in process).
 *
 * ```
 * NoCloud  (label "cidata")            ConfigDrive (label "config-2")
 * /user-data                           /openstack/latest/user_data
 * /meta-data        (JSON)             /openstack/latest/meta_data.json
 * /network-config   (when given)       /openstack/latest/network_data.json   (when given)
 * ```
 * meta-data is the JSON KubeVirt marshals: NoCloud `{"instance-type"?, "instance-id", "local-hostname"?,
 * "public-keys"?}` with instance-id = the VMI's firmware UUID; ConfigDrive `{"instance_type"?, "instance_id",
 * "local_hostname"?, "hostname"?, "uuid"?, "devices"?, "public_keys"?}` with instance_id = `<name>.<namespace>` and
 * uuid = the firmware UUID. Files are mode 0600 as KubeVirt writes them.
 */
import { goBase64Decode, goJson } from "@kvt/api";
import { VolumeDataError } from "./errors.ts";
import { type IsoLimits, writeIso9660 } from "./iso9660.ts";

/** The volume label cloud-init's NoCloud datasource looks for. */
export const NOCLOUD_VOLUME_LABEL = "cidata";
/** The volume label cloud-init's ConfigDrive datasource looks for. */
export const CONFIG_DRIVE_VOLUME_LABEL = "config-2";

/**
 * A cloudInitNoCloud / cloudInitConfigDrive volume source as the VMI spec gives it. Secret references are resolved
 * by the caller: pass the secret's contents through secretUserData / secretNetworkData (see cloudInitSecretData).
 */
export interface CloudInitSource {
  readonly userData?: string;
  readonly userDataBase64?: string;
  readonly networkData?: string;
  readonly networkDataBase64?: string;
}

/** Contents read from secretRef / networkDataSecretRef; non-empty values win over the inline ones. */
export interface CloudInitSecretData {
  readonly userData?: string;
  readonly networkData?: string;
}

/** The VMI facts KubeVirt puts in the metadata. */
export interface CloudInitIdentity {
  /** metadata.name of the VMI. */
  readonly name: string;
  readonly namespace: string;
  /** spec.domain.firmware.uuid (virt-api always defaults it). */
  readonly firmwareUuid: string;
  /** spec.hostname, if set; otherwise the hostname is derived from the name (sanitizeHostname). */
  readonly hostname?: string;
  /** The instancetype annotation (cluster-wide one first), when the VM uses one. */
  readonly instanceType?: string;
  /** SSH public keys from accessCredentials with the matching propagation method, in KubeVirt's order. */
  readonly publicSshKeys?: readonly string[];
}

/** One device of ConfigDrive's `devices` list (KubeVirt's DeviceData). */
export interface CloudInitDeviceData {
  readonly type: "nic" | "hostdev";
  readonly bus: string;
  readonly address: string;
  readonly mac?: string;
  readonly serial?: string;
  readonly numaNode?: number;
  readonly alignedCPUs?: readonly number[];
  readonly tags: readonly string[];
}

/** How the disk is written. */
export interface CloudInitDiskOptions {
  /** Every date in the image (reproducible output). */
  readonly timestamp: Date;
  readonly limits?: Partial<IsoLimits>;
}

const SECRET_USER_DATA_KEYS = ["userdata", "userData"];
const SECRET_NETWORK_DATA_KEYS = ["networkdata", "networkData"];
const DNS1123_LABEL_MAX = 63;
const CLOUD_INIT_FILE_MODE = 0o600;

/**
 * The user and network data in a secretRef / networkDataSecretRef secret: the first of `userdata`,
 * `userData` (and `networkdata`, `networkData`) present, as KubeVirt's resolveNoCloudSecrets reads them.
 */
export function cloudInitSecretData(secret: Readonly<Record<string, Uint8Array | string>>): CloudInitSecretData {
  const first = (keys: string[]): string | undefined => {
    for (const key of keys) {
      const v = secret[key];
      if (v !== undefined) return typeof v === "string" ? v : Buffer.from(v).toString("utf8");
    }
    return undefined;
  };
  return { userData: first(SECRET_USER_DATA_KEYS), networkData: first(SECRET_NETWORK_DATA_KEYS) };
}

/** KubeVirt's dns.SanitizeHostname: spec.hostname if set, else the name up to its first dot, cut to 63 bytes. */
export function sanitizeHostname(name: string, specHostname?: string): string {
  if (specHostname) return specHostname;
  return name.split(".")[0].slice(0, DNS1123_LABEL_MAX);
}

function rawOrBase64(raw: string | undefined, base64: string | undefined, field: string): string {
  if (raw) return raw;
  if (!base64) return "";
  const decoded = goBase64Decode(base64);
  if (!decoded) throw new VolumeDataError("INVALID_BASE64", `Cannot decode ${field}: not valid base64`);
  return decoded.toString("utf8");
}

/**
 * User and network data of a cloud-init source (KubeVirt readCloudInitData): inline text first, then base64; secret
 * contents replace them when non-empty. Throws VolumeDataError NO_DATA when both are empty, with KubeVirt's message.
 */
export function readCloudInitData(
  source: CloudInitSource,
  secret: CloudInitSecretData = {},
): { userData: string; networkData: string } {
  const userData = secret.userData || rawOrBase64(source.userData, source.userDataBase64, "userDataBase64");
  const networkData =
    secret.networkData || rawOrBase64(source.networkData, source.networkDataBase64, "networkDataBase64");
  if (userData === "" && networkData === "") {
    throw new VolumeDataError(
      "NO_DATA",
      "userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source",
    );
  }
  return { userData, networkData };
}

function publicKeys(keys: readonly string[] | undefined): Map<string, string> | undefined {
  // KubeVirt numbers the non-empty keys from 0 (a Go map: marshalled in key order "0", "1", "10", "2", ...) and
  // leaves the field out when there are none.
  const nonEmpty = (keys ?? []).filter((k) => k !== "");
  if (nonEmpty.length === 0) return undefined;
  return new Map(nonEmpty.map((k, i) => [String(i), k]));
}

/** NoCloud meta-data, byte for byte as KubeVirt's json.Marshal of NoCloudMetadata (keys in Go's order). */
export function noCloudMetaData(identity: CloudInitIdentity): string {
  return goJson({
    "instance-type": identity.instanceType || undefined,
    "instance-id": identity.firmwareUuid,
    "local-hostname": sanitizeHostname(identity.name, identity.hostname) || undefined,
    "public-keys": publicKeys(identity.publicSshKeys),
  });
}

/** ConfigDrive meta_data.json, byte for byte as KubeVirt's json.Marshal of ConfigDriveMetadata. */
export function configDriveMetaData(identity: CloudInitIdentity, devices?: readonly CloudInitDeviceData[]): string {
  return goJson({
    instance_type: identity.instanceType || undefined,
    instance_id: `${identity.name}.${identity.namespace}`,
    hostname: sanitizeHostname(identity.name, identity.hostname) || undefined,
    uuid: identity.firmwareUuid || undefined,
    devices: devices?.map(deviceJson),
    public_keys: publicKeys(identity.publicSshKeys),
  });
}

function deviceJson(d: CloudInitDeviceData): Record<string, unknown> {
  return {
    type: d.type,
    bus: d.bus,
    address: d.address,
    mac: d.mac || undefined,
    serial: d.serial || undefined,
    numaNode: d.numaNode || undefined,
    alignedCPUs: d.alignedCPUs?.length ? d.alignedCPUs : undefined,
    tags: d.tags,
  };
}

/**
 * The cloudInitNoCloud disk: an ISO 9660 image labelled `cidata` with user-data, meta-data and (when there is network
 * data) network-config. Throws VolumeDataError for bad input and IsoImageError when a limit is exceeded.
 */
export function buildNoCloudDisk(
  source: CloudInitSource,
  identity: CloudInitIdentity,
  options: CloudInitDiskOptions & { secret?: CloudInitSecretData },
): Buffer {
  const { userData, networkData } = readCloudInitData(source, options.secret);
  const files = [
    { path: "user-data", data: userData, mode: CLOUD_INIT_FILE_MODE },
    { path: "meta-data", data: noCloudMetaData(identity), mode: CLOUD_INIT_FILE_MODE },
  ];
  if (networkData !== "") files.push({ path: "network-config", data: networkData, mode: CLOUD_INIT_FILE_MODE });
  return writeIso9660({ volumeId: NOCLOUD_VOLUME_LABEL, files, timestamp: options.timestamp, limits: options.limits });
}

/**
 * The cloudInitConfigDrive disk: an ISO 9660 image labelled `config-2` with openstack/latest/{user_data,
 * meta_data.json, network_data.json}. Throws as buildNoCloudDisk.
 */
export function buildConfigDriveDisk(
  source: CloudInitSource,
  identity: CloudInitIdentity,
  options: CloudInitDiskOptions & { secret?: CloudInitSecretData; devices?: readonly CloudInitDeviceData[] },
): Buffer {
  const { userData, networkData } = readCloudInitData(source, options.secret);
  const dir = "openstack/latest";
  const files = [
    { path: `${dir}/user_data`, data: userData, mode: CLOUD_INIT_FILE_MODE },
    { path: `${dir}/meta_data.json`, data: configDriveMetaData(identity, options.devices), mode: CLOUD_INIT_FILE_MODE },
  ];
  if (networkData !== "")
    files.push({ path: `${dir}/network_data.json`, data: networkData, mode: CLOUD_INIT_FILE_MODE });
  return writeIso9660({
    volumeId: CONFIG_DRIVE_VOLUME_LABEL,
    files,
    timestamp: options.timestamp,
    limits: options.limits,
  });
}
