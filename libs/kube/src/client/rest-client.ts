/**
 * The HTTP transport over client-node: KubeConfig authentication (`applySecurityAuthentication`), client-node's
 * undici fetch library for requests and its `Watch` for streams. One dispatcher (connection pool) is reused for
 * every request; client-node would otherwise build a fresh one per call. Every request is counted in
 * `kubevirt_rest_client_requests_total{code,method,host,resource,verb}` and timed in
 * `kubevirt_rest_client_request_latency_seconds{verb,url}` (url: the path template, never object names).
 */
import { IsomorphicFetchHttpLibrary, type KubeConfig, RequestContext, Watch } from "@kubernetes/client-node";
import type { Registry } from "prom-client";
import { Counter, Histogram } from "prom-client";

import { ApiError } from "../errors.ts";
import type { Status } from "../types.ts";

/** One API request. */
export interface RestRequest {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Absolute API path, e.g. `/api/v1/namespaces/default/pods`. */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  /** JSON body (serialized here). */
  readonly body?: unknown;
  /** Content type of the body; default `application/json`. */
  readonly contentType?: string;
  readonly signal?: AbortSignal;
}

/** One watch event as the server sends it. */
export interface RawWatchEvent {
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  readonly object: unknown;
}

/** A running watch; `stop()` ends it without calling `onDone` with an error. */
export interface WatchHandle {
  stop(): void;
}

/** The transport a typed client needs; the fake client in @kvt/testing implements the same. */
export interface RestTransport {
  /** Sends a request and resolves to the parsed JSON body; non-2xx answers reject with {@link ApiError}. */
  request<T>(req: RestRequest): Promise<T>;
  /**
   * Starts a watch on `path` (`watch=true` is added). `onEvent` gets each event; `onDone` is called exactly once
   * when the stream ends, with the error if it failed (an HTTP error arrives there as an {@link ApiError}).
   */
  watch(
    path: string,
    query: Readonly<Record<string, string | number | boolean | undefined>>,
    onEvent: (event: RawWatchEvent) => void,
    onDone: (error: unknown) => void,
  ): Promise<WatchHandle>;
}

/** Options for {@link RestClient}. */
export interface RestClientOptions {
  /** Registry for `kubevirt_rest_client_requests_total`; none means no metric. */
  readonly registry?: Registry;
  /** User agent; default `kvt`. */
  readonly userAgent?: string;
}

/** {@link RestTransport} over a KubeConfig. */
export class RestClient implements RestTransport {
  readonly #kc: KubeConfig;
  readonly #server: string;
  readonly #http = new IsomorphicFetchHttpLibrary();
  readonly #watch: Watch;
  readonly #userAgent: string;
  readonly #requests: Counter<"code" | "method" | "host" | "resource" | "verb"> | undefined;
  readonly #latency: Histogram<"verb" | "url"> | undefined;
  readonly #host: string;
  #dispatcher: ReturnType<RequestContext["getDispatcher"]> | undefined;
  #auth: { headers: [string, string][]; at: number } | undefined;

