/**
 * The endpoints virt-api calls on this node's handler (KubeVirt's VirtHandlerConn scheme; apps/virt-api's
 * handler-client.ts is the caller), over mutual TLS only: the handler presents its serving certificate
 * (`kubevirt-virt-handler-server-certs`) and accepts only a client certificate signed by the KubeVirt CA whose CN is
 * virt-api's (`kubevirt.io:system:client:virt-handler`, Secret `kubevirt-virt-handler-certs`), as KubeVirt's
 * handler does. A peer without one, with another CA's, or with another name is refused before any request is read:
 * pause and the console change and reveal a guest.
 *
 *   PUT /v1/namespaces/{ns}/virtualmachineinstances/{name}/pause       -> 200 | Status (404, 409, 503)
 *   PUT /v1/namespaces/{ns}/virtualmachineinstances/{name}/unpause
 *   PUT /v1/namespaces/{ns}/virtualmachineinstances/{name}/softreboot
 *   GET /v1/namespaces/{ns}/virtualmachineinstances/{name}/guestosinfo -> 409: no guest agent in our guests
 *   GET /v1/namespaces/{ns}/virtualmachineinstances/{name}/console     -> WebSocket, subprotocol
 *       `plain.kubevirt.io`: binary frames carry the serial bytes both ways; either side closing ends it
 *   GET /v1/namespaces/{ns}/virtualmachineinstances/{name}/portforward/{port}[/{protocol}]
 *       -> the launcher connects to the guest's port first (an error Status saying why it could not, e.g. 503
 *       `dial tcp 10.0.2.2:23: connect: connection refused`), then WebSocket `plain.kubevirt.io`: binary frames
 *       carry the connection's bytes both ways, with backpressure; either side ending closes both
 *   GET /healthz                                                       -> 200 ok (same mutual TLS)
 *
 * One endpoint is for the other handlers, and only for them (their certificate, CN
 * `kubevirt.io:system:node:virt-handler`; virt-api's is refused there, as theirs is on every endpoint above):
 *
 *   POST /v1/namespaces/{ns}/virtualmachineinstances/{name}/migrations/{migrationUid}/secret
 *       {"certificate": the source launcher's (PEM), absent under migrations.disableTLS}
 *       -> 200 {"secret", "certificate"} | Status (400, 403, 404, 409, 413): the secret of a migration this node is
 *       the target of and its launcher's certificate, for the handler of its source node, once the source's
 *       certificate is pinned in the target launcher (migration/migration-secrets.ts)
 *
 * Every error is a Kubernetes `Status` (kind Status, code, reason, message).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer as createHttpsServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { type Duplex, pipeline } from "node:stream";
import type { TLSSocket } from "node:tls";
import type { VirtualMachineInstance } from "@kvt/api";
import { CertificateError, keyMatchesCertificate } from "@kvt/certs";
import { ApiError, parseJson, statusError } from "@kvt/kube";
import { LauncherRpcError } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import { createWebSocketStream, type WebSocket, WebSocketServer } from "ws";
import type { LauncherView } from "../launchers/launcher-registry.ts";
import { type MigrationHandoff, SOURCE_NODE_HEADER, VIRT_HANDLER_NAME } from "../migration/migration-secrets.ts";

/** The console WebSocket subprotocol virt-api speaks. */
export const CONSOLE_SUBPROTOCOL = "plain.kubevirt.io";
/** The CN of virt-api's client certificate for the handlers (KubeVirt's `kubevirt-virt-handler-certs`). */
export const VIRT_API_CLIENT_NAME = "kubevirt.io:system:client:virt-handler";

/** The handler server's TLS: its serving certificate and key, and the CA whose client certificates it accepts. */
export interface HandlerServerTls {
  readonly cert: string;
  readonly key: string;
  /** CA bundle (PEM) that signed the accepted client certificates. */
  readonly ca: string;
  /** Client certificate CNs accepted on virt-api's endpoints; default [{@link VIRT_API_CLIENT_NAME}]. */
  readonly allowedNames?: readonly string[];
}

