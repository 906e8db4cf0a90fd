/**
 * The process-kubelet: the node agent of the local cluster. It runs the containers of the Pods bound to its node
 * as local processes (container-spec.ts decides how), reports Pod status, deletes Pods gracefully, and keeps its
 * Node object and heartbeat current. One instance per simulated node.
 *
 *   Pod bound here (spec.nodeName)        -> make <dataDir>/pods/<uid>/, set up its volumes (pod-volumes.ts; until
 *                                            every one is ready: containers Waiting/ContainerCreating, a FailedMount
 *                                            event, retried every second), start containers, report status
 *   container state changes               -> recompute and write pods/status (merge patch)
 *   deletionTimestamp set                 -> stop containers (SIGTERM, grace, SIGKILL), then DELETE with grace 0
 *   Pod gone from the API                 -> stop containers at once
 *   kubelet stopping (node shutdown)      -> stop every container with its pod's grace period
 *   kubelet starting                      -> adopt the containers an earlier kubelet started (their records under
 *                                            the pod directory; never a second copy), end those whose pod is gone
 *                                            and remove their directories (node-reaper.ts)
 *
 * A pod's directory is `<dataDir>/pods/<uid>`, the real kubelet's layout under its root dir: its emptyDir volumes
 * (the launcher's `sockets` and `private`) are `volumes/kubernetes.io~empty-dir/<name>` there, so they go with the
 * directory when the pod is deleted. Containers are told them through the pods directory's short link
 * (pods-link.ts), which the node's virt-handler is given as its kubelet pods directory.
 */
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  CORE_V1,
  type CoreEvent,
  EventRecorder,
  Informer,
  type KubeObject,
  type ResourceClient,
  type RestTransport,
  resourceClient,
} from "@kvt/kube";
import type { Logger } from "@kvt/observability";
import type {
  V1ConfigMap,
  V1Container,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1Secret,
  V1ServiceAccount,
} from "../cluster/kube-models.ts";
import type { KubeletNetwork } from "../network/kubelet-network.ts";
import { ContainerProcess } from "./container-process.ts";
import { type ContainerRecord, readRecords } from "./container-records.ts";
import { type ContainerPlan, planContainer, type ResolvedVolume, type RuntimeLayout } from "./container-spec.ts";
import { withDevices } from "./device-plugins/container-devices.ts";
import type { AdmissionRefusal, DeviceManager } from "./device-plugins/device-manager.ts";
import { CONTAINER_LOG_MAX_BYTES, rotateLog } from "./log-rotation.ts";
import { endContainers, recordedPods } from "./node-reaper.ts";
import { type ContainerRunState, podStatus } from "./pod-status.ts";
import { failedMountMessage, setUpPodVolumes, type VolumeLookups } from "./pod-volumes.ts";
import { makePodsLink, removePodsLink } from "./pods-link.ts";

/** How often container logs are checked against their size cap. */
const LOG_ROTATION_MS = 2000;

/** How often a pod whose volumes are not ready is tried again. */
const VOLUME_RETRY_MS = 1000;

/** What a kubelet needs. */
export interface KubeletOptions {
  readonly nodeName: string;
  /** The API server (a @kvt/kube RestClient). */
  readonly transport: RestTransport;
  /** Where pod directories and container logs live. */
  readonly dataDir: string;
  readonly layout: RuntimeLayout;
  readonly log: Logger;
  /** The pod network (network/kubelet-network.ts); none: pods share the node's network. */
  readonly network?: KubeletNetwork;
  /** A container log larger than this is rotated (the kubelet's containerLogMaxSize; default 10Mi). */
  readonly containerLogMaxBytes?: number;
  /** The device manager (device-plugins/): admission allocates devices, containers get the plugins' answers. */
  readonly devices?: DeviceManager;
}

interface RunningPod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly dir: string;
  readonly containers: ContainerProcess[];
  /** Set once every volume is set up and the containers were created. */
  volumes: ReadonlyMap<string, ResolvedVolume> | undefined;
  /** The last FailedMount message recorded (one event per distinct message). */
  lastMountError: string | undefined;
  pod: V1Pod;
  stopping: boolean;
  statusWrite: Promise<void>;
  /** A status write is queued and has not read the state yet: later changes ride along with it. */
  statusQueued: boolean;
  /** Refused at admission (device allocation): the pod is Failed with this and never starts. */
  rejected?: AdmissionRefusal;
}

