/**
 * The kubelet's HTTP endpoint for container logs, shaped like the real kubelet's:
 *   GET /containerLogs/{namespace}/{pod}/{container}?follow=true&tailLines=N&limitBytes=N
 * The API server proxies `pods/log` here (node.status.daemonEndpoints.kubeletEndpoint.Port on 127.0.0.1), so
 * `kubectl logs [-f] [-c name]` works as on a real cluster. Unknown pods/containers are 404.
 *
 * HTTPS with client certificates only, as a real kubelet with `--client-ca-file`: a launcher's logs are the guest's
 * serial console, so a peer without a client-auth certificate of that CA (the API server's
 * `--kubelet-client-certificate`) is refused at the handshake.
 */
import { closeSync, createReadStream, existsSync, openSync, readSync, statSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { isClientCertificate } from "@kvt/certs";

/** The kubelet's serving certificate and the CA of the clients it accepts (kubelet `--client-ca-file`). */
export interface LogServerTls {
  /** Serving certificate and key (PEM; kubelet `--tls-cert-file`, `--tls-private-key-file`). */
  readonly cert: string;
  readonly key: string;
  /** CA bundle (PEM) of accepted client certificates. */
  readonly clientCa: string;
}

/** Where and how the log endpoint listens. */
export interface LogServerOptions {
  readonly tls: LogServerTls;
  /** Port (default 0: any free port). */
  readonly port?: number;
  /** Address (default 127.0.0.1: the local cluster's nodes share this host). */
  readonly host?: string;
}

/** Finds the log file of a container; undefined when this node does not run it. */
export type LogLocator = (namespace: string, pod: string, container: string | undefined) => string | undefined;

/** The last `lines` lines of `file` (reads at most the trailing 1 MiB). */
export function tailLines(file: string, lines: number): Buffer {
  const size = statSync(file).size;
  const start = Math.max(0, size - 1024 * 1024);
  const buf = Buffer.alloc(size - start);
  const fd = openSync(file, "r");
  try {
    readSync(fd, buf, 0, buf.length, start);
  } finally {
    closeSync(fd);
  }
  if (lines <= 0) return Buffer.alloc(0);
  let idx = buf.length;
  if (buf[idx - 1] === 0x0a) idx--;
  for (let seen = 0; idx > 0; idx--) {
    if (buf[idx - 1] === 0x0a && ++seen === lines) break;
  }
  return buf.subarray(idx);
}

/** Starts the log endpoint (mutual TLS) on `options.host`:`options.port`. */
export async function startLogServer(
  locate: LogLocator,
  options: LogServerOptions,
): Promise<{ port: number; server: Server; close(): Promise<void> }> {
  const { cert, key, clientCa } = options.tls;
  const tls = { cert, key, ca: clientCa, requestCert: true, rejectUnauthorized: true };
  const server = createServer(tls, (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const m = /^\/containerLogs\/([^/]+)\/([^/]+)(?:\/([^/]+))?$/.exec(url.pathname);
    const file = m
      ? locate(decodeURIComponent(m[1]), decodeURIComponent(m[2]), m[3] ? decodeURIComponent(m[3]) : undefined)
      : undefined;
    if (!file || !existsSync(file)) {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("container log not found on this node\n");
      return;
    }
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    res.flushHeaders();
    const tail = url.searchParams.get("tailLines");
    let offset = 0;
    if (tail !== null) {
      const body = tailLines(file, Number(tail));
      res.write(body);
      offset = statSync(file).size;
    }
    const follow = url.searchParams.get("follow") === "true";
    const pump = (onDone: () => void): void => {
      const size = statSync(file).size;
      // Rotated by copy-and-truncate (log-rotation.ts): the file starts over, and so does the copy.
      if (size < offset) offset = 0;
      if (size <= offset) {
        onDone();
        return;
      }
      const stream = createReadStream(file, { start: offset, end: size - 1 });
      offset = size;
      stream.on("data", (chunk) => res.write(chunk));
      stream.on("close", onDone);
    };
    if (!follow) {
      pump(() => res.end());
      return;
    }
    let busy = false;
    const timer = setInterval(() => {
      if (busy || !existsSync(file)) return;
      busy = true;
      pump(() => {
        busy = false;
      });
    }, 200);
    res.on("close", () => clearInterval(timer));
  });
  server.prependListener("secureConnection", (socket: TLSSocket) => {
    // A serving certificate of the same CA (another node's) is not a client.
    const raw = socket.getPeerCertificate().raw as Uint8Array | undefined;
    if (!raw || !isClientCertificate(raw)) socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
