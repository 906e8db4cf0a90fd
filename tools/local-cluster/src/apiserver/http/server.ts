/**
 * The HTTP front of the API server. Request pipeline:
 *
 *   request -> authentication (bearer token, else system:anonymous without credentials; 401: ../auth/authenticate.ts)
 *           -> impersonation and RBAC authorization (../auth; 403)
 *           -> non-resource paths: /version /healthz /livez /readyz /openapi/v2 /openapi/v3[/...]
 *           -> discovery: /api /apis /apis/<g> /api/v1 /apis/<g>/<v>   (aggregated v2 or legacy)
 *           -> aggregated API groups (extension point: a handler owns /apis/<group>/<version>/...)
 *           -> resource requests: RequestInfo -> ResourceDef -> verb / subresource handler
 *                 writes: decode -> strategy -> mutating admission -> schema -> validating admission -> storage
 *           -> any error becomes a Kubernetes Status
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Logger } from "pino";
import { authenticateRequest } from "../auth/authenticate.ts";
import { authorizeRequest } from "../auth/authorize-request.ts";
import type { Authorizer } from "../auth/rbac.ts";
import { notFound, statusError, toApiError } from "../errors.ts";
import { legacyAggregatedGroup } from "../extensions/discovery-convert.ts";
import type { ResourceService } from "../rest/service.ts";
import type { WatchHub } from "../watch/hub.ts";
import {
  aggregatedContentType,
  aggregatedDiscovery,
  type ExternalGroup,
  legacyApiGroup,
  legacyApiGroupList,
  legacyApiVersions,
  legacyResourceList,
  wantsAggregated,
} from "./discovery.ts";
import { sendError, sendJson } from "./io.ts";
import type { OpenApiV3 } from "./openapi.ts";
import { sendOpenApiV2 } from "./openapi-v2.ts";
import { parseResourcePath } from "./request-info.ts";
import { handleResource, type SubresourceHandler } from "./resource-handler.ts";

/** The /version answer (minor "32": the machine's kubectl dispatcher picks its kubectl by it). */
export const VERSION_INFO = {
  major: "1",
  minor: "32",
  gitVersion: "v1.32.0",
  gitCommit: "kvt-local-cluster",
  gitTreeState: "clean",
  buildDate: "2024-12-11T00:00:00Z",
  goVersion: "go1.23.4",
  compiler: "gc",
  platform: "linux/amd64",
};

