/**
 * Which devices each container of each pod holds, and the plugin's answer for them: the kubelet device manager's
 * podDevices, kept across kubelet restarts in `<device plugins dir>/kubelet_internal_checkpoint` (JSON, written
 * atomically, mode 0600) together with the device IDs each registered resource had, so a restarted kubelet neither
 * hands a device out twice nor forgets a resource before its plugin registers again.
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type ContainerAllocateResponse, KUBELET_CHECKPOINT } from "@kvt/device-plugin";

/** One container's devices of one resource. */
export interface ResourceAllocation {
  readonly deviceIds: readonly string[];
  readonly response: ContainerAllocateResponse;
}

/** What the checkpoint file holds (field names after the kubelet's checkpoint). */
interface CheckpointData {
  readonly PodDeviceEntries: {
    PodUID: string;
    ContainerName: string;
    ResourceName: string;
    DeviceIDs: string[];
    AllocResp: ContainerAllocateResponse;
  }[];
  readonly RegisteredDevices: Record<string, string[]>;
}

/** pod uid -> container name -> resource name -> allocation. */
export class PodAllocations {
  readonly #pods = new Map<string, Map<string, Map<string, ResourceAllocation>>>();

  /** The allocation of `resource` to a container, if any. */
  get(uid: string, container: string, resource: string): ResourceAllocation | undefined {
    return this.#pods.get(uid)?.get(container)?.get(resource);
  }

  /** Every resource's allocation to a container. */
  container(uid: string, container: string): ReadonlyMap<string, ResourceAllocation> | undefined {
    return this.#pods.get(uid)?.get(container);
  }

  set(uid: string, container: string, resource: string, allocation: ResourceAllocation): void {
    const pod = this.#pods.get(uid) ?? new Map<string, Map<string, ResourceAllocation>>();
    this.#pods.set(uid, pod);
    const c = pod.get(container) ?? new Map<string, ResourceAllocation>();
    pod.set(container, c);
    c.set(resource, allocation);
  }

  /** Drops a pod's allocations; true when it had any. */
  delete(uid: string): boolean {
    return this.#pods.delete(uid);
  }

  pods(): string[] {
    return [...this.#pods.keys()];
  }

  /** The devices of `resource` held by any container of any pod. */
  inUse(resource: string): Set<string> {
    const out = new Set<string>();
    for (const pod of this.#pods.values())
      for (const c of pod.values()) for (const id of c.get(resource)?.deviceIds ?? []) out.add(id);
    return out;
  }

  /** True when some container holds devices of `resource`. */
  holds(resource: string): boolean {
    return this.inUse(resource).size > 0;
  }

  /** Writes the checkpoint (with the registered resources' device IDs) into `dir`. */
  write(dir: string, registered: ReadonlyMap<string, readonly string[]>): void {
    const data: CheckpointData = {
      PodDeviceEntries: [...this.#pods].flatMap(([PodUID, pod]) =>
        [...pod].flatMap(([ContainerName, c]) =>
          [...c].map(([ResourceName, a]) => ({
            PodUID,
            ContainerName,
            ResourceName,
            DeviceIDs: [...a.deviceIds],
            AllocResp: a.response,
          })),
        ),
      ),
      RegisteredDevices: Object.fromEntries([...registered].map(([r, ids]) => [r, [...ids]])),
    };
    const file = join(dir, KUBELET_CHECKPOINT);
    writeFileSync(`${file}.tmp`, `${JSON.stringify({ Data: data })}\n`, { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  }

  /**
   * Reads the checkpoint in `dir`: the allocations, and the device IDs of the resources registered then. A missing
   * or unreadable checkpoint gives nothing (as the kubelet, which then starts with no allocations).
   */
  static read(dir: string): { allocations: PodAllocations; registered: Map<string, string[]> } {
    const allocations = new PodAllocations();
    const registered = new Map<string, string[]>();
    let data: Partial<CheckpointData> | undefined;
    try {
      data = (JSON.parse(readFileSync(join(dir, KUBELET_CHECKPOINT), "utf8")) as { Data?: CheckpointData }).Data;
    } catch {
      return { allocations, registered };
    }
    for (const e of Array.isArray(data?.PodDeviceEntries) ? data.PodDeviceEntries : []) {
      if (typeof e?.PodUID !== "string" || typeof e.ContainerName !== "string" || typeof e.ResourceName !== "string")
        continue;
      const ids = Array.isArray(e.DeviceIDs) ? e.DeviceIDs.filter((d) => typeof d === "string") : [];
      allocations.set(e.PodUID, e.ContainerName, e.ResourceName, { deviceIds: ids, response: e.AllocResp ?? {} });
    }
    for (const [resource, ids] of Object.entries(data?.RegisteredDevices ?? {}))
      if (Array.isArray(ids))
        registered.set(
          resource,
          ids.filter((d) => typeof d === "string"),
        );
    return { allocations, registered };
  }
}
