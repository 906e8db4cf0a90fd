/**
 * The process-kubelet's device manager: the kubelet's side of the device plugin API (pkg/kubelet/cm/devicemanager).
 *
 *   start        remove every file in the device plugins dir but the checkpoint (plugins see their sockets go and
 *                register again), restore allocations and registered resources from the checkpoint, serve
 *                Registration on <dir>/kubelet.sock
 *   Register     version in SUPPORTED_VERSIONS, an extended resource name, an endpoint that is a file in <dir>;
 *                answered at once, then the plugin is dialled and followed through ListAndWatch (a newer
 *                registration of the same resource replaces the older one)
 *   ListAndWatch each list replaces the resource's devices: capacity = every device, allocatable = the healthy ones
 *   stream ends  every device of the resource turns unhealthy (allocatable 0); 5 minutes later (the kubelet's
 *                endpointStopGracePeriod) the resource is gone: capacity and allocatable 0
 *   admit(pod)   for each container (init containers first), each device resource in its limits: reuse what it holds,
 *                else take free healthy devices (the plugin's preference when it offers one), Allocate them
 *                (PreStartContainer too when the plugin asks for it); a failure refuses the pod with the kubelet's
 *                UnexpectedAdmissionError and message
 *   release(uid) the pod ended or went: its devices are free again
 *
 * `onChange` fires when capacity or allocatable may have changed (the node status is written then).
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseQuantity } from "@kvt/api";
import {
  type ContainerAllocateResponse,
  type Device,
  DevicePluginClient,
  type DevicePluginOptions,
  type DeviceWatch,
  HEALTHY,
  KUBELET_CHECKPOINT,
  KUBELET_SOCKET,
  type RegisterRequest,
  SUPPORTED_VERSIONS,
  serveRegistration,
  type UnixGrpcServer,
} from "@kvt/device-plugin";
import type { Logger } from "@kvt/observability";
import { PodAllocations, type ResourceAllocation } from "./pod-allocations.ts";

/** The kubelet's endpointStopGracePeriod: how long a stopped plugin's resource stays (allocatable 0). */
export const ENDPOINT_STOP_GRACE_MS = 5 * 60_000;
/** More devices than this in one list is a misbehaving plugin (its stream is dropped). */
const MAX_DEVICES = 100_000;

/** The parts of a pod admission reads (client-node's V1Pod and libs/kube's Pod both fit). */
export interface DevicePod {
  readonly metadata?: { readonly uid?: string; readonly namespace?: string; readonly name?: string };
  readonly spec?: {
    readonly initContainers?: readonly DeviceContainer[];
    readonly containers: readonly DeviceContainer[];
  };
}

/** The parts of a container admission reads. */
export interface DeviceContainer {
  readonly name: string;
  readonly resources?: { readonly limits?: Readonly<Record<string, unknown>> };
}

/** Why a pod was refused (the pod's status.reason and status.message). */
export interface AdmissionRefusal {
  readonly reason: string;
  readonly message: string;
}

/** A container's allocations merged over its resources (what the runtime applies). */
export type ContainerDevices = readonly ContainerAllocateResponse[];

/** One registered (or restored) resource. */
interface Resource {
  healthy: Set<string>;
  unhealthy: Set<string>;
  options: DevicePluginOptions;
  client: DevicePluginClient | undefined;
  watch: DeviceWatch | undefined;
  /** When its plugin's stream ended (undefined while it streams). */
  stoppedAt: number | undefined;
}

/** What a device manager needs. */
export interface DeviceManagerOptions {
  /** The device plugins directory (the kubelet's /var/lib/kubelet/device-plugins). */
  readonly dir: string;
  readonly log: Logger;
  /** Called when capacity or allocatable may have changed. */
  readonly onChange?: () => void;
  readonly stopGraceMs?: number;
  /** How long dialling a plugin and each call may take (default the library's 5 s). */
  readonly timeoutMs?: number;
}

/** The kubelet device manager (see the header). */
export class DeviceManager {
  readonly #o: DeviceManagerOptions;
  readonly #resources = new Map<string, Resource>();
  /** Resources whose grace period ended: reported 0 from then on. */
  readonly #deleted = new Set<string>();
  #allocations = new PodAllocations();
  #server: UnixGrpcServer | undefined;
  /** Admissions run one at a time, so two pods never take the same free device. */
  #admitting: Promise<unknown> = Promise.resolve();

