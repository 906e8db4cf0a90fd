/**
 * The lane's raw block storage: StorageClass `local-block` and its dynamic provisioner, a host process `up` starts
 * and the supervisor keeps running (it needs root for losetup). The local cluster serves the same class inside its
 * API server; the decisions (class, PV, device size, file layout) and the host side (sparse file, loop device, link)
 * are that provisioner's own, imported from @kvt/local-cluster; what is here is how they meet kube-apiserver.
 *
 * ```
 *   up:  ServiceAccount kube-system/local-block-provisioner, ClusterRole (persistentvolumes create/delete/get/list/
 *        watch; persistentvolumeclaims, storageclasses get/list/watch; events create) and its binding, StorageClass
 *        local-block (kubevirt-ts.io/local-block, WaitForFirstConsumer, Delete) -> a TokenRequest token of the
 *        account in <cluster-dir>/local-block-provisioner.kubeconfig, which the supervised process waits for
 *   each pass (at every change its watches of StorageClasses, claims and PVs see, and every 30 s):
 *     Pending claim of a class of ours, storage-provisioner annotation ours (kube-controller-manager's), a selected
 *     node when the class waits for the first consumer, no PV pvc-<uid> yet
 *        -> Block: <cluster-dir>/storage/local-block/pvc-<uid>_<ns>_<name>.img (sparse, the request), a loop device
 *           over it, the link beside it -> the device; PV pvc-<uid> (volumeMode Block, local.path = the link, the
 *           claim's access modes, claimRef = the claim: kube-controller-manager binds it, as for external-provisioner)
 *        -> Filesystem: refused, one ProvisioningFailed event
 *     Released PV of ours, reclaim Delete -> the loop device detached, link and file removed, the PV deleted (uid
 *        precondition)
 *     at start: each PV of ours gets its device again (after a restart of the host) and the link follows it
 *   SIGTERM (down): every loop device over our files is detached, and the kubelets' own loop devices over them
 *        (kubelet keeps one per mapped Block volume, backed by .../volumeDevices/<pv>/<pod uid>)
 * ```
 *
 * Node affinity: every node (`kubernetes.io/hostname Exists`). Each node is a mount namespace of this machine made
 * from the host's, so the devtmpfs at /dev and the cluster directory are the same on all of them: a device made here
 * is there for every kubelet at once.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, statSync, watch, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import {
  ApiError,
  CORE_V1,
  type CoreEvent,
  EventRecorder,
  Informer,
  type KubeObject,
  kubeConfigFromFile,
  type ResourceClient,
  RestClient,
  resourceClient,
} from "@kvt/kube";
import {
  VOLUME_ANNOTATIONS as ANN,
  attachedUnder,
  attachLoopDevice,
  backingFileOf,
  classOf,
  detachDevice,
  deviceBytes,
  isInside,
  LOCAL_BLOCK_CLASS,
  LOCAL_BLOCK_PROVISIONER,
  type LoopDevice,
  linkDevice,
  listLoopDevices,
  localBlockRefusal,
  localBlockStorageClass,
  localBlockVolume,
  makeBlockDevice,
  removeBlockDevice,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1StorageClass,
} from "@kvt/local-cluster";
import type { Logger } from "@kvt/observability";
import { stringify } from "yaml";
import { storageDir } from "./local-path.ts";

const exec = promisify(execFile);

export { LOCAL_BLOCK_CLASS, LOCAL_BLOCK_PROVISIONER };

/** The supervised component's name (and the cli command that runs it). */
export const LOCAL_BLOCK_COMPONENT = "local-block-provisioner";
const NAMESPACE = "kube-system";
const ACCOUNT = "local-block-provisioner";
const ROLE = "kubevirt-ts:local-block-provisioner";
/** How long the provisioner's token lives (renewed by the next `up`). */
const TOKEN_DURATION = "8760h";

