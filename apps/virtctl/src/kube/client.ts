/**
 * virtctl's only way out: HTTP requests and WebSocket upgrades to the API server named by the kubeconfig. Plain
 * object writes go to `/api` and `/apis/kubevirt.io`; actions go to the aggregated `subresources.kubevirt.io`
 * paths, which the API server proxies to virt-api. Non-2xx answers become {@link ApiStatusError} with the
 * server's Status message, as client-go's errors print.
 */
import { request as httpRequest, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import WebSocket from "ws";
import type { Connection } from "./connection.ts";

/** One request. */
export interface Request {
  readonly method: "GET" | "POST" | "PUT" | "DELETE" | "PATCH";
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: unknown;
  /** Extra request headers (e.g. a W3C `traceparent`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A Kubernetes Status as the server sent it. */
export interface StatusBody {
  readonly kind?: string;
  readonly message?: string;
  readonly reason?: string;
  readonly code?: number;
}

/** A non-2xx answer; `message` is what client-go's `StatusError.Error()` would print. */
export class ApiStatusError extends Error {
  readonly code: number;
  readonly reason: string;
  constructor(code: number, reason: string, message: string) {
    super(message);
    this.name = "ApiStatusError";
    this.code = code;
    this.reason = reason;
  }
}

/** True for a 404 answer. */
export function isNotFound(error: unknown): boolean {
  return error instanceof ApiStatusError && error.code === 404;
}

/** What commands use; tests pass fakes. */
export interface VirtClient {
  /** The namespace from the kubeconfig context or `-n`. */
  readonly namespace: string;
  /** Sends a request; resolves to the parsed JSON body (undefined when empty); rejects with ApiStatusError. */
  request(req: Request): Promise<unknown>;
  /**
   * Opens a WebSocket at `path` with `protocols`, paused (call `resume()` after adding listeners); rejects with
   * ApiStatusError when the upgrade is refused.
   */
  websocket(path: string, protocols: readonly string[]): Promise<WebSocket>;
}

function statusFrom(code: number, text: string): ApiStatusError {
  try {
    const body = JSON.parse(text) as StatusBody;
    if (body.kind === "Status" && body.message) return new ApiStatusError(code, body.reason ?? "", body.message);
  } catch {
    // not a Status: fall through to client-go's generic texts
  }
  if (code === 404) return new ApiStatusError(code, "NotFound", "the server could not find the requested resource");
  if (code === 401) return new ApiStatusError(code, "Unauthorized", "Unauthorized");
  if (code === 403) return new ApiStatusError(code, "Forbidden", `forbidden: ${text.trim()}`);
  return new ApiStatusError(
    code,
    "InternalError",
    `an error on the server ("${text.trim()}") has prevented the request from succeeding`,
  );
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
      r.setTimeout(60_000, () => r.destroy(new Error("the request to the API server timed out")));
      r.on("error", reject);
      r.end(payload);
    });
    if (code < 200 || code >= 300) throw statusFrom(code, text);
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
          const err = statusFrom(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8"));
          reject(err);
        });
        res.on("error", () => reject(new ApiStatusError(res.statusCode ?? 0, "", "upgrade refused")));
      });
      ws.once("error", reject);
    });
  }
}
