/**
 * Typed operations on KubeVirt objects through the API server, acting as one user. Subresource handlers and
 * webhooks depend on the {@link ClusterClient} interface; unit tests pass a fake, production passes
 * {@link RestClusterClient} over an impersonating {@link RestTransport}.
 */

import type {
  JsonPatchOp,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VirtualMachineInstancePreset,
} from "@kvt/api";
import type { RestResponse, RestTransport, UserInfo } from "./rest.ts";
import { ApiError, internalError, isStatus } from "./status.ts";

/** A Kubernetes list, as far as virt-api reads it. */
interface List<T> {
  items?: T[];
}

/** A Pod, as far as the virt-handler locator reads it. */
export interface PodLite {
  metadata: { name?: string; namespace?: string; labels?: Record<string, string> };
  spec?: { nodeName?: string };
  status?: { podIP?: string; phase?: string };
}

/** What virt-api does to the cluster. `dryRun` maps to `?dryRun=All`. Missing objects give `undefined`. */
export interface ClusterClient {
  getVm(namespace: string, name: string): Promise<VirtualMachine | undefined>;
  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined>;
  patchVm(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void>;
  patchVmStatus(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void>;
  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void>;
  createVmim(
    namespace: string,
    vmim: VirtualMachineInstanceMigration,
    dryRun: boolean,
  ): Promise<VirtualMachineInstanceMigration>;
  listVmims(namespace: string, labelSelector?: string): Promise<VirtualMachineInstanceMigration[]>;
  listPods(namespace: string, labelSelector?: string, fieldSelector?: string): Promise<PodLite[]>;
  /** The VirtualMachineInstancePresets of `namespace` (the VMI mutating webhook applies the matching ones). */
  listVmiPresets(namespace: string): Promise<VirtualMachineInstancePreset[]>;
}

/** True when an ApiError is the API server reporting a failed JSON-patch `test` (a lost optimistic race). */
export function isPatchTestFailure(error: unknown): boolean {
  if (!(error instanceof ApiError)) return false;
  return (error.code === 422 || error.code === 409) && /test/i.test(error.message);
}

const KV = "/apis/kubevirt.io/v1";

/**
 * One path segment, escaped: names come from requests (a webhook's object, a subresource's URL) and must neither
 * break the request ("Request path contains unescaped characters", found by the API fuzz lane) nor walk to another
 * path ("../.."). A lone UTF-16 surrogate (no object can be named so) becomes U+FFFD instead of a URIError: the
 * lookup then answers NotFound.
 */
const seg = (s: string): string =>
  s === "." || s === ".." ? encodeURIComponent(s).replaceAll(".", "%2E") : encodeURIComponent(s.toWellFormed());

function check(res: RestResponse, what: string): unknown {
  if (res.status >= 200 && res.status < 300) return res.body;
  if (isStatus(res.body)) throw new ApiError(res.body);
  throw new ApiError(
    internalError(`${what}: HTTP ${res.status} ${typeof res.body === "string" ? res.body : ""}`.trim()),
  );
}

/** {@link ClusterClient} over the API server's REST interface, as `user` (or as virt-api itself when omitted). */
export class RestClusterClient implements ClusterClient {
  readonly #transport: RestTransport;
  readonly #user: UserInfo | undefined;

  constructor(transport: RestTransport, user?: UserInfo) {
    this.#transport = transport;
    this.#user = user;
  }

  async #get<T>(path: string, what: string): Promise<T | undefined> {
    const res = await this.#transport.send({ method: "GET", path }, this.#user);
    if (res.status === 404) return undefined;
    return check(res, what) as T;
  }

  async #patch(path: string, patch: readonly JsonPatchOp[], dryRun: boolean, what: string): Promise<void> {
    const res = await this.#transport.send(
      {
        method: "PATCH",
        path,
        query: { dryRun: dryRun ? "All" : undefined },
        body: patch,
        contentType: "application/json-patch+json",
      },
      this.#user,
    );
    check(res, what);
  }

  getVm(namespace: string, name: string): Promise<VirtualMachine | undefined> {
    return this.#get(`${KV}/namespaces/${seg(namespace)}/virtualmachines/${seg(name)}`, "get virtualmachine");
  }

  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined> {
    return this.#get(
      `${KV}/namespaces/${seg(namespace)}/virtualmachineinstances/${seg(name)}`,
      "get virtualmachineinstance",
    );
  }

  patchVm(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch(
      `${KV}/namespaces/${seg(namespace)}/virtualmachines/${seg(name)}`,
      patch,
      dryRun,
      "patch virtualmachine",
    );
  }

  patchVmStatus(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch(
      `${KV}/namespaces/${seg(namespace)}/virtualmachines/${seg(name)}/status`,
      patch,
      dryRun,
      "patch virtualmachine status",
    );
  }

  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch(
      `${KV}/namespaces/${seg(namespace)}/virtualmachineinstances/${seg(name)}`,
      patch,
      dryRun,
      "patch virtualmachineinstance",
    );
  }

  async createVmim(
    namespace: string,
    vmim: VirtualMachineInstanceMigration,
    dryRun: boolean,
  ): Promise<VirtualMachineInstanceMigration> {
    const res = await this.#transport.send(
      {
        method: "POST",
        path: `${KV}/namespaces/${seg(namespace)}/virtualmachineinstancemigrations`,
        query: { dryRun: dryRun ? "All" : undefined },
        body: { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstanceMigration", ...vmim },
      },
      this.#user,
    );
    return check(res, "create virtualmachineinstancemigration") as VirtualMachineInstanceMigration;
  }

  async listVmims(namespace: string, labelSelector?: string): Promise<VirtualMachineInstanceMigration[]> {
    const res = await this.#transport.send(
      {
        method: "GET",
        path: `${KV}/namespaces/${seg(namespace)}/virtualmachineinstancemigrations`,
        query: { labelSelector },
      },
      this.#user,
    );
    return (check(res, "list virtualmachineinstancemigrations") as List<VirtualMachineInstanceMigration>).items ?? [];
  }

  async listVmiPresets(namespace: string): Promise<VirtualMachineInstancePreset[]> {
    const path = `${KV}/namespaces/${seg(namespace)}/virtualmachineinstancepresets`;
    const res = await this.#transport.send({ method: "GET", path }, this.#user);
    // A cluster without the (deprecated) preset CRD has no presets to apply.
    if (res.status === 404) return [];
    return (check(res, "list virtualmachineinstancepresets") as List<VirtualMachineInstancePreset>).items ?? [];
  }

  async listPods(namespace: string, labelSelector?: string, fieldSelector?: string): Promise<PodLite[]> {
    const res = await this.#transport.send(
      { method: "GET", path: `/api/v1/namespaces/${seg(namespace)}/pods`, query: { labelSelector, fieldSelector } },
      this.#user,
    );
    return (check(res, "list pods") as List<PodLite>).items ?? [];
  }
}
