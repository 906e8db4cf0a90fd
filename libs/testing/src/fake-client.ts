/**
 * An in-memory API for controller unit tests: typed {@link ResourceClient}s over shared object maps, recording every
 * write as an action the test asserts on (KubeVirt's fake clientset + `testing.Action`). Creates fill in uid,
 * resourceVersion, creationTimestamp and generateName; updates check resourceVersion; JSON patches honour `test`.
 */
import { randomUUID } from "node:crypto";
import {
  ApiError,
  type DeleteOptions,
  type JsonPatchOp,
  type KubeList,
  type KubeObject,
  type ResourceClient,
  type ResourceType,
} from "@kvt/kube";
import { applyJsonPatch, applyMergePatch } from "./json-patch-apply.ts";

/** One recorded call. */
export interface Action {
  readonly verb: "create" | "update" | "patch" | "delete" | "get" | "list";
  /** `pods`, `virtualmachineinstances/status`, ... */
  readonly resource: string;
  readonly namespace: string;
  readonly name: string;
  /** The object sent (create/update) or the patch (patch). */
  readonly body?: unknown;
  readonly options?: DeleteOptions;
}

type Failure = (action: Action) => Error | undefined;

/** The fake API: one per test. */
export class FakeApi {
  /** Every write (and read) in order. */
  readonly actions: Action[] = [];
  readonly #objects = new Map<string, Map<string, KubeObject>>();
  readonly #failures: Failure[] = [];
  #rv = 100;

  /** Makes matching calls fail: `failOn("create", "pods", new ApiError(...))`. */
  failOn(verb: Action["verb"], resource: string, error: Error): void {
    this.#failures.push((a) => (a.verb === verb && a.resource === resource ? error : undefined));
  }

  /** The writes only (creates, updates, patches, deletes). */
  writes(): Action[] {
    return this.actions.filter((a) => a.verb !== "get" && a.verb !== "list");
  }

  /** Short strings for the writes: `create pods`, `patch virtualmachineinstances/status d/vmi1`. */
  summary(): string[] {
    return this.writes().map(
      (a) => `${a.verb} ${a.resource}${a.verb === "create" ? "" : ` ${a.namespace ? `${a.namespace}/` : ""}${a.name}`}`,
    );
  }

  /** Stores `obj` as if it existed already (no action recorded). */
  seed<T extends KubeObject>(type: ResourceType, obj: T): T {
    const copy = structuredClone(obj);
    copy.metadata ??= {};
    copy.metadata.uid ??= randomUUID();
    copy.metadata.resourceVersion ??= String(++this.#rv);
    this.#map(type).set(this.#key(copy.metadata.namespace, copy.metadata.name!), copy);
    return copy;
  }

  /** The stored object, if any. */
  stored<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string): T | undefined {
    return this.#map(type).get(this.#key(namespace, name)) as T | undefined;
  }

