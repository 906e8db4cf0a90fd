/**
 * The HTTP transport: node:http(s) with one keep-alive connection pool per client, authenticated from a KubeConfig
 * (`applyToHTTPSOptions`: CA, client certificate, bearer or exec/OIDC token). A client or a single request may act as
 * another user through impersonation headers ({@link Impersonation}). Watches are chunked JSON lines parsed straight
 * off the socket. Every request is counted in
 * `kubevirt_rest_client_requests_total{code,method,host,resource,verb}` and timed in
 * `kubevirt_rest_client_request_latency_seconds{verb,url}` (url: the path template, never object names).
 *
 * Why not client-node's fetch: undici's fetch goes through web streams per response and built a fresh dispatcher
 * per call; under a 1,000-VM burst the transport was most of virt-controller's CPU. `http.request` over a
 * keep-alive `Agent` costs a fraction of it per request.
 */

import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import { Agent as HttpsAgent, type RequestOptions as HttpsRequestOptions, request as httpsRequest } from "node:https";
import { createSecureContext } from "node:tls";
import type { Registry } from "prom-client";
import { Counter, Histogram } from "prom-client";
import { ApiError } from "../errors.ts";
import { answerStatus, parseJson } from "../status.ts";
import type { KubeAccess } from "./kube-config.ts";
import { openWatch, type RawWatchEvent, type WatchHandle } from "./watch-stream.ts";

