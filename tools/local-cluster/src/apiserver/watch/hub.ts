/**
 * Watch fan-out. Each watcher follows one collection (optionally one namespace) through a label and field
 * selector, with the cacher's transition rules:
 *
 *   event      old matched  new matches  ->  sent as
 *   ADDED          -            yes           ADDED
 *   MODIFIED      yes           yes           MODIFIED
 *   MODIFIED      no            yes           ADDED
 *   MODIFIED      yes           no            DELETED (the new state)
 *   DELETED       yes           -             DELETED
 *
 * Start: without a resourceVersion (or "0"), synthetic ADDED for every current match, then live events; from
 * revision N, the retained history after N, then live events (410 Expired if N was compacted).
 */
import { type FieldGetter, type FieldSelector, matchFields } from "../selectors/fields.ts";
import { type LabelSelector, matchLabels } from "../selectors/labels.ts";
import type { Store, StoreEvent } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";

/** What a watcher follows. */
export interface WatchFilter {
  readonly coll: string;
  /** `ns/` to follow one namespace, "" for all. */
  readonly idPrefix: string;
  readonly labels: LabelSelector;
  readonly fields: FieldSelector;
  readonly getters: ReadonlyMap<string, FieldGetter>;
}

/** One delivered event. */
export interface WatchEvent {
  readonly type: "ADDED" | "MODIFIED" | "DELETED";
  readonly obj: KubeObject;
  /** The object's serialized form when it is the stored one. */
  readonly json: string;
  readonly rev: number;
}

/** Receives events; returns false to stop (the watcher then closes). */
export type WatchSink = (ev: WatchEvent) => void;

/** A running watch. */
export interface WatchHandle {
  close(): void;
}

interface Watcher {
  readonly filter: WatchFilter;
  readonly sink: WatchSink;
  lastRev: number;
}

/** True if the object passes the filter. */
export function matches(f: WatchFilter, obj: KubeObject, id: string): boolean {
  return (
    id.startsWith(f.idPrefix) && matchLabels(f.labels, obj.metadata.labels) && matchFields(f.fields, obj, f.getters)
  );
}

/** One shared WatchEvent per store event and type, so streams can cache its serialized line. */
const shared = new WeakMap<StoreEvent, Partial<Record<WatchEvent["type"], WatchEvent>>>();

function as(ev: StoreEvent, type: WatchEvent["type"]): WatchEvent {
  let m = shared.get(ev);
  if (!m) {
    m = {};
    shared.set(ev, m);
  }
  let w = m[type];
  if (!w) {
    w = { type, obj: ev.obj, json: ev.json, rev: ev.rev };
    m[type] = w;
  }
  return w;
}

function translate(f: WatchFilter, ev: StoreEvent): WatchEvent | undefined {
  if (f.labels.length === 0 && f.fields.length === 0) {
    // No selector: the table above reduces to the namespace check (old and new state share the id).
    if (!ev.id.startsWith(f.idPrefix)) return undefined;
    if (ev.type === "DELETED") return as(ev, "DELETED");
    return as(ev, ev.type === "ADDED" && ev.prev === undefined ? "ADDED" : "MODIFIED");
  }
  const newMatch = ev.type !== "DELETED" && matches(f, ev.obj, ev.id);
  const oldMatch = ev.prev !== undefined && matches(f, ev.prev, ev.id);
  if (ev.type === "DELETED")
    return oldMatch || (ev.prev === undefined && matches(f, ev.obj, ev.id)) ? as(ev, "DELETED") : undefined;
  if (newMatch) return as(ev, oldMatch || (ev.type === "MODIFIED" && ev.prev === undefined) ? "MODIFIED" : "ADDED");
  if (oldMatch) return as(ev, "DELETED");
  return undefined;
}

/** Dispatches committed store events to watchers. */
export class WatchHub {
  readonly #store: Store;
  readonly #byColl = new Map<string, Set<Watcher>>();

  constructor(store: Store) {
    this.#store = store;
    store.subscribe((ev) => this.#dispatch(ev));
  }

  /** Number of open watchers (metrics, tests). */
  get size(): number {
    let n = 0;
    for (const s of this.#byColl.values()) n += s.size;
    return n;
  }

  #dispatch(ev: StoreEvent): void {
    const set = this.#byColl.get(ev.coll);
    if (!set) return;
    for (const w of set) {
      if (ev.rev <= w.lastRev) continue;
      w.lastRev = ev.rev;
      const out = translate(w.filter, ev);
      if (out) w.sink(out);
    }
  }

  /** Starts a watch; throws 410 Expired synchronously if `fromRev` is compacted. */
  watch(filter: WatchFilter, fromRev: number | undefined, sink: WatchSink): WatchHandle {
    const w: Watcher = { filter, sink, lastRev: 0 };
    const initial: WatchEvent[] = [];
    if (fromRev === undefined) {
      w.lastRev = this.#store.revision;
      for (const e of this.#store.list(filter.coll, filter.idPrefix))
        if (matches(filter, e.obj, e.id)) initial.push({ type: "ADDED", obj: e.obj, json: e.json, rev: e.rev });
    } else {
      w.lastRev = fromRev;
      for (const ev of this.#store.eventsSince(fromRev, filter.coll)) {
        const out = translate(filter, ev);
        w.lastRev = ev.rev;
        if (out) initial.push(out);
      }
    }
    let set = this.#byColl.get(filter.coll);
    if (!set) {
      set = new Set();
      this.#byColl.set(filter.coll, set);
    }
    set.add(w);
    for (const ev of initial) sink(ev);
    return { close: () => set.delete(w) };
  }
}
