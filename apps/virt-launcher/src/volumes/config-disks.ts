/**
 * configMap, secret, serviceAccount and downwardAPI volumes as ISO disks, as KubeVirt's pkg/config makes them
 * (createIsoDisksForConfigVolumes: `xorrisofs -volid <label> -joliet -rock -graft-points`, one file per key):
 *
 * | volume         | files                                   | volume label                          |
 * | -------------- | --------------------------------------- | ------------------------------------- |
 * | configMap      | one per key (data and binaryData)       | spec volumeLabel, else `cfgdata`      |
 * | secret         | one per key                             | spec volumeLabel, else `cfgdata`      |
 * | serviceAccount | `ca.crt`, `namespace`, `token`          | `cfgdata` (KubeVirt sets none)        |
 * | downwardAPI    | one per `fields[].path`, kubelet format | spec volumeLabel, else `cfgdata`      |
 *
 * A key may hold "/" (an items path such as `sub/key`), which becomes a directory, as the projected volume KubeVirt
 * reads from has it. Unlike a disk made from the kubelet's projected directory, the atomic-writer entries (`..data`,
 * `..2026_...`) are not copied: the guest sees exactly the keys.
 */
import { goFormatMap } from "@kvt/api";
import { VolumeDataError } from "./errors.ts";
import { type IsoFileInput, type IsoLimits, writeIso9660 } from "./iso9660.ts";

/** KubeVirt's label for config disks whose volume sets none. */
export const DEFAULT_CONFIG_VOLUME_LABEL = "cfgdata";

/** Keys to contents: a ConfigMap's data and binaryData merged, a Secret's data decoded, or rendered files. */
export type ConfigData = Readonly<Record<string, Uint8Array | string>>;

/** How a config disk is written. */
export interface ConfigDiskOptions {
  /** Every date in the image (reproducible output). */
  readonly timestamp: Date;
  /** The volume's `volumeLabel`; empty or undefined gives `cfgdata`. */
  readonly volumeLabel?: string;
  /** Rock Ridge permission bits of every file; default 0o644 (the kubelet's defaultMode). */
  readonly fileMode?: number;
  readonly limits?: Partial<IsoLimits>;
}

function configFiles(data: ConfigData, what: string): IsoFileInput[] {
  if (data === null || typeof data !== "object")
    throw new VolumeDataError("INVALID_INPUT", `Cannot read ${what}: not an object`);
  // Sorted so the same data in any insertion order gives the same image.
  return Object.keys(data)
    .sort()
    .map((key) => {
      const value = data[key];
      if (typeof value !== "string" && !(value instanceof Uint8Array)) {
        throw new VolumeDataError(
          "INVALID_INPUT",
          `Cannot write ${what} key "${key}": its value is neither a string nor bytes`,
        );
      }
      return { path: key, data: value };
    });
}

function configDisk(data: ConfigData, options: ConfigDiskOptions, what: string): Buffer {
  return writeIso9660({
    volumeId: options.volumeLabel || DEFAULT_CONFIG_VOLUME_LABEL,
    files: configFiles(data, what),
    timestamp: options.timestamp,
    fileMode: options.fileMode,
    limits: options.limits,
  });
}

/** A configMap volume's disk: one file per key. Throws VolumeDataError or IsoImageError (limits, names). */
export function buildConfigMapDisk(data: ConfigData, options: ConfigDiskOptions): Buffer {
  return configDisk(data, options, "configMap");
}

/** A secret volume's disk: one file per key (values already base64-decoded). Throws as buildConfigMapDisk. */
export function buildSecretDisk(data: ConfigData, options: ConfigDiskOptions): Buffer {
  return configDisk(data, options, "secret");
}

/** What a pod's service account token volume holds (/var/run/secrets/kubernetes.io/serviceaccount). */
export interface ServiceAccountData {
  readonly token: string;
  readonly namespace: string;
  readonly "ca.crt": string | Uint8Array;
}

/** The serviceAccount volume's disk: `ca.crt`, `namespace` and `token`, label `cfgdata` (KubeVirt gives it none). */
export function buildServiceAccountDisk(
  account: ServiceAccountData,
  options: Omit<ConfigDiskOptions, "volumeLabel">,
): Buffer {
  const data: ConfigData = { "ca.crt": account["ca.crt"], namespace: account.namespace, token: account.token };
  return configDisk(data, options, "serviceAccount");
}

/** The object fields a downwardAPI volume can show (a VMI's metadata, as the launcher pod carries it). */
export interface DownwardApiObject {
  readonly name: string;
  readonly namespace: string;
  readonly uid?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** One entry of a downwardAPI volume's `fields` (Kubernetes DownwardAPIVolumeFile, fieldRef only). */
export interface DownwardApiField {
  readonly path: string;
  readonly fieldRef?: { readonly fieldPath: string };
}

function fieldValue(object: DownwardApiObject, fieldPath: string): string {
  const subscript = /^(metadata\.(?:labels|annotations))\['(.+)'\]$/.exec(fieldPath);
  if (subscript) {
    const map = subscript[1] === "metadata.labels" ? object.labels : object.annotations;
    return map?.[subscript[2]] ?? "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return object.name;
    case "metadata.namespace":
      return object.namespace;
    case "metadata.uid":
      return object.uid ?? "";
    case "metadata.labels":
      return goFormatMap(object.labels);
    case "metadata.annotations":
      return goFormatMap(object.annotations);
    default:
      throw new VolumeDataError("INVALID_INPUT", `Cannot render downwardAPI fieldPath "${fieldPath}": unsupported`);
  }
}

/**
 * The files a downwardAPI volume's `fields` give for `object`, as the kubelet writes them (metadata.labels and
 * metadata.annotations as the kubelet's FormatMap (goFormatMap); name, namespace, uid and `['key']` subscripts as plain values).
 */
export function downwardApiFiles(
  object: DownwardApiObject,
  fields: readonly DownwardApiField[],
): Record<string, string> {
  const files: Record<string, string> = {};
  for (const field of fields) {
    if (!field.fieldRef)
      throw new VolumeDataError(
        "INVALID_INPUT",
        `Cannot render downwardAPI path "${field.path}": only fieldRef is supported`,
      );
    files[field.path] = fieldValue(object, field.fieldRef.fieldPath);
  }
  return files;
}

/** A downwardAPI volume's disk from its rendered files (see downwardApiFiles). Throws as buildConfigMapDisk. */
export function buildDownwardApiDisk(files: ConfigData, options: ConfigDiskOptions): Buffer {
  return configDisk(files, options, "downwardAPI");
}
