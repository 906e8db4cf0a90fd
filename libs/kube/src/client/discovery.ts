/**
 * Where a kind lives, asked of the API server (kubectl's RESTMapper): the discovery document of its group version
 * (`GET /api/v1`, `GET /apis/GROUP/VERSION`, an `APIResourceList`) names each resource with its kind and scope.
 * For tools that handle objects of kinds they do not know in advance (applying manifests); clients of a known kind
 * use its {@link ResourceType} constant instead.
 */
import { ApiError, isNotFound } from "../errors.ts";
import type { ResourceType } from "./resource-client.ts";
import type { RestTransport } from "./rest-client.ts";

/** One entry of an `APIResourceList` (the fields the mapping needs). */
interface ApiResource {
  readonly name: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

/** Maps `apiVersion` + `kind` to a {@link ResourceType}; one discovery request per group version, cached. */
export class ResourceDiscovery {
  readonly #transport: RestTransport;
  readonly #lists = new Map<string, Promise<readonly ApiResource[]>>();

  constructor(transport: RestTransport) {
    this.#transport = transport;
  }

  /**
   * The resource type serving `kind` in `apiVersion` (`v1`, `rbac.authorization.k8s.io/v1`). Rejects with a
   * NotFound {@link ApiError} when the server serves no such group version or kind; a failed lookup is not cached.
   */
  async resourceType(apiVersion: string, kind: string): Promise<ResourceType> {
    const slash = apiVersion.indexOf("/");
    const group = slash < 0 ? "" : apiVersion.slice(0, slash);
    const version = apiVersion.slice(slash + 1);
    const resources = await this.#resources(group, version, apiVersion);
    // Subresources (`pods/status`) share their parent's kind: only a top-level resource names the kind.
    const hit = resources.find((r) => r.kind === kind && !r.name.includes("/"));
    if (!hit) throw notServed(`the server has no kind "${kind}" in "${apiVersion}"`);
    return { group, version, plural: hit.name, kind, namespaced: hit.namespaced };
  }

  #resources(group: string, version: string, apiVersion: string): Promise<readonly ApiResource[]> {
    let list = this.#lists.get(apiVersion);
    if (!list) {
      const path = group ? `/apis/${group}/${version}` : `/api/${version}`;
      list = this.#transport.request<{ resources?: ApiResource[] }>({ method: "GET", path }).then(
        (answer) => answer.resources ?? [],
        (error: unknown) => {
          this.#lists.delete(apiVersion);
          if (isNotFound(error)) throw notServed(`the server does not serve "${apiVersion}"`, error);
          throw error;
        },
      );
      this.#lists.set(apiVersion, list);
    }
    return list;
  }
}

function notServed(message: string, cause?: unknown): ApiError {
  return new ApiError(
    `Cannot map to a resource: ${message}`,
    404,
    { kind: "Status", status: "Failure", reason: "NotFound", code: 404, message },
    cause === undefined ? undefined : { cause },
  );
}