/** What the server looks VMIs and launchers up in. */
export interface HandlerServerDeps {
  readonly findVmi: (namespace: string, name: string) => VirtualMachineInstance | undefined;
  readonly launcherFor: (vmiUid: string) => LauncherView | undefined;
  readonly logger: Logger;
  /** Mutual TLS material: there is no plain-HTTP mode. */
  readonly tls: HandlerServerTls;
  /**
   * The secret and target certificate of migration `migrationUid` of VMI `namespace/name` for the handler of node
   * `callerNode`, whose launcher presents `sourceCertificate`; rejects with the Status to answer
   * (migration/migration-secrets.ts `HandlerMigrationSecrets.answer`). Absent: no such endpoint.
   */
  readonly migrationSecret?: (
    namespace: string,
    name: string,
    migrationUid: string,
    callerNode: string,
    sourceCertificate: string | undefined,
  ) => Promise<MigrationHandoff>;
}

/** Largest body of a migration-secret request: a certificate is about 1 KiB. */
const MAX_SECRET_REQUEST_BYTES = 16 * 1024;

const ROUTE = /^\/v1\/namespaces\/([^/]+)\/virtualmachineinstances\/([^/]+)\/([a-z]+)$/;
const SECRET_ROUTE = /^\/v1\/namespaces\/([^/]+)\/virtualmachineinstances\/([^/]+)\/migrations\/([^/]+)\/secret$/;
const PORT_FORWARD_ROUTE =
  /^\/v1\/namespaces\/([^/]+)\/virtualmachineinstances\/([^/]+)\/portforward\/([^/]*)(?:\/([^/]*))?$/;