  constructor(options: DeviceManagerOptions) {
    this.#o = options;
  }

  /** The Registration socket. */
  get socketPath(): string {
    return join(this.#o.dir, KUBELET_SOCKET);
  }

  /** Restores the checkpoint, clears the directory and serves Registration. */
  async start(): Promise<void> {
    mkdirSync(this.#o.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.#o.dir, 0o700);
    const restored = PodAllocations.read(this.#o.dir);
    this.#allocations = restored.allocations;
    for (const [name, ids] of restored.registered) this.#resources.set(name, stoppedResource(ids, Date.now()));
    for (const f of readdirSync(this.#o.dir)) {
      if (f === KUBELET_CHECKPOINT) continue;
      const path = join(this.#o.dir, f);
      if (!lstatSync(path).isDirectory()) rmSync(path, { force: true });
    }
    this.#server = await serveRegistration(this.socketPath, (r) => this.#register(r));
    this.#o.log.info({ socket: this.socketPath, restored: [...restored.registered.keys()] }, "device manager serving");
  }

  /** Stops serving and drops every plugin connection (the plugins notice the socket go when the kubelet returns). */
  async stop(): Promise<void> {
    for (const r of this.#resources.values()) this.#disconnect(r);
    await this.#server?.close(0);
  }

  /** Capacity and allocatable of every device resource (0 for resources gone since). */
  capacity(now = Date.now()): { capacity: Record<string, string>; allocatable: Record<string, string> } {
    const graceMs = this.#o.stopGraceMs ?? ENDPOINT_STOP_GRACE_MS;
    const capacity: Record<string, string> = {};
    const allocatable: Record<string, string> = {};
    for (const [name, r] of this.#resources) {
      if (r.stoppedAt !== undefined && now - r.stoppedAt >= graceMs) {
        this.#o.log.info({ resource: name }, "device plugin did not come back: resource removed");
        this.#resources.delete(name);
        this.#deleted.add(name);
        this.#checkpoint();
        continue;
      }
      capacity[name] = String(r.healthy.size + r.unhealthy.size);
      allocatable[name] = String(r.healthy.size);
    }
    for (const name of this.#deleted) {
      if (this.#resources.has(name)) continue;
      capacity[name] = "0";
      allocatable[name] = "0";
    }
    return { capacity, allocatable };
  }

  /** True for a resource a plugin registered (or that some container still holds). */
  isDeviceResource(name: string): boolean {
    return this.#resources.has(name) || this.#allocations.holds(name);
  }

  /** The plugins' answers for a container (empty when it holds no devices). */
  containerDevices(uid: string, container: string): ContainerDevices {
    return [...(this.#allocations.container(uid, container)?.values() ?? [])].map((a) => a.response);
  }

  /**
   * Allocates the devices `pod` requests; resolves to the refusal when it cannot (the pod must not run), else to
   * undefined. Devices already held by the pod (a restarted kubelet) are kept as they are.
   */
  admit(pod: DevicePod): Promise<AdmissionRefusal | undefined> {
    const run = this.#admitting.then(() => this.#admit(pod));
    this.#admitting = run.catch(() => undefined);
    return run;
  }

  /** Frees the devices of a pod that ended or went. */
  release(uid: string): void {
    if (!this.#allocations.delete(uid)) return;
    this.#o.log.info({ uid }, "released the devices of a pod");
    this.#checkpoint();
  }

  /** Frees the devices of every pod not in `uids` (pods gone while no kubelet ran). */
  retain(uids: ReadonlySet<string>): void {
    for (const uid of this.#allocations.pods()) if (!uids.has(uid)) this.release(uid);
  }

  async #admit(pod: DevicePod): Promise<AdmissionRefusal | undefined> {
    const uid = pod.metadata?.uid ?? "";
    // Devices of init containers (which run before, one at a time) are handed on to the app containers.
    const reusable = new Map<string, Set<string>>();
    const reuse = (resource: string): Set<string> => {
      const set = reusable.get(resource) ?? new Set<string>();
      reusable.set(resource, set);
      return set;
    };
    try {
      for (const c of pod.spec?.initContainers ?? []) {
        for (const [resource, needed] of this.#requests(c)) {
          const got = await this.#allocate(uid, c.name, resource, needed, reuse(resource));
          for (const id of got) reuse(resource).add(id);
        }
      }
      for (const c of pod.spec?.containers ?? []) {
        for (const [resource, needed] of this.#requests(c)) {
          const got = await this.#allocate(uid, c.name, resource, needed, reuse(resource));
          for (const id of got) reuse(resource).delete(id);
        }
      }
      return undefined;
    } catch (err) {
      // The kubelet's admit handler: the pod fails with this reason and message and never starts.
      const message = `Allocate failed due to ${(err as Error).message}, which is unexpected`;
      this.#o.log.warn({ pod: `${pod.metadata?.namespace}/${pod.metadata?.name}`, message }, "pod refused");
      this.release(uid);
      return { reason: "UnexpectedAdmissionError", message };
    }
  }

  /** The device resources in a container's limits, with their counts. */
  #requests(c: DeviceContainer): [string, number][] {
    const out: [string, number][] = [];
    for (const [name, q] of Object.entries(c.resources?.limits ?? {})) {
      if (!this.isDeviceResource(name)) continue;
      const n = Number(parseQuantity(String(q)).value());
      if (n > 0) out.push([name, n]);
    }
    return out;
  }

  /** Allocates `needed` devices of `resource` to a container (reusing `reusable` first); resolves to their IDs. */
  async #allocate(
    uid: string,
    container: string,
    resource: string,
    needed: number,
    reusable: ReadonlySet<string>,
  ): Promise<readonly string[]> {
    const held = this.#allocations.get(uid, container, resource);
    if (held) {
      if (held.deviceIds.length !== needed)
        throw new Error(
          `pod ${uid} container ${container} changed request for resource ${resource} from ${held.deviceIds.length} to ${needed}`,
        );
      return held.deviceIds;
    }
    const r = this.#resources.get(resource);
    if (!r) throw new Error(`cannot allocate unregistered device ${resource}`);
    if (r.healthy.size === 0)
      throw new Error(`no healthy devices present; cannot allocate unhealthy devices ${resource}`);
    const reused = [...reusable].filter((id) => r.healthy.has(id)).slice(0, needed);
    const inUse = this.#allocations.inUse(resource);
    const available = [...r.healthy].filter((id) => !inUse.has(id)).sort();
    if (available.length < needed - reused.length)
      throw new Error(
        `requested number of devices unavailable for ${resource}. Requested: ${needed - reused.length}, Available: ${available.length}`,
      );
    const client = r.client;
    if (!client) throw new Error(`endpoint not found in cache for a registered resource: ${resource}`);
    const chosen = [...reused, ...(await this.#choose(r, client, available, needed - reused.length))];
    const response = await client.allocate({ containerRequests: [{ devicesIds: chosen }] }, this.#o.timeoutMs);
    const answer = response.containerResponses[0];
    if (!answer) throw new Error(`no containers return in allocation response ${JSON.stringify(response)}`);
    if (r.options.preStartRequired) await client.preStartContainer({ devicesIds: chosen });
    const allocation: ResourceAllocation = { deviceIds: chosen, response: answer };
    this.#allocations.set(uid, container, resource, allocation);
    this.#checkpoint();
    this.#o.log.info({ uid, container, resource, devices: chosen.length }, "allocated devices");
    return chosen;
  }

  /** The devices to take: the plugin's preference among the free ones when it offers one, else the first free. */
  async #choose(r: Resource, client: DevicePluginClient, available: string[], needed: number): Promise<string[]> {
    if (needed === 0) return [];
    if (!r.options.getPreferredAllocationAvailable) return available.slice(0, needed);
    const preferred = await client.getPreferredAllocation(
      { containerRequests: [{ availableDeviceIDs: available, mustIncludeDeviceIDs: [], allocationSize: needed }] },
      this.#o.timeoutMs,
    );
    const free = new Set(available);
    const picked = [...new Set(preferred.containerResponses[0]?.deviceIDs ?? [])].filter((id) => free.has(id));
    // A preference that is short or names devices that are not free is completed from the free ones, in order.
    for (const id of available) if (picked.length < needed && !picked.includes(id)) picked.push(id);
    return picked.slice(0, needed);
  }

  async #register(req: RegisterRequest): Promise<void> {
    if (!SUPPORTED_VERSIONS.includes(req.version))
      throw new Error(
        `requested API version ${JSON.stringify(req.version)} is not supported by kubelet. Supported versions are ${JSON.stringify(SUPPORTED_VERSIONS)}`,
      );
    if (!isExtendedResourceName(req.resourceName))
      throw new Error(`the ResourceName ${JSON.stringify(req.resourceName)} is invalid`);
    if (!/^[^/\0]+$/.test(req.endpoint) || req.endpoint === "." || req.endpoint === "..")
      throw new Error(`the endpoint ${JSON.stringify(req.endpoint)} is not a file name in ${this.#o.dir}`);
    this.#o.log.info({ resource: req.resourceName, endpoint: req.endpoint }, "device plugin registered");
    void this.#connect(req); // answered at once; the plugin is dialled after (as the kubelet's addEndpoint)
  }

  async #connect(req: RegisterRequest): Promise<void> {
    let client: DevicePluginClient;
    try {
      client = await DevicePluginClient.connect(join(this.#o.dir, req.endpoint), this.#o.timeoutMs);
    } catch (err) {
      this.#o.log.warn({ err, resource: req.resourceName }, "cannot dial the registered device plugin");
      return;
    }
    const old = this.#resources.get(req.resourceName);
    if (old) this.#disconnect(old);
    // Devices of the earlier registration are kept until the new plugin's first list replaces them.
    const r: Resource = {
      healthy: old?.healthy ?? new Set(),
      unhealthy: old?.unhealthy ?? new Set(),
      options: req.options ?? {},
      client,
      watch: undefined,
      stoppedAt: undefined,
    };
    this.#resources.set(req.resourceName, r);
    this.#deleted.delete(req.resourceName);
    r.watch = client.listAndWatch(({ devices }) => this.#update(req.resourceName, r, devices));
    const ended = await r.watch.ended;
    if (this.#resources.get(req.resourceName) !== r) return; // replaced by a newer registration
    this.#o.log.warn({ err: ended, resource: req.resourceName }, "device plugin stream ended; its devices unhealthy");
    this.#disconnect(r);
    for (const id of r.healthy) r.unhealthy.add(id);
    r.healthy.clear();
    r.stoppedAt = Date.now();
    this.#o.onChange?.();
  }

  #update(name: string, r: Resource, devices: readonly Device[]): void {
    if (devices.length > MAX_DEVICES || devices.some((d) => typeof d.ID !== "string" || d.ID === "")) {
      this.#o.log.warn({ resource: name, devices: devices.length }, "device plugin sent an invalid list; dropping it");
      r.watch?.cancel();
      return;
    }
    r.healthy = new Set(devices.filter((d) => d.health === HEALTHY).map((d) => d.ID));
    r.unhealthy = new Set(devices.filter((d) => d.health !== HEALTHY && !r.healthy.has(d.ID)).map((d) => d.ID));
    this.#checkpoint();
    this.#o.onChange?.();
  }

  #disconnect(r: Resource): void {
    r.watch?.cancel();
    r.client?.close();
    r.client = undefined;
  }

  #checkpoint(): void {
    const registered = new Map([...this.#resources].map(([n, r]) => [n, [...r.healthy, ...r.unhealthy]] as const));
    try {
      this.#allocations.write(this.#o.dir, registered);
    } catch (err) {
      // A lost checkpoint only costs the next kubelet the allocations; this one keeps them in memory.
      this.#o.log.warn({ err }, "cannot write the device manager checkpoint");
    }
  }
}

/** A resource restored from the checkpoint: its devices known, its plugin not yet back. */
function stoppedResource(ids: readonly string[], now: number): Resource {
  return {
    healthy: new Set(),
    unhealthy: new Set(ids),
    options: {},
    client: undefined,
    watch: undefined,
    stoppedAt: now,
  };
}

/**
 * kube's IsExtendedResourceName: a qualified name (`<DNS subdomain>/<name>`) outside the `kubernetes.io` namespace
 * and not a quota `requests.` name.
 */
export function isExtendedResourceName(name: string): boolean {
  const slash = name.indexOf("/");
  if (slash < 0 || name.startsWith("requests.")) return false;
  const prefix = name.slice(0, slash);
  const rest = name.slice(slash + 1);
  if (prefix === "kubernetes.io" || prefix.endsWith(".kubernetes.io")) return false;
  const subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
  return (
    prefix.length <= 253 &&
    subdomain.test(prefix) &&
    rest.length <= 63 &&
    /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(rest)
  );
}
