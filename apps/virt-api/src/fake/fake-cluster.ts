/**
 * Test fakes for virt-api's unit tests: {@link FakeCluster}, virt-api's {@link ClusterClient} over the one fake
 * cluster ({@link FakeApi} from @kvt/testing, which applies JSON patches as the API server does: a failed `test` is
 * a 422), recording every write in virt-api's own terms; and a {@link HandlerClient} that records calls. Only
 * `*.test.ts` files import this module.
 */

import type {
  JsonPatchOp,
  RunStrategy,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VirtualMachineInstancePreset,
  VmiPhase,
} from "@kvt/api";
import {
  CORE_V1,
  KUBEVIRT_V1,
  type JsonPatchOp as KubeJsonPatchOp,
  type KubeObject,
  type ResourceType,
} from "@kvt/kube";
import { applyJsonPatch, FakeApi } from "@kvt/testing";
import type WebSocket from "ws";
import type { HandlerClient } from "../handler/handler-client.ts";
import type { ClusterClient, PodLite } from "../kube/cluster-client.ts";

/** One recorded write. */
export interface Write {
  readonly verb: "patchVm" | "patchVmStatus" | "patchVmi" | "createVmim";
  readonly name: string;
  readonly body: unknown;
  readonly dryRun: boolean;
}

type Kube<T> = T & KubeObject;
const VMS = KUBEVIRT_V1.virtualMachines;
const VMIS = KUBEVIRT_V1.virtualMachineInstances;
const VMIMS = KUBEVIRT_V1.virtualMachineInstanceMigrations;

/** The stored objects of `type`, keyed `namespace/name` (a snapshot: read it after the call under test). */
function byKey<T>(api: FakeApi, type: ResourceType): Map<string, T> {
  return new Map(api.all<Kube<T>>(type).map((o) => [`${o.metadata?.namespace}/${o.metadata?.name}`, o]));
}

/** `obj` with its namespace defaulted to `default`, as a test builds it. */
function inDefault<T extends { metadata?: { namespace?: string } }>(obj: T): Kube<T> {
  return { ...obj, metadata: { ...obj.metadata, namespace: obj.metadata?.namespace ?? "default" } };
}

/** virt-api's {@link ClusterClient} over {@link FakeApi}. Objects are keyed `namespace/name`. */
export class FakeCluster implements ClusterClient {
  /** The fake cluster itself: seed it, or read its recorded actions. */
  readonly api = new FakeApi();
  readonly writes: Write[] = [];

  /** Stored VMs by `namespace/name`. */
  get vms(): Map<string, VirtualMachine> {
    return byKey(this.api, VMS);
  }

  /** Stored VMIs by `namespace/name`. */
  get vmis(): Map<string, VirtualMachineInstance> {
    return byKey(this.api, VMIS);
  }

  /** Stored VMIMs in creation order. */
  get vmims(): VirtualMachineInstanceMigration[] {
    return this.api.all<Kube<VirtualMachineInstanceMigration>>(VMIMS);
  }

  addVm(vm: VirtualMachine): this {
    this.api.seed(VMS, inDefault(vm));
    return this;
  }

  addVmi(vmi: VirtualMachineInstance): this {
    this.api.seed(VMIS, inDefault(vmi));
    return this;
  }

  addVmim(vmim: VirtualMachineInstanceMigration): this {
    this.api.seed(VMIMS, inDefault(vmim));
    return this;
  }

  addPod(pod: PodLite): this {
    this.api.seed(CORE_V1.pods, inDefault(pod));
    return this;
  }

  getVm(namespace: string, name: string): Promise<VirtualMachine | undefined> {
    return Promise.resolve(structuredClone(this.api.stored<Kube<VirtualMachine>>(VMS, namespace, name)));
  }

  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined> {
    return Promise.resolve(structuredClone(this.api.stored<Kube<VirtualMachineInstance>>(VMIS, namespace, name)));
  }

  patchVm(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch("patchVm", VMS, namespace, name, patch, dryRun);
  }

