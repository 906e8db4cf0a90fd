/**
 * Subresources the server implements itself: pods/binding (what a scheduler posts), pods/eviction (eviction.ts)
 * and namespaces/finalize.
 */
import { badRequest, conflict, statusError } from "../errors.ts";
import { isObject, type KubeObject } from "../types.ts";
import { serveEviction } from "./eviction.ts";
import { sendJson } from "./io.ts";
import type { SubresourceContext, SubresourceHandler } from "./resource-handler.ts";

function success(code: number): Record<string, unknown> {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", code };
}

/** POST pods/NAME/binding: sets spec.nodeName once. */
const binding: SubresourceHandler = async (c: SubresourceContext) => {
  if (c.req.method !== "POST") throw statusError(405, "MethodNotAllowed", "only POST is supported on pods/binding");
  const b = await c.body();
  const target = isObject(b) && isObject(b.target) ? b.target : undefined;
  const node = target && typeof target.name === "string" ? target.name : "";
  if (!node)
    throw statusError(422, "Invalid", `Binding "${c.info.name ?? ""}" is invalid: target.name: Required value`);
  const pod = c.svc.get(c.def, c.info.namespace, c.info.name as string).obj;
  if (pod.metadata.deletionTimestamp)
    throw conflict(c.def, c.info.name as string, "pod is being deleted, cannot be assigned to a host");
  const current = (pod.spec as { nodeName?: string } | undefined)?.nodeName;
  if (current)
    throw conflict(c.def, c.info.name as string, `pod ${c.info.name ?? ""} is already assigned to node "${current}"`);
  const next = structuredClone(pod);
  (next.spec as Record<string, unknown>).nodeName = node;
  const status = (next.status ?? {}) as { conditions?: unknown[] };
  status.conditions = [
    ...(status.conditions ?? []).filter((x) => !(isObject(x) && x.type === "PodScheduled")),
    {
      type: "PodScheduled",
      status: "True",
      lastProbeTime: null,
      lastTransitionTime: new Date().toISOString().slice(0, 19) + "Z",
    },
  ];
  next.status = status;
  if (!c.ctx.dryRun) {
    const { committed } = c.svc.store.put("core/pods", `${c.info.namespace ?? ""}/${c.info.name ?? ""}`, next);
    await committed;
  }
  sendJson(c.res, 201, success(201));
};

/** PUT namespaces/NAME/finalize: replaces spec.finalizers. */
const finalize: SubresourceHandler = async (c: SubresourceContext) => {
  if (c.req.method !== "PUT")
    throw statusError(405, "MethodNotAllowed", "only PUT is supported on namespaces/finalize");
  const b = await c.body();
  if (!isObject(b)) throw badRequest("the body of the request was not a Namespace");
  const cur = c.svc.get(c.def, undefined, c.info.name as string).obj;
  const next = structuredClone(cur);
  next.spec = {
    ...(next.spec ?? {}),
    finalizers: (isObject(b.spec) && Array.isArray(b.spec.finalizers) ? b.spec.finalizers : []) as string[],
  };
  const e = await finalizeNamespace(c, next);
  sendJson(c.res, 200, e);
};

async function finalizeNamespace(c: SubresourceContext, next: KubeObject): Promise<KubeObject> {
  const store = c.svc.store;
  const cur = store.get("core/namespaces", next.metadata.name as string);
  if (!cur) return next;
  const finals = (next.spec as { finalizers?: string[] }).finalizers ?? [];
  if (finals.length === 0 && next.metadata.deletionTimestamp && !next.metadata.finalizers?.length) {
    const { entry, committed } = store.remove("core/namespaces", next.metadata.name as string, next);
    await committed;
    return entry.obj;
  }
  if (JSON.stringify(next) === cur.json) return cur.obj;
  const { entry, committed } = store.put("core/namespaces", next.metadata.name as string, next);
  await committed;
  return entry.obj;
}

/** The built-in subresource handlers by `coll/subresource`. */
export function builtinSubresources(): Map<string, SubresourceHandler> {
  return new Map([
    ["core/pods/binding", binding],
    ["core/pods/eviction", serveEviction],
    ["core/namespaces/finalize", finalize],
  ]);
}
