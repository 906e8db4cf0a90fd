/**
 * Resource requests: verb dispatch for collections and objects, list (limit/continue, selectors, Table), watch,
 * and the subresource extension point (status is generic, as is scale for custom resources that declare it;
 * pods/binding, pods/eviction and namespaces/finalize are built in; others, such as pods/log, are registered by
 * other components).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Authorizer } from "../auth/rbac.ts";
import {
  ApiError,
  badRequest,
  expired,
  methodNotSupported,
  notFound,
  statusError,
  tooLargeResourceVersion,
} from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";
import { collOf, groupVersion } from "../resources/types.ts";
import { type DeleteOptions, deleteObject, deleteStatus } from "../rest/delete.ts";
import type { ResourceService, WriteContext } from "../rest/service.ts";
import { type FieldGetter, parseFieldSelector, pathGetter } from "../selectors/fields.ts";
import { parseLabelSelector } from "../selectors/labels.ts";
import type { Entry, Store } from "../storage/store.ts";
import { toTable } from "../table/table.ts";
import { isObject, type KubeObject } from "../types.ts";
import { matches, type WatchFilter, type WatchHub } from "../watch/hub.ts";
import { serveWatch } from "../watch/stream.ts";
import { negotiateBodyType } from "./content-type.ts";
import { decode, mediaType, readBody, sendJson } from "./io.ts";
import { includeObject, intParam, rvParam, wantsTable, writeContext } from "./negotiate.ts";
import type { RequestInfo } from "./request-info.ts";
import { serveScale } from "./scale.ts";

/** Everything a subresource handler gets. */
export interface SubresourceContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly info: RequestInfo;
  readonly query: URLSearchParams;
  readonly def: ResourceDef;
  readonly svc: ResourceService;
  readonly ctx: WriteContext;
  /** The decoded request body. */
  body(): Promise<unknown>;
}

/** Serves one subresource (`pods/log`, `pods/binding`, ...). */
export type SubresourceHandler = (c: SubresourceContext) => Promise<void>;

/** Dependencies of the resource handler. */
export interface ResourceHandlerDeps {
  readonly svc: ResourceService;
  readonly hub: WatchHub;
  readonly subresources: ReadonlyMap<string, SubresourceHandler>;
  readonly logger: Logger;
  /** Answers review resources (SelfSubjectAccessReview, SubjectAccessReview). */
  readonly authorizer: Authorizer;
}

interface ContinueToken {
  rv: number;
  start: string;
}

function getters(def: ResourceDef): Map<string, FieldGetter> {
  const m = new Map<string, FieldGetter>(def.fields);
  m.set("metadata.name", pathGetter("metadata.name"));
  m.set("metadata.namespace", pathGetter("metadata.namespace"));
  return m;
}

function filterOf(def: ResourceDef, ns: string | undefined, q: URLSearchParams): WatchFilter {
  const g = getters(def);
  return {
    coll: collOf(def),
    idPrefix: def.namespaced && ns ? `${ns}/` : "",
    labels: parseLabelSelector(q.get("labelSelector")),
    fields: parseFieldSelector(q.get("fieldSelector"), new Set(g.keys())),
    getters: g,
  };
}

function listOf(def: ResourceDef, version: string, entries: Entry[], meta: Record<string, unknown>): string {
  const gv = groupVersion(def.group, version);
  const preferred = gv === groupVersion(def.group, def.versions[0]);
  const items = entries.map((e) => (preferred ? e.json : JSON.stringify({ ...e.obj, apiVersion: gv })));
  return `{"kind":"${def.listKind}","apiVersion":"${gv}","metadata":${JSON.stringify(meta)},"items":[${items.join(",")}]}`;
}