/** Where the backing files and device links live under a cluster directory. */
export const localBlockDir = (clusterDir: string): string => join(storageDir(clusterDir), "local-block");
/** The provisioner's kubeconfig (its ServiceAccount token), written by `up`. */
export const localBlockKubeconfig = (clusterDir: string): string =>
  join(clusterDir, `${LOCAL_BLOCK_COMPONENT}.kubeconfig`);

type Manifest = Record<string, unknown>;

/** The provisioner's account, least-privilege role, binding and StorageClass, in apply order (pure). */
export function localBlockManifests(): Manifest[] {
  const rule = (apiGroups: string[], resources: string[], verbs: string[]) => ({ apiGroups, resources, verbs });
  const read = ["get", "list", "watch"];
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: ACCOUNT, namespace: NAMESPACE } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: ROLE },
      rules: [
        rule([""], ["persistentvolumes"], ["create", "delete", ...read]),
        rule([""], ["persistentvolumeclaims"], read),
        rule(["storage.k8s.io"], ["storageclasses"], read),
        rule([""], ["events"], ["create"]),
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: ROLE },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: ROLE },
      subjects: [{ kind: "ServiceAccount", name: ACCOUNT, namespace: NAMESPACE }],
    },
    localBlockStorageClass(),
  ];
}

/** A claim this provisioner should act on: provision it, or refuse it with `refusal`. */
export interface ClaimWork {
  readonly claim: V1PersistentVolumeClaim;
  readonly sc: V1StorageClass;
  readonly refusal?: string;
}

const isOurs = (sc: V1StorageClass): boolean => sc.provisioner === LOCAL_BLOCK_PROVISIONER;
const provisionerOf = (claim: V1PersistentVolumeClaim): string | undefined =>
  claim.metadata?.annotations?.[ANN.storageProvisioner] ?? claim.metadata?.annotations?.[ANN.betaStorageProvisioner];

/** Pending, unbound, not being deleted, handed to us, its node selected when `sc` waits for the first consumer. */
function waitsForUs(claim: V1PersistentVolumeClaim, sc: V1StorageClass): boolean {
  if (claim.spec?.volumeName || claim.metadata?.deletionTimestamp) return false;
  if ((claim.status?.phase ?? "Pending") !== "Pending") return false;
  if (provisionerOf(claim) !== LOCAL_BLOCK_PROVISIONER) return false;
  return sc.volumeBindingMode !== "WaitForFirstConsumer" || Boolean(claim.metadata?.annotations?.[ANN.selectedNode]);
}

/**
 * The claims to provision now (pure), as external-provisioner picks them: Pending, unbound, not being deleted, of a
 * class of ours, handed to us by kube-controller-manager's storage-provisioner annotation, with a selected node when
 * the class waits for the first consumer, and no PV of the claim's name yet. Not Block: a refusal.
 */
export function claimsToProvision(
  classes: readonly V1StorageClass[],
  claims: readonly V1PersistentVolumeClaim[],
  volumes: readonly V1PersistentVolume[],
): ClaimWork[] {
  const ours = new Map(classes.filter(isOurs).map((sc) => [sc.metadata?.name ?? "", sc]));
  const volumeNames = new Set(volumes.map((v) => v.metadata?.name));
  const work: ClaimWork[] = [];
  for (const claim of claims) {
    const sc = ours.get(classOf(claim));
    if (!sc || !waitsForUs(claim, sc) || volumeNames.has(`pvc-${claim.metadata?.uid}`)) continue;
    const refusal = localBlockRefusal(claim);
    work.push(refusal ? { claim, sc, refusal } : { claim, sc });
  }
  return work;
}

/** The PVs of ours to reclaim now (pure): Released with reclaim policy Delete, not being deleted. */
export function volumesToDelete(volumes: readonly V1PersistentVolume[]): V1PersistentVolume[] {
  return volumes.filter(
    (v) =>
      v.metadata?.annotations?.[ANN.provisionedBy] === LOCAL_BLOCK_PROVISIONER &&
      v.status?.phase === "Released" &&
      v.spec?.persistentVolumeReclaimPolicy === "Delete" &&
      !v.metadata?.deletionTimestamp,
  );
}