  patchVmStatus(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch("patchVmStatus", VMS, namespace, name, patch, dryRun, "status");
  }

  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch("patchVmi", VMIS, namespace, name, patch, dryRun);
  }

  /** A write is recorded once it succeeded; a dry run checks the patch against the stored object and keeps nothing. */
  async #patch(
    verb: Write["verb"],
    type: ResourceType,
    namespace: string,
    name: string,
    patch: readonly JsonPatchOp[],
    dryRun: boolean,
    subresource?: "status",
  ): Promise<void> {
    // @kvt/api and @kvt/kube each declare a JsonPatchOp (same wire shape; kube's splits `remove` out).
    const ops = patch as readonly KubeJsonPatchOp[];
    if (dryRun) {
      const current = await this.api.client(type).get(namespace, name);
      applyJsonPatch(current, ops);
    } else {
      await this.api.client(type).patch(namespace, name, ops, subresource);
    }
    this.writes.push({ verb, name, body: patch, dryRun });
  }

  async createVmim(
    namespace: string,
    vmim: VirtualMachineInstanceMigration,
    dryRun: boolean,
  ): Promise<VirtualMachineInstanceMigration> {
    // A fixed suffix for generateName keeps names predictable in assertions.
    const name = `${vmim.metadata?.generateName ?? ""}abcde`;
    const created = structuredClone(vmim);
    created.metadata = { ...created.metadata, namespace, name };
    this.writes.push({ verb: "createVmim", name, body: vmim, dryRun });
    if (dryRun) return created;
    return this.api.client<Kube<VirtualMachineInstanceMigration>>(VMIMS).create(created);
  }

  listVmims(namespace: string, labelSelector?: string): Promise<VirtualMachineInstanceMigration[]> {
    const wanted = /in \(([^)]*)\)/.exec(labelSelector ?? "")?.[1];
    return Promise.resolve(
      this.vmims.filter(
        (m) =>
          m.metadata?.namespace === namespace &&
          (wanted === undefined || m.metadata?.labels?.["kubevirt.io/vmi-name"] === wanted),
      ),
    );
  }

  /** Presets listVmiPresets returns (all namespaces; filtered by namespace on read). */
  readonly presets: VirtualMachineInstancePreset[] = [];

  listVmiPresets(namespace: string): Promise<VirtualMachineInstancePreset[]> {
    return Promise.resolve(this.presets.filter((p) => (p.metadata?.namespace ?? "default") === namespace));
  }

  listPods(namespace: string, labelSelector?: string, fieldSelector?: string): Promise<PodLite[]> {
    const node = /spec\.nodeName=(.*)/.exec(fieldSelector ?? "")?.[1];
    const [lk, lv] = (labelSelector ?? "").split("=");
    return Promise.resolve(
      this.api
        .all<Kube<PodLite>>(CORE_V1.pods)
        .filter(
          (p) =>
            p.metadata?.namespace === namespace &&
            (node === undefined || p.spec?.nodeName === node) &&
            (lk === undefined || lk === "" || p.metadata?.labels?.[lk] === lv),
        ),
    );
  }
}

/** Records handler calls; `fail` makes every call reject with that message. */
export class FakeHandler implements HandlerClient {
  readonly calls: Array<{ verb: "put" | "get"; vmi: string; sub: string; body?: unknown }> = [];
  fail: string | undefined;
  guestInfo: unknown = { name: "debian", kernelRelease: "6.1" };

  put(vmi: VirtualMachineInstance, sub: string, body?: unknown): Promise<void> {
    this.calls.push({ verb: "put", vmi: vmi.metadata?.name ?? "", sub, body });
    return this.fail ? Promise.reject(new Error(this.fail)) : Promise.resolve();
  }

  get(vmi: VirtualMachineInstance, sub: string): Promise<unknown> {
    this.calls.push({ verb: "get", vmi: vmi.metadata?.name ?? "", sub });
    return this.fail ? Promise.reject(new Error(this.fail)) : Promise.resolve(this.guestInfo);
  }

  portForward(): Promise<WebSocket> {
    return Promise.reject(new Error("FakeHandler has no port-forward"));
  }
  console(): Promise<WebSocket> {
    return Promise.reject(new Error("FakeHandler has no console"));
  }
}

/** A VM in `default` with the given run strategy (or `running`) and optional status. */
export function newVm(
  name: string,
  strategy: { runStrategy?: RunStrategy; running?: boolean },
  status?: VirtualMachine["status"],
): VirtualMachine {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name, namespace: "default", uid: `uid-vm-${name}` },
    spec: { ...strategy, template: { spec: { domain: { devices: {} } } } },
    ...(status ? { status } : {}),
  };
}

type VmiSpec = VirtualMachineInstance["spec"];
/** Spec fields a test sets; the domain may leave out `devices`. */
type VmiSpecOverrides = Partial<Omit<VmiSpec, "domain">> & { domain?: Partial<VmiSpec["domain"]> };

/** A VMI in `default` in `phase` with optional conditions and spec overrides. */
export function newVmi(
  name: string,
  phase: VmiPhase | undefined,
  conditions: Array<{ type: string; status: string }> = [],
  spec: VmiSpecOverrides = {},
): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name, namespace: "default", uid: `uid-vmi-${name}` },
    spec: { ...spec, domain: { devices: {}, ...spec.domain } },
    status: { ...(phase ? { phase } : {}), nodeName: "node01", conditions },
  };
}
