/**
 * Test fakes for virt-api's unit tests: an in-memory {@link ClusterClient} that applies JSON patches with RFC 6902
 * semantics (a failed `test` is a 422 like the API server's), records every write, and a {@link HandlerClient}
 * that records calls. Only `*.test.ts` files import this module.
 */
import { isDeepStrictEqual } from "node:util";
import type {
  JsonPatchOp,
  RunStrategy,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VmiPhase,
} from "@kvt/api";
import type WebSocket from "ws";
import type { HandlerClient } from "../handler/handler-client.ts";
import type { ClusterClient, PodLite } from "../kube/cluster-client.ts";
import { ApiError, type Status } from "../kube/status.ts";

type Json = Record<string, unknown>;

function invalidPatch(message: string): ApiError {
  const status: Status = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason: "Invalid",
    code: 422,
  };
  return new ApiError(status);
}

/** Applies RFC 6902 ops to a deep copy of `doc` (object members only; `-` and indexes for arrays). */
export function applyJsonPatch<T>(doc: T, ops: readonly JsonPatchOp[]): T {
  const root = structuredClone(doc) as unknown as Json;
  for (const op of ops) {
    const tokens = op.path
      .split("/")
      .slice(1)
      .map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"));
    const last = tokens.pop() ?? "";
    let parent: unknown = root;
    for (const t of tokens) parent = (parent as Json | undefined)?.[t];
    if (typeof parent !== "object" || parent === null) throw invalidPatch(`doc is missing path: ${op.path}`);
    const p = parent as Json;
    if (op.op === "test") {
      if (!(last in p) || !isDeepStrictEqual(p[last], op.value)) {
        throw invalidPatch(`the server rejected our request due to an error in our request: test failed at ${op.path}`);
      }
    } else if (op.op === "remove") {
      if (!(last in p)) throw invalidPatch(`doc is missing path: ${op.path}`);
      delete p[last];
    } else if (op.op === "replace") {
      if (!(last in p)) throw invalidPatch(`doc is missing path: ${op.path}`);
      p[last] = structuredClone(op.value);
    } else if (Array.isArray(p) && last === "-") {
      p.push(structuredClone(op.value));
    } else {
      p[last] = structuredClone(op.value);
    }
  }
  return root as unknown as T;
}

/** One recorded write. */
export interface Write {
  readonly verb: "patchVm" | "patchVmStatus" | "patchVmi" | "createVmim";
  readonly name: string;
  readonly body: unknown;
  readonly dryRun: boolean;
}

/** In-memory cluster. Objects are keyed `namespace/name`. */
export class FakeCluster implements ClusterClient {
  readonly vms = new Map<string, VirtualMachine>();
  readonly vmis = new Map<string, VirtualMachineInstance>();
  readonly vmims: VirtualMachineInstanceMigration[] = [];
  readonly pods: PodLite[] = [];
  readonly writes: Write[] = [];
  /** When set, the next patch fails with this error (then clears). */
  failNextPatch: ApiError | undefined;

  addVm(vm: VirtualMachine): this {
    this.vms.set(`${vm.metadata?.namespace ?? "default"}/${vm.metadata?.name ?? ""}`, structuredClone(vm));
    return this;
  }

  addVmi(vmi: VirtualMachineInstance): this {
    this.vmis.set(`${vmi.metadata?.namespace ?? "default"}/${vmi.metadata?.name ?? ""}`, structuredClone(vmi));
    return this;
  }

  getVm(namespace: string, name: string): Promise<VirtualMachine | undefined> {
    return Promise.resolve(structuredClone(this.vms.get(`${namespace}/${name}`)));
  }

  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined> {
    return Promise.resolve(structuredClone(this.vmis.get(`${namespace}/${name}`)));
  }

  #patch<T>(map: Map<string, T>, key: string, patch: readonly JsonPatchOp[]): T {
    if (this.failNextPatch) {
      const error = this.failNextPatch;
      this.failNextPatch = undefined;
      throw error;
    }
    const current = map.get(key);
    if (!current) throw invalidPatch(`not found: ${key}`);
    return applyJsonPatch(current, patch);
  }

  patchVm(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#record("patchVm", this.vms, namespace, name, patch, dryRun);
  }

  patchVmStatus(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#record("patchVmStatus", this.vms, namespace, name, patch, dryRun);
  }

  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#record("patchVmi", this.vmis, namespace, name, patch, dryRun);
  }

  #record<T>(
    verb: Write["verb"],
    map: Map<string, T>,
    namespace: string,
    name: string,
    patch: readonly JsonPatchOp[],
    dryRun: boolean,
  ): Promise<void> {
    try {
      const next = this.#patch(map, `${namespace}/${name}`, patch);
      this.writes.push({ verb, name, body: patch, dryRun });
      if (!dryRun) map.set(`${namespace}/${name}`, next);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  createVmim(
    namespace: string,
    vmim: VirtualMachineInstanceMigration,
    dryRun: boolean,
  ): Promise<VirtualMachineInstanceMigration> {
    const created = structuredClone(vmim);
    const name = `${vmim.metadata?.generateName ?? ""}abcde`;
    created.metadata = { ...created.metadata, namespace, name };
    this.writes.push({ verb: "createVmim", name, body: vmim, dryRun });
    if (!dryRun) this.vmims.push(created);
    return Promise.resolve(created);
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

  listPods(namespace: string, labelSelector?: string, fieldSelector?: string): Promise<PodLite[]> {
    const node = /spec\.nodeName=(.*)/.exec(fieldSelector ?? "")?.[1];
    const [lk, lv] = (labelSelector ?? "").split("=");
    return Promise.resolve(
      this.pods.filter(
        (p) =>
          p.metadata.namespace === namespace &&
          (node === undefined || p.spec?.nodeName === node) &&
          (lk === undefined || lk === "" || p.metadata.labels?.[lk] === lv),
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