/** The PVs of ours whose device should exist (every PV of ours not being reclaimed) (pure). */
export function volumesToAttach(volumes: readonly V1PersistentVolume[], baseDir: string): V1PersistentVolume[] {
  return volumes.filter(
    (v) =>
      v.metadata?.annotations?.[ANN.provisionedBy] === LOCAL_BLOCK_PROVISIONER &&
      v.status?.phase !== "Released" &&
      isInside(baseDir, v.spec?.local?.path ?? "/"),
  );
}

/**
 * The loop devices to detach when the cluster stops (pure): those over our files, and the kubelets' over the
 * devices of our PVs (named in their backing path `.../volumeDevices/<pv>/<pod uid>`), the kubelets' first.
 */
export function devicesToRelease(
  devices: readonly LoopDevice[],
  baseDir: string,
  pvNames: ReadonlySet<string>,
): string[] {
  const ours = devices.filter((d) => isInside(baseDir, d.file));
  const kubelets = devices.filter((d) => {
    const m = /\/volumeDevices\/([^/]+)\/[^/]+$/.exec(d.file);
    return m !== null && pvNames.has(m[1]) && !ours.includes(d);
  });
  return [...kubelets, ...ours].map((d) => d.device);
}

/** The PV names of the backing files in `baseDir` (`pvc-<uid>_<ns>_<name>.img` -> `pvc-<uid>`). */
export function volumeNamesOfFiles(files: readonly string[]): Set<string> {
  return new Set(files.filter((f) => f.endsWith(".img")).map((f) => basename(f).split("_")[0]));
}

/** What the reconciler reads and writes through the API (a fake in the tests). */
export interface LocalBlockApi {
  listClasses(): Promise<V1StorageClass[]>;
  listClaims(): Promise<V1PersistentVolumeClaim[]>;
  listVolumes(): Promise<V1PersistentVolume[]>;
  /** Creates the PV; one that exists already (a retry) is not an error. */
  createVolume(pv: V1PersistentVolume): Promise<void>;
  /** Deletes that very PV (uid precondition); one gone already is not an error. */
  deleteVolume(pv: V1PersistentVolume): Promise<void>;
  event(claim: V1PersistentVolumeClaim, type: "Normal" | "Warning", reason: string, message: string): void;
}

/** The host side (loop devices; a fake in the tests). */
export interface BlockDevices {
  /** Makes the file and device behind `link`, `bytes` long; returns the device. */
  make(link: string, bytes: bigint): string;
  /** Attaches the existing file behind `link` again if needed and points the link at its device. */
  reattach(link: string): string;
  /** Detaches the device, removes the link and the file; returns the devices detached. */
  remove(link: string): string[];
}

/** What one pass did. */
export interface PassResult {
  readonly provisioned: string[];
  readonly deleted: string[];
  readonly refused: string[];
}

/** One pass over the claims and volumes: the provisioner's reconcile. */
export class LocalBlockReconciler {
  readonly #api: LocalBlockApi;
  readonly #devices: BlockDevices;
  readonly #baseDir: string;
  readonly #logger: Logger;
  /** Claims (uid) refused already: one event each. */
  readonly #refused = new Set<string>();
  #resumed = false;

  constructor(api: LocalBlockApi, devices: BlockDevices, baseDir: string, logger: Logger) {
    this.#api = api;
    this.#devices = devices;
    this.#baseDir = resolve(baseDir);
    this.#logger = logger;
  }

  async pass(): Promise<PassResult> {
    const [classes, claims, volumes] = await Promise.all([
      this.#api.listClasses(),
      this.#api.listClaims(),
      this.#api.listVolumes(),
    ]);
    if (!this.#resumed) {
      this.#resume(volumes);
      this.#resumed = true;
    }
    const result: PassResult = { provisioned: [], deleted: [], refused: [] };
    for (const work of claimsToProvision(classes, claims, volumes)) await this.#provision(work, result);
    for (const pv of volumesToDelete(volumes)) await this.#reclaim(pv, result);
    return result;
  }

