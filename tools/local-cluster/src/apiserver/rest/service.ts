/**
 * The generic registry: create, update, patch and get with Kubernetes semantics (generateName, uid, generation,
 * resourceVersion conflicts, status subresource rules, strict field validation, finalizers, no-op writes), the
 * way k8s.io/apiserver's generic registry Store does them. HTTP handlers and the in-process controllers (GC,
 * namespaces) both write through it. Deletion lives in delete.ts.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { AdmissionAttributes, AdmissionChain, AdmissionOperation } from "../admission/types.ts";
import {
  ApiError,
  alreadyExists,
  badRequest,
  conflict,
  forbidden,
  invalid,
  notFound,
  type StatusCause,
  statusError,
  unsupportedMediaType,
} from "../errors.ts";
import { applyConfig, managerOf, trackUpdate, validateWriteOptions } from "../managed-fields/field-manager.ts";
import { applyJsonPatch, parseJsonPatch } from "../patch/json-patch.ts";
import { mergePatch } from "../patch/merge-patch.ts";
import { strategicMerge } from "../patch/strategic-merge.ts";
import type { ResourceRegistry } from "../resources/registry.ts";
import { applySchema } from "../resources/schema.ts";
import { collOf, groupVersion, idOf, type ResourceDef } from "../resources/types.ts";
import type { Entry, Store } from "../storage/store.ts";
import { cloneJson, isObject, type Json, type JsonObject, jsonEqual, type KubeObject, nowTime } from "../types.ts";
import { checkAppliedConfig, scopeOf, zeroObject } from "./managed.ts";
import { generateName, specPart, unknownMetaFields, validateMeta, validateName } from "./metadata.ts";
import { checkDecodedTypes } from "./typed-decode.ts";

/** Who is asking and how (per request). */
export interface WriteContext {
  readonly user: { readonly username: string; readonly groups: readonly string[] };
  readonly dryRun: boolean;
  readonly fieldValidation: "Strict" | "Warn" | "Ignore";
  /** Warnings to send back (`Warning: 299 - "..."` headers). */
  readonly warnings: string[];
  readonly options: Readonly<Record<string, unknown>>;
  /** The body was just decoded from the request and may be used without a copy. */
  readonly freshBody?: boolean;
  /** The client's User-Agent (names the field manager when the request has no `fieldManager`). */
  readonly userAgent?: string;
}

/** A context for in-process writers (controllers). */
export function systemContext(username = "system:apiserver", userAgent = "kube-controller-manager"): WriteContext {
  return {
    user: { username, groups: ["system:masters"] },
    dryRun: false,
    fieldValidation: "Ignore",
    warnings: [],
    options: {},
    userAgent,
  };
}

/** Patch content types. */
export const PATCH_TYPES = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
  apply: "application/apply-patch+yaml",
} as const;

/** The patch types `def` accepts, in kube-apiserver's order (no strategic merge patch for custom resources). */
export function acceptedPatchTypes(def: Pick<ResourceDef, "custom">): string[] {
  return def.custom
    ? [PATCH_TYPES.json, PATCH_TYPES.merge, PATCH_TYPES.apply]
    : [PATCH_TYPES.json, PATCH_TYPES.merge, PATCH_TYPES.strategic, PATCH_TYPES.apply];
}

/** A write raced with another one between read and commit (a 409; patches retry it). */
export class RaceConflict extends ApiError {
  constructor(def: ResourceDef, name: string) {
    const c = conflict(def, name);
    super(c.message, c.code, c.status);
  }
}

/** How an update writes: to which subresource, and with what managed fields if a server-side apply computed them. */
interface WriteHow {
  readonly sub: string;
  readonly applied?: Json[];
}

/** Metadata an update cannot change: the server's fields are carried over from the stored object. */
function carryServerMeta(m: KubeObject["metadata"], old: KubeObject["metadata"], name: string): void {
  m.name = name;
  m.uid = old.uid;
  m.creationTimestamp = old.creationTimestamp;
  if (old.deletionTimestamp) m.deletionTimestamp = old.deletionTimestamp;
  else delete m.deletionTimestamp;
  if (old.deletionGracePeriodSeconds !== undefined) m.deletionGracePeriodSeconds = old.deletionGracePeriodSeconds;
  else delete m.deletionGracePeriodSeconds;
  if (old.generation !== undefined) m.generation = old.generation;
  else delete m.generation;
  delete m.generateName;
  if (old.generateName) m.generateName = old.generateName;
  delete m.selfLink;
}

