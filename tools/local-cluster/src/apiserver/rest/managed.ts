/**
 * The registry's side of field management: which type and scope a write of a kind has, what "the empty object"
 * of a kind is (the live object a create is compared with), and the checks kube's apply patcher makes on an
 * applied configuration before merging it.
 */
import { badRequest } from "../errors.ts";
import type { WriteScope } from "../managed-fields/field-manager.ts";
import { rootType } from "../managed-fields/field-types.ts";
import { applySchema, type JSONSchemaProps } from "../resources/schema.ts";
import { groupVersion, type ResourceDef } from "../resources/types.ts";
import { cloneJson, isObject, type Json, type JsonObject, type KubeObject } from "../types.ts";

/** The scope of a write to `def` at `version` (`sub`: "" or a subresource). */
export function scopeOf(def: ResourceDef, version: string, sub: string): WriteScope {
  const schema = def.schemas.get(version) ?? def.schemas.get(def.versions[0]);
  return {
    apiVersion: groupVersion(def.group, version),
    subresource: sub,
    hasStatus: def.subresources.includes("status"),
    type: rootType(schema, def.custom),
    known: schema ? (config) => knownPart(config, schema) : undefined,
  };
}

/** `config` without the fields `schema` prunes (its defaults are not added: only what the configuration set). */
function knownPart(config: JsonObject, schema: JSONSchemaProps): JsonObject {
  const pruned = cloneJson(config);
  applySchema(schema, pruned);
  return keepPresent(config, pruned) as JsonObject;
}

function keepPresent(v: Json, pruned: Json | undefined): Json {
  if (Array.isArray(v))
    return Array.isArray(pruned) && pruned.length === v.length ? v.map((x, i) => keepPresent(x, pruned[i])) : v;
  if (!isObject(v) || !isObject(pruned)) return v;
  const out: JsonObject = {};
  for (const k of Object.keys(v))
    if (Object.hasOwn(pruned, k))
      Object.defineProperty(out, k, {
        value: keepPresent(v[k], pruned[k]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  return out;
}

/**
 * The empty object a create is compared with, as kube's `New()` of the kind: a custom resource is only its
 * apiVersion and kind; a built-in type's non-pointer structs (metadata, spec, status, a pod template) are there
 * already, so a creator does not own them as wholes.
 */
export function zeroObject(def: ResourceDef, obj: KubeObject): KubeObject {
  const zero: KubeObject = { apiVersion: obj.apiVersion, kind: obj.kind, metadata: {} };
  if (def.custom) {
    delete (zero as Partial<KubeObject>).metadata;
    return zero;
  }
  for (const k of ["spec", "status"] as const) {
    const v = obj[k];
    if (!isObject(v)) continue;
    const part: JsonObject = {};
    if (isObject(v.template)) part.template = { metadata: {}, spec: {} };
    if (isObject(v.strategy)) part.strategy = {};
    if (isObject(v.updateStrategy)) part.updateStrategy = {};
    zero[k] = part;
  }
  return zero;
}

/**
 * Checks an applied configuration as kube's apply patcher does: an object, of the kind and version of the request
 * (400 `invalid object type: apps/v1, Kind=Deployment` otherwise), without managedFields (400 `metadata.managedFields
 * must be nil`).
 */
export function checkAppliedConfig(def: ResourceDef, version: string, body: unknown): JsonObject {
  if (!isObject(body)) throw badRequest("the body of the request was not a JSON object");
  const gv = groupVersion(def.group, version);
  if (body.apiVersion !== gv || body.kind !== def.kind) {
    const av = typeof body.apiVersion === "string" ? body.apiVersion : "";
    const slash = av.indexOf("/");
    const [g, v] = slash >= 0 ? [av.slice(0, slash), av.slice(slash + 1)] : ["", av];
    throw badRequest(`invalid object type: ${g}/${v}, Kind=${typeof body.kind === "string" ? body.kind : ""}`);
  }
  if (body.metadata !== undefined && body.metadata !== null && !isObject(body.metadata))
    throw badRequest("metadata must be an object");
  if (isObject(body.metadata) && body.metadata.managedFields !== undefined && body.metadata.managedFields !== null)
    throw badRequest("metadata.managedFields must be nil");
  return body;
}