  /** At start: every PV of ours gets its device again (the same one if still attached) and its link. */
  #resume(volumes: readonly V1PersistentVolume[]): void {
    for (const pv of volumesToAttach(volumes, this.#baseDir)) {
      try {
        this.#devices.reattach(pv.spec?.local?.path ?? "");
      } catch (err) {
        // The PV stays; the kubelet reports the missing device to pods that use it (FailedMapVolume).
        this.#logger.error({ err, pv: pv.metadata?.name }, "cannot attach the loop device of a Block volume");
      }
    }
  }

  async #provision({ claim, sc, refusal }: ClaimWork, result: PassResult): Promise<void> {
    const key = `${claim.metadata?.namespace}/${claim.metadata?.name}`;
    const uid = claim.metadata?.uid ?? "";
    if (refusal) {
      if (this.#refused.has(uid)) return;
      this.#refused.add(uid);
      this.#api.event(claim, "Warning", "ProvisioningFailed", refusal);
      result.refused.push(key);
      return;
    }
    // Every node sees every device (one machine, one /dev): node affinity to all of them.
    const pv = localBlockVolume(claim, sc, this.#baseDir, undefined);
    const name = pv.metadata?.name ?? "";
    try {
      const device = this.#devices.make(pv.spec?.local?.path ?? "", deviceBytes(claim));
      await this.#api.createVolume(pv);
      this.#logger.info({ pv: name, claim: key, device }, "provisioned a Block volume");
      this.#api.event(claim, "Normal", "ProvisioningSucceeded", `Successfully provisioned volume ${name}`);
      result.provisioned.push(name);
    } catch (err) {
      this.#logger.error({ err, claim: key }, "provisioning failed");
      this.#api.event(claim, "Warning", "ProvisioningFailed", (err as Error).message);
    }
  }

  async #reclaim(pv: V1PersistentVolume, result: PassResult): Promise<void> {
    const name = pv.metadata?.name ?? "";
    const link = pv.spec?.local?.path;
    if (!link || !isInside(this.#baseDir, link)) {
      this.#logger.error({ pv: name, link }, `volume path is not inside ${this.#baseDir}: not deleting it`);
      return;
    }
    try {
      const devices = this.#devices.remove(link);
      await this.#api.deleteVolume(pv);
      this.#logger.info({ pv: name, devices }, "detached and removed a Block volume");
      result.deleted.push(name);
    } catch (err) {
      this.#logger.error({ err, pv: name }, "deleting a Block volume failed");
    }
  }
}

/** The loop devices the real host gives (losetup, root). */
export const hostBlockDevices: BlockDevices = {
  make: makeBlockDevice,
  reattach(link) {
    const device = attachLoopDevice(backingFileOf(link));
    linkDevice(link, device);
    return device;
  },
  remove: removeBlockDevice,
};

/**
 * Detaches the loop devices of the cluster's Block volumes and the kubelets' over them; returns those detached. A
 * device that cannot be detached is reported through `report` and the others go on (`losetup -a` shows it).
 */
export function releaseLocalBlockDevices(clusterDir: string, report: (line: string) => void): string[] {
  const baseDir = localBlockDir(clusterDir);
  if (!existsSync(baseDir)) return [];
  let devices: LoopDevice[];
  const names = volumeNamesOfFiles(readdirSync(baseDir));
  try {
    devices = listLoopDevices();
    for (const d of attachedUnder(baseDir)) names.add(basename(d.file).split("_")[0]);
  } catch (err) {
    report(`cannot list loop devices: ${(err as Error).message}`);
    return [];
  }
  const detached: string[] = [];
  for (const device of devicesToRelease(devices, baseDir, names)) {
    try {
      detachDevice(device);
      detached.push(device);
    } catch (err) {
      report(`cannot detach ${device}: ${(err as Error).message}`);
    }
  }
  return detached;
}

/**
 * Applies the provisioner's objects with the release's kubectl and writes its kubeconfig with a TokenRequest token
 * of its ServiceAccount (the supervised process waits for that file).
 */
export async function installLocalBlock(
  kubectl: string,
  adminKubeconfig: string,
  clusterDir: string,
  timeoutMs: number,
): Promise<void> {
  const run = async (args: string[]): Promise<string> => {
    try {
      const { stdout } = await exec(kubectl, ["--kubeconfig", adminKubeconfig, ...args], { timeout: timeoutMs });
      return stdout;
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`kubectl ${args.join(" ")} failed: ${(e.stderr ?? e.message).trim()}`, { cause: error });
    }
  };
  mkdirSync(localBlockDir(clusterDir), { recursive: true, mode: 0o700 });
  const addons = join(clusterDir, "addons");
  mkdirSync(addons, { recursive: true });
  const file = join(addons, "local-block.yaml");
  writeFileSync(
    file,
    localBlockManifests()
      .map((m) => stringify(m))
      .join("---\n"),
  );
  await run(["apply", "-f", file]);
  const token = (await run(["create", "token", ACCOUNT, "-n", NAMESPACE, `--duration=${TOKEN_DURATION}`])).trim();
  const config = JSON.parse(await run(["config", "view", "--raw", "--minify", "--flatten", "-o", "json"])) as {
    users: unknown[];
    contexts: { context: { user: string } }[];
  };
  const user = `system:serviceaccount:${NAMESPACE}:${ACCOUNT}`;
  config.users = [{ name: user, user: { token } }];
  for (const context of config.contexts) context.context.user = user;
  writeFileSync(localBlockKubeconfig(clusterDir), JSON.stringify(config, null, 2), { mode: 0o600 });
}

