/** Shapes shared by every apiserver module: JSON values and Kubernetes object metadata. */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/** An owner reference (metav1.OwnerReference). */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** ObjectMeta as the server reads and writes it. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: Json[];
  [key: string]: unknown;
}

/** A Kubernetes object: apiVersion, kind, metadata and anything else. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

/** True for a plain JSON object (not an array, not null). */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A deep copy of a JSON value. */
export function clone<T>(v: T): T {
  return structuredClone(v);
}

/**
 * A deep copy of a plain JSON value (objects, arrays, primitives; keys holding undefined are kept), about ten
 * times cheaper than structuredClone for objects the size of a VMI. Only for values that are JSON: request bodies
 * and stored objects, never Dates, Maps or class instances.
 */
export function cloneJson<T>(v: T): T {
  if (typeof v !== "object" || v === null) return v;
  if (Array.isArray(v)) {
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = cloneJson(v[i] as unknown);
    return out as T;
  }
  const src = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k in src) {
    if (!Object.hasOwn(src, k)) continue;
    // A "__proto__" key from JSON.parse is an own property; assigning it would set the prototype instead.
    if (k === "__proto__")
      Object.defineProperty(out, k, { value: cloneJson(src[k]), enumerable: true, writable: true, configurable: true });
    else out[k] = cloneJson(src[k]);
  }
  return out as T;
}

/** Kubernetes timestamp with seconds precision (metav1.Time). */
let lastSecond = -1;
let lastText = "";
export function nowTime(now: number = Date.now()): string {
  const sec = Math.floor(now / 1000);
  if (sec !== lastSecond) {
    lastSecond = sec;
    lastText = `${new Date(sec * 1000).toISOString().slice(0, 19)}Z`;
  }
  return lastText;
}

/** Deep equality of two JSON values (key order ignored; keys holding undefined count as absent). Allocates nothing. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  // Count a's defined keys while comparing them, then b's: equal counts mean b has no extra key.
  let keys = 0;
  for (const k in ra) {
    if (!Object.hasOwn(ra, k) || ra[k] === undefined) continue;
    keys++;
    if (!Object.hasOwn(rb, k) || !jsonEqual(ra[k], rb[k])) return false;
  }
  for (const k in rb) if (Object.hasOwn(rb, k) && rb[k] !== undefined) keys--;
  return keys === 0;
}
