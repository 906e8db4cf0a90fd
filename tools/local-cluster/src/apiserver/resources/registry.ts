/**
 * The resource registry: built-ins plus one entry per established CRD, kept in step with the stored CRDs (it
 * follows the store's committed events), so discovery, OpenAPI and routing change as CRDs come and go.
 */
import type { Logger } from "pino";
import type { Store, StoreEvent } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";
import { builtinResources } from "./builtins.ts";
import { crdToDef } from "./crd.ts";
import { ClusterIpAllocator, DEFAULT_SERVICE_CIDR, serviceStrategy } from "./service-ip.ts";
import { collOf, type ResourceDef } from "./types.ts";

const CRD_COLL = "apiextensions.k8s.io/customresourcedefinitions";

/** Resource lookup by group/version/resource, kind or short name. */
export class ResourceRegistry {
  readonly #builtins: ResourceDef[];
  readonly #crds = new Map<string, ResourceDef>();
  readonly #logger: Logger;
  #generation = 0;
  readonly #changeListeners = new Set<() => void>();
  /** `lookup` answers by `group/version/resource`, valid for one generation (every request routes through it). */
  readonly #lookups = new Map<string, ResourceDef | undefined>();

  /**
   * Loads built-ins and the CRDs in `store`, and follows later CRD changes. Services get their ClusterIPs from
   * `serviceClusterIpRange` (kube-apiserver's `--service-cluster-ip-range`, default {@link DEFAULT_SERVICE_CIDR}).
   */
  constructor(store: Store, logger: Logger, serviceClusterIpRange = DEFAULT_SERVICE_CIDR) {
    this.#logger = logger;
    const allocator = new ClusterIpAllocator(serviceClusterIpRange, () =>
      store.list("core/services").map((e) => e.obj),
    );
    this.#builtins = builtinResources({ services: serviceStrategy(allocator) });
    store.subscribe((ev) => {
      if (ev.coll === "core/services") allocator.settled(ev.obj.metadata.uid ?? "");
    });
    for (const e of store.list(CRD_COLL)) this.#apply(e.obj, false);
    store.subscribe((ev) => this.#onEvent(ev));
  }

  #onEvent(ev: StoreEvent): void {
    if (ev.coll !== CRD_COLL) return;
    this.#apply(ev.obj, ev.type === "DELETED");
  }

  #apply(crd: KubeObject, deleted: boolean): void {
    const name = crd.metadata.name ?? "";
    if (deleted) this.#crds.delete(name);
    else {
      try {
        const def = crdToDef(crd);
        if (def) this.#crds.set(name, def);
        else this.#crds.delete(name);
      } catch (err) {
        this.#logger.warn({ err, crd: name }, "cannot serve CRD");
        this.#crds.delete(name);
      }
    }
    this.#generation++;
    this.#lookups.clear();
    for (const l of this.#changeListeners) l();
  }

  /** Called whenever the set of served resources changes. */
  onChange(listener: () => void): void {
    this.#changeListeners.add(listener);
  }

  /** Bumps on every change; discovery and OpenAPI use it as a cache key. */
  get generation(): number {
    return this.#generation;
  }

  /** Every served resource. */
  all(): ResourceDef[] {
    return [...this.#builtins, ...this.#crds.values()];
  }

  /** The resource served at group/version/resource. */
  lookup(group: string, version: string, resource: string): ResourceDef | undefined {
    const key = `${group}/${version}/${resource}`;
    if (this.#lookups.has(key)) return this.#lookups.get(key);
    const def = this.all().find((d) => d.group === group && d.resource === resource && d.versions.includes(version));
    // Bounded: only paths that name a resource reach here, and unknown ones are not remembered.
    if (def) this.#lookups.set(key, def);
    return def;
  }

  /** The resource of an apiVersion+kind (ownerReferences). */
  byKind(apiVersion: string, kind: string): ResourceDef | undefined {
    const slash = apiVersion.indexOf("/");
    const group = slash < 0 ? "" : apiVersion.slice(0, slash);
    const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
    return this.all().find((d) => d.group === group && d.kind === kind && d.versions.includes(version));
  }

  /** The resource stored in a collection. */
  byColl(coll: string): ResourceDef | undefined {
    return this.all().find((d) => collOf(d) === coll);
  }

  /** True if some served group has this version. */
  hasGroupVersion(group: string, version: string): boolean {
    return this.all().some((d) => d.group === group && d.versions.includes(version));
  }
}
