/**
 * A pod's volumes on this machine (the process-kubelet's volume manager). Processes are not containerized, so a
 * volume is a host directory (or file) that the container's process is told about; nothing is mounted.
 *
 *   volume source              host path                                                  set up
 *   persistentVolumeClaim      the bound PV's spec.hostPath.path (or spec.local.path)     claim Bound, PV bound to it,
 *                                                                                         path there (PV hostPath type
 *                                                                                         honoured: DirectoryOrCreate)
 *   emptyDir                   <podDir>/volumes/kubernetes.io~empty-dir/<name> (kubelet's made; removed with the pod dir
 *                              layout: <root>/pods/<uid>/...), told to containers through
 *                              the pods directory's short link (pods-link.ts)
 *   hostPath                   spec.hostPath.path                                         type: DirectoryOrCreate and
 *                                                                                         FileOrCreate create, the
 *                                                                                         others are checked
 *   configMap, secret,         <podDir>/volumes/kubernetes.io~<plugin>/<name>, one file   the object exists (or the
 *   downwardAPI, projected     per key or item (config-volumes.ts), read-only             source is optional); removed
 *                                                                                         with the pod dir
 *   image (ImageVolume)        the image's directory in the local image store             the image is stored
 *                              (tools/images: <store>/<repository>/<tag>), read-only      (its image.json is there)
 *   anything else              not provided (left out of KVT_VOLUME_MOUNTS)
 *
 * A claim bound to a volumeMode Block PV is a raw block device: its PV's local.path (or hostPath) must be one (a
 * link to one is followed, as the local volume plugin does), and the containers get it through volumeDevices
 * (container-spec.ts). As kubelet's volume manager, a claim's volumeMode must match its use: a Block volume in
 * volumeMounts or a Filesystem volume in volumeDevices is refused with kubelet's message, and the pod waits.
 *
 * A volume that cannot be set up yet (claim Pending, PV missing, path absent) keeps the pod's containers from
 * starting: {@link setUpPodVolumes} reports why, in the kubelet's words, and the kubelet retries.
 */
import { closeSync, existsSync, mkdirSync, openSync, realpathSync, statSync } from "node:fs";
import { join } from "node:path";
import { defaultStoreRoot, imageDir } from "@kvt/images";
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1Pod, V1Volume } from "../cluster/kube-models.ts";
import { type ConfigLookups, isConfigVolume, setUpConfigVolume } from "./config-volumes.ts";
import type { ResolvedVolume } from "./container-spec.ts";

/** Where the kubelet reads claims, volumes and the objects config volumes show (the API, or a fake in tests). */
export interface VolumeLookups extends ConfigLookups {
  claim(namespace: string, name: string): Promise<V1PersistentVolumeClaim | undefined>;
  volume(name: string): Promise<V1PersistentVolume | undefined>;
  /** The local image store image volumes come from (default tools/images' defaultStoreRoot()). */
  readonly imageStore?: string;
}

/** The outcome: every volume ready, or the volumes that are not, each with the reason. */
export type VolumeSetUp =
  | { readonly ready: ReadonlyMap<string, ResolvedVolume> }
  | { readonly failed: readonly { readonly volume: string; readonly message: string }[] };

/** The directory of a pod's emptyDir volume (kubelet's layout under the pod directory). */
export function emptyDirPath(podDir: string, volume: string): string {
  return join(podDir, "volumes", "kubernetes.io~empty-dir", volume);
}

/**
 * Applies a hostPath `type` to `path` as kubelet's hostPath plugin does: the *OrCreate types create what is
 * missing (a directory 0755, or an empty file 0644 whose parent must exist); the others check. Returns the error
 * message, or undefined.
 */
export function applyHostPathType(path: string, type: string | undefined): string | undefined {
  const st = existsSync(path) ? statSync(path) : undefined;
  const failed = (what: string): string => `hostPath type check failed: ${path} is not ${what}`;
  switch (type ?? "") {
    case "":
      return undefined;
    case "DirectoryOrCreate":
      if (!st) {
        mkdirSync(path, { recursive: true, mode: 0o755 });
        return undefined;
      }
      return st.isDirectory() ? undefined : failed("a directory");
    case "Directory":
      return st?.isDirectory() ? undefined : failed("a directory");
    case "FileOrCreate":
      if (!st) {
        try {
          closeSync(openSync(path, "a", 0o644));
        } catch (err) {
          return `hostPath type check failed: cannot create file ${path}: ${(err as Error).message}`;
        }
        return undefined;
      }
      return st.isFile() ? undefined : failed("a file");
    case "File":
      return st?.isFile() ? undefined : failed("a file");
    case "Socket":
      return st?.isSocket() ? undefined : failed("a socket file");
    case "CharDevice":
      return st?.isCharacterDevice() ? undefined : failed("a character device");
    case "BlockDevice":
      return st?.isBlockDevice() ? undefined : failed("a block device");
    default:
      return `hostPath type check failed: unknown type ${String(type)}`;
  }
}

