/**
 * Field management (k8s.io/apimachinery managedfields): `metadata.managedFields` kept on every write, and
 * server-side apply with field-manager conflicts.
 *
 * ```
 * write (POST/PUT/patch)   manager = ?fieldManager, else the User-Agent up to its first "/"
 *   live --compare--> new      added+modified fields: owned by (manager, Update, apiVersion[, subresource]),
 *                              taken away from every other manager; removed fields are owned by nobody
 * apply (apply-patch+yaml)  manager = ?fieldManager (required)
 *   live + config --merge--> merged --prune(fields this manager applied before, now owned by nobody)-->
 *   conflicts = others' fields the apply adds or changes -> 409 unless force (force moves them to the applier);
 *   (manager, Apply) owns exactly the fields of the configuration
 * ```
 * A request object's managedFields replace the live ones when they decode; `[]` or `[{}]` resets them; anything
 * that does not decode keeps the live ones (so clients that drop the field lose nothing).
 */
import { goIsPrint, goQuote } from "@kvt/api";
import { type ApiError, badRequest, invalid, type StatusCause, statusError } from "../errors.ts";
import { cloneJson, isObject, type Json, type JsonObject, jsonEqual, type KubeObject, nowTime } from "../types.ts";
import { FieldSet, type FieldsV1Error, fieldSetOf, pathString } from "./field-set.ts";
import type { FieldType } from "./field-types.ts";
import { compare, compareFields, mergeValues, prune, TypedValueError, toFieldSet } from "./typed-value.ts";

/** `Apply` or `Update`. */
export type ManagedOperation = "Apply" | "Update";

/** One manager's fields (a decoded metav1.ManagedFieldsEntry). */
export interface ManagerEntry {
  readonly manager: string;
  readonly operation: ManagedOperation;
  readonly apiVersion: string;
  readonly subresource?: string;
  readonly time?: string;
  readonly set: FieldSet;
}

/** The managers of an object by identity (manager, operation, apiVersion for updates, subresource). */
export type Managed = Map<string, ManagerEntry>;

/** The identity of a manager entry, as kube's BuildManagerIdentifier (the conflict messages print it). */
export function managerId(e: Pick<ManagerEntry, "manager" | "operation" | "apiVersion" | "subresource">): string {
  return JSON.stringify({
    manager: e.manager,
    operation: e.operation,
    apiVersion: e.operation === "Update" ? e.apiVersion : undefined,
    subresource: e.subresource || undefined,
  });
}

/** The most characters a field manager may have (kube's FieldManagerMaxLength). */
export const FIELD_MANAGER_MAX_LENGTH = 128;

/**
 * The manager of a write: the `fieldManager` option, else the User-Agent's prefix before its first "/" with
 * unprintable characters dropped, cut to 128 bytes (kube's managerOrUserAgent).
 */
export function managerOf(fieldManager: string | undefined, userAgent: string | undefined): string {
  if (fieldManager) return fieldManager;
  let out = "";
  for (const ch of (userAgent ?? "").split("/")[0]) {
    if (!goIsPrint(ch)) continue;
    if (Buffer.byteLength(out + ch) > FIELD_MANAGER_MAX_LENGTH) break;
    out += ch;
  }
  return out;
}

/**
 * Checks the write options as kube's ValidateCreateOptions/UpdateOptions/PatchOptions do: 422
 * `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`, `force:
 * Forbidden: may not be specified for non-apply patch`, a fieldManager over 128 bytes or with unprintable runes.
 */