export type { RawWatchEvent, WatchHandle } from "./watch-stream.ts";

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
  /** Act as this user for this request (wins over the client's {@link RestClientOptions.impersonate}). */
  readonly impersonate?: Impersonation;
  /** More request headers, e.g. a W3C `traceparent`. */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Who a request acts as (client-go's `ImpersonationConfig`): the API server authorizes it as this user, provided
 * the client's own identity may `impersonate` users, groups, uids and extras. Sent as `Impersonate-User`,
 * `Impersonate-Group` (one per group), `Impersonate-Uid` and `Impersonate-Extra-<key>` headers.
 */
export interface Impersonation {
  readonly username: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/** The impersonation headers for `user`, named as client-go sends them (extra keys percent-encoded). */
export function impersonationHeaders(user: Impersonation): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = { "Impersonate-User": user.username };
  if (user.groups?.length) headers["Impersonate-Group"] = [...user.groups];
  if (user.uid) headers["Impersonate-Uid"] = user.uid;
  for (const [key, values] of Object.entries(user.extra ?? {}))
    headers[`Impersonate-Extra-${encodeURIComponent(key)}`] = [...values];
  return headers;
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
  /**
   * Registry for `kubevirt_rest_client_requests_total` and the latency histogram; none means no metric. Clients
   * on the same registry share the series.
   */
  readonly registry?: Registry;
  /** User agent; default `kvt`. */
  readonly userAgent?: string;
  /**
   * A watch that receives nothing for this long is ended with a `TimeoutError` and resumed (ms); default 90 s. It
   * detects a dead connection; the API server sends a bookmark about every minute on a quiet watch, so a shorter
   * limit would only reconnect healthy quiet watches (client-node's 30 s did, twice a minute per informer).
   */
  readonly watchIdleTimeoutMs?: number;
  /**
   * A request whose connection stays silent this long (no answer, or a stalled body) fails with a `TimeoutError`
   * (ms); default 5 min, what undici's fetch allowed before. Keeps a worker from waiting forever on a hung server.
   */
  readonly requestTimeoutMs?: number;
  /** Act as this user in every request and watch (client-go's `rest.Config.Impersonate`); none: as the kubeconfig's. */
  readonly impersonate?: Impersonation;
}

/**
 * What an upgraded connection (a WebSocket, e.g. a VMI console) to the API server needs: its URL (`wss:`/`ws:`)
 * and the options to open it with: the client's TLS material and credential headers, or the proxy agent.
 */
export interface UpgradeTarget {
  readonly url: string;
  /** Credential (and impersonation) headers. */
  readonly headers: Readonly<Record<string, string | string[]>>;
  /** `ca`, `cert`, `key`, `servername`, `rejectUnauthorized` for `tls.connect`, or `agent` behind a proxy. */
  readonly options: Readonly<Record<string, unknown>>;
}

/** The connection settings derived from the KubeConfig; refreshed every minute (exec and OIDC tokens expire). */
interface Connection {
  /** Pool for requests: keep-alive, at most {@link MAX_SOCKETS} connections. */
  readonly agent: HttpAgent;
  /** Pool for watches: each holds its connection for as long as it runs, so they do not count against requests. */
  readonly watchAgent: HttpAgent;
  readonly headers: Readonly<Record<string, string>>;
  /** The TLS options the agents were made with (for {@link RestClient.upgradeTarget}). */
  readonly tls: Readonly<Record<string, unknown>>;
  readonly at: number;
}

/** One request as it goes on the wire: the path with its query, the final headers, the encoded body. */
interface Outgoing {
  readonly method: string;
  readonly path: string;
  readonly headers: OutgoingHttpHeaders;
  readonly body: string | undefined;
  readonly signal: AbortSignal | undefined;
}

/** How often the kubeconfig's credentials are applied again (ms). */
const AUTH_REFRESH_MS = 60_000;

/**
 * Connections per client for requests. HTTP/1.1 carries one request per connection at a time; past a few dozen, more
 * connections only add TLS handshakes on both sides while the API server's event loop is the limit (client-go
 * keeps 25 idle connections per host).
 */
const MAX_SOCKETS = 32;

interface RestClientMetrics {
  readonly requests: Counter<"code" | "method" | "host" | "resource" | "verb">;
  readonly latency: Histogram<"verb" | "url">;
}
const metricsByRegistry = new WeakMap<Registry, RestClientMetrics>();

/** The client metrics of `registry`, shared by every RestClient registered there (e.g. a separate lease client). */
function restClientMetrics(registry: Registry): RestClientMetrics {
  let m = metricsByRegistry.get(registry);
  if (!m) {
    m = {
      requests: new Counter({
        name: "kubevirt_rest_client_requests_total",
        help: "Number of HTTP requests to the API server, partitioned by status code, method, host, resource and verb.",
        labelNames: ["code", "method", "host", "resource", "verb"],
        registers: [registry],
      }),
      latency: new Histogram({
        name: "kubevirt_rest_client_request_latency_seconds",
        help: "Request latency to the API server in seconds, broken down by verb and URL template.",
        labelNames: ["verb", "url"],
        buckets: [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192],
        registers: [registry],
      }),
    };
    metricsByRegistry.set(registry, m);
  }
  return m;
}

/** {@link RestTransport} over a KubeConfig. */
export class RestClient implements RestTransport {
  readonly #kc: KubeAccess;
  readonly #server: string;
  /** Where requests go, parsed once (`http.request` would parse a URL string per request). */
  readonly #target: { hostname: string; port: number; basePath: string };
  readonly #https: boolean;
  readonly #userAgent: string;
  readonly #watchIdleMs: number;
  readonly #requestTimeoutMs: number;
  readonly #requests: Counter<"code" | "method" | "host" | "resource" | "verb"> | undefined;
  readonly #latency: Histogram<"verb" | "url"> | undefined;
  readonly #host: string;
  readonly #impersonation: Record<string, string | string[]>;
  #agents: { agent: HttpAgent; watchAgent: HttpAgent; tls: Record<string, unknown> } | undefined;
  #connection: Connection | undefined;
  #connecting: Promise<Connection> | undefined;

  constructor(kc: KubeAccess, options: RestClientOptions = {}) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error("Cannot create an API client: the kubeconfig has no current cluster");
    this.#kc = kc;
    this.#server = cluster.server.replace(/\/+$/, "");
    const url = new URL(this.#server);
    this.#target = {
      hostname: url.hostname.replace(/^\[|\]$/g, ""),
      port: Number(url.port) || (url.protocol === "https:" ? 443 : 80),
      basePath: url.pathname.replace(/\/+$/, ""),
    };
    this.#https = url.protocol === "https:";
    this.#host = url.host;
    this.#userAgent = options.userAgent ?? "kvt";
    this.#watchIdleMs = options.watchIdleTimeoutMs ?? 90_000;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 300_000;
    this.#impersonation = options.impersonate ? impersonationHeaders(options.impersonate) : {};
    const metrics = options.registry ? restClientMetrics(options.registry) : undefined;
    this.#requests = metrics?.requests;
    this.#latency = metrics?.latency;
  }

  /** The API server URL. */
  get server(): string {
    return this.#server;
  }

  async request<T>(req: RestRequest): Promise<T> {
    const path = req.path + queryString(req.query);
    const body = req.body === undefined ? undefined : JSON.stringify(req.body);
    let code = "<error>";
    const started = performance.now();
    try {
      const conn = await this.#connect();
      const headers: OutgoingHttpHeaders = {
        ...conn.headers,
        Accept: "application/json",
        "User-Agent": this.#userAgent,
        ...(req.impersonate ? impersonationHeaders(req.impersonate) : this.#impersonation),
        ...req.headers,
      };
      if (body !== undefined) {
        headers["Content-Type"] = req.contentType ?? "application/json";
        headers["Content-Length"] = Buffer.byteLength(body);
      }
      const response = await this.#send(conn, { method: req.method, path, headers, body, signal: req.signal });
      code = String(response.status);
      if (response.status >= 200 && response.status < 300)
        return (response.text ? parseJson(response.text) : undefined) as T;
      const status = answerStatus(response.status, response.text);
      throw new ApiError(`${req.method} ${req.path}: ${status.message ?? ""}`, response.status, status);
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
   * One request and its whole answer. A request that fails because the server had just closed the idle keep-alive
   * connection it went out on (ECONNRESET/EPIPE on a reused socket, before any answer) never reached the server:
   * it is sent once more on a fresh connection, except POST (a create is not safe to repeat blindly).
   */
  async #send(conn: Connection, out: Outgoing): Promise<{ status: number; text: string }> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#sendOnce(conn, out);
      } catch (error) {
        const stale = (error as { staleConnection?: boolean }).staleConnection === true;
        if (!stale || attempt > 0 || out.method === "POST") throw error;
        // Retried once: the server closed the idle connection this request was written to (see above).
      }
    }
  }

  #sendOnce(
    conn: Connection,
    { method, path, headers, body, signal }: Outgoing,
  ): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const { hostname, port, basePath } = this.#target;
      const req = (this.#https ? httpsRequest : httpRequest)({
        hostname,
        port,
        path: basePath + path,
        method,
        headers,
        agent: conn.agent,
        signal,
        timeout: this.#requestTimeoutMs,
      });
      req.once("timeout", () => {
        const error = new Error(`${method} ${path}: no answer for ${this.#requestTimeoutMs} ms`);
        error.name = "TimeoutError";
        req.destroy(Object.assign(error, { code: "ETIMEDOUT" }));
      });
      let answered = false;
      req.once("response", (res: IncomingMessage) => {
        answered = true;
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.once("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            text: chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.once("error", reject);
      });
      req.once("error", (error: NodeJS.ErrnoException) => {
        const code = error.code;
        if (!answered && req.reusedSocket && (code === "ECONNRESET" || code === "EPIPE"))
          Object.assign(error, { staleConnection: true });
        reject(error);
      });
      req.end(body);
    });
  }

  /** The pooled agent and current auth headers, refreshed from the kubeconfig every {@link AUTH_REFRESH_MS}. */
  #connect(): Promise<Connection> {
    const c = this.#connection;
    if (c && performance.now() - c.at < AUTH_REFRESH_MS) return Promise.resolve(c);
    this.#connecting ??= this.#applyKubeConfig().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #applyKubeConfig(): Promise<Connection> {
    const opts: HttpsRequestOptions = {};
    await this.#kc.applyToHTTPSOptions(opts);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
    this.#agents ??= this.#createAgents(opts);
    this.#connection = { ...this.#agents, headers, at: performance.now() };
    return this.#connection;
  }

  /**
   * The two pools. A proxy needs client-node's proxy agent (shared). Otherwise the TLS material becomes one secure
   * context for every connection (Node would build one per connection from the raw PEMs).
   */
  #createAgents(opts: HttpsRequestOptions): { agent: HttpAgent; watchAgent: HttpAgent; tls: Record<string, unknown> } {
    if (this.#kc.getCurrentCluster()?.proxyUrl)
      return { agent: opts.agent as HttpAgent, watchAgent: opts.agent as HttpAgent, tls: { agent: opts.agent } };
    if (!this.#https)
      return {
        agent: new HttpAgent({ keepAlive: true, maxSockets: MAX_SOCKETS }),
        watchAgent: new HttpAgent(),
        tls: {},
      };
    const tls = {
      secureContext: createSecureContext({
        ca: opts.ca,
        cert: opts.cert,
        key: opts.key,
        pfx: opts.pfx,
        passphrase: opts.passphrase,
      }),
      ...(opts.servername !== undefined ? { servername: opts.servername } : {}),
      ...(opts.rejectUnauthorized !== undefined ? { rejectUnauthorized: opts.rejectUnauthorized } : {}),
    };
    return {
      agent: new HttpsAgent({ keepAlive: true, maxSockets: MAX_SOCKETS, ...tls }),
      watchAgent: new HttpsAgent(tls),
      tls,
    };
  }

  async watch(
    path: string,
    query: Readonly<Record<string, string | number | boolean | undefined>>,
    onEvent: (event: RawWatchEvent) => void,
    onDone: (error: unknown) => void,
  ): Promise<WatchHandle> {
    this.#requests?.inc({
      code: "200",
      method: "GET",
      host: this.#host,
      resource: describePath(path, "GET", {}).resource,
      verb: "WATCH",
    });
    const conn = await this.#connect();
    return openWatch({
      hostname: this.#target.hostname,
      port: this.#target.port,
      path: this.#target.basePath + path + queryString({ ...query, watch: true, allowWatchBookmarks: true }),
      send: this.#https ? httpsRequest : httpRequest,
      headers: { ...conn.headers, Accept: "application/json", "User-Agent": this.#userAgent, ...this.#impersonation },
      agent: conn.watchAgent,
      idleTimeoutMs: this.#watchIdleMs,
      onEvent,
      onDone,
    });
  }

  /**
   * Where and how to open an upgraded connection to `path` (a WebSocket to a subresource such as a VMI console),
   * authenticated as this client's requests are; the caller opens it with its own library (`ws`).
   */
  async upgradeTarget(path: string, impersonate?: Impersonation): Promise<UpgradeTarget> {
    const conn = await this.#connect();
    return {
      url: `${this.#https ? "wss" : "ws"}://${this.#host}${this.#target.basePath}${path}`,
      headers: { ...conn.headers, ...(impersonate ? impersonationHeaders(impersonate) : this.#impersonation) },
      options: conn.tls,
    };
  }
}

/** `?k=v&...` for the defined entries of `query`, or `""`. */
function queryString(query: Readonly<Record<string, string | number | boolean | undefined>> | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const s = params.toString();
  return s ? `?${s}` : "";
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