/** How the pod's containers use each volume: by name, in volumeMounts and in volumeDevices. */
function volumeUses(pod: V1Pod): { mounted: Set<string>; mapped: Set<string> } {
  const mounted = new Set<string>();
  const mapped = new Set<string>();
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const m of c.volumeMounts ?? []) mounted.add(m.name);
    for (const d of c.volumeDevices ?? []) mapped.add(d.name);
  }
  return { mounted, mapped };
}

/**
 * kubelet's desired-state populator: why the PV's volumeMode does not fit the containers' use of the volume (a
 * Block volume in volumeMounts, a Filesystem one in volumeDevices), or undefined.
 */
function volumeModeMisuse(pod: V1Pod, name: string, mode: string): string | undefined {
  const uses = volumeUses(pod);
  if (uses.mounted.has(name) && mode !== "Filesystem")
    return `volume ${name} has volumeMode ${mode}, but is specified in volumeMounts`;
  if (uses.mapped.has(name) && mode !== "Block")
    return `volume ${name} has volumeMode ${mode}, but is specified in volumeDevices`;
  return undefined;
}

/** The block device at `path` (a link to one followed), or the kubelet-style reason it is not one. */
function blockDevice(pvName: string, path: string): { path: string } | { message: string } {
  const failed = (why: string): { message: string } => ({
    message: `MapVolume.MapPodDevice failed for volume "${pvName}" : ${why}`,
  });
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return failed(`path ${path} does not exist`);
  }
  return statSync(real).isBlockDevice() ? { path: real } : failed(`${path} is not a block device`);
}

async function claimPath(
  pod: V1Pod,
  volume: V1Volume,
  lookups: VolumeLookups,
): Promise<{ path: string; block: boolean } | { message: string }> {
  const bound = await boundVolume(pod, volume, lookups);
  return "message" in bound ? bound : volumeSource(pod, volume.name, bound);
}

/** The PV a pod's claim is bound to, checked both ways, or why the claim is not ready. */
async function boundVolume(
  pod: V1Pod,
  volume: V1Volume,
  lookups: VolumeLookups,
): Promise<{ pvName: string; pv: V1PersistentVolume } | { message: string }> {
  const ns = pod.metadata?.namespace ?? "default";
  const claimName = volume.persistentVolumeClaim!.claimName;
  const claim = await lookups.claim(ns, claimName);
  const prefix = `error processing PVC ${ns}/${claimName}`;
  if (!claim) return { message: `${prefix}: persistentvolumeclaim "${claimName}" not found` };
  if (claim.metadata?.deletionTimestamp) return { message: `${prefix}: PVC is being deleted` };
  const pvName = claim.spec?.volumeName;
  if (claim.status?.phase !== "Bound" || !pvName) return { message: `${prefix}: PVC is not bound` };
  const pv = await lookups.volume(pvName);
  if (!pv) return { message: `failed to fetch PV ${pvName} from API server: persistentvolume "${pvName}" not found` };
  if (pv.spec?.claimRef?.uid !== claim.metadata?.uid)
    return {
      message: `Found bound PV "${pvName}", but its claimRef does not point back to PVC ${ns}/${claimName} (uid ${claim.metadata?.uid ?? ""})`,
    };
  return { pvName, pv };
}

/** The host path of a bound PV (a directory, or a block device for volumeMode Block), or why it is not usable. */
function volumeSource(
  pod: V1Pod,
  name: string,
  { pvName, pv }: { pvName: string; pv: V1PersistentVolume },
): { path: string; block: boolean } | { message: string } {
  const source = pv.spec?.hostPath ?? pv.spec?.local;
  if (!source?.path)
    return { message: `volume "${pvName}": its volume plugin is not supported by the process-kubelet` };
  const mode = pv.spec?.volumeMode ?? "Filesystem";
  const misuse = volumeModeMisuse(pod, name, mode);
  if (misuse) return { message: misuse };
  if (mode === "Block") {
    const device = blockDevice(pvName, source.path);
    return "message" in device ? device : { path: device.path, block: true };
  }
  const typeError = pv.spec?.hostPath ? applyHostPathType(source.path, pv.spec.hostPath.type) : undefined;
  if (typeError) return { message: `MountVolume.SetUp failed for volume "${pvName}" : ${typeError}` };
  if (!existsSync(source.path))
    return { message: `MountVolume.SetUp failed for volume "${pvName}" : path ${source.path} does not exist` };
  return { path: source.path, block: false };
}