/** virt-handler's REST server for virt-api. */
export class HandlerServer {
  readonly #d: HandlerServerDeps;
  readonly #server: Server;
  /** The CNs of virt-api's client certificate. */
  readonly #virtApiNames: ReadonlySet<string>;
  readonly #ws = new WebSocketServer({
    noServer: true,
    handleProtocols: (p) => (p.has(CONSOLE_SUBPROTOCOL) ? CONSOLE_SUBPROTOCOL : false),
  });

  constructor(deps: HandlerServerDeps) {
    this.#d = deps;
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      this.#handle(req, res).catch((error: unknown) => sendStatus(res, toApiError(error)));
    };
    const { cert, key, ca } = deps.tls;
    this.#virtApiNames = new Set(deps.tls.allowedNames ?? [VIRT_API_CLIENT_NAME]);
    this.#server = createHttpsServer({ cert, key, ca, requestCert: true, rejectUnauthorized: true }, handler);
    // The CA also signs other components' certificates: only virt-api's and the handlers' names may talk to the
    // handler (and each only on its own endpoints, see #handle).
    this.#server.prependListener("secureConnection", (socket: TLSSocket) => {
      const cn = socket.getPeerCertificate().subject?.CN;
      if (typeof cn === "string" && (this.#virtApiNames.has(cn) || cn === VIRT_HANDLER_NAME)) return;
      deps.logger.warn({ remote: socket.remoteAddress, cn }, "refused a client certificate not issued to virt-api");
      socket.destroy();
    });
    this.#server.on("tlsClientError", (error: Error, socket: TLSSocket) => {
      deps.logger.debug({ err: error, remote: socket.remoteAddress }, "refused a TLS handshake");
    });
    this.#server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on("error", () => socket.destroy()); // virt-api vanishing mid-stream is routine
      this.#upgrade(req, socket, head).catch((error: unknown) => {
        const e = toApiError(error);
        const body = JSON.stringify(e.status);
        socket.end(
          `HTTP/1.1 ${e.code} ${e.reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      });
    });
  }

  /**
   * Replaces the serving certificate and the client CA (a rotated Secret, seen by main.ts's file watch); new
   * connections use them, open consoles keep theirs.
   */
  updateTls(tls: Pick<HandlerServerTls, "cert" | "key" | "ca">): void {
    // A pair caught mid-swap is refused here (Deno's setSecureContext would take it and fail every handshake).
    if (!keyMatchesCertificate(tls.cert, tls.key)) {
      throw new CertificateError("The key is not the private key of virt-handler's serving certificate");
    }
    this.#server.setSecureContext({ cert: tls.cert, key: tls.key, ca: tls.ca });
    this.#d.logger.info("virt-handler's serving certificate and client CA reloaded");
  }

  /** Listens on `port` (0 = any) at `host`; resolves with the bound port. */
  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(port, host, () => resolve());
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Stops listening and drops open consoles. */
  async close(): Promise<void> {
    for (const client of this.#ws.clients) client.terminate();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      return;
    }
    const secret = SECRET_ROUTE.exec(path);
    if (secret) return this.#migrationSecret(secret, req, res);
    this.#requireVirtApi(req);
    if (PORT_FORWARD_ROUTE.test(path)) throw statusError(400, "BadRequest", "portforward needs a WebSocket upgrade");
    const m = ROUTE.exec(path);
    if (!m) throw statusError(404, "NotFound", `no such path: ${path}`);
    const [, namespace = "", name = "", sub] = m;
    req.resume(); // options bodies (PauseOptions, ...) carry nothing we act on
    const view = this.#launcher(decodeSegment(namespace), decodeSegment(name));
    if (sub === "guestosinfo" && req.method === "GET") {
      throw statusError(409, "Conflict", "VMI does not have guest agent connected");
    }
    if (req.method !== "PUT") throw statusError(405, "MethodNotAllowed", `${sub} takes PUT`);
    if (sub === "pause") await view.client.pause();
    else if (sub === "unpause") await view.client.unpause();
    else if (sub === "softreboot") await view.client.softReboot();
    else throw statusError(404, "NotFound", `no such subresource: ${sub ?? ""}`);
    this.#d.logger.info({ namespace, name, action: sub }, "VMI action done");
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  }

  /** Only for another handler: the secret of a migration this node is the target of, for its launcher's certificate. */
  async #migrationSecret(m: RegExpExecArray, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const cn = peerName(req);
    if (cn !== VIRT_HANDLER_NAME) {
      req.resume();
      throw statusError(403, "Forbidden", `only virt-handler's certificate may fetch a migration secret, not "${cn}"`);
    }
    if (req.method !== "POST") {
      req.resume();
      throw statusError(405, "MethodNotAllowed", "a migration secret takes POST (with the source's certificate)");
    }
    if (!this.#d.migrationSecret) {
      req.resume();
      throw statusError(404, "NotFound", "this handler holds no migration secrets");
    }
    const sourceCertificate = certificateOf(await readSmallBody(req, MAX_SECRET_REQUEST_BYTES));
    const [, ns = "", name = "", uid = ""] = m;
    const caller = req.headers[SOURCE_NODE_HEADER];
    const node = typeof caller === "string" ? caller : "";
    const handoff = await this.#d.migrationSecret(
      decodeSegment(ns),
      decodeSegment(name),
      decodeSegment(uid),
      node,
      sourceCertificate,
    );
    this.#d.logger.info(
      { namespace: ns, name, migrationUid: uid, sourceNode: node, tls: handoff.certificate !== undefined },
      "migration secret handed over",
    );
    res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
    res.end(JSON.stringify(handoff));
  }

  /** virt-api's endpoints refuse every other client name (the handlers' included). */
  #requireVirtApi(req: IncomingMessage): void {
    const cn = peerName(req);
    if (!this.#virtApiNames.has(cn)) throw statusError(403, "Forbidden", `"${cn}" may not use virt-api's endpoints`);
  }

  async #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    this.#requireVirtApi(req);
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const forward = PORT_FORWARD_ROUTE.exec(path);
    if (forward) return this.#portForward(forward, req, socket, head);
    const m = ROUTE.exec(path);
    if (m?.[3] !== "console") throw statusError(404, "NotFound", "only the console and portforward upgrade");
    const view = this.#launcher(decodeSegment(m[1]), decodeSegment(m[2]));
    const serial = await view.client.openConsole();
    this.#ws.handleUpgrade(req, socket, head, (ws) => {
      serial.on("data", (chunk: Buffer) => ws.send(chunk, { binary: true }));
      serial.on("close", () => ws.close());
      serial.on("error", () => ws.close());
      ws.on("message", (data: Buffer | ArrayBuffer | Buffer[]) => {
        serial.write(Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer));
      });
      ws.on("close", () => serial.destroy());
      ws.on("error", () => serial.destroy());
    });
  }

  /**
   * `portforward/{port}[/{protocol}]`: the launcher dials the guest before the upgrade is answered, so a closed port
   * or a missing interface is an error Status, never an open-then-closed WebSocket.
   */
  async #portForward(m: RegExpExecArray, req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const [, ns = "", name = "", rawPort = "", protocol = "tcp"] = m;
    const port = /^\d{1,5}$/.test(rawPort) ? Number(rawPort) : Number.NaN;
    if (!(port >= 1 && port <= 65535)) throw statusError(400, "BadRequest", `invalid port "${rawPort}"`);
    if (protocol !== "tcp") throw statusError(400, "BadRequest", `unsupported protocol "${protocol}"`);
    const namespace = decodeSegment(ns);
    const vmiName = decodeSegment(name);
    const view = this.#launcher(namespace, vmiName);
    const guest = await view.client.openPortForward(port, protocol);
    if (socket.destroyed) {
      guest.destroy(); // virt-api gave up while the launcher dialled
      return;
    }
    this.#ws.handleUpgrade(req, socket, head, (ws) => {
      this.#d.logger.info({ namespace, name: vmiName, port, protocol }, "port-forward opened");
      spliceWebSocket(ws, guest, () =>
        this.#d.logger.info({ namespace, name: vmiName, port, protocol }, "port-forward closed"),
      );
    });
  }

  #launcher(namespace: string, name: string): LauncherView {
    const vmi = this.#d.findVmi(namespace, name);
    if (!vmi?.metadata?.uid) throw statusError(404, "NotFound", `VMI ${namespace}/${name} is not on this node`);
    const view = this.#d.launcherFor(vmi.metadata.uid);
    if (!view) throw statusError(503, "ServiceUnavailable", `no running launcher for VMI ${namespace}/${name}`);
    return view;
  }
}

