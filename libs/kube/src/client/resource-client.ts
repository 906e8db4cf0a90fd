/**
 * Typed clients: one {@link ResourceClient} per kind, built from a {@link ResourceType} and a transport. CRUD,
 * the status subresource, JSON/merge patches, deletes with uid/resourceVersion preconditions, and POSTs to the
 * create-only subresources (`pods/binding`, `pods/eviction`, `serviceaccounts/token`).
 */
import type { KubeList, KubeObject } from "../types.ts";
import type { JsonPatchOp } from "./json-patch.ts";
import type { RawWatchEvent, RestTransport, WatchHandle } from "./rest-client.ts";

/** Where a kind lives in the API. */
export interface ResourceType {
  /** API group; `""` for core. */
  readonly group: string;
  readonly version: string;
  /** Lower-case plural, e.g. `virtualmachineinstances`. */
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

/** `apiVersion` of a resource type (`v1`, `kubevirt.io/v1`). */
export function apiVersionOf(type: ResourceType): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

/**
 * One path segment, escaped: names may come from requests and must neither break the request path nor walk to
 * another one (`..` becomes `%2E%2E`). A lone UTF-16 surrogate (in no valid name) becomes U+FFFD instead of a
 * URIError, so the lookup answers NotFound.
 */
function segment(s: string): string {
  return s === "." || s === ".." ? s.replaceAll(".", "%2E") : encodeURIComponent(s.toWellFormed());
}

/** The API path of a collection or object of `type`. `namespace` undefined or `""` with namespaced = all namespaces. */
export function resourcePath(type: ResourceType, namespace?: string, name?: string, subresource?: string): string {
  let path = type.group ? `/apis/${type.group}/${type.version}` : `/api/${type.version}`;
  if (type.namespaced && namespace) path += `/namespaces/${segment(namespace)}`;
  path += `/${type.plural}`;
  if (name !== undefined) path += `/${segment(name)}`;
  if (subresource) path += `/${subresource}`;
  return path;
}

/** List options. */
export interface ListOptions {
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  readonly resourceVersion?: string;
  readonly limit?: number;
  readonly continue?: string;
}

/** Delete options: preconditions and propagation. */
export interface DeleteOptions {
  readonly preconditions?: { uid?: string; resourceVersion?: string };
  readonly propagationPolicy?: "Orphan" | "Background" | "Foreground";
  readonly gracePeriodSeconds?: number;
}

/** CRUD on one kind. Every method rejects with an `ApiError` on a non-2xx answer. */
export interface ResourceClient<T extends KubeObject> {
  readonly type: ResourceType;
  get(namespace: string, name: string): Promise<T>;
  list(namespace?: string, options?: ListOptions): Promise<KubeList<T>>;
  create(obj: T): Promise<T>;
  /** PUT; the object's resourceVersion is the optimistic-concurrency precondition. */
  update(obj: T): Promise<T>;
  /** PUT on the status subresource. */
  updateStatus(obj: T): Promise<T>;
  /** JSON patch (RFC 6902); put `test` ops first for preconditions. */
  patch(namespace: string, name: string, ops: readonly JsonPatchOp[], subresource?: "status"): Promise<T>;
  /** JSON merge patch (RFC 7386). */
  mergePatch(namespace: string, name: string, patch: unknown, subresource?: "status"): Promise<T>;
  delete(namespace: string, name: string, options?: DeleteOptions): Promise<void>;
  /**
   * POSTs `body` to a subresource of the object `namespace/name` and resolves to the server's answer: a Binding to
   * `pods/NAME/binding` (what a scheduler does), an Eviction to `pods/NAME/eviction`, a TokenRequest to
   * `serviceaccounts/NAME/token`.
   */
  createSubresource<R>(namespace: string, name: string, subresource: string, body: unknown): Promise<R>;
  /** Starts a watch; see `RestTransport.watch`. */
  watch(
    namespace: string | undefined,
    options: ListOptions,
    onEvent: (event: RawWatchEvent) => void,
    onDone: (error: unknown) => void,
  ): Promise<WatchHandle>;
}

/** Builds a {@link ResourceClient} for `type` over `transport`. */
export function resourceClient<T extends KubeObject>(transport: RestTransport, type: ResourceType): ResourceClient<T> {
  const apiVersion = apiVersionOf(type);
  const withTypeMeta = (obj: T): T => ({ ...obj, apiVersion, kind: type.kind });
  const ns = (obj: T): string | undefined => obj.metadata?.namespace;
  const nameOf = (obj: T): string => {
    const name = obj.metadata?.name;
    if (!name) throw new TypeError(`Cannot update a ${type.kind} without metadata.name`);
    return name;
  };
  return {
    type,
    get: (namespace, name) => transport.request<T>({ method: "GET", path: resourcePath(type, namespace, name) }),
    list: (namespace, options = {}) =>
      transport.request<KubeList<T>>({ method: "GET", path: resourcePath(type, namespace), query: { ...options } }),
    create: (obj) =>
      transport.request<T>({ method: "POST", path: resourcePath(type, ns(obj)), body: withTypeMeta(obj) }),
    update: (obj) =>
      transport.request<T>({ method: "PUT", path: resourcePath(type, ns(obj), nameOf(obj)), body: withTypeMeta(obj) }),
    updateStatus: (obj) =>
      transport.request<T>({
        method: "PUT",
        path: resourcePath(type, ns(obj), nameOf(obj), "status"),
        body: withTypeMeta(obj),
      }),
    patch: (namespace, name, ops, subresource) =>
      transport.request<T>({
        method: "PATCH",
        path: resourcePath(type, namespace, name, subresource),
        body: ops,
        contentType: "application/json-patch+json",
      }),
    mergePatch: (namespace, name, patch, subresource) =>
      transport.request<T>({
        method: "PATCH",
        path: resourcePath(type, namespace, name, subresource),
        body: patch,
        contentType: "application/merge-patch+json",
      }),
    delete: async (namespace, name, options = {}) => {
      await transport.request<unknown>({
        method: "DELETE",
        path: resourcePath(type, namespace, name),
        body: { apiVersion: "v1", kind: "DeleteOptions", ...options },
      });
    },
    createSubresource: <R>(namespace: string, name: string, subresource: string, body: unknown) =>
      transport.request<R>({ method: "POST", path: resourcePath(type, namespace, name, subresource), body }),
    watch: (namespace, options, onEvent, onDone) =>
      transport.watch(resourcePath(type, namespace), { ...options }, onEvent, onDone),
  };
}