/** Handles a request already resolved to `def`. */
export async function handleResource(
  deps: ResourceHandlerDeps,
  req: IncomingMessage,
  res: ServerResponse,
  info: RequestInfo,
  def: ResourceDef,
  query: URLSearchParams,
  user: WriteContext["user"],
): Promise<void> {
  const { svc } = deps;
  const method = req.method ?? "GET";
  const ns = def.namespaced ? info.namespace : undefined;
  if (def.namespaced && info.name !== undefined && !ns) throw notFound(def, info.name);
  const ctx = writeContext(query, user, req.headers["user-agent"]);
  // A deprecated version warns on every request, whatever its answer (kube-apiserver's deprecation filter).
  const deprecation = def.deprecationWarnings?.get(info.version);
  if (deprecation) {
    ctx.warnings.push(deprecation);
    res.setHeader("Warning", `299 - ${JSON.stringify(deprecation)}`);
  }
  const table = wantsTable(req.headers.accept);
  const version = info.version;
  let bodyCache: unknown;
  let bodyRead = false;
  const body = async (): Promise<unknown> => {
    if (!bodyRead) {
      // The Content-Type is checked before the body is read (415 without reading it), except for DELETE, whose
      // body is optional and negotiated only when there is one (as kube-apiserver's delete handler does).
      const ct = req.headers["content-type"];
      const media = method === "DELETE" ? undefined : negotiateBodyType(def, method, ct);
      const raw = await readBody(req);
      bodyCache = raw.length === 0 ? undefined : decode(raw, media ?? negotiateBodyType(def, method, ct));
      bodyRead = true;
    }
    return bodyCache;
  };
  const sendObj = (code: number, obj: KubeObject, json?: string): void => {
    if (table && method === "GET") {
      sendJson(
        res,
        code,
        toTable(def, [svc.asVersion(def, obj, version)], includeObject(query), {
          resourceVersion: obj.metadata.resourceVersion,
        }),
      );
      return;
    }
    const served = svc.asVersion(def, obj, version);
    // The stored serialization is the answer when the object is served as stored (no second JSON.stringify).
    sendJson(res, code, served === obj && json !== undefined ? json : served, "application/json", ctx.warnings);
  };
  const sendEntry = (code: number, e: Entry): void => sendObj(code, e.obj, e.json);

  if (info.subresource === "scale" && def.scale && info.name !== undefined) {
    await serveScale({ req, res, info, query, def, svc, ctx, body }, def.scale);
    return;
  }
  if (info.subresource && info.subresource !== "status") {
    const handler = deps.subresources.get(`${collOf(def)}/${info.subresource}`);
    if (!handler || info.name === undefined) throw notFound(def, `${info.name ?? ""}/${info.subresource}`);
    await handler({ req, res, info, query, def, svc, ctx, body });
    return;
  }
  if (info.subresource === "status" && !def.subresources.includes("status")) throw notFound(def, info.name ?? "");

  if (info.name === undefined) {
    if (method === "GET" && (info.legacyWatch || query.get("watch") === "true" || query.get("watch") === "1")) {
      const filter = filterOf(def, ns, query);
      const initialEvents = query.get("sendInitialEvents") === "true";
      if (
        initialEvents &&
        (query.get("resourceVersionMatch") !== "NotOlderThan" || query.get("allowWatchBookmarks") !== "true")
      )
        throw statusError(
          422,
          "Invalid",
          'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks to true',
        );
      const fromRev = initialEvents ? undefined : rvParam(query);
      const timeout = intParam(query, "timeoutSeconds") ?? 1800 + Math.floor(Math.random() * 1800);
      serveWatch(res, deps.hub, {
        def,
        version,
        filter,
        fromRev,
        startRev: fromRev ?? svc.store.revision,
        initialEventsEnd: initialEvents,
        table,
        include: includeObject(query),
        bookmarks: query.get("allowWatchBookmarks") === "true",
        timeoutSeconds: timeout,
        logger: deps.logger,
      });
      return;
    }
    if (method === "GET") {
      await waitForRevision(svc.store, rvParam(query));
      return list(deps, res, def, version, ns, query, table);
    }
    if (method === "POST" && def.strategy.review) {
      const b = await body();
      if (!isObject(b)) throw badRequest("the body of the request was not a JSON object");
      const obj = {
        ...b,
        apiVersion: groupVersion(def.group, version),
        kind: def.kind,
        metadata: isObject(b.metadata) ? b.metadata : {},
      } as KubeObject;
      sendJson(res, 201, def.strategy.review(obj, user, deps.authorizer));
      return;
    }
    if (!def.verbs.includes(method === "GET" ? "list" : method === "POST" ? "create" : "deletecollection"))
      throw methodNotSupported(method, def);
    if (method === "POST") {
      const e = await svc.create(def, version, ns, await body(), ctx);
      return sendEntry(201, e);
    }
    if (method === "DELETE") return deleteCollection(deps, req, res, def, version, ns, query, ctx, body);
    throw methodNotSupported(method, def);
  }
  const name = info.name;
  if (!def.verbs.includes("get")) throw methodNotSupported(method, def);
  switch (method) {
    case "GET":
      await waitForRevision(svc.store, rvParam(query));
      return sendEntry(200, svc.get(def, ns, name));
    case "PUT": {
      const e = await svc.update(def, version, ns, name, await body(), ctx, info.subresource);
      return sendEntry(200, e);
    }
    case "PATCH": {
      const e = await svc.patch(
        def,
        version,
        ns,
        name,
        mediaType(req.headers["content-type"]),
        await body(),
        ctx,
        info.subresource,
      );
      return sendEntry(200, e);
    }
    case "DELETE": {
      if (info.subresource) throw methodNotSupported("DELETE", def);
      const opts = deleteOptions(await body(), query);
      const r = await deleteObject(svc, def, ns, name, opts, ctx);
      if (r.deleted && !def.returnDeletedObject) return sendJson(res, 200, deleteStatus(def, r.entry.obj));
      return sendEntry(200, r.entry);
    }
    default:
      throw methodNotSupported(method, def);
  }
}

