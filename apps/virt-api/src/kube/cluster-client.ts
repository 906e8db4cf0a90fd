/**
 * Typed operations on KubeVirt objects through the API server, acting as one user. Subresource handlers and
 * webhooks depend on the {@link ClusterClient} interface; unit tests pass a fake, production passes
 * {@link RestClusterClient} over @kvt/kube's `RestClient`, which impersonates the user per request.
 */

import type {
  JsonPatchOp,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VirtualMachineInstancePreset,
} from "@kvt/api";
import {
  ApiError,
  CORE_V1,
  errorMessage,
  type Impersonation,
  isNotFound,
  KUBEVIRT_V1,
  type ResourceType,
  type RestRequest,
  type RestTransport,
  resourcePath,
} from "@kvt/kube";

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
  return (error.code === 422 || error.code === 409) && /test/i.test(errorMessage(error));
}

/** GETs `req`; undefined when the API server answers 404 (any other failure rejects). */
export async function getIfExists<T>(
  transport: RestTransport,
  req: Omit<RestRequest, "method">,
): Promise<T | undefined> {
  try {
    return await transport.request<T>({ ...req, method: "GET" });
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

const VMS = KUBEVIRT_V1.virtualMachines;
const VMIS = KUBEVIRT_V1.virtualMachineInstances;
const VMIMS = KUBEVIRT_V1.virtualMachineInstanceMigrations;
const PRESETS: ResourceType = {
  group: "kubevirt.io",
  version: "v1",
  plural: "virtualmachineinstancepresets",
  kind: "VirtualMachineInstancePreset",
  namespaced: true,
};

/**
 * {@link ClusterClient} over the API server's REST interface, as `user` (or as virt-api itself when omitted).
 * Failures reject with the API server's `ApiError`, its Status as the server sent it.
 */
export class RestClusterClient implements ClusterClient {
  readonly #transport: RestTransport;
  readonly #user: Impersonation | undefined;

  constructor(transport: RestTransport, user?: Impersonation) {
    this.#transport = transport;
    this.#user = user;
  }

  #request<T>(req: RestRequest): Promise<T> {
    return this.#transport.request<T>(this.#user ? { ...req, impersonate: this.#user } : req);
  }

  #get<T>(type: ResourceType, namespace: string, name: string): Promise<T | undefined> {
    const path = resourcePath(type, namespace, name);
    return getIfExists<T>(this.#transport, this.#user ? { path, impersonate: this.#user } : { path });
  }

  async #list<T>(type: ResourceType, namespace: string, query: RestRequest["query"] = {}): Promise<T[]> {
    const list = await this.#request<List<T>>({ method: "GET", path: resourcePath(type, namespace), query });
    return list.items ?? [];
  }

  async #patch(path: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    await this.#request<unknown>({
      method: "PATCH",
      path,
      query: { dryRun: dryRun ? "All" : undefined },
      body: patch,
      contentType: "application/json-patch+json",
    });
  }

  getVm(namespace: string, name: string): Promise<VirtualMachine | undefined> {
    return this.#get(VMS, namespace, name);
  }

  getVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined> {
    return this.#get(VMIS, namespace, name);
  }

  patchVm(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch(resourcePath(VMS, namespace, name), patch, dryRun);
  }

  patchVmStatus(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch(resourcePath(VMS, namespace, name, "status"), patch, dryRun);
  }

  patchVmi(namespace: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    return this.#patch(resourcePath(VMIS, namespace, name), patch, dryRun);
  }

  createVmim(
    namespace: string,
    vmim: VirtualMachineInstanceMigration,
    dryRun: boolean,
  ): Promise<VirtualMachineInstanceMigration> {
    return this.#request({
      method: "POST",
      path: resourcePath(VMIMS, namespace),
      query: { dryRun: dryRun ? "All" : undefined },
      body: { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstanceMigration", ...vmim },
    });
  }

  listVmims(namespace: string, labelSelector?: string): Promise<VirtualMachineInstanceMigration[]> {
    return this.#list(VMIMS, namespace, { labelSelector });
  }

  async listVmiPresets(namespace: string): Promise<VirtualMachineInstancePreset[]> {
    try {
      return await this.#list(PRESETS, namespace);
    } catch (error) {
      // A cluster without the (deprecated) preset CRD has no presets to apply.
      if (isNotFound(error)) return [];
      throw error;
    }
  }

  listPods(namespace: string, labelSelector?: string, fieldSelector?: string): Promise<PodLite[]> {
    return this.#list(CORE_V1.pods, namespace, { labelSelector, fieldSelector });
  }
}
