/**
 * configMap, secret, downwardAPI and projected volumes as the process-kubelet makes them: a directory of files under
 * the pod directory, written the way kubelet's AtomicWriter writes them, so a reader sees what it would see in a
 * container:
 *
 *   <podDir>/volumes/kubernetes.io~configmap/<volume>/      (~secret, ~downward-api, ~projected)
 *     ..2026_11_25_23_59_59.123456789/<path>             the files (mode: item mode, else defaultMode, else 0644)
 *     ..data -> ..2026_11_25_23_59_59.123456789          the current payload
 *     <first path segment> -> ..data/<first path segment>  one symlink per top-level entry
 *
 * What each source gives (kubelet's volume plugins):
 *
 *   configMap    every key of data and binaryData, or only `items` (key -> path); a missing ConfigMap fails the
 *                mount unless `optional` (then the directory is empty); an items key it lacks fails it likewise
 *   secret       the same over the Secret's (base64) data
 *   downwardAPI  each item's fieldRef of the pod (metadata.name, namespace, uid, labels, annotations and their
 *                ['key'] subscripts, spec.nodeName, spec.serviceAccountName, status.podIP/hostIP)
 *   projected    its sources merged: configMap, secret and downwardAPI as above; serviceAccountToken asks the API
 *                server for a token of the pod's account (TokenRequest: serviceaccounts/NAME/token, which the
 *                local API server answers with an opaque token that authenticates as the account); a missing
 *                account or a server without TokenRequest fails the mount. The token is not refreshed (kubelet
 *                renews it at 80% of its lifetime): a pod outliving it (default 3607 s) holds an expired token.
 *
 * Errors are kubelet's `MountVolume.SetUp failed for volume "<name>" : ...` messages; the caller retries.
 */
import { mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { goFormatMap } from "@kvt/api";
import type {
  V1ConfigMap,
  V1DownwardAPIVolumeFile,
  V1KeyToPath,
  V1Pod,
  V1Secret,
  V1ServiceAccount,
  V1Volume,
} from "../cluster/kube-models.ts";

/** Where the kubelet reads the objects config volumes show (the API, or a fake in tests). */
export interface ConfigLookups {
  configMap(namespace: string, name: string): Promise<V1ConfigMap | undefined>;
  secret(namespace: string, name: string): Promise<V1Secret | undefined>;
  serviceAccount(namespace: string, name: string): Promise<V1ServiceAccount | undefined>;
  /** A token for the account from the API server's TokenRequest, or undefined when the server offers none. */
  token(namespace: string, name: string, expirationSeconds: number, audience?: string): Promise<string | undefined>;
}

/** One file of a volume's payload. */
interface PayloadFile {
  readonly data: Buffer;
  readonly mode: number;
}

/** A payload, or why the volume cannot be set up. */
type Payload = { readonly files: Map<string, PayloadFile> } | { readonly error: string };

/** The kubelet's default file mode for these volumes (0644). */
const DEFAULT_MODE = 0o644;

/** The plugin directory of each source (kubelet's `kubernetes.io~<plugin>`). */
const PLUGIN_DIR = {
  configMap: "kubernetes.io~configmap",
  secret: "kubernetes.io~secret",
  downwardAPI: "kubernetes.io~downward-api",
  projected: "kubernetes.io~projected",
} as const;

/** Whether the kubelet makes `volume` here (a configMap, secret, downwardAPI or projected source). */
export function isConfigVolume(volume: V1Volume): boolean {
  return Boolean(volume.configMap || volume.secret || volume.downwardAPI || volume.projected);
}

/** The value of a downward API fieldRef of `pod`, or an error message. */
export function podFieldValue(pod: V1Pod, fieldPath: string): { value: string } | { error: string } {
  const subscript = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (subscript) {
    const map = subscript[1] === "labels" ? pod.metadata?.labels : pod.metadata?.annotations;
    return { value: map?.[subscript[2]] ?? "" };
  }
  const values: Record<string, string | undefined> = {
    "metadata.name": pod.metadata?.name,
    "metadata.namespace": pod.metadata?.namespace,
    "metadata.uid": pod.metadata?.uid,
    "metadata.labels": goFormatMap(pod.metadata?.labels),
    "metadata.annotations": goFormatMap(pod.metadata?.annotations),
    "spec.nodeName": pod.spec?.nodeName,
    "spec.serviceAccountName": pod.spec?.serviceAccountName,
    // Containers here share the host's network namespace view of the API (the pod IP is not theirs to report).
    "status.podIP": pod.status?.podIP ?? "",
    "status.hostIP": pod.status?.hostIP ?? "",
  };
  if (!(fieldPath in values)) return { error: `unsupported fieldPath: ${fieldPath}` };
  return { value: values[fieldPath] ?? "" };
}

/** Keys to bytes: every key, or the `items` (a missing item key is an error unless the source is optional). */
function keyFiles(
  all: Map<string, Buffer>,
  items: readonly V1KeyToPath[] | undefined,
  mode: number,
  optional: boolean,
  what: string,
): Payload {
  const files = new Map<string, PayloadFile>();
  if (!items?.length) {
    for (const [key, data] of all) files.set(key, { data, mode });
    return { files };
  }
  for (const item of items) {
    const data = all.get(item.key);
    if (data === undefined) {
      if (optional) continue;
      return {
        error: `${what} references non-existent ${what === "configmap" ? "config" : "secret"} key: ${item.key}`,
      };
    }
    files.set(item.path, { data, mode: item.mode ?? mode });
  }
  return { files };
}

function configMapData(cm: V1ConfigMap): Map<string, Buffer> {
  const all = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(cm.data ?? {})) all.set(k, Buffer.from(v, "utf8"));
  for (const [k, v] of Object.entries(cm.binaryData ?? {})) all.set(k, Buffer.from(v, "base64"));
  return all;
}