/** The API side of the reconciler over a kubeconfig: reads from watch caches, `onChange` at every change seen. */
function kubeApi(kubeconfig: string, logger: Logger, onChange: () => void): LocalBlockApi & WatchedApi {
  const transport = new RestClient(kubeConfigFromFile(kubeconfig), { userAgent: LOCAL_BLOCK_COMPONENT });
  const classes = resourceClient<V1StorageClass & KubeObject>(transport, CORE_V1.storageClasses);
  const claims = resourceClient<V1PersistentVolumeClaim & KubeObject>(transport, CORE_V1.persistentVolumeClaims);
  const volumes = resourceClient<V1PersistentVolume & KubeObject>(transport, CORE_V1.persistentVolumes);
  const events = resourceClient<CoreEvent>(transport, CORE_V1.events);
  const recorder = new EventRecorder({ events, component: LOCAL_BLOCK_PROVISIONER, logger });
  const handlers = { onAdd: onChange, onUpdate: onChange, onDelete: onChange };
  const watched = <T extends KubeObject>(client: ResourceClient<T>): Informer<T> => {
    const informer = new Informer<T>({ client, logger });
    informer.addHandlers(handlers);
    return informer;
  };
  const informers = { classes: watched(classes), claims: watched(claims), volumes: watched(volumes) };
  const all = Object.values(informers);
  return {
    start: () => {
      for (const i of all) i.start();
    },
    stop: () => {
      for (const i of all) i.stop();
    },
    get synced() {
      return all.every((i) => i.hasSynced);
    },
    listClasses: async () => informers.classes.store.list(),
    listClaims: async () => informers.claims.store.list(),
    listVolumes: async () => informers.volumes.store.list(),
    async createVolume(pv) {
      try {
        await volumes.create(pv);
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 409)) throw err;
      }
    },
    async deleteVolume(pv) {
      try {
        await volumes.delete("", pv.metadata!.name!, { preconditions: { uid: pv.metadata?.uid } });
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 404)) throw err;
      }
    },
    // A listed item carries no kind: the event's involvedObject needs it.
    event: (claim, type, reason, message) =>
      recorder.event({ apiVersion: "v1", kind: "PersistentVolumeClaim", ...claim }, type, reason, message),
  };
}