/** The generic registry. */
export class ResourceService {
  readonly store: Store;
  readonly registry: ResourceRegistry;
  readonly admission: AdmissionChain;
  readonly logger: Logger;

  constructor(store: Store, registry: ResourceRegistry, admission: AdmissionChain, logger: Logger) {
    this.store = store;
    this.registry = registry;
    this.admission = admission;
    this.logger = logger;
  }

  /** The stored entry, or 404. */
  get(def: ResourceDef, ns: string | undefined, name: string): Entry {
    const e = this.store.get(collOf(def), idOf(def, ns, name));
    if (!e) throw notFound(def, name);
    return e;
  }

  /** The object as served at `version` (conversion None: only apiVersion changes). */
  asVersion(def: ResourceDef, obj: KubeObject, version: string): KubeObject {
    const apiVersion = groupVersion(def.group, version);
    return obj.apiVersion === apiVersion ? obj : { ...obj, apiVersion };
  }

  /** Checks kind/apiVersion/namespace of a body; `fresh` bodies (just parsed) are used without a copy. */
  #decode(def: ResourceDef, version: string, body: unknown, ns: string | undefined, fresh = false): KubeObject {
    if (!isObject(body)) throw badRequest("the body of the request was not a JSON object");
    const gv = groupVersion(def.group, version);
    if (
      body.apiVersion !== undefined &&
      body.apiVersion !== gv &&
      !def.versions.map((v) => groupVersion(def.group, v)).includes(JSON.stringify(body.apiVersion))
    )
      throw badRequest(
        `the API version in the data (${JSON.stringify(body.apiVersion)}) does not match the expected API version (${gv})`,
      );
    if (body.kind !== undefined && body.kind !== def.kind)
      throw badRequest(
        `the kind in the data (${JSON.stringify(body.kind)}) does not match the expected kind (${def.kind})`,
      );
    const meta = body.metadata ?? {};
    if (!isObject(meta)) throw badRequest("metadata must be an object");
    checkDecodedTypes(def, version, body);
    const obj = {
      ...(fresh ? body : cloneJson(body)),
      apiVersion: groupVersion(def.group, def.versions[0]),
      kind: def.kind,
      metadata: fresh ? { ...meta } : cloneJson(meta),
    } as KubeObject;
    if (def.namespaced) {
      if (obj.metadata.namespace && ns && obj.metadata.namespace !== ns)
        throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
      obj.metadata.namespace = ns;
    } else delete obj.metadata.namespace;
    return obj;
  }

  #schema(def: ResourceDef, version: string, obj: KubeObject, ctx: WriteContext, report: boolean): StatusCause[] {
    const schema = def.schemas.get(version) ?? def.schemas.get(def.versions[0]);
    const unknown = report ? unknownMetaFields(obj) : [];
    let causes: StatusCause[] = [];
    if (schema) {
      const r = applySchema(schema, obj as unknown as JsonObject);
      if (report) unknown.push(...r.unknown);
      causes = r.causes;
    }
    if (unknown.length > 0 && ctx.fieldValidation === "Strict")
      throw badRequest(`strict decoding error: ${unknown.map((u) => `unknown field "${u}"`).join(", ")}`);
    if (ctx.fieldValidation === "Warn") for (const u of unknown) ctx.warnings.push(`unknown field "${u}"`);
    return causes;
  }

  #attrs(
    op: AdmissionOperation,
    def: ResourceDef,
    version: string,
    sub: string,
    obj: KubeObject | null,
    old: KubeObject | null,
    ctx: WriteContext,
  ): AdmissionAttributes {
    const m = (obj ?? old)?.metadata;
    return {
      operation: op,
      group: def.group,
      version,
      kind: def.kind,
      resource: def.resource,
      subResource: sub,
      namespace: m?.namespace ?? "",
      name: m?.name ?? "",
      object: obj,
      oldObject: old,
      dryRun: ctx.dryRun,
      userInfo: ctx.user,
      options: ctx.options,
      warnings: ctx.warnings,
    };
  }

  #checkNamespace(def: ResourceDef, ns: string | undefined, name: string): void {
    if (!def.namespaced) return;
    if (!ns) throw badRequest("the server could not find the requested resource: a namespace is required");
    const nsEntry = this.store.get("core/namespaces", ns);
    if (!nsEntry) throw notFound({ group: "", resource: "namespaces" }, ns);
    if (nsEntry.obj.metadata.deletionTimestamp)
      throw forbidden(def, name, `unable to create new content in namespace ${ns} because it is being terminated`);
  }

  async #validateAll(
    def: ResourceDef,
    version: string,
    sub: string,
    op: AdmissionOperation,
    obj: KubeObject,
    old: KubeObject | null,
    ctx: WriteContext,
    schemaCauses: StatusCause[],
  ): Promise<KubeObject> {
    let out = obj;
    const mutated = await this.admission.mutate(this.#attrs(op, def, version, sub, out, old, ctx));
    if (mutated && mutated !== out) {
      out = mutated;
      schemaCauses = this.#schema(def, version, out, { ...ctx, fieldValidation: "Ignore" }, false);
    }
    const causes = [...schemaCauses, ...validateMeta(out), ...(def.strategy.validate?.(out, old ?? undefined) ?? [])];
    if (causes.length > 0) throw invalid(def.kind, def.group, out.metadata.name ?? "", causes);
    await this.admission.validate(this.#attrs(op, def, version, sub, out, old, ctx));
    return out;
  }

  /** Records the manager of this write in obj.metadata.managedFields (`live`: the object before the write). */
  #track(def: ResourceDef, version: string, sub: string, live: KubeObject, obj: KubeObject, ctx: WriteContext): void {
    const manager = managerOf(ctx.options.fieldManager as string | undefined, ctx.userAgent);
    const managed = trackUpdate(live, obj, manager, scopeOf(def, version, sub));
    if (managed) obj.metadata.managedFields = managed;
    else delete obj.metadata.managedFields;
  }

  /** POST: creates an object. */
  async create(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    body: unknown,
    ctx: WriteContext,
  ): Promise<Entry> {
    validateWriteOptions("CreateOptions", ctx.options.fieldManager as string | undefined);
    return await this.#create(def, version, ns, body, ctx);
  }

  /** A create; `applied`: the managed fields a server-side apply computed (else this write's are recorded). */
  async #create(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    body: unknown,
    ctx: WriteContext,
    applied?: Json[],
  ): Promise<Entry> {
    let obj = this.#decode(def, version, body, ns, ctx.freshBody === true);
    const schemaCauses = this.#schema(def, version, obj, ctx, true);
    const m = obj.metadata;
    if (!m.name && m.generateName) m.name = generateName(m.generateName);
    const nameCauses = validateName(def, m.name);
    if (nameCauses.length > 0) throw invalid(def.kind, def.group, m.name ?? "", nameCauses);
    this.#checkNamespace(def, ns, m.name as string);
    m.uid = randomUUID();
    m.creationTimestamp = nowTime();
    delete m.resourceVersion;
    delete m.deletionTimestamp;
    delete m.deletionGracePeriodSeconds;
    delete m.selfLink;
    if (def.generation) m.generation = 1;
    else delete m.generation;
    if (def.subresources.includes("status") && !def.strategy.statusOnCreate) delete obj.status;
    if (applied) obj.metadata.managedFields = applied;
    else this.#track(def, version, "", zeroObject(def, obj), obj, ctx);
    def.strategy.decode?.(obj);
    def.strategy.prepareCreate?.(obj);
    obj = await this.#validateAll(def, version, "", "CREATE", obj, null, ctx, schemaCauses);
    const coll = collOf(def);
    for (let attempt = 0; this.store.get(coll, idOf(def, ns, obj.metadata.name as string)); attempt++) {
      if (!m.generateName || attempt >= 7) throw alreadyExists(def, obj.metadata.name as string);
      obj.metadata.name = generateName(m.generateName);
    }
    if (ctx.dryRun)
      return {
        coll,
        id: idOf(def, ns, obj.metadata.name as string),
        rev: this.store.revision,
        obj,
        json: JSON.stringify(obj),
      };
    const { entry, committed } = this.store.put(coll, idOf(def, ns, obj.metadata.name as string), obj);
    await committed;
    return entry;
  }

  /** PUT (main endpoint or `/status`). */
  async update(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    body: unknown,
    ctx: WriteContext,
    sub = "",
  ): Promise<Entry> {
    validateWriteOptions("UpdateOptions", ctx.options.fieldManager as string | undefined);
    const oldEntry = this.get(def, ns, name);
    const old = oldEntry.obj;
    const incoming = this.#decode(def, version, body, ns, ctx.freshBody === true);
    if (incoming.metadata.name !== undefined && incoming.metadata.name !== name)
      throw badRequest(
        `the name of the object (${String(incoming.metadata.name)}) does not match the name on the URL (${name})`,
      );
    const rv = incoming.metadata.resourceVersion;
    if (rv === undefined || rv === "") {
      if (!def.unconditionalUpdate)
        throw invalid(def.kind, def.group, name, [
          {
            reason: "FieldValueInvalid",
            message: "Invalid value: 0x0: must be specified for an update",
            field: "metadata.resourceVersion",
          },
        ]);
    } else if (rv !== old.metadata.resourceVersion) throw conflict(def, name);
    return this.#write(def, version, ns, name, oldEntry, incoming, ctx, { sub });
  }

  async #write(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    oldEntry: Entry,
    incoming: KubeObject,
    ctx: WriteContext,
    how: WriteHow,
  ): Promise<Entry> {
    const { sub, applied } = how;
    const old = oldEntry.obj;
    const hasStatus = def.subresources.includes("status");
    let obj: KubeObject;
    let schemaCauses: StatusCause[];
    if (sub === "status") {
      obj = cloneJson(old);
      if (incoming.status === undefined) delete obj.status;
      else obj.status = incoming.status;
      if (!def.custom) {
        obj.metadata.labels = incoming.metadata.labels;
        obj.metadata.annotations = incoming.metadata.annotations;
      }
      schemaCauses = this.#schema(def, version, obj, ctx, true);
    } else {
      obj = incoming;
      if (hasStatus) {
        if (old.status === undefined) delete obj.status;
        else obj.status = cloneJson(old.status);
      }
      schemaCauses = this.#schema(def, version, obj, ctx, true);
    }
    const m = obj.metadata;
    carryServerMeta(m, old.metadata, name);
    if (def.namespaced) m.namespace = ns;
    if (old.metadata.deletionTimestamp) {
      const added = (m.finalizers ?? []).filter((f) => !(old.metadata.finalizers ?? []).includes(f));
      if (added.length > 0)
        throw invalid(def.kind, def.group, name, [
          {
            reason: "FieldValueForbidden",
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(", ")}}`,
            field: "metadata.finalizers",
          },
        ]);
    }
    if (applied) obj.metadata.managedFields = applied;
    else this.#track(def, version, sub, old, obj, ctx);
    def.strategy.decode?.(obj);
    if (sub !== "status") def.strategy.prepareUpdate?.(obj, old);
    obj = await this.#validateAll(def, version, sub, "UPDATE", obj, old, ctx, schemaCauses);
    if (def.generation && m.generation !== undefined && !jsonEqual(specPart(obj, hasStatus), specPart(old, hasStatus)))
      obj.metadata.generation = (old.metadata.generation ?? 0) + 1;
    if (obj.metadata.finalizers?.length === 0) delete obj.metadata.finalizers;
    obj.metadata.resourceVersion = old.metadata.resourceVersion;
    if (jsonEqual(obj, old)) return oldEntry;
    if (ctx.dryRun) return { ...oldEntry, obj, json: JSON.stringify(obj) };
    const coll = collOf(def);
    const id = idOf(def, ns, name);
    if (this.store.get(coll, id)?.rev !== oldEntry.rev) throw new RaceConflict(def, name);
    if (obj.metadata.deletionTimestamp && !obj.metadata.finalizers?.length && !this.#graceRemaining(obj)) {
      const { entry, committed } = this.store.remove(coll, id, obj);
      await committed;
      return entry;
    }
    const { entry, committed } = this.store.put(coll, id, obj);
    await committed;
    return entry;
  }

  #graceRemaining(obj: KubeObject): boolean {
    return (obj.metadata.deletionGracePeriodSeconds ?? 0) > 0;
  }

  /** PATCH with any supported patch type (main endpoint or `/status`). */
  async patch(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    contentType: string,
    body: unknown,
    ctx: WriteContext,
    sub = "",
  ): Promise<Entry> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#patchOnce(def, version, ns, name, contentType, body, ctx, sub);
      } catch (err) {
        if (!(err instanceof RaceConflict) || attempt >= 5) throw err;
      }
    }
  }

  async #patchOnce(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    contentType: string,
    body: unknown,
    ctx: WriteContext,
    sub: string,
  ): Promise<Entry> {
    const accepted = acceptedPatchTypes(def);
    if (!accepted.includes(contentType)) throw unsupportedMediaType(accepted);
    const apply = contentType === PATCH_TYPES.apply;
    validateWriteOptions("PatchOptions", ctx.options.fieldManager as string | undefined, {
      apply,
      forceSet: ctx.options.force !== undefined,
    });
    const existing = this.store.get(collOf(def), idOf(def, ns, name));
    if (apply) return this.#strictAsInvalid(this.#apply(def, version, ns, name, existing, body, ctx, sub));
    if (!existing) throw notFound(def, name);
    const current = this.asVersion(def, existing.obj, version) as unknown as Json;
    let patched: Json;
    if (contentType === PATCH_TYPES.json) patched = applyJsonPatch(current, parseJsonPatch(body));
    else if (!isObject(body)) throw badRequest("the body of the request was not a JSON object");
    else if (contentType === PATCH_TYPES.strategic) patched = strategicMerge(current, body);
    else patched = mergePatch(current, body);
    if (!isObject(patched) || !isObject(patched.metadata))
      throw statusError(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request: patched object is not an object",
      );
    const incoming = this.#decode(def, version, patched, ns);
    if (incoming.metadata.name !== name)
      throw badRequest(
        `the name of the object (${String(incoming.metadata.name)}) does not match the name on the URL (${name})`,
      );
    if (incoming.metadata.resourceVersion !== existing.obj.metadata.resourceVersion) throw conflict(def, name);
    return this.#strictAsInvalid(this.#write(def, version, ns, name, existing, incoming, ctx, { sub }));
  }

  /** A patch's strict decoding error is kube's 422 on the patch. */
  async #strictAsInvalid(write: Promise<Entry>): Promise<Entry> {
    try {
      return await write;
    } catch (err) {
      if (err instanceof ApiError && err.code === 400 && err.message.startsWith("strict decoding error"))
        throw statusError(422, "Invalid", `The request is invalid: patch: Invalid value: "map[...]": ${err.message}`, {
          causes: [{ reason: "FieldValueInvalid", message: err.message, field: "patch" }],
        });
      throw err;
    }
  }

  /** Server-side apply (`application/apply-patch+yaml`): creates the object when it does not exist. */
  async #apply(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    existing: Entry | undefined,
    body: unknown,
    ctx: WriteContext,
    sub: string,
  ): Promise<Entry> {
    const config = checkAppliedConfig(def, version, body);
    if (!existing && sub !== "") throw notFound(def, name);
    const scope = scopeOf(def, version, sub);
    const manager = ctx.options.fieldManager as string;
    const force = ctx.options.force === true;
    const metadata = def.namespaced && ns ? { name, namespace: ns } : { name };
    const live = existing
      ? this.asVersion(def, existing.obj, version)
      : ({ apiVersion: scope.apiVersion, kind: def.kind, metadata } as KubeObject);
    const { obj } = applyConfig(live, config, manager, force, scope);
    if (obj.metadata.name !== name)
      throw badRequest(
        `the name of the object (${String(obj.metadata.name)}) does not match the name on the URL (${name})`,
      );
    if (!existing)
      return this.#create(def, version, ns, obj, ctx, obj.metadata.managedFields).catch((err: unknown) => {
        // Created by someone else meanwhile: apply again, to the object that now exists (patch retries races).
        if (err instanceof ApiError && err.reason === "AlreadyExists") throw new RaceConflict(def, name);
        throw err;
      });
    const incoming = this.#decode(def, version, obj, ns);
    if (incoming.metadata.resourceVersion !== existing.obj.metadata.resourceVersion) throw conflict(def, name);
    return this.#write(def, version, ns, name, existing, incoming, ctx, {
      sub,
      applied: obj.metadata.managedFields,
    });
  }
}