function secretData(secret: V1Secret): Map<string, Buffer> {
  const all = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(secret.data ?? {})) all.set(k, Buffer.from(v, "base64"));
  return all;
}

interface KeySource {
  readonly name: string;
  readonly items?: V1KeyToPath[];
  readonly optional?: boolean;
}

async function configMapPayload(ns: string, s: KeySource, mode: number, lookups: ConfigLookups): Promise<Payload> {
  const cm = await lookups.configMap(ns, s.name);
  if (!cm) return s.optional ? { files: new Map() } : { error: `configmap "${s.name}" not found` };
  return keyFiles(configMapData(cm), s.items, mode, s.optional === true, "configmap");
}

async function secretPayload(ns: string, s: KeySource, mode: number, lookups: ConfigLookups): Promise<Payload> {
  const secret = await lookups.secret(ns, s.name);
  if (!secret) return s.optional ? { files: new Map() } : { error: `secret "${s.name}" not found` };
  return keyFiles(secretData(secret), s.items, mode, s.optional === true, "secret");
}

function downwardApiPayload(pod: V1Pod, items: readonly V1DownwardAPIVolumeFile[] | undefined, mode: number): Payload {
  const files = new Map<string, PayloadFile>();
  for (const item of items ?? []) {
    if (!item.fieldRef) return { error: `downwardAPI item "${item.path}": only fieldRef is supported here` };
    const r = podFieldValue(pod, item.fieldRef.fieldPath);
    if ("error" in r) return r;
    files.set(item.path, { data: Buffer.from(r.value, "utf8"), mode: item.mode ?? mode });
  }
  return { files };
}

async function tokenPayload(
  pod: V1Pod,
  source: { path: string; expirationSeconds?: number; audience?: string },
  mode: number,
  lookups: ConfigLookups,
): Promise<Payload> {
  const ns = pod.metadata?.namespace ?? "default";
  const account = pod.spec?.serviceAccountName || "default";
  if (!(await lookups.serviceAccount(ns, account)))
    return { error: `failed to fetch token: serviceaccounts "${account}" not found` };
  const token = await lookups.token(ns, account, source.expirationSeconds ?? 3600, source.audience);
  if (token === undefined) return { error: "failed to fetch token: the server could not find the requested resource" };
  return { files: new Map([[source.path, { data: Buffer.from(token, "utf8"), mode }]]) };
}

async function projectedPayload(pod: V1Pod, volume: V1Volume, lookups: ConfigLookups): Promise<Payload> {
  const ns = pod.metadata?.namespace ?? "default";
  const mode = volume.projected!.defaultMode ?? DEFAULT_MODE;
  const files = new Map<string, PayloadFile>();
  for (const source of volume.projected!.sources ?? []) {
    let part: Payload = { files: new Map() };
    if (source.configMap) part = await configMapPayload(ns, source.configMap as KeySource, mode, lookups);
    else if (source.secret) part = await secretPayload(ns, source.secret as KeySource, mode, lookups);
    else if (source.downwardAPI) part = downwardApiPayload(pod, source.downwardAPI.items, mode);
    else if (source.serviceAccountToken) part = await tokenPayload(pod, source.serviceAccountToken, mode, lookups);
    if ("error" in part) return part;
    for (const [path, file] of part.files) files.set(path, file);
  }
  return { files };
}