/** Runs the pods of one node. */
export class Kubelet {
  readonly #o: KubeletOptions;
  readonly #pods = new Map<string, RunningPod>();
  readonly #podClient: ResourceClient<V1Pod>;
  readonly #events: EventRecorder;
  /** The claims, volumes and config objects, read from the API server each time (they may have just changed). */
  readonly #lookups: VolumeLookups;
  #informer: Informer<V1Pod> | undefined;
  /** Until the first pod list is processed: the containers an earlier kubelet started, by pod uid. */
  #recorded: Map<string, Map<string, ContainerRecord>> | undefined;
  /** The short link of `<dataDir>/pods` (pods-link.ts), made at start. */
  #podsLink: string | undefined;
  #logRotation: ReturnType<typeof setInterval> | undefined;
  #stopped = false;

  constructor(options: KubeletOptions) {
    this.#o = options;
    this.#podClient = resourceClient<V1Pod>(options.transport, CORE_V1.pods);
    this.#lookups = lookupsOver(options.transport);
    // As kubelet's recorder: source kubelet on this host; repeats of one event bump its count.
    this.#events = new EventRecorder({
      events: resourceClient<CoreEvent>(options.transport, CORE_V1.events),
      component: "kubelet",
      host: options.nodeName,
      logger: options.log,
    });
  }

  /** The directory of a pod's files (container logs, container records, its volumes). */
  podDir(uid: string): string {
    return join(this.#o.dataDir, "pods", uid);
  }

  /** The pod's directory as containers are told it: through the short link of the pods directory once made. */
  #linkedPodDir(uid: string): string {
    return this.#podsLink ? join(this.#podsLink, uid) : this.podDir(uid);
  }

  /** The log file of `container` in the pod `namespace/name`, if this kubelet runs it. */
  containerLogPath(namespace: string, name: string, container?: string): string | undefined {
    for (const p of this.#pods.values()) {
      if (p.namespace !== namespace || p.name !== name) continue;
      const c = container ? p.containers.find((x) => x.state.name === container) : p.containers[0];
      return c?.logPath;
    }
    return undefined;
  }

  /** Starts watching pods; resolves once the first list is processed. */
  async start(): Promise<void> {
    // Lists and watches are retried by the informer itself (backoff, relist on 410).
    const informer = new Informer<V1Pod>({
      client: this.#podClient,
      logger: this.#o.log.child({ informer: "pods" }),
    });
    informer.addHandlers({
      onAdd: (pod) => this.#sync(pod),
      onUpdate: (_old, pod) => this.#sync(pod),
      onDelete: (pod) => this.#gone(pod),
    });
    this.#informer = informer;
    mkdirSync(join(this.#o.dataDir, "pods"), { recursive: true });
    this.#podsLink = makePodsLink(this.#o.dataDir);
    this.#recorded = recordedPods(join(this.#o.dataDir, "pods"));
    informer.start();
    await informer.waitForSync();
    // Every pod of the first list was synced (adopting its containers): what is left belongs to pods that are gone.
    const leftover = this.#recorded;
    this.#recorded = undefined;
    for (const [uid, records] of leftover) if (!this.#pods.has(uid)) void this.#endOrphan(uid, records);
    this.#o.devices?.retain(new Set(this.#pods.keys()));
    this.#logRotation = setInterval(() => this.#rotateLogs(), LOG_ROTATION_MS);
    this.#logRotation.unref();
  }

  /** Rotates every container log over the cap (copytruncate: the containers keep their descriptors). */
  #rotateLogs(): void {
    for (const p of this.#pods.values())
      for (const c of p.containers) rotateLog(c.logPath, this.#o.containerLogMaxBytes ?? CONTAINER_LOG_MAX_BYTES);
  }

  /** Ends the containers of a pod this node no longer runs, then removes its directory unless the pod exists. */
  async #endOrphan(uid: string, records: Map<string, ContainerRecord>): Promise<void> {
    this.#o.log.info({ uid, containers: [...records.keys()] }, "ending containers whose pod is gone");
    await endContainers(records.values());
    const exists = this.#informer?.store.list().some((p) => p.metadata?.uid === uid) ?? true;
    if (!exists && !this.#pods.has(uid)) rmSync(this.podDir(uid), { recursive: true, force: true });
  }

  /** Node shutdown: stops every container (each pod's grace period) and the watch. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#logRotation);
    this.#informer?.stop();
    await Promise.all([...this.#pods.values()].map((p) => this.#stopContainers(p, graceOf(p.pod))));
    if (this.#podsLink) removePodsLink(this.#o.dataDir);
  }

  #sync(pod: V1Pod): void {
    if (this.#stopped || pod.spec?.nodeName !== this.#o.nodeName || !pod.metadata?.uid) return;
    const uid = pod.metadata.uid;
    let running = this.#pods.get(uid);
    if (!running) {
      if (pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") return; // finished before we knew it
      if (pod.metadata.deletionTimestamp && !this.#recorded?.has(uid)) {
        void this.#finalizeDelete(pod);
        return;
      }
      running = this.#launch(pod);
    }
    running.pod = pod;
    if (pod.metadata.deletionTimestamp && !running.stopping) void this.#deleteGracefully(running);
  }

  #launch(pod: V1Pod): RunningPod {
    const uid = pod.metadata!.uid!;
    const dir = this.podDir(uid);
    mkdirSync(dir, { recursive: true });
    const running: RunningPod = {
      uid,
      namespace: pod.metadata!.namespace ?? "default",
      name: pod.metadata!.name!,
      dir,
      containers: [],
      volumes: undefined,
      lastMountError: undefined,
      pod,
      stopping: false,
      statusWrite: Promise.resolve(),
      statusQueued: false,
    };
    this.#pods.set(uid, running);
    const records = this.#recorded?.get(uid);
    if (records) this.#adoptContainers(running, records);
    else this.#o.log.info({ pod: `${running.namespace}/${running.name}`, uid }, "starting pod");
    void (records ? this.#startWhenVolumesReady(running) : this.#startWhenAdmitted(running));
    return running;
  }

  /**
   * Admission (the device manager allocates the pod's devices), then the volumes and containers. A refused pod is
   * Failed with the refusal's reason and never starts, as the kubelet's rejectPod.
   */
  async #startWhenAdmitted(running: RunningPod): Promise<void> {
    const refusal = await this.#o.devices?.admit(running.pod);
    if (running.stopping || this.#pods.get(running.uid) !== running) {
      this.#o.devices?.release(running.uid); // deleted while admitted
      return;
    }
    if (refusal) {
      running.rejected = refusal;
      this.#event(running.pod, "Warning", refusal.reason, refusal.message);
      this.#writeStatus(running);
      return;
    }
    await this.#startWhenVolumesReady(running);
  }

  /** Sets up the pod's volumes (retrying until they are ready or the pod stops), then starts its containers. */
  async #startWhenVolumesReady(running: RunningPod): Promise<void> {
    for (;;) {
      if (running.stopping || this.#pods.get(running.uid) !== running) return;
      let setUp: Awaited<ReturnType<typeof setUpPodVolumes>>;
      try {
        setUp = await setUpPodVolumes(running.pod, running.dir, this.#lookups, this.#linkedPodDir(running.uid));
      } catch (err) {
        // An API or filesystem error is another reason the volumes are not ready: report it and retry.
        setUp = { failed: [{ volume: "", message: (err as Error).message }] };
      }
      if (running.stopping || this.#pods.get(running.uid) !== running) return;
      if ("ready" in setUp) {
        if (await this.#attachNetwork(running)) {
          this.#createContainers(running, setUp.ready);
          return;
        }
        this.#writeStatus(running);
        await new Promise((r) => setTimeout(r, VOLUME_RETRY_MS));
        continue;
      }
      const message = failedMountMessage(setUp.failed);
      if (message !== running.lastMountError) {
        running.lastMountError = message;
        this.#o.log.info({ pod: `${running.namespace}/${running.name}`, message }, "volumes not ready");
        // As kubelet: a failed SetUp is its own event (the operation executor's); claims not ready yet are
        // reported in the volume manager's summary.
        for (const f of setUp.failed)
          if (f.message.startsWith("MountVolume.SetUp failed"))
            this.#event(running.pod, "Warning", "FailedMount", f.message);
          else if (f.message.startsWith("MapVolume."))
            this.#event(running.pod, "Warning", "FailedMapVolume", f.message);
        this.#event(running.pod, "Warning", "FailedMount", message);
      }
      this.#writeStatus(running);
      await new Promise((r) => setTimeout(r, VOLUME_RETRY_MS));
    }
  }

  /**
   * Takes over the containers an earlier kubelet started for this pod (as a kubelet finds them through its
   * runtime): each recorded one is followed, never started again; tail containers resume where their log ends.
   */
  #adoptContainers(running: RunningPod, records: Map<string, ContainerRecord>): void {
    const pod = running.pod;
    this.#o.log.info({ pod: `${running.namespace}/${running.name}`, uid: running.uid }, "adopting pod's containers");
    for (const c of pod.spec?.containers ?? []) {
      const plan = this.#plan(pod, c, running.dir);
      const record = records.get(c.name);
      if (!record && plan.kind !== "tail") continue; // never started: started once the volumes are ready
      const container = new ContainerProcess(plan, c.image ?? "", running.dir, () => this.#onContainerChange(running), {
        podUid: running.uid,
        graceSeconds: graceOf(pod),
      });
      running.containers.push(container);
      container.adopt(record);
    }
    this.#writeStatus(running);
  }

  #createContainers(running: RunningPod, volumes: ReadonlyMap<string, ResolvedVolume>): void {
    const pod = running.pod;
    running.volumes = volumes;
    const onChange = (): void => this.#onContainerChange(running);
    const adopted = new Set(running.containers.map((c) => c.state.name));
    const created: ContainerProcess[] = [];
    for (const c of pod.spec?.containers ?? []) {
      if (adopted.has(c.name)) continue;
      const container = new ContainerProcess(
        this.#plan(pod, c, running.dir, volumes),
        c.image ?? "",
        running.dir,
        onChange,
        { podUid: running.uid, graceSeconds: graceOf(pod) },
      );
      running.containers.push(container);
      created.push(container);
    }
    for (const c of created) c.start();
    this.#writeStatus(running);
  }

  /** Records an event about `pod` from this node's kubelet (best effort, as kubelet's recorder). */
  #event(pod: V1Pod, type: "Normal" | "Warning", reason: string, message: string): void {
    this.#events.event({ apiVersion: "v1", kind: "Pod", metadata: pod.metadata }, type, reason, message);
  }

  /** How `container` of the pod `namespace/name` runs here (undefined until its volumes are ready). */
  containerPlan(namespace: string, name: string, container: string): ContainerPlan | undefined {
    for (const p of this.#pods.values()) {
      if (p.namespace !== namespace || p.name !== name || !p.volumes) continue;
      const spec = p.pod.spec?.containers.find((c) => c.name === container);
      return spec ? this.#plan(p.pod, spec, p.dir, p.volumes) : undefined;
    }
    return undefined;
  }

  /** How `c` runs: planContainer, inside the pod's network sandbox when it has one. */
  #plan(pod: V1Pod, c: V1Container, dir: string, volumes?: ReadonlyMap<string, ResolvedVolume>): ContainerPlan {
    const devices = this.#o.devices?.containerDevices(pod.metadata?.uid ?? "", c.name) ?? [];
    const make = (p: V1Pod, x: V1Container): ContainerPlan =>
      withDevices(planContainer(p, x, dir, this.#o.layout, volumes), devices, existsSync);
    return this.#o.network ? this.#o.network.plan(pod, c, make) : make(pod, c);
  }

  /** Wires the pod's network sandbox; false (after a FailedCreatePodSandBox event) when it cannot yet. */
  async #attachNetwork(running: RunningPod): Promise<boolean> {
    try {
      await this.#o.network?.attach(running.pod);
      return true;
    } catch (err) {
      const message = `Failed to create pod sandbox: ${(err as Error).message}`;
      this.#o.log.warn({ err, pod: `${running.namespace}/${running.name}` }, "pod sandbox not created; retrying");
      this.#event(running.pod, "Warning", "FailedCreatePodSandBox", message);
      return false;
    }
  }

  /** Tears the network sandbox of a pod that is gone down (its containers have stopped). */
  async #detachNetwork(running: RunningPod): Promise<void> {
    try {
      await this.#o.network?.detach(running.uid);
    } catch (err) {
      // The cluster removes every sandbox with the bridge at stop; until then a leftover only holds an address.
      this.#o.log.warn({ err, pod: `${running.namespace}/${running.name}` }, "pod sandbox not removed");
    }
  }

  #onContainerChange(running: RunningPod): void {
    // Sidecars that follow another container's output (virt-tail) end when every worker has ended.
    const workers = running.containers.filter((c) => !c.isSidecar);
    if (workers.length > 0 && workers.every((c) => c.state.state === "terminated")) {
      this.#o.devices?.release(running.uid); // the pod has ended: its devices are free
      for (const c of running.containers) if (c.isSidecar && c.state.state === "running") void c.stop(0);
    }
    this.#writeStatus(running);
  }

  #writeStatus(running: RunningPod): void {
    // Serialise status writes per pod so an older state never overwrites a newer one, and coalesce: a write that
    // has not started yet reads the state when it starts, so it covers every change made meanwhile (a pod start
    // is then one PATCH, Running, instead of one per container state change).
    if (running.statusQueued) return;
    running.statusQueued = true;
    running.statusWrite = running.statusWrite.then(async () => {
      running.statusQueued = false;
      const rejected = running.rejected;
      const status = rejected
        ? { phase: "Failed", reason: rejected.reason, message: `Pod was rejected: ${rejected.message}` }
        : podStatus(
            running.pod,
            this.#containerStates(running),
            new Date(),
            running.volumes !== undefined,
            this.#o.network?.podIPs(running.uid),
          );
      try {
        await this.#podClient.mergePatch(running.namespace, running.name, { status }, "status");
      } catch (err) {
        // The pod may be gone (deleted while we wrote): the delete path owns it now, so only log.
        this.#o.log.debug({ err, pod: `${running.namespace}/${running.name}` }, "pod status write failed");
      }
    });
  }

  /** The containers' states; before they exist (volumes not ready) each is Waiting/ContainerCreating. */
  #containerStates(running: RunningPod): ContainerRunState[] {
    if (running.volumes || running.containers.length > 0) return running.containers.map((c) => c.state);
    return (running.pod.spec?.containers ?? []).map((c) => ({
      name: c.name,
      image: c.image ?? "",
      state: "waiting",
      reason: "ContainerCreating",
    }));
  }

  async #stopContainers(running: RunningPod, graceSeconds: number): Promise<void> {
    running.stopping = true;
    await Promise.all(running.containers.map((c) => c.stop(graceSeconds)));
    await running.statusWrite;
  }

  async #deleteGracefully(running: RunningPod): Promise<void> {
    this.#o.log.info(
      { pod: `${running.namespace}/${running.name}`, grace: graceOf(running.pod) },
      "stopping pod for deletion",
    );
    await this.#stopContainers(running, graceOf(running.pod));
    await this.#finalizeDelete(running.pod);
  }

  async #finalizeDelete(pod: V1Pod): Promise<void> {
    const uid = pod.metadata!.uid!;
    try {
      await this.#podClient.delete(pod.metadata!.namespace ?? "default", pod.metadata!.name!, {
        gracePeriodSeconds: 0,
        preconditions: { uid },
      });
    } catch (err) {
      // Already gone, or replaced by a pod with the same name (the uid precondition failed): nothing to finish.
      this.#o.log.debug({ err, uid }, "final pod delete failed");
    }
  }

  #gone(pod: V1Pod): void {
    const uid = pod.metadata?.uid;
    const running = uid ? this.#pods.get(uid) : undefined;
    if (!running) {
      // A pod this kubelet did not run (it had finished before a restart): its directory still goes with it.
      const dir = uid ? this.podDir(uid) : "";
      if (uid && pod.spec?.nodeName === this.#o.nodeName && !this.#recorded?.has(uid) && existsSync(dir)) {
        void endContainers(readRecords(dir).values()).then(() => {
          if (!this.#pods.has(uid)) rmSync(dir, { recursive: true, force: true });
        });
      }
      return;
    }
    this.#pods.delete(uid!);
    this.#o.devices?.release(uid!);
    void this.#stopContainers(running, 0).then(() => {
      rmSync(running.dir, { recursive: true, force: true });
      void this.#detachNetwork(running);
    });
  }
}

