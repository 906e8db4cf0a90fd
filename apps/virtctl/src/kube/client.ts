/**
 * virtctl's only way out: HTTP requests and WebSocket upgrades to the API server named by the kubeconfig. Plain
 * object writes go to `/api` and `/apis/kubevirt.io`; actions go to the aggregated `subresources.kubevirt.io`
 * paths, which the API server proxies to virt-api. Non-2xx answers become {@link ApiStatusError} with the
 * server's Status message, as client-go's errors print (401 and 403 with a hint naming the context in use);
 * socket, DNS and TLS failures become a ConnectionErrors that say what to check.
 */
import { request as httpRequest, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import WebSocket from "ws";
import { ApiStatusError, statusFrom } from "./api-status-error.ts";
import type { Connection } from "./connection.ts";
import { authHint, toConnectionError } from "./connection-error.ts";

export { ApiStatusError, isNotFound, type StatusBody } from "./api-status-error.ts";

/** One request. */
export interface Request {
  readonly method: "GET" | "POST" | "PUT" | "DELETE" | "PATCH";
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: unknown;
  /** Extra request headers (e.g. a W3C `traceparent`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** How long one request may take before it fails as a timeout. */
const REQUEST_TIMEOUT_MS = 60_000;

/** The error a request that ran out of time fails with (classified as a timeout, like a connect timeout). */
function timeoutError(): Error {
  return Object.assign(new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`), { code: "ETIMEDOUT" });
}

/** What commands use; tests pass fakes. */
export interface VirtClient {
  /** The namespace from the kubeconfig context or `-n`. */
  readonly namespace: string;
  /**
   * Sends a request; resolves to the parsed JSON body (undefined when empty); rejects with ApiStatusError, or
   * a ConnectionError when the server cannot be reached.
   */
  request(req: Request): Promise<unknown>;
  /**
   * Opens a WebSocket at `path` with `protocols`, paused (call `resume()` after adding listeners); rejects with
   * ApiStatusError when the upgrade is refused.
   */
  websocket(path: string, protocols: readonly string[]): Promise<WebSocket>;
}

/** {@link VirtClient} over node:http(s) with the kubeconfig's credentials. */
export class HttpVirtClient implements VirtClient {
  readonly #conn: Connection;
  readonly namespace: string;

  constructor(conn: Connection) {
    this.#conn = conn;
    this.namespace = conn.namespace;
  }

  async #options(path: string): Promise<RequestOptions & Record<string, unknown>> {
    const base = this.#conn.server;
    const options: RequestOptions & Record<string, unknown> = {
      hostname: base.hostname.replace(/^\[|\]$/g, ""),
      port: base.port || (base.protocol === "https:" ? 443 : 80),
      path: `${base.pathname.replace(/\/$/, "")}${path}`,
      headers: {},
    };
    await this.#conn.apply(options);
    if (base.protocol !== "https:") delete options.agent;
    return options;
  }

  async request(req: Request): Promise<unknown> {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) params.set(k, v);
    const qs = params.toString();
    const options = await this.#options(qs ? `${req.path}?${qs}` : req.path);
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    options.method = req.method;
    options.headers = {
      ...(options.headers as Record<string, string>),
      Accept: "application/json",
      "User-Agent": "virtctl/kubevirt-ts",
      // Content-Length always: Node sends a DELETE body unframed otherwise (no chunked encoding by default for
      // DELETE), and the API server reads those bytes as a broken next request (400 with no body).
      ...(payload !== undefined
        ? { "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(payload)) }
        : {}),
      ...req.headers,
    };
    const send = this.#conn.server.protocol === "https:" ? httpsRequest : httpRequest;
    const { code, text } = await new Promise<{ code: number; text: string }>((resolve, reject) => {
      const r = send(options, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ code: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      r.setTimeout(REQUEST_TIMEOUT_MS, () => r.destroy(timeoutError()));
      r.on("error", (error) => reject(toConnectionError(error, this.#conn.origin)));
      r.end(payload);
    });
    if (code < 200 || code >= 300) throw statusFrom(code, text, authHint(code, this.#conn.origin));
    if (text.trim() === "") return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }

  async websocket(path: string, protocols: readonly string[]): Promise<WebSocket> {
    const options = await this.#options(path);
    const base = this.#conn.server;
    const url = `${base.protocol === "https:" ? "wss:" : "ws:"}//${base.host}${options.path ?? path}`;
    const { hostname: _h, port: _p, path: _path, ...tls } = options;
    const ws = new WebSocket(url, [...protocols], { ...(tls as WebSocket.ClientOptions), handshakeTimeout: 30_000 });
    return await new Promise<WebSocket>((resolve, reject) => {
      // Paused until the caller has attached its listeners, so no early frame (the guest's banner) is lost.
      ws.once("open", () => {
        ws.pause();
        resolve(ws);
      });
      ws.once("unexpected-response", (_req, res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const code = res.statusCode ?? 0;
          reject(statusFrom(code, Buffer.concat(chunks).toString("utf8"), authHint(code, this.#conn.origin)));
        });
        res.on("error", () => reject(new ApiStatusError(res.statusCode ?? 0, "", "upgrade refused")));
      });
      ws.once("error", (error) => reject(toConnectionError(error, this.#conn.origin)));
    });
  }
}