/**
 * Makes the missing subPath directories the pod's containers mount, as kubelet does before starting them; a subPath
 * of a configMap, secret, downwardAPI or projected volume names one of its files and is left alone.
 */
function makeSubPaths(pod: V1Pod, ready: ReadonlyMap<string, ResolvedVolume>): void {
  // Config volumes' subPaths name their files; an image volume is read only (its subPath must be in the image).
  const config = new Set((pod.spec?.volumes ?? []).filter((v) => isConfigVolume(v) || v.image).map((v) => v.name));
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const m of c.volumeMounts ?? []) {
      const v = ready.get(m.name);
      if (!v || !m.subPath || config.has(m.name) || !existsSync(v.hostPath) || !statSync(v.hostPath).isDirectory())
        continue;
      if (existsSync(join(v.hostPath, m.subPath))) continue;
      mkdirSync(join(v.hostPath, m.subPath), { recursive: true, mode: 0o755 });
    }
  }
}

/**
 * Sets up every volume of `pod` whose containers live in `podDir`. `linkedPodDir` is the same directory as the
 * containers are told it (through the pods directory's short link, pods-link.ts; default `podDir`): emptyDirs hold
 * unix sockets, whose paths must stay short.
 */
export async function setUpPodVolumes(
  pod: V1Pod,
  podDir: string,
  lookups: VolumeLookups,
  linkedPodDir: string = podDir,
): Promise<VolumeSetUp> {
  const ready = new Map<string, ResolvedVolume>();
  const failed: { volume: string; message: string }[] = [];
  for (const v of pod.spec?.volumes ?? []) {
    if (v.emptyDir) {
      const dir = emptyDirPath(linkedPodDir, v.name);
      mkdirSync(dir, { recursive: true, mode: 0o777 });
      ready.set(v.name, { hostPath: dir, readOnly: false });
    } else if (v.hostPath) {
      const error = applyHostPathType(v.hostPath.path, v.hostPath.type);
      if (error) failed.push({ volume: v.name, message: `MountVolume.SetUp failed for volume "${v.name}" : ${error}` });
      else ready.set(v.name, { hostPath: v.hostPath.path, readOnly: false });
    } else if (v.persistentVolumeClaim) {
      const r = await claimPath(pod, v, lookups);
      if ("message" in r) failed.push({ volume: v.name, message: r.message });
      else
        ready.set(v.name, {
          hostPath: r.path,
          readOnly: v.persistentVolumeClaim.readOnly === true,
          ...(r.block ? { block: true } : {}),
        });
    } else if (v.image) {
      const r = storedImageVolume(v.image.reference, lookups.imageStore ?? defaultStoreRoot());
      if ("message" in r) failed.push({ volume: v.name, message: r.message });
      else ready.set(v.name, { hostPath: r.path, readOnly: true });
    } else if (isConfigVolume(v)) {
      const r = await setUpConfigVolume(pod, podDir, v, lookups);
      if ("message" in r) failed.push({ volume: v.name, message: r.message });
      else ready.set(v.name, { hostPath: r.hostPath, readOnly: true });
    }
  }
  if (failed.length > 0) return { failed };
  makeSubPaths(pod, ready);
  return { ready };
}

/**
 * An image volume's files: the image's directory in the local image store (the process-kubelet's stand-in for the
 * runtime's pull and mount), or why it cannot be mounted, in the kubelet's words for a failed image volume pull.
 */
function storedImageVolume(reference: string | undefined, store: string): { path: string } | { message: string } {
  const failed = (why: string): { message: string } => ({
    message: `Failed to pull image "${reference ?? ""}": ${why}`,
  });
  if (!reference) return failed("the image volume names no reference");
  let dir: string;
  try {
    dir = imageDir(store, reference);
  } catch (error) {
    return failed((error as Error).message);
  }
  if (!existsSync(join(dir, "image.json"))) return failed(`image is not in the local image store ${store}`);
  return { path: dir };
}

/** The FailedMount event message for volumes that are not ready (kubelet's wording). */
export function failedMountMessage(failed: readonly { volume: string; message: string }[]): string {
  const names = failed.map((f) => f.volume).join(" ");
  return `Unable to attach or mount volumes: unmounted volumes=[${names}], unattached volumes=[], failed to process volumes=[${names}]: ${failed.map((f) => f.message).join("; ")}`;
}