/** The files `volume` holds for `pod`, or why it cannot be set up (kubelet's words, without the SetUp prefix). */
export async function configVolumePayload(pod: V1Pod, volume: V1Volume, lookups: ConfigLookups): Promise<Payload> {
  const ns = pod.metadata?.namespace ?? "default";
  if (volume.configMap) {
    const s = volume.configMap;
    return configMapPayload(ns, s as KeySource, s.defaultMode ?? DEFAULT_MODE, lookups);
  }
  if (volume.secret) {
    const s = volume.secret;
    const source = { name: s.secretName ?? "", items: s.items, optional: s.optional };
    return secretPayload(ns, source, s.defaultMode ?? DEFAULT_MODE, lookups);
  }
  if (volume.downwardAPI)
    return downwardApiPayload(pod, volume.downwardAPI.items, volume.downwardAPI.defaultMode ?? DEFAULT_MODE);
  if (volume.projected) return projectedPayload(pod, volume, lookups);
  return { error: "not a configMap, secret, downwardAPI or projected volume" };
}

/** A payload path that stays inside the volume (kubelet refuses absolute paths and `..` segments). */
function safePath(path: string): boolean {
  return path !== "" && !path.startsWith("/") && !path.split("/").some((s) => s === ".." || s === "");
}

/** kubelet's timestamped payload directory name: `..YYYY_MM_DD_HH_MM_SS.<nanos>`. */
function payloadDirName(now: Date): string {
  const p = (n: number): string => String(n).padStart(2, "0");
  const stamp = `${now.getUTCFullYear()}_${p(now.getUTCMonth() + 1)}_${p(now.getUTCDate())}_${p(now.getUTCHours())}_${p(now.getUTCMinutes())}_${p(now.getUTCSeconds())}`;
  return `..${stamp}.${String(now.getUTCMilliseconds() * 1_000_000 + Math.floor(Math.random() * 1_000_000))}`;
}

/**
 * Writes `files` into `dir` as kubelet's AtomicWriter does (see the header): the payload in a timestamped
 * directory, `..data` pointing at it, a symlink per top-level entry; an earlier payload is replaced.
 */
export function writeAtomically(dir: string, files: ReadonlyMap<string, PayloadFile>, now = new Date()): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const payload = payloadDirName(now);
  for (const [path, file] of files) {
    if (!safePath(path)) throw new Error(`invalid path ${JSON.stringify(path)}: must be relative without ".."`);
    const target = join(dir, payload, path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o755 });
    writeFileSync(target, file.data, { mode: file.mode });
  }
  mkdirSync(join(dir, payload), { recursive: true, mode: 0o755 });
  const old = readdirSync(dir).filter((e) => e.startsWith("..") && e !== "..data" && e !== payload);
  symlinkSync(payload, join(dir, "..data_tmp"));
  renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
  const top = new Set([...files.keys()].map((p) => p.split("/")[0]));
  for (const entry of readdirSync(dir)) {
    if (!entry.startsWith("..") && !top.has(entry)) rmSync(join(dir, entry), { recursive: true, force: true });
  }
  for (const name of top) {
    rmSync(join(dir, name), { force: true });
    symlinkSync(join("..data", name), join(dir, name));
  }
  for (const e of old) rmSync(join(dir, e), { recursive: true, force: true });
}

/**
 * Sets up one configMap, secret, downwardAPI or projected volume of `pod` under `podDir`: its directory, or the
 * kubelet's `MountVolume.SetUp failed ...` message.
 */
export async function setUpConfigVolume(
  pod: V1Pod,
  podDir: string,
  volume: V1Volume,
  lookups: ConfigLookups,
): Promise<{ hostPath: string } | { message: string }> {
  const plugin = volume.configMap
    ? PLUGIN_DIR.configMap
    : volume.secret
      ? PLUGIN_DIR.secret
      : volume.downwardAPI
        ? PLUGIN_DIR.downwardAPI
        : PLUGIN_DIR.projected;
  const dir = join(podDir, "volumes", plugin, volume.name);
  const failed = (why: string): { message: string } => ({
    message: `MountVolume.SetUp failed for volume "${volume.name}" : ${why}`,
  });
  const payload = await configVolumePayload(pod, volume, lookups);
  if ("error" in payload) return failed(payload.error);
  try {
    writeAtomically(dir, payload.files);
  } catch (err) {
    return failed((err as Error).message);
  }
  return { hostPath: dir };
}
