/**
 * What an API server does for an APIService (`v1.subresources.kubevirt.io`), packaged for an API server written
 * in TypeScript (the local one): forward every request under `/apis/subresources.kubevirt.io/<v>/...` to virt-api
 * over HTTPS, verifying virt-api's certificate against the APIService `caBundle`, presenting the front-proxy
 * client certificate, and passing the authenticated caller as kube-apiserver's requestheader authenticator does:
 *
 *   client --(Bearer token)--> API server --authenticate--> user{username, groups, extra}
 *          --(TLS, proxy client cert; X-Remote-User, X-Remote-Group*, X-Remote-Extra-<key>*)--> virt-api
 *
 * Callers' own credentials (Authorization, Impersonate-*) are never forwarded. WebSocket upgrades (the console)
 * are relayed byte for byte after the 101.
 */

import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import type { Duplex } from "node:stream";
import { apiResourceList, SUBRESOURCE_GROUP, SUBRESOURCE_VERSIONS } from "../subresources/discovery.ts";

/** The authenticated caller, as the API server knows it. */
export interface ProxyUser {
  readonly username: string;
  readonly groups: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/** Where virt-api is and how to reach it. */
export interface AggregationProxyOptions {
  /** virt-api's base URL, e.g. `https://127.0.0.1:8443`. */
  readonly url: string;
  /** PEM CA that signed virt-api's serving certificate (the APIService caBundle). */
  readonly caPem: string;
  /**
   * The name virt-api's certificate must carry when it differs from the URL's host: `virt-api.<ns>.svc` for an
   * APIService's Service reached at another address (kube-apiserver verifies a Service's certificate by that name).
   */
  readonly serverName?: string;
  /** The front-proxy client certificate and key (kube-apiserver `--proxy-client-cert-file`/`--proxy-client-key-file`). */
  readonly clientCertPem: string;
  readonly clientKeyPem: string;
  /** Deadline for a plain request, ms; default 30 000. */
  readonly timeoutMs?: number;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "authorization",
  "content-length",
]);

/** Request headers to forward: the caller's, minus hop-by-hop, credentials and any X-Remote-* or Impersonate-* header. */
export function forwardedHeaders(headers: IncomingHttpHeaders, user: ProxyUser): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (
      value === undefined ||
      HOP_BY_HOP.has(lower) ||
      lower.startsWith("x-remote-") ||
      lower.startsWith("impersonate-")
    )
      continue;
    out[lower] = value;
  }
  if (headers["content-length"] !== undefined) out["content-length"] = headers["content-length"];
  out["x-remote-user"] = user.username;
  if (user.groups.length > 0) out["x-remote-group"] = [...user.groups];
  for (const [key, values] of Object.entries(user.extra ?? {}))
    out[`x-remote-extra-${encodeURIComponent(key)}`] = [...values];
  return out;
}

/**
 * An aggregated API for `subresources.kubevirt.io` that proxies to virt-api. Its shape matches the local API
 * server's `AggregatedApi` extension point (`group`, `versions`, `resources(version)`, `handle(req, res, user)`),
 * plus `upgrade(req, socket, head, user)` for WebSocket requests.
 */
export class AggregationProxy {
  readonly group = SUBRESOURCE_GROUP;
  readonly versions: readonly string[] = SUBRESOURCE_VERSIONS;
  readonly #o: AggregationProxyOptions;
  readonly #base: URL;

  constructor(options: AggregationProxyOptions) {
    this.#o = options;
    this.#base = new URL(options.url);
  }

  /** Legacy discovery resources for `version`. */
  resources(version: string): Record<string, unknown>[] {
    return (apiResourceList(version).resources as Record<string, unknown>[]) ?? [];
  }

  #options(req: IncomingMessage, user: ProxyUser): RequestOptions {
    return {
      method: req.method,
      hostname: this.#base.hostname.replace(/^\[|\]$/g, ""),
      port: this.#base.port || 443,
      path: req.url,
      ca: this.#o.caPem,
      ...(this.#o.serverName ? { servername: this.#o.serverName } : {}),
      cert: this.#o.clientCertPem,
      key: this.#o.clientKeyPem,
      headers: forwardedHeaders(req.headers, user),
    };
  }

  /** Proxies one plain request; answers 503 when virt-api cannot be reached. */
  handle(req: IncomingMessage, res: ServerResponse, user: ProxyUser): Promise<void> {
    return new Promise<void>((resolve) => {
      const upstream = httpsRequest(this.#options(req, user), (answer) => {
        const headers: OutgoingHttpHeaders = {};
        for (const [k, v] of Object.entries(answer.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
        res.writeHead(answer.statusCode ?? 502, headers);
        answer.pipe(res);
        answer.on("end", () => resolve());
        answer.on("error", () => {
          res.destroy();
          resolve();
        });
      });
      upstream.setTimeout(this.#o.timeoutMs ?? 30_000, () =>
        upstream.destroy(new Error("virt-api did not answer in time")),
      );
      upstream.on("error", (error) => {
        if (!res.headersSent) {
          const body = JSON.stringify({
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Failure",
            message: `error trying to reach service: ${error.message}`,
            reason: "ServiceUnavailable",
            code: 503,
          });
          res.writeHead(503, { "content-type": "application/json" });
          res.end(body);
        } else res.destroy();
        resolve();
      });
      req.pipe(upstream);
    });
  }

  /** Relays a WebSocket upgrade: the handshake goes to virt-api, then bytes flow both ways untouched. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, user: ProxyUser): void {
    const options = this.#options(req, user);
    options.headers = { ...options.headers, connection: "Upgrade", upgrade: req.headers.upgrade ?? "websocket" };
    const upstream = httpsRequest(options);
    socket.on("error", () => upstream.destroy());
    upstream.on("upgrade", (answer, upSocket, upHead) => {
      const lines = [`HTTP/1.1 ${answer.statusCode ?? 101} ${answer.statusMessage ?? "Switching Protocols"}`];
      for (let i = 0; i < answer.rawHeaders.length; i += 2)
        lines.push(`${answer.rawHeaders[i] ?? ""}: ${answer.rawHeaders[i + 1] ?? ""}`);
      socket.write(`${lines.join("\r\n")}\r\n\r\n`);
      if (upHead.length > 0) socket.write(upHead);
      if (head.length > 0) upSocket.write(head);
      upSocket.pipe(socket).pipe(upSocket);
      upSocket.on("error", () => socket.destroy());
      socket.on("close", () => upSocket.destroy());
      upSocket.on("close", () => socket.destroy());
    });
    upstream.on("response", (answer) => {
      // Refused upgrade: pass the Status answer through and close.
      const chunks: Buffer[] = [];
      answer.on("data", (c: Buffer) => chunks.push(c));
      answer.on("end", () => {
        const body = Buffer.concat(chunks);
        socket.end(
          `HTTP/1.1 ${answer.statusCode ?? 502} ${answer.statusMessage ?? ""}\r\nContent-Type: ${answer.headers["content-type"] ?? "application/json"}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.toString()}`,
        );
      });
    });
    upstream.on("error", () => socket.destroy());
    upstream.end();
  }
}