/** The Status reason (apimachinery's StatusReason) of each launcher error code. */
const STATUS_REASON: Partial<Record<LauncherRpcError["code"], string>> = {
  BadRequest: "BadRequest",
  NotFound: "NotFound",
  Conflict: "Conflict",
  Unavailable: "ServiceUnavailable",
  DeadlineExceeded: "Timeout",
};

function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof LauncherRpcError) {
    return statusError(error.status, STATUS_REASON[error.code] ?? "InternalError", error.message);
  }
  return statusError(500, "InternalError", error instanceof Error ? error.message : String(error));
}

/**
 * Carries bytes between a WebSocket and a stream both ways with backpressure (each chunk one binary message); the
 * first side to end or fail closes both. `onClosed` runs once, when both are gone.
 */
function spliceWebSocket(ws: WebSocket, stream: Duplex, onClosed: () => void): void {
  const wsStream = createWebSocketStream(ws);
  let open = 2;
  const done = (): void => {
    wsStream.destroy();
    stream.destroy();
    if (--open === 0) onClosed();
  };
  pipeline(stream, wsStream, done);
  pipeline(wsStream, stream, done);
}

/** The CN of the peer's client certificate (the connection was refused without one). */
function peerName(req: IncomingMessage): string {
  const cn = (req.socket as TLSSocket).getPeerCertificate?.().subject?.CN;
  return typeof cn === "string" ? cn : "";
}

/** A path segment, percent-decoded; a malformed escape names no VMI (404), never a 500. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw statusError(404, "NotFound", `no such path segment: ${segment}`);
  }
}

function sendStatus(res: ServerResponse, e: ApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(e.code, { "content-type": "application/json" }).end(JSON.stringify(e.status));
}

/** Reads a request body of at most `limit` bytes (413 over it: reading stops, the answer closes the connection). */
function readSmallBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      req.off("data", onData);
      req.pause();
      reject(statusError(413, "RequestEntityTooLarge", `Request entity too large: limit is ${limit}`));
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.once("error", reject);
  });
}

/** The `certificate` of a migration-secret request body (`{}` or empty: none, migrations.disableTLS). */
function certificateOf(body: string): string | undefined {
  if (body.trim() === "") return undefined;
  const parsed = parseJson(body);
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw statusError(400, "BadRequest", "the request body must be a JSON object");
  }
  const certificate = (parsed as { certificate?: unknown }).certificate;
  if (certificate === undefined) return undefined;
  if (typeof certificate !== "string" || certificate.length === 0) {
    throw statusError(400, "BadRequest", "certificate must be a PEM string");
  }
  return certificate;
}