  constructor(kc: KubeConfig, options: RestClientOptions = {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("Cannot create an API client: the kubeconfig has no current cluster");
    this.#kc = kc;
    this.#server = cluster.server.replace(/\/+$/, "");
    this.#watch = new Watch(kc);
    this.#userAgent = options.userAgent ?? "kvt";
    this.#host = new URL(this.#server).host;
    this.#requests = options.registry
      ? new Counter({
          name: "kubevirt_rest_client_requests_total",
          help: "Number of HTTP requests to the API server, partitioned by status code, method, host, resource and verb.",
          labelNames: ["code", "method", "host", "resource", "verb"],
          registers: [options.registry],
        })
      : undefined;
    this.#latency = options.registry
      ? new Histogram({
          name: "kubevirt_rest_client_request_latency_seconds",
          help: "Request latency to the API server in seconds, broken down by verb and URL template.",
          labelNames: ["verb", "url"],
          buckets: [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192],
          registers: [options.registry],
        })
      : undefined;
  }

  /** The API server URL. */
  get server(): string {
    return this.#server;
  }

  async request<T>(req: RestRequest): Promise<T> {
    const url = new URL(this.#server + req.path);
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const ctx = new RequestContext(url.toString(), req.method);
    await this.#authenticate(ctx);
    ctx.setHeaderParam("Accept", "application/json");
    ctx.setHeaderParam("User-Agent", this.#userAgent);
    if (req.body !== undefined) {
      ctx.setHeaderParam("Content-Type", req.contentType ?? "application/json");
      ctx.setBody(JSON.stringify(req.body));
    }
    if (req.signal) ctx.setSignal(req.signal);
    let code = "<error>";
    const started = performance.now();
    try {
      const response = await this.#http.send(ctx).toPromise();
      code = String(response.httpStatusCode);
      const text = await response.body.text();
      const parsed = text ? parseJson(text) : undefined;
      if (response.httpStatusCode >= 200 && response.httpStatusCode < 300) return parsed as T;
      const status = isStatus(parsed) ? parsed : undefined;
      throw new ApiError(
        `${req.method} ${req.path}: ${status?.message ?? (text.slice(0, 200) || `HTTP ${response.httpStatusCode}`)}`,
        response.httpStatusCode,
        status,
      );
    } finally {
      const described = describePath(req.path, req.method, req.query);
      this.#requests?.inc({ code, method: req.method, host: this.#host, ...described });
      this.#latency?.observe(
        { verb: described.verb, url: pathTemplate(req.path) },
        (performance.now() - started) / 1000,
      );
    }
  }

  /**
   * Applies the kubeconfig's credentials. client-node builds a fresh dispatcher (connection pool) per call, so the
   * first one is kept for every request and the auth headers are cached for a minute (exec and OIDC tokens are
   * refreshed that often).
   */
  async #authenticate(ctx: RequestContext): Promise<void> {
    const now = performance.now();
    if (!this.#auth || now - this.#auth.at > 60_000) {
      const probe = new RequestContext(this.#server, "GET");
      await this.#kc.applySecurityAuthentication(probe);
      this.#dispatcher ??= probe.getDispatcher();
      this.#auth = { headers: Object.entries(probe.getHeaders()), at: now };
    }
    for (const [k, v] of this.#auth.headers) ctx.setHeaderParam(k, v);
    if (this.#dispatcher) ctx.setDispatcher(this.#dispatcher);
  }

  async watch(
    path: string,
    query: Readonly<Record<string, string | number | boolean | undefined>>,
    onEvent: (event: RawWatchEvent) => void,
    onDone: (error: unknown) => void,
  ): Promise<WatchHandle> {
    let stopped = false;
    const q: Record<string, string | number | boolean> = { allowWatchBookmarks: true };
    for (const [k, v] of Object.entries(query)) if (v !== undefined) q[k] = v;
    this.#requests?.inc({
      code: "200",
      method: "GET",
      host: this.#host,
      resource: describePath(path, "GET", {}).resource,
      verb: "WATCH",
    });
    const controller = await this.#watch.watch(
      path,
      q,
      (type: string, object: unknown) => {
        if (!stopped) onEvent({ type: type as RawWatchEvent["type"], object });
      },
      (error: unknown) => {
        if (!stopped) onDone(toApiError(error));
      },
    );
    return {
      stop: () => {
        stopped = true;
        controller.abort();
      },
    };
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // A non-JSON body (a proxy's HTML error page): keep the text for the error message.
    return undefined;
  }
}

function isStatus(v: unknown): v is Status {
  return typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "Status";
}

function toApiError(error: unknown): unknown {
  const code = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof code === "number") return new ApiError(`watch: HTTP ${code}`, code, undefined, { cause: error });
  return error;
}

/** The `resource` and `verb` labels of a request path (client-go's metric labels). */
export function describePath(
  path: string,
  method: string,
  query: Readonly<Record<string, unknown>> | undefined,
): { resource: string; verb: string } {
  const parts = path.split("/").filter(Boolean);
  // /api/v1/... or /apis/group/version/...
  let rest = parts[0] === "api" ? parts.slice(2) : parts.slice(3);
  if (rest[0] === "namespaces" && rest.length > 2) rest = rest.slice(2);
  const resource = rest[0] ?? "";
  const named = rest.length >= 2;
  const sub = rest[2];
  let verb: string;
  if (method === "GET") verb = query?.watch ? "WATCH" : named ? "GET" : "LIST";
  else if (method === "POST") verb = "CREATE";
  else if (method === "PUT") verb = "UPDATE";
  else verb = method;
  return { resource: sub ? `${resource}/${sub}` : resource, verb };
}

/**
 * A request path with namespace and object names replaced by `{namespace}` and `{name}` (bounded label values):
 * `/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm1/status` becomes
 * `/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachineinstances/{name}/status`.
 */
export function pathTemplate(path: string): string {
  const parts = path.split("/").filter(Boolean);
  const base = parts[0] === "api" ? 2 : 3;
  const out = parts.slice(0, base);
  let rest = parts.slice(base);
  if (rest[0] === "namespaces" && rest.length >= 2) {
    out.push("namespaces", "{namespace}");
    rest = rest.slice(2);
  }
  if (rest.length > 0) out.push(rest[0]);
  if (rest.length > 1) out.push("{name}", ...rest.slice(2));
  return `/${out.join("/")}`;
}