/** An authenticated user. */
export interface UserInfo {
  readonly username: string;
  readonly groups: readonly string[];
  /** Extra attributes (authentication.k8s.io UserInfo.extra), forwarded to aggregated servers as X-Remote-Extra-*. */
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/** An aggregated API group-version served by someone else (e.g. subresources.kubevirt.io via virt-api). */
export interface AggregatedApi extends ExternalGroup {
  /** Serves every request under /apis/<group>/<version>. */
  handle(req: IncomingMessage, res: ServerResponse, user: UserInfo): Promise<void>;
}

/** The server's moving parts. */
export interface HttpDeps {
  readonly svc: ResourceService;
  readonly hub: WatchHub;
  readonly openapi: OpenApiV3;
  readonly logger: Logger;
  /** Bearer tokens and who they are. */
  readonly tokens: ReadonlyMap<string, UserInfo>;
  /** Decides every authenticated request (RBAC). */
  readonly authorizer: Authorizer;
  readonly subresources: Map<string, SubresourceHandler>;
  readonly aggregated: AggregatedApi[];
}

/**
 * /livez, /readyz, /healthz as kube-apiserver answers them: "ok", or 500 with one line per check and
 * "<endpoint> check failed". The storage check fails while the last commit failed (a full disk); /livez leaves it out,
 * as restarting would not give the disk space back and writes resume by themselves. `?verbose` lists passing checks.
 */
function health(deps: HttpDeps, res: ServerResponse, path: string, q: URLSearchParams): void {
  const endpoint = path.slice(1);
  const checks: [string, string | undefined][] = [["ping", undefined]];
  if (endpoint !== "livez") {
    const h = deps.svc.store.health();
    checks.push(["storage", h.ok ? undefined : h.reason]);
  }
  const failed = checks.some(([, why]) => why !== undefined);
  const lines = checks.map(([name, why]) => (why === undefined ? `[+]${name} ok` : `[-]${name} failed: ${why}`));
  const body = failed
    ? `${lines.join("\n")}\n${endpoint} check failed\n`
    : q.has("verbose")
      ? `${lines.join("\n")}\n${endpoint} check passed\n`
      : "ok";
  res.writeHead(failed ? 500 : 200, {
    "Content-Type": "text/plain; charset=utf-8",
    "X-Content-Type-Options": "nosniff",
  });
  res.end(body);
}

async function route(deps: HttpDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const path = url.pathname.replace(/\/+$/, "") || "/";
  if (path === "/healthz" || path === "/livez" || path === "/readyz") return health(deps, res, path, url.searchParams);
  const authenticated = authenticateRequest(deps.tokens, req);
  if (!authenticated) throw statusError(401, "Unauthorized", "Unauthorized");
  const user = authorizeRequest(deps.authorizer, authenticated, req, url);
  const { registry } = deps.svc;
  const method = req.method ?? "GET";
  if (method === "GET") {
    if (path === "/version") return sendJson(res, 200, VERSION_INFO);
    if (path === "/openapi/v2") return sendOpenApiV2(req, res, deps.openapi.v2());
    if (path === "/openapi/v3") return sendJson(res, 200, deps.openapi.index());
    if (path.startsWith("/openapi/v3/")) {
      const doc = deps.openapi.doc(path.slice("/openapi/v3/".length));
      if (!doc) throw statusError(404, "NotFound", "the server could not find the requested resource");
      return sendJson(res, 200, doc.body);
    }
    const agg = wantsAggregated(req.headers.accept);
    if (path === "/api") {
      if (agg) return sendJson(res, 200, aggregatedDiscovery(registry, true, agg, []), aggregatedContentType(agg));
      return sendJson(res, 200, legacyApiVersions(req.headers.host ?? "127.0.0.1"));
    }
    if (path === "/apis") {
      if (agg)
        return sendJson(
          res,
          200,
          aggregatedDiscovery(registry, false, agg, deps.aggregated),
          aggregatedContentType(agg),
        );
      return sendJson(res, 200, legacyApiGroupList(registry, deps.aggregated));
    }
    const parts = path.split("/").slice(1);
    if (parts[0] === "apis" && parts.length === 2) {
      const g = legacyApiGroup(registry, parts[1]) ?? legacyAggregatedGroup(deps.aggregated, parts[1]);
      if (g) return sendJson(res, 200, g);
    }
    if ((parts[0] === "api" && parts.length === 2) || (parts[0] === "apis" && parts.length === 3)) {
      const group = parts[0] === "api" ? "" : parts[1];
      const version = parts[parts.length - 1];
      const l = legacyResourceList(registry, group, version);
      if (l) return sendJson(res, 200, l);
    }
  }
  const parts = path.split("/").slice(1);
  if (parts[0] === "apis" && parts.length >= 3) {
    const a = deps.aggregated.find((x) => x.group === parts[1] && x.versions.includes(parts[2]));
    if (a) return a.handle(req, res, user);
  }
  const info = parseResourcePath(path);
  if (!info) throw statusError(404, "NotFound", "the server could not find the requested resource");
  const def = registry.lookup(info.group, info.version, info.resource);
  if (!def) {
    if (info.name !== undefined) throw notFound({ group: info.group, resource: info.resource }, info.name);
    throw statusError(404, "NotFound", "the server could not find the requested resource");
  }
  return handleResource(deps, req, res, info, def, url.searchParams, user);
}

/** Creates the HTTP(S) server (not yet listening); TLS when `tls` is given. */
export function createApiHttpServer(deps: HttpDeps, tls?: { cert: string; key: string }): Server {
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const started = Date.now();
    route(deps, req, res)
      .catch((err: unknown) => {
        const e = toApiError(err);
        if (e.code >= 500) deps.logger.error({ err, method: req.method, url: req.url }, "request failed");
        sendError(res, e);
      })
      .finally(() => {
        deps.logger.trace(
          { method: req.method, url: req.url, code: res.statusCode, ms: Date.now() - started },
          "request",
        );
      });
  };
  // requestCert: a client certificate is seen (and refused with 401, as one kube-apiserver cannot verify), not
  // ignored, which would make its request anonymous.
  const server: Server = tls
    ? createHttpsServer({ cert: tls.cert, key: tls.key, requestCert: true, rejectUnauthorized: false }, handler)
    : createServer(handler);
  server.keepAliveTimeout = 60_000;
  return server;
}