/** {@link VolumeLookups} over the API: each object read fresh (it may have just changed). */
function lookupsOver(transport: RestTransport): VolumeLookups {
  const read =
    <T extends KubeObject>(type: (typeof CORE_V1)[keyof typeof CORE_V1]) =>
    (namespace: string, name: string): Promise<T | undefined> =>
      unlessNotFound(resourceClient<T>(transport, type).get(namespace, name));
  const accounts = resourceClient<V1ServiceAccount>(transport, CORE_V1.serviceAccounts);
  return {
    claim: read<V1PersistentVolumeClaim>(CORE_V1.persistentVolumeClaims),
    volume: (name) => read<V1PersistentVolume>(CORE_V1.persistentVolumes)("", name),
    configMap: read<V1ConfigMap>(CORE_V1.configMaps),
    secret: read<V1Secret>(CORE_V1.secrets),
    serviceAccount: read<V1ServiceAccount>(CORE_V1.serviceAccounts),
    token: async (namespace, name, expirationSeconds, audience) => {
      const request = accounts.createSubresource<{ status?: { token?: string } }>(namespace, name, "token", {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds, audiences: audience ? [audience] : [] },
      });
      // A server without the TokenRequest subresource answers 404 or 405: no token (the mount fails and retries).
      return (await unlessNotFound(request, [404, 405]))?.status?.token;
    },
  };
}

/** The object, or undefined when the API server answers with one of `codes` (default 404). */
async function unlessNotFound<T>(request: Promise<T>, codes: readonly number[] = [404]): Promise<T | undefined> {
  try {
    return await request;
  } catch (err) {
    if (codes.includes((err as { code?: number }).code ?? 0)) return undefined;
    throw err;
  }
}

function graceOf(pod: V1Pod): number {
  return pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
}