  /** Every stored object of `type`. */
  all<T extends KubeObject>(type: ResourceType): T[] {
    return [...this.#map(type).values()] as T[];
  }

  /** A typed client for `type` over this fake. */
  client<T extends KubeObject>(type: ResourceType): ResourceClient<T> {
    const map = this.#map(type);
    const record = (a: Action): void => {
      this.actions.push(a);
      for (const f of this.#failures) {
        const e = f(a);
        if (e) throw e;
      }
    };
    const notFound = (name: string): ApiError =>
      new ApiError(`${type.plural} "${name}" not found`, 404, { code: 404, reason: "NotFound" });
    const getStored = (namespace: string, name: string): T => {
      const o = map.get(this.#key(namespace, name));
      if (!o) throw notFound(name);
      return structuredClone(o) as T;
    };
    const store = (o: T): T => {
      o.metadata!.resourceVersion = String(++this.#rv);
      map.set(this.#key(o.metadata!.namespace, o.metadata!.name!), structuredClone(o));
      return structuredClone(o);
    };
    const sub = (s?: string): string => (s ? `${type.plural}/${s}` : type.plural);
    const update = async (obj: T, subresource?: string): Promise<T> => {
      const ns = obj.metadata?.namespace ?? "";
      const name = obj.metadata?.name ?? "";
      record({ verb: "update", resource: sub(subresource), namespace: ns, name, body: structuredClone(obj) });
      const cur = getStored(ns, name);
      if (obj.metadata?.resourceVersion && obj.metadata.resourceVersion !== cur.metadata?.resourceVersion) {
        throw new ApiError("the object has been modified", 409, { code: 409, reason: "Conflict" });
      }
      return store(structuredClone(obj));
    };
    return {
      type,
      get: async (namespace, name) => {
        record({ verb: "get", resource: type.plural, namespace, name });
        return getStored(namespace, name);
      },
      list: async (namespace) => {
        record({ verb: "list", resource: type.plural, namespace: namespace ?? "", name: "" });
        const items = [...map.values()].filter((o) => !namespace || o.metadata?.namespace === namespace);
        return { metadata: { resourceVersion: String(this.#rv) }, items: structuredClone(items) } as KubeList<T>;
      },
      create: async (obj) => {
        const o = structuredClone(obj);
        o.metadata ??= {};
        if (!o.metadata.name && o.metadata.generateName)
          o.metadata.name = o.metadata.generateName + randomUUID().slice(0, 5);
        record({
          verb: "create",
          resource: type.plural,
          namespace: o.metadata.namespace ?? "",
          name: o.metadata.name ?? "",
          body: structuredClone(obj),
        });
        if (map.has(this.#key(o.metadata.namespace, o.metadata.name!))) {
          throw new ApiError(`${type.plural} "${o.metadata.name}" already exists`, 409, {
            code: 409,
            reason: "AlreadyExists",
          });
        }
        o.metadata.uid = randomUUID();
        o.metadata.creationTimestamp = new Date().toISOString();
        return store(o);
      },
      update: (obj) => update(obj),
      updateStatus: (obj) => update(obj, "status"),
      patch: async (namespace, name, ops: readonly JsonPatchOp[], subresource) => {
        record({ verb: "patch", resource: sub(subresource), namespace, name, body: structuredClone(ops) });
        const cur = getStored(namespace, name);
        try {
          return store(applyJsonPatch(cur, ops));
        } catch (error) {
          throw new ApiError(`the server rejected our request due to an error in our request: ${String(error)}`, 422, {
            code: 422,
            reason: "Invalid",
          });
        }
      },
      mergePatch: async (namespace, name, patch, subresource) => {
        record({ verb: "patch", resource: sub(subresource), namespace, name, body: structuredClone(patch) });
        return store(applyMergePatch(getStored(namespace, name), patch));
      },
      delete: async (namespace, name, options) => {
        record({ verb: "delete", resource: type.plural, namespace, name, options });
        const cur = getStored(namespace, name);
        if (options?.preconditions?.uid && options.preconditions.uid !== cur.metadata?.uid) {
          throw new ApiError("precondition failed: uid", 409, { code: 409, reason: "Conflict" });
        }
        map.delete(this.#key(namespace, name));
      },
      createSubresource: async <R>(namespace: string, name: string, subresource: string, body: unknown) => {
        record({ verb: "create", resource: sub(subresource), namespace, name, body: structuredClone(body) });
        getStored(namespace, name); // the object must exist (else 404, as the server answers)
        return structuredClone(body) as R;
      },
      watch: async () => ({ stop: () => {} }),
    };
  }

  #map(type: ResourceType): Map<string, KubeObject> {
    const id = `${type.group}/${type.plural}`;
    let m = this.#objects.get(id);
    if (!m) {
      m = new Map();
      this.#objects.set(id, m);
    }
    return m;
  }

  #key(namespace: string | undefined, name: string): string {
    return `${namespace ?? ""}/${name}`;
  }
}
