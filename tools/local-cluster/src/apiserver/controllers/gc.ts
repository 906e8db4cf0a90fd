/**
 * The garbage collector for ownerReferences (kube-controller-manager's garbagecollector), by uid:
 *
 *   dependent whose owners are all gone              -> deleted (Background)
 *   dependent with some owners gone, some alive      -> the dangling references are removed
 *   owner deleting with finalizer "orphan"           -> its references are removed from dependents, then the
 *                                                       finalizer is dropped
 *   owner deleting with finalizer "foregroundDeletion" -> dependents are deleted; once none with
 *                                                       blockOwnerDeletion=true remains, the finalizer is dropped
 *
 * It follows committed store events; keys are `coll|id`.
 */
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import { deleteObject, FINALIZER_FOREGROUND, FINALIZER_ORPHAN } from "../rest/delete.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";
import { WorkLoop } from "./queue.ts";

const ctx = systemContext("system:serviceaccount:kube-system:generic-garbage-collector");

/** The garbage collector. */
export class GarbageCollector {
  readonly #svc: ResourceService;
  readonly #uids = new Map<string, string>();
  readonly #dependents = new Map<string, Set<string>>();
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((k) => this.#process(k), logger.child({ controller: "garbage-collector" }));
    for (const def of svc.registry.all()) {
      const coll = `${def.group || "core"}/${def.resource}`;
      for (const e of svc.store.list(coll)) this.#index(`${coll}|${e.id}`, undefined, e.obj);
    }
    for (const key of [...this.#uids.values()]) this.#loop.add(key);
    for (const deps of this.#dependents.values()) for (const d of deps) this.#loop.add(d);
  }

  #index(key: string, prev: KubeObject | undefined, obj: KubeObject | undefined): void {
    if (prev?.metadata.uid) {
      this.#uids.delete(prev.metadata.uid);
      for (const r of prev.metadata.ownerReferences ?? []) this.#dependents.get(r.uid)?.delete(key);
    }
    if (obj?.metadata.uid) {
      this.#uids.set(obj.metadata.uid, key);
      for (const r of obj.metadata.ownerReferences ?? []) {
        let s = this.#dependents.get(r.uid);
        if (!s) {
          s = new Set();
          this.#dependents.set(r.uid, s);
        }
        s.add(key);
      }
    }
  }

  /** Feeds one committed event. */
  onEvent(ev: StoreEvent): void {
    const key = `${ev.coll}|${ev.id}`;
    this.#index(key, ev.prev, ev.type === "DELETED" ? undefined : ev.obj);
    const uid = ev.obj.metadata.uid;
    if (ev.type === "DELETED") {
      if (uid) for (const d of this.#dependents.get(uid) ?? []) this.#loop.add(d);
      for (const r of ev.obj.metadata.ownerReferences ?? []) {
        const owner = this.#uids.get(r.uid);
        if (owner) this.#loop.add(owner);
      }
      if (uid && (this.#dependents.get(uid)?.size ?? 0) === 0) this.#dependents.delete(uid);
      return;
    }
    if (ev.obj.metadata.deletionTimestamp) {
      this.#loop.add(key);
      for (const r of ev.obj.metadata.ownerReferences ?? []) {
        const owner = this.#uids.get(r.uid);
        if (owner) this.#loop.add(owner);
      }
    }
    if (ev.obj.metadata.ownerReferences?.length) this.#loop.add(key);
  }

  #get(key: string): KubeObject | undefined {
    const [coll, id] = key.split("|") as [string, string];
    return this.#svc.store.get(coll, id)?.obj;
  }

  async #process(key: string): Promise<boolean> {
    const obj = this.#get(key);
    if (!obj) return false;
    let retry = false;
    const fins = obj.metadata.finalizers ?? [];
    if (obj.metadata.deletionTimestamp && fins.includes(FINALIZER_ORPHAN)) retry = (await this.#orphan(obj)) || retry;
    if (obj.metadata.deletionTimestamp && fins.includes(FINALIZER_FOREGROUND))
      retry = (await this.#foreground(obj)) || retry;
    if (obj.metadata.ownerReferences?.length) retry = (await this.#checkOwners(key, obj)) || retry;
    return retry;
  }

  async #write(key: string, mutate: (o: KubeObject) => void): Promise<void> {
    const [coll] = key.split("|") as [string, string];
    const def = this.#svc.registry.byColl(coll);
    const cur = this.#get(key);
    if (!def || !cur) return;
    const next = structuredClone(cur);
    mutate(next);
    await this.#svc.update(def, def.versions[0], cur.metadata.namespace, cur.metadata.name as string, next, ctx);
  }

  async #delete(key: string, policy: "Background" | "Foreground"): Promise<void> {
    const [coll] = key.split("|") as [string, string];
    const def = this.#svc.registry.byColl(coll);
    const cur = this.#get(key);
    if (!def || !cur || cur.metadata.deletionTimestamp) return;
    try {
      await deleteObject(
        this.#svc,
        def,
        cur.metadata.namespace,
        cur.metadata.name as string,
        { propagationPolicy: policy, preconditions: { uid: cur.metadata.uid } },
        ctx,
      );
    } catch (err) {
      if (!(err instanceof ApiError && (err.code === 404 || err.code === 409))) throw err;
    }
  }

  async #orphan(owner: KubeObject): Promise<boolean> {
    const uid = owner.metadata.uid as string;
    for (const d of [...(this.#dependents.get(uid) ?? [])])
      await this.#write(d, (o) => {
        o.metadata.ownerReferences = (o.metadata.ownerReferences ?? []).filter((r) => r.uid !== uid);
        if (o.metadata.ownerReferences.length === 0) delete o.metadata.ownerReferences;
      });
    const key = this.#uids.get(uid);
    if (key)
      await this.#write(key, (o) => {
        o.metadata.finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== FINALIZER_ORPHAN);
      });
    return false;
  }

  async #foreground(owner: KubeObject): Promise<boolean> {
    const uid = owner.metadata.uid as string;
    let blocking = 0;
    for (const d of [...(this.#dependents.get(uid) ?? [])]) {
      const dep = this.#get(d);
      if (!dep) continue;
      if (dep.metadata.ownerReferences?.some((r) => r.uid === uid && r.blockOwnerDeletion)) blocking++;
      await this.#delete(d, "Foreground");
    }
    if (blocking > 0) return false;
    const key = this.#uids.get(uid);
    if (key)
      await this.#write(key, (o) => {
        o.metadata.finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== FINALIZER_FOREGROUND);
      });
    return false;
  }

  async #checkOwners(key: string, obj: KubeObject): Promise<boolean> {
    const refs = obj.metadata.ownerReferences ?? [];
    const alive = refs.filter((r) => {
      const k = this.#uids.get(r.uid);
      const o = k ? this.#get(k) : undefined;
      return o !== undefined;
    });
    const owners = alive.map((r) => this.#get(this.#uids.get(r.uid) as string) as KubeObject);
    const foregroundOwner = owners.some(
      (o) => o.metadata.deletionTimestamp && o.metadata.finalizers?.includes(FINALIZER_FOREGROUND),
    );
    if (alive.length === 0 || (foregroundOwner && owners.every((o) => o.metadata.deletionTimestamp))) {
      await this.#delete(key, foregroundOwner ? "Foreground" : "Background");
      return false;
    }
    if (alive.length < refs.length) {
      const keep = new Set(alive.map((r) => r.uid));
      await this.#write(key, (o) => {
        o.metadata.ownerReferences = (o.metadata.ownerReferences ?? []).filter((r) => keep.has(r.uid));
      });
    }
    return false;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