/** How long a read at a future resourceVersion waits for it (kube-apiserver's watch cache: 3 s). */
export const FRESHNESS_WAIT_MS = 3000;

/**
 * Waits until the store has reached `rv` (a get or list "not older than" rv), or answers kube-apiserver's 504
 * "Too large resource version" after {@link FRESHNESS_WAIT_MS}. A watch from a future revision is not refused (as
 * on kube-apiserver it simply delivers the events after it).
 */
export function waitForRevision(store: Store, rv: number | undefined): Promise<void> {
  if (rv === undefined || store.revision >= rv) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const unsubscribe = store.subscribe(() => {
      if (store.revision < rv) return;
      clearTimeout(timer);
      unsubscribe();
      resolve();
    });
    const timer = setTimeout(() => {
      unsubscribe();
      reject(tooLargeResourceVersion(rv, store.revision));
    }, FRESHNESS_WAIT_MS);
  });
}

/** DeleteOptions from the body and the query. */
export function deleteOptions(body: unknown, q: URLSearchParams): DeleteOptions {
  const opts: DeleteOptions = isObject(body) ? structuredClone(body) : {};
  const pp = q.get("propagationPolicy");
  if (pp) opts.propagationPolicy = pp as DeleteOptions["propagationPolicy"];
  const gp = intParam(q, "gracePeriodSeconds");
  if (gp !== undefined) opts.gracePeriodSeconds = gp;
  if (opts.propagationPolicy && !["Background", "Foreground", "Orphan"].includes(opts.propagationPolicy))
    throw statusError(
      422,
      "Invalid",
      `DeleteOptions.propagationPolicy: Unsupported value: "${opts.propagationPolicy}": supported values: "Foreground", "Background", "Orphan", "nil"`,
    );
  return opts;
}

function list(
  deps: ResourceHandlerDeps,
  res: ServerResponse,
  def: ResourceDef,
  version: string,
  ns: string | undefined,
  q: URLSearchParams,
  table: boolean,
): void {
  const store = deps.svc.store;
  const filter = filterOf(def, ns, q);
  const limit = intParam(q, "limit");
  let rv = store.revision;
  let start = "";
  const cont = q.get("continue");
  if (cont) {
    let token: ContinueToken;
    try {
      token = JSON.parse(Buffer.from(cont, "base64url").toString("utf8")) as ContinueToken;
    } catch {
      throw badRequest("continue key is not valid: illegal base64 data");
    }
    if (token.rv < store.compactedRevision) {
      const e = expired(token.rv, store.compactedRevision);
      throw statusError(
        410,
        "Expired",
        `The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter. (${e.message})`,
      );
    }
    rv = token.rv;
    start = token.start;
  }
  const all = store.list(filter.coll, filter.idPrefix).filter((e) => e.id > start && matches(filter, e.obj, e.id));
  let page = all;
  const meta: Record<string, unknown> = { resourceVersion: String(rv) };
  if (limit && limit > 0 && all.length > limit) {
    page = all.slice(0, limit);
    meta.continue = Buffer.from(JSON.stringify({ rv, start: page[page.length - 1].id })).toString("base64url");
    meta.remainingItemCount = all.length - limit;
  }
  if (table) {
    const objs = page.map((e) => deps.svc.asVersion(def, e.obj, version));
    sendJson(res, 200, toTable(def, objs, includeObject(q), meta));
    return;
  }
  sendJson(res, 200, listOf(def, version, page, meta));
}

async function deleteCollection(
  deps: ResourceHandlerDeps,
  _req: IncomingMessage,
  res: ServerResponse,
  def: ResourceDef,
  version: string,
  ns: string | undefined,
  q: URLSearchParams,
  ctx: WriteContext,
  body: () => Promise<unknown>,
): Promise<void> {
  const filter = filterOf(def, ns, q);
  const opts = deleteOptions(await body(), q);
  const out: Entry[] = [];
  for (const e of deps.svc.store.list(filter.coll, filter.idPrefix)) {
    if (!matches(filter, e.obj, e.id)) continue;
    try {
      const r = await deleteObject(deps.svc, def, e.obj.metadata.namespace, e.obj.metadata.name as string, opts, ctx);
      out.push(r.entry);
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
  }
  sendJson(res, 200, listOf(def, version, out, { resourceVersion: String(deps.svc.store.revision) }));
}
