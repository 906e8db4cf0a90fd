/**
 * The scale subresource of a custom resource (`/<plural>/<name>/scale`), as kube-apiserver's apiextensions server
 * serves it from the CRD's `subresources.scale` paths: an autoscaling/v1 Scale whose `spec.replicas` is read from
 * and written to `specReplicasPath`, `status.replicas` read from `statusReplicasPath` and `status.selector` from
 * `labelSelectorPath`. GET answers the Scale; PUT takes one; PATCH (JSON, merge, strategic merge) patches the Scale
 * of the current object. A write changes only the replicas field of the object and goes through the ordinary update
 * (admission sees subresource "scale"; resourceVersion conflicts and generation as for any spec change).
 *
 * ```
 *   kubectl scale vmirs web --replicas 3
 *     PATCH .../virtualmachineinstancereplicasets/web/scale  {"spec":{"replicas":3}}
 *       Scale(current object) --patch--> Scale' --spec.replicas--> object.spec.replicas = 3 --> update
 * ```
 */
import { ApiError, badRequest, invalid, methodNotSupported, unsupportedMediaType } from "../errors.ts";
import { applyJsonPatch, parseJsonPatch } from "../patch/json-patch.ts";
import { mergePatch } from "../patch/merge-patch.ts";
import type { ScaleSpec } from "../resources/types.ts";
import { PATCH_TYPES } from "../rest/service.ts";
import { cloneJson, isObject, type Json, type KubeObject } from "../types.ts";
import { mediaType, sendJson } from "./io.ts";
import type { SubresourceContext } from "./resource-handler.ts";

/** An autoscaling/v1 Scale. */
export interface Scale {
  kind: "Scale";
  apiVersion: "autoscaling/v1";
  metadata: Record<string, unknown>;
  spec: { replicas?: number };
  status: { replicas: number; selector?: string };
}

function segments(jsonPath: string): string[] {
  return jsonPath.replace(/^\./, "").split(".");
}

function read(obj: unknown, jsonPath: string): unknown {
  let cur: unknown = obj;
  for (const s of segments(jsonPath)) cur = isObject(cur) ? cur[s] : undefined;
  return cur;
}

function write(obj: KubeObject, jsonPath: string, value: number): void {
  const segs = segments(jsonPath);
  let cur = obj as unknown as Record<string, Json>;
  for (const s of segs.slice(0, -1)) {
    if (!isObject(cur[s])) cur[s] = {};
    cur = cur[s];
  }
  cur[segs[segs.length - 1]] = value;
}

/** The Scale of `obj` under the paths of `scale`. */
export function scaleOf(obj: KubeObject, scale: ScaleSpec): Scale {
  const spec = read(obj, scale.specReplicasPath);
  const status = read(obj, scale.statusReplicasPath);
  const selector = scale.labelSelectorPath ? read(obj, scale.labelSelectorPath) : undefined;
  const m = obj.metadata;
  const metadata: Record<string, unknown> = { name: m.name, uid: m.uid, resourceVersion: m.resourceVersion };
  if (m.namespace) metadata.namespace = m.namespace;
  metadata.creationTimestamp = m.creationTimestamp;
  const out: Scale = {
    kind: "Scale",
    apiVersion: "autoscaling/v1",
    metadata,
    spec: { replicas: typeof spec === "number" ? spec : 0 },
    status: { replicas: typeof status === "number" ? status : 0 },
  };
  if (typeof selector === "string" && selector !== "") out.status.selector = selector;
  return out;
}

/** The object with the Scale's replicas written to its spec path; checks the Scale as kube-apiserver validates it. */
export function applyScale(obj: KubeObject, body: unknown, scale: ScaleSpec): KubeObject {
  if (!isObject(body)) throw badRequest("the body of the request was not a JSON object");
  if (body.kind !== undefined && body.kind !== "Scale")
    throw badRequest(`the kind in the data (${JSON.stringify(body.kind)}) does not match the expected kind (Scale)`);
  const name = obj.metadata.name ?? "";
  const meta = isObject(body.metadata) ? body.metadata : {};
  if (meta.name !== undefined && meta.name !== name)
    throw badRequest(
      `the name of the object (${JSON.stringify(meta.name)}) does not match the name on the URL (${name})`,
    );
  const replicas = isObject(body.spec) ? body.spec.replicas : undefined;
  if (replicas !== undefined && (typeof replicas !== "number" || !Number.isInteger(replicas)))
    throw badRequest(`Scale in version "v1" cannot be handled as a Scale: spec.replicas must be an integer`);
  const n = replicas ?? 0;
  if (n < 0)
    throw invalid("Scale", "autoscaling", name, [
      {
        reason: "FieldValueInvalid",
        message: `Invalid value: ${n}: must be greater than or equal to 0`,
        field: "spec.replicas",
      },
    ]);
  const next = cloneJson(obj);
  write(next, scale.specReplicasPath, n);
  // A Scale that names a resourceVersion is a precondition (409 on mismatch); one without it writes unconditionally.
  const rv = typeof meta.resourceVersion === "string" && meta.resourceVersion !== "" ? meta.resourceVersion : undefined;
  next.metadata.resourceVersion = rv ?? obj.metadata.resourceVersion;
  return next;
}

function patchScale(current: Scale, contentType: string, body: unknown): unknown {
  if (contentType === PATCH_TYPES.json) return applyJsonPatch(current as unknown as Json, parseJsonPatch(body));
  if (contentType !== PATCH_TYPES.merge && contentType !== PATCH_TYPES.strategic)
    throw unsupportedMediaType([PATCH_TYPES.json, PATCH_TYPES.merge, PATCH_TYPES.strategic]);
  if (!isObject(body)) throw badRequest("the body of the request was not a JSON object");
  // A Scale has no lists: a strategic merge patch merges as a merge patch does.
  return mergePatch(current as unknown as Json, body);
}

/** Serves `<plural>/<name>/scale` of a resource whose def carries scale paths. */
export async function serveScale(c: SubresourceContext, scale: ScaleSpec): Promise<void> {
  const { def, svc, info } = c;
  const ns = def.namespaced ? info.namespace : undefined;
  const name = info.name as string;
  const method = c.req.method ?? "GET";
  if (method === "GET") {
    sendJson(c.res, 200, scaleOf(svc.get(def, ns, name).obj, scale));
    return;
  }
  if (method !== "PUT" && method !== "PATCH") throw methodNotSupported(method, def);
  for (let attempt = 0; ; attempt++) {
    const current = svc.get(def, ns, name).obj;
    const body =
      method === "PUT"
        ? await c.body()
        : patchScale(scaleOf(current, scale), mediaType(c.req.headers["content-type"]), await c.body());
    const next = applyScale(current, body, scale);
    try {
      const e = await svc.update(def, info.version, ns, name, svc.asVersion(def, next, info.version), c.ctx, "scale");
      sendJson(c.res, 200, scaleOf(e.obj, scale));
      return;
    } catch (err) {
      // A patch read the object it patched: a write in between is retried, as the generic registry retries patches.
      const raced = err instanceof ApiError && err.code === 409 && method === "PATCH";
      if (!raced || attempt >= 5) throw err;
    }
  }
}