/** The watches behind {@link kubeApi}. */
export interface WatchedApi {
  start(): void;
  stop(): void;
  /** True once every watch has its first list. */
  readonly synced: boolean;
}

/** What {@link runLocalBlockProvisioner} uses; tests replace the API and the devices. */
export interface ProvisionerOptions {
  /** A pass this often besides the changes (ms); default 30 s. */
  readonly resyncMs?: number;
  readonly api?: (kubeconfig: string, logger: Logger, onChange: () => void) => LocalBlockApi & WatchedApi;
  readonly devices?: BlockDevices;
}

/**
 * The supervised process: waits for its kubeconfig, then watches StorageClasses, claims and PVs and reconciles
 * when any of them changes (coalesced: one pass at a time, one more if something changed during it), and every
 * `resyncMs` besides (a provisioning that failed is tried again then), until `signal` aborts; then detaches every
 * loop device of the cluster's Block volumes. A rejected token (401 on a write), or a kubeconfig that `up` wrote
 * anew (a new token: the watches cannot authenticate with the old one), ends it: the supervisor starts it again.
 */
export async function runLocalBlockProvisioner(
  clusterDir: string,
  logger: Logger,
  signal: AbortSignal,
  options: ProvisionerOptions = {},
): Promise<void> {
  const resyncMs = options.resyncMs ?? 30_000;
  const kubeconfig = localBlockKubeconfig(clusterDir);
  while (!signal.aborted && !existsSync(kubeconfig)) await sleep(1000, undefined, { signal }).catch(() => undefined);
  const baseDir = localBlockDir(clusterDir);
  let api: (LocalBlockApi & WatchedApi) | undefined;
  try {
    if (signal.aborted) return;
    const written = statSync(kubeconfig).mtimeMs;
    let kick: () => void = () => {};
    let changed = true;
    const onChange = (): void => {
      changed = true;
      kick();
    };
    api = (options.api ?? kubeApi)(kubeconfig, logger, onChange);
    const reconciler = new LocalBlockReconciler(api, options.devices ?? hostBlockDevices, baseDir, logger);
    api.start();
    logger.info({ baseDir }, "local-block provisioner watching claims and volumes");
    const renewed = watchFile(kubeconfig, onChange);
    try {
      while (!signal.aborted) {
        if (statSync(kubeconfig, { throwIfNoEntry: false })?.mtimeMs !== written)
          throw new Error(`${kubeconfig} was written anew (a new token): restarting to use it`);
        let failed = false;
        if (api.synced && changed) {
          changed = false;
          failed = !(await passOnce(reconciler, logger));
          if (changed && !failed) continue; // something changed during the pass
        }
        // Until a change (kick) or the resync: a second after a failed pass or while the caches fill, else resyncMs.
        const woken = new AbortController();
        kick = () => woken.abort();
        await sleep(failed || !api.synced ? 1000 : resyncMs, undefined, {
          signal: AbortSignal.any([signal, woken.signal]),
        }).then(
          () => {
            changed = true;
          },
          () => undefined,
        );
      }
    } finally {
      renewed.close();
    }
  } finally {
    api?.stop();
    // Only when stopped: a restart after a failure keeps the devices pods use.
    if (signal.aborted) {
      const detached = releaseLocalBlockDevices(clusterDir, (line) => logger.error(line));
      logger.info({ detached }, "local-block provisioner stopped");
    }
  }
}

/** One pass; false when it failed (retried), a rejected token (401) thrown. */
async function passOnce(reconciler: LocalBlockReconciler, logger: Logger): Promise<boolean> {
  try {
    await reconciler.pass();
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.code === 401) throw err;
    logger.warn({ err }, "a pass failed; retrying in a second");
    return false;
  }
}

/** Calls `onChange` when `file` is written (its directory is watched: a rename over it is seen too). */
function watchFile(file: string, onChange: () => void): { close(): void } {
  const watcher = watch(dirname(file), (_event, name) => {
    if (name === basename(file)) onChange();
  });
  watcher.on("error", () => undefined); // the resync's stat check still sees the file change
  return watcher;
}