export function validateWriteOptions(
  kind: "CreateOptions" | "UpdateOptions" | "PatchOptions",
  fieldManager: string | undefined,
  patch?: { apply: boolean; forceSet: boolean },
): void {
  const causes: StatusCause[] = [];
  if (patch && !patch.apply && patch.forceSet)
    causes.push({
      reason: "FieldValueForbidden",
      message: "Forbidden: may not be specified for non-apply patch",
      field: "force",
    });
  if (patch?.apply && !fieldManager)
    causes.push({
      reason: "FieldValueRequired",
      message: "Required value: is required for apply patch",
      field: "fieldManager",
    });
  const fm = fieldManager ?? "";
  if (Buffer.byteLength(fm) > FIELD_MANAGER_MAX_LENGTH)
    causes.push({
      reason: "FieldValueTooLong",
      message: `Too long: may not be more than ${FIELD_MANAGER_MAX_LENGTH} bytes`,
      field: "fieldManager",
    });
  let pos = 0;
  for (const ch of fm) {
    if (!goIsPrint(ch)) {
      const cp = ch.codePointAt(0) ?? 0;
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${goQuote(fm)}: invalid character U+${cp.toString(16).toUpperCase().padStart(4, "0")} (at position ${pos})`,
        field: "fieldManager",
      });
    }
    pos += Buffer.byteLength(ch);
  }
  if (causes.length > 0) throw invalid(kind, "meta.k8s.io", "", causes);
}

function decodeEntry(raw: Json): ManagerEntry {
  if (!isObject(raw)) throw new TypeError("managed fields entry must be an object");
  const { manager, operation, apiVersion, time, fieldsType, fieldsV1, subresource } = raw;
  if (operation !== "Apply" && operation !== "Update") throw new TypeError("operation must be `Apply` or `Update`");
  if (typeof apiVersion !== "string" || apiVersion === "") throw new TypeError("apiVersion must not be empty");
  if (fieldsType !== "FieldsV1") throw new TypeError(`invalid fieldsType ${JSON.stringify(fieldsType)}`);
  if (manager !== undefined && typeof manager !== "string") throw new TypeError("manager must be a string");
  if (subresource !== undefined && typeof subresource !== "string") throw new TypeError("subresource must be a string");
  if (time !== undefined && time !== null && typeof time !== "string") throw new TypeError("time must be a string");
  return {
    manager: manager ?? "",
    operation,
    apiVersion,
    subresource: subresource || undefined,
    time: time ?? undefined,
    set: FieldSet.fromFieldsV1(fieldsV1),
  };
}

/** Decoded managedFields by the stored array (stored objects are not modified in place): no decode per write. */
const decoded = new WeakMap<readonly Json[], Managed>();

/**
 * Decodes managedFields (throws TypeError / FieldsV1Error on an entry that does not decode, or a duplicate). The
 * answer may be shared: callers must not modify it.
 */
export function decodeManaged(entries: readonly Json[] | undefined): Managed {
  if (entries === undefined) return new Map();
  let out = decoded.get(entries);
  if (!out) {
    out = decodeEntries(entries);
    decoded.set(entries, out);
  }
  return out;
}

function decodeEntries(entries: readonly Json[]): Managed {
  const out: Managed = new Map();
  for (const raw of entries) {
    const e = decodeEntry(raw);
    const id = managerId(e);
    if (out.has(id)) throw new TypeError(`duplicate entries for manager ${id}`);
    out.set(id, e);
  }
  return out;
}

/** Like {@link decodeManaged}, but anything that does not decode counts as no managed fields. */
export function decodeManagedOrEmpty(entries: readonly Json[] | undefined): Managed {
  try {
    return decodeManaged(entries);
  } catch (err) {
    if (err instanceof TypeError || (err as FieldsV1Error).name === "FieldsV1Error") return new Map();
    throw err;
  }
}

/** True for `[]` and `[{}]`, which reset the managed fields (kube's isResetManagedFields). */
export function isResetManagedFields(entries: unknown): boolean {
  if (!Array.isArray(entries)) return false;
  return entries.length === 0 || (entries.length === 1 && isObject(entries[0]) && Object.keys(entries[0]).length === 0);
}

/** The most Update entries an object keeps (kube's DefaultMaxUpdateManagers). */
export const MAX_UPDATE_MANAGERS = 10;

/** The manager the oldest Update entries are merged into, per apiVersion, beyond {@link MAX_UPDATE_MANAGERS}. */
export const ANCIENT_CHANGES = "ancient-changes";

/**
 * Merges the oldest Update entries into one `ancient-changes` entry per apiVersion until at most
 * {@link MAX_UPDATE_MANAGERS} remain (kube's capManagersManager); in place, and returned.
 */
export function capUpdateManagers(m: Managed): Managed {
  const updaters = [...m.entries()].filter(([, e]) => e.operation === "Update");
  if (updaters.length <= MAX_UPDATE_MANAGERS) return m;
  updaters.sort(([, a], [, b]) => cmp(a.time ?? "", b.time ?? ""));
  const firstOfVersion = new Map<string, string>();
  let count = updaters.length;
  for (const [id, e] of updaters) {
    if (count <= MAX_UPDATE_MANAGERS) break;
    const bucketEntry = { manager: ANCIENT_CHANGES, operation: "Update" as const, apiVersion: e.apiVersion };
    const bucket = managerId(bucketEntry);
    const first = firstOfVersion.get(e.apiVersion);
    if (first === undefined) {
      firstOfVersion.set(e.apiVersion, id);
      continue;
    }
    let into = m.get(bucket);
    if (!into) {
      into = { ...bucketEntry, set: (m.get(first) as ManagerEntry).set };
      m.delete(first);
    }
    m.set(bucket, { ...into, time: e.time, set: into.set.union(e.set) });
    m.delete(id);
    count--;
  }
  return m;
}

/** The managed fields of `obj` in kube's order (Apply before Update, then by time, manager, apiVersion). */
export function encodeManaged(m: Managed): Json[] {
  const entries = [...m.values()].sort(
    (a, b) =>
      cmp(a.operation, b.operation) ||
      cmp(a.time ?? "", b.time ?? "") ||
      cmp(a.manager, b.manager) ||
      cmp(a.apiVersion, b.apiVersion) ||
      cmp(a.subresource ?? "", b.subresource ?? ""),
  );
  return entries.map((e) => {
    const out: JsonObject = { manager: e.manager, operation: e.operation, apiVersion: e.apiVersion };
    if (e.time) out.time = e.time;
    out.fieldsType = "FieldsV1";
    out.fieldsV1 = e.set.toFieldsV1();
    if (e.subresource) out.subresource = e.subresource;
    return out;
  });
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Fields nobody owns (kube's stripMetaManager). */
const STRIPPED = fieldSetOf(
  ["f:apiVersion"],
  ["f:kind"],
  ["f:metadata"],
  ...["name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation"].map((f) => [
    "f:metadata",
    `f:${f}`,
  ]),
  ["f:metadata", "f:managedFields"],
  ["f:metadata", "f:resourceVersion"],
);

/** Where a write lands: which fields it may own (kube's reset fields: status on the main endpoint, else status). */
export interface WriteScope {
  /** The apiVersion the request used (`kubevirt.io/v1`). */
  readonly apiVersion: string;
  /** "" for the main endpoint, else `status`, `scale`, ... */
  readonly subresource: string;
  /** The kind has a status subresource (its main endpoint does not own status). */
  readonly hasStatus: boolean;
  readonly type: FieldType;
  /** The part of an applied configuration the kind's schema keeps (unknown fields dropped); default: all of it. */
  readonly known?: (config: JsonObject) => JsonObject;
}

function ownable(s: FieldSet, scope: WriteScope): FieldSet {
  const stripped = s.difference(STRIPPED);
  if (scope.subresource === "status") {
    const status = stripped.node(["f:status"]);
    const out = new FieldSet();
    for (const p of status?.paths(["f:status"]) ?? []) out.insert(p);
    if (stripped.has(["f:status"])) out.insert(["f:status"]);
    return out;
  }
  return scope.hasStatus && scope.subresource === ""
    ? stripped.recursiveDifference(fieldSetOf(["f:status"]))
    : stripped;
}

function withoutManaged(obj: KubeObject): Json {
  if (obj.metadata === undefined) return obj as unknown as Json;
  const { managedFields: _, ...metadata } = obj.metadata;
  return { ...obj, metadata } as unknown as Json;
}

/**
 * The managed fields after an update (create, PUT, or a non-apply patch) by `manager` from `live` to `next`;
 * `live` is an empty object of the kind for a create. Never throws: a value that does not fit its type keeps the
 * managed fields as they were (kube's UpdateNoErrors).
 */
export function trackUpdate(
  live: KubeObject,
  next: KubeObject,
  manager: string,
  scope: WriteScope,
  now: string = nowTime(),
): Json[] | undefined {
  const base = baseManaged(live, next, scope);
  try {
    const status = scope.subresource === "status";
    // Writes cannot change what their scope resets (status on the main endpoint, all but status and metadata on
    // the status subresource), so the comparison skips it.
    const keep = (k: string): boolean =>
      status ? k === "status" || k === "metadata" : !(scope.hasStatus && scope.subresource === "" && k === "status");
    const c = compareFields(withoutManaged(live) as JsonObject, withoutManaged(next) as JsonObject, scope.type, keep);
    const changed = c.added.union(c.modified);
    // Nothing changed and nobody handed in other managed fields: they stay as stored (no re-encoding).
    if (changed.empty() && c.removed.empty() && base === decodeManagedOrEmpty(live.metadata?.managedFields))
      return live.metadata?.managedFields;
    const out: Managed = new Map();
    for (const [id, e] of base) {
      const set = e.set.difference(c.removed).difference(changed);
      if (!set.empty()) out.set(id, { ...e, set });
    }
    const mine = ownable(changed.difference(c.removed), scope);
    if (!mine.empty()) {
      const entry = {
        manager,
        operation: "Update" as const,
        apiVersion: scope.apiVersion,
        subresource: scope.subresource || undefined,
      };
      const id = managerId(entry);
      const prev = out.get(id);
      out.set(id, { ...entry, time: now, set: prev ? prev.set.union(mine) : mine });
    }
    return out.size > 0 ? encodeManaged(capUpdateManagers(out)) : undefined;
  } catch (err) {
    if (err instanceof TypedValueError) return live.metadata?.managedFields;
    throw err;
  }
}

function baseManaged(live: KubeObject, next: KubeObject, scope: WriteScope): Managed {
  const requested = next.metadata.managedFields;
  if (scope.subresource !== "") return decodeManagedOrEmpty(live.metadata?.managedFields);
  if (isResetManagedFields(requested)) return new Map();
  const fromRequest: Managed = Array.isArray(requested)
    ? decodeManagedOrEmpty(requested)
    : new Map<string, ManagerEntry>();
  return fromRequest.size > 0 ? fromRequest : decodeManagedOrEmpty(live.metadata?.managedFields);
}

/** The outcome of an apply. */
export interface ApplyResult {
  /** The merged object (its metadata.managedFields set). */
  readonly obj: KubeObject;
}

/**
 * Server-side apply of `config` by `manager` over `live` (an empty object of the kind when creating): merges,
 * prunes what the manager no longer applies, and moves ownership; 409 with kube's conflict message and causes
 * when another manager owns a field the apply changes, unless `force`. 400 for a configuration that does not fit
 * its type.
 */
export function applyConfig(
  live: KubeObject,
  config: JsonObject,
  manager: string,
  force: boolean,
  scope: WriteScope,
  now: string = nowTime(),
): ApplyResult {
  try {
    return applyTyped(live, config, manager, force, scope, now);
  } catch (err) {
    if (err instanceof TypedValueError) throw badRequest(err.message);
    throw err;
  }
}

function applyTyped(
  live: KubeObject,
  config: JsonObject,
  manager: string,
  force: boolean,
  scope: WriteScope,
  now: string,
): ApplyResult {
  const t = scope.type;
  const liveValue = withoutManaged(live) as JsonObject;
  const managed = decodeManagedOrEmpty(live.metadata?.managedFields);
  // A deep copy: pruning edits it in place, and the merge shares what the configuration leaves alone with live.
  const merged = cloneJson(mergeValues(liveValue, config, t)) as JsonObject;
  // Fields the schema prunes are never stored, so nobody owns them (fieldValidation=Warn/Ignore lets them through).
  const applied = ownable(toFieldSet(scope.known ? scope.known(config) : config, t), scope);
  const entry = {
    manager,
    operation: "Apply" as const,
    apiVersion: scope.apiVersion,
    subresource: scope.subresource || undefined,
  };
  const id = managerId(entry);
  const last = managed.get(id);
  let keep = applied;
  for (const [other, e] of managed) if (other !== id) keep = keep.union(e.set);
  if (last) prune(merged, last.set, keep, t);
  const c = compare(liveValue, merged, t);
  const changed = c.added.union(c.modified);
  const conflicts: { id: string; set: FieldSet }[] = [];
  const out: Managed = new Map();
  for (const [other, e] of managed) {
    if (other === id) continue;
    const clash = e.set.intersection(changed);
    if (!clash.empty()) conflicts.push({ id: other, set: clash });
    const set = e.set.difference(c.removed).difference(force ? clash : new FieldSet());
    if (!set.empty()) out.set(other, { ...e, set });
  }
  if (conflicts.length > 0 && !force) {
    const left = withoutAllowedConflicts(conflicts, manager, liveValue, t, scope.apiVersion);
    // Conflicts all allowed by the last client-side apply: the apply goes through as forced (kube's lastAppliedManager).
    if (left.length > 0) throw conflictError(left);
    return applyTyped(live, config, manager, true, scope, now);
  }
  if (manager === "kubectl") syncLastApplied(merged, config);
  const unchanged = jsonEqual(liveValue, merged);
  out.set(id, { ...entry, time: unchanged ? last?.time : now, set: applied });
  capUpdateManagers(out);
  const obj = merged as unknown as KubeObject;
  obj.metadata = {
    ...(isObject(merged.metadata) ? cloneJson(merged.metadata) : {}),
    managedFields: encodeManaged(out),
  };
  return { obj };
}

/** kubectl's client-side apply annotation. */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

function lastAppliedOf(obj: JsonObject): string | undefined {
  const meta = obj.metadata;
  const annotations = isObject(meta) ? meta.annotations : undefined;
  const v = isObject(annotations) ? annotations[LAST_APPLIED] : undefined;
  return typeof v === "string" && v !== "" ? v : undefined;
}

/**
 * The conflicts `kubectl apply --server-side` still has once those a client-side apply explains are dropped: the
 * fields of the last-applied annotation whose live value is still the applied one (kube's lastAppliedManager,
 * which upgrades an object from client-side to server-side apply without conflicts).
 */
function withoutAllowedConflicts(
  conflicts: { id: string; set: FieldSet }[],
  manager: string,
  live: JsonObject,
  t: FieldType,
  apiVersion: string,
): { id: string; set: FieldSet }[] {
  if (manager !== "kubectl") return conflicts;
  const text = lastAppliedOf(live);
  if (text === undefined) return conflicts;
  let allowed: FieldSet;
  try {
    const last = JSON.parse(text) as unknown;
    if (!isObject(last) || last.apiVersion !== apiVersion) return conflicts;
    const c = compare(last, live, t);
    allowed = toFieldSet(last, t).difference(c.modified).difference(c.added).difference(c.removed);
  } catch (err) {
    // An annotation that does not parse or fit the type allows nothing, as in kube.
    if (err instanceof SyntaxError || err instanceof TypedValueError) return conflicts;
    throw err;
  }
  return conflicts.map((c) => ({ id: c.id, set: c.set.difference(allowed) })).filter((c) => !c.set.empty());
}

/** kubectl's server-side apply keeps an existing last-applied annotation in step (kube's lastAppliedUpdater). */
function syncLastApplied(merged: JsonObject, config: JsonObject): void {
  if (lastAppliedOf(merged) === undefined) return;
  const copy = cloneJson(config);
  const meta = isObject(copy.metadata) ? copy.metadata : undefined;
  if (meta && isObject(meta.annotations)) {
    delete meta.annotations[LAST_APPLIED];
    if (Object.keys(meta.annotations).length === 0) delete meta.annotations;
  }
  ((merged.metadata as JsonObject).annotations as JsonObject)[LAST_APPLIED] = JSON.stringify(copy);
}

function printManager(id: string): string {
  const e = JSON.parse(id) as { manager: string; operation: string; apiVersion?: string; subresource?: string };
  let s = JSON.stringify(e.manager);
  if (e.subresource) s += ` with subresource ${JSON.stringify(e.subresource)}`;
  return e.operation === "Update" ? `${s} using ${e.apiVersion}` : s;
}

/** kube's apply conflict: 409 Conflict, message and FieldManagerConflict causes as NewConflictError builds them. */
export function conflictError(conflicts: readonly { id: string; set: FieldSet }[]): ApiError {
  const sorted = [...conflicts].sort((a, b) => cmp(printManager(a.id), printManager(b.id)));
  const all = sorted.flatMap((c) => c.set.paths().map((p) => ({ who: printManager(c.id), path: pathString(p) })));
  const causes: StatusCause[] = all.map((c) => ({
    reason: "FieldManagerConflict",
    message: `conflict with ${c.who}`,
    field: c.path,
  }));
  let message: string;
  if (all.length === 1) message = `Apply failed with 1 conflict: conflict with ${all[0].who}: ${all[0].path}`;
  else {
    const lines: string[] = [];
    for (const c of sorted) {
      lines.push(`conflicts with ${printManager(c.id)}:`);
      for (const p of c.set.paths()) lines.push(`- ${pathString(p)}`);
    }
    message = `Apply failed with ${all.length} conflicts: ${lines.join("\n")}`;
  }
  return statusError(409, "Conflict", message, { causes });
}
