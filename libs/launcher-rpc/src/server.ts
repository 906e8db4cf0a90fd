/**
 * The launcher side of the protocol (see protocol.ts for the diagram): an HTTP/1.1 server on a unix socket that
 * routes commands to a {@link LauncherService}, enforces each request's deadline, continues the caller's trace,
 * streams events to every subscriber, upgrades `/v1/console` into a raw byte stream, and `/v1/portforward/{port}/tcp`
 * into a connection to the guest's port.
 */
import { chmodSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "@kvt/observability";
import {
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { isLauncherErrorCode, LauncherRpcError } from "./errors.ts";
import {
  type CancelMigrationRequest,
  CONSOLE_PROTOCOL,
  type DomainInfo,
  type DomainStats,
  type ErrorBody,
  EVENT_PING_INTERVAL_MS,
  type LauncherEventBody,
  type MigrateRequest,
  type MigrationTarget,
  PATHS,
  POLLED_PATHS,
  PORT_FORWARD_PROTOCOL,
  type PortForwardProtocol,
  type PrepareTargetRequest,
  type ShutdownRequest,
  type SourceCertificateRequest,
  type SyncRequest,
  TIMEOUT_HEADER,
} from "./protocol.ts";
import {
  parseCancelMigration,
  parseMigrate,
  parsePrepareTarget,
  parseShutdown,
  parseSourceCertificate,
  parseSync,
} from "./validate.ts";

/** What a launcher implements; the server validates input and calls these. Throw {@link LauncherRpcError} to pick the status. */
export interface LauncherService {
  info(): DomainInfo;
  sync(request: SyncRequest, signal: AbortSignal): Promise<DomainInfo>;
  pause(signal: AbortSignal): Promise<void>;
  unpause(signal: AbortSignal): Promise<void>;
  softReboot(signal: AbortSignal): Promise<void>;
  shutdown(request: ShutdownRequest, signal: AbortSignal): Promise<void>;
  kill(signal: AbortSignal): Promise<void>;
  prepareTarget(request: PrepareTargetRequest, signal: AbortSignal): Promise<MigrationTarget>;
  /** Target side: pins the source's certificate for the prepared migration's TLS handshake. */
  sourceCertificate(request: SourceCertificateRequest, signal: AbortSignal): Promise<void>;
  /** Starts the migration and returns once it is under way; the result is published as an event. */
  migrate(request: MigrateRequest, signal: AbortSignal): Promise<void>;
  cancelMigration(request: CancelMigrationRequest, signal: AbortSignal): Promise<void>;
  stats(signal: AbortSignal): Promise<DomainStats>;
}

/** The guest's serial console, as the server attaches clients to it. */
export interface ConsoleEndpoint {
  /** Recent output, replayed to a client when it attaches. */
  scrollback(): Uint8Array;
  /** Input from a client. */
  write(data: Uint8Array): void;
  /** Output as it arrives; returns the unsubscribe function. */
  subscribe(listener: (chunk: Uint8Array) => void): () => void;
}

/** The guest's network ports, as the server connects port-forward clients to them. */
export interface PortForwardEndpoint {
  /**
   * Connects to the guest's `port`. Rejects with a {@link LauncherRpcError} saying why it cannot (no pod network
   * interface: Conflict; refused, unreachable or timed out: Unavailable with the dial error).
   */
  dial(port: number, protocol: PortForwardProtocol): Promise<Duplex>;
}

/** Options for {@link LauncherServer}. */
export interface LauncherServerOptions {
  readonly socketPath: string;
  readonly service: LauncherService;
  readonly console?: ConsoleEndpoint;
  /** Serves `/v1/portforward/...`; without it those upgrades answer 503. */
  readonly portForward?: PortForwardEndpoint;
  readonly logger: Logger;
  /** Largest accepted request body; default 4 MiB (a VMI is a few KiB). */
  readonly maxBodyBytes?: number;
}

type Route = (body: unknown, signal: AbortSignal) => Promise<unknown>;

const tracer = trace.getTracer("@kvt/launcher-rpc");
const headerGetter = {
  get: (carrier: IncomingMessage["headers"], key: string): string | undefined => {
    const v = carrier[key];
    return Array.isArray(v) ? v[0] : v;
  },
  keys: (carrier: IncomingMessage["headers"]): string[] => Object.keys(carrier),
};

/** Serves one launcher's protocol on a unix socket. Call {@link listen}, then {@link close} on the way out. */
export class LauncherServer {
  readonly #options: LauncherServerOptions;
  readonly #server: Server;
  readonly #routes: Map<string, { method: "GET" | "POST"; run: Route }>;
  readonly #subscribers = new Set<{ res: ServerResponse; seq: number }>();
  readonly #sockets = new Set<Socket | Duplex>();
  #ping: ReturnType<typeof setInterval> | undefined;

  constructor(options: LauncherServerOptions) {
    this.#options = options;
    const s = options.service;
    this.#routes = new Map<string, { method: "GET" | "POST"; run: Route }>([
      [PATHS.info, { method: "GET", run: async () => s.info() }],
      [PATHS.sync, { method: "POST", run: (b, sig) => s.sync(parseSync(b), sig) }],
      [PATHS.pause, { method: "POST", run: (_b, sig) => done(s.pause(sig)) }],
      [PATHS.unpause, { method: "POST", run: (_b, sig) => done(s.unpause(sig)) }],
      [PATHS.softReboot, { method: "POST", run: (_b, sig) => done(s.softReboot(sig)) }],
      [PATHS.shutdown, { method: "POST", run: (b, sig) => done(s.shutdown(parseShutdown(b), sig)) }],
      [PATHS.kill, { method: "POST", run: (_b, sig) => done(s.kill(sig)) }],
      [PATHS.prepareTarget, { method: "POST", run: (b, sig) => s.prepareTarget(parsePrepareTarget(b), sig) }],
      [
        PATHS.sourceCertificate,
        { method: "POST", run: (b, sig) => done(s.sourceCertificate(parseSourceCertificate(b), sig)) },
      ],
      [PATHS.migrate, { method: "POST", run: (b, sig) => done(s.migrate(parseMigrate(b), sig)) }],
      [
        PATHS.cancelMigration,
        { method: "POST", run: (b, sig) => done(s.cancelMigration(parseCancelMigration(b), sig)) },
      ],
      [PATHS.stats, { method: "GET", run: (_b, sig) => s.stats(sig) }],
    ]);
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        // Last resort: a bug in routing must not take the launcher down; the peer sees a 500.
        this.#options.logger.error({ err: error, path: req.url }, "launcher-rpc request failed unexpectedly");
        if (!res.headersSent) sendError(res, new LauncherRpcError("Internal", "internal error"));
        else res.destroy();
      });
    });
    this.#server.on("connection", (socket) => this.#track(socket));
    this.#server.on("upgrade", (req, socket, head) => this.#upgrade(req, socket, head));
  }

  /** Starts listening; replaces a stale socket file left by a previous launcher at the same path. */
  async listen(): Promise<void> {
    rmSync(this.#options.socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(this.#options.socketPath, () => {
        this.#server.off("error", reject);
        // The socket controls a guest: its owner only (virt-handler runs as the same user, or root). Until this
        // chmod the umask's mode applies, which already denies connect (write) to group and others with 022.
        chmodSync(this.#options.socketPath, 0o600);
        resolve();
      });
    });
    this.#ping = setInterval(() => this.publish({ type: "ping" }), EVENT_PING_INTERVAL_MS);
    this.#ping.unref();
  }

  /** Sends `event` to every event-stream subscriber. Call it on every domain and migration change. */
  publish(event: LauncherEventBody): void {
    for (const sub of this.#subscribers) writeEvent(sub, event);
  }

  /** How many clients follow the event stream (the handler, usually one). */
  get subscriberCount(): number {
    return this.#subscribers.size;
  }

  /** Ends the event streams, drops console and idle connections, stops listening and removes the socket file. */
  async close(): Promise<void> {
    if (this.#ping) clearInterval(this.#ping);
    for (const sub of this.#subscribers) sub.res.end();
    this.#subscribers.clear();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const socket of this.#sockets) socket.destroy();
    await closed;
    rmSync(this.#options.socketPath, { force: true });
  }

  #track(socket: Socket | Duplex): void {
    this.#sockets.add(socket);
    socket.once("close", () => this.#sockets.delete(socket));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === PATHS.events && req.method === "GET") return this.#subscribe(req, res);
    const route = this.#routes.get(path);
    if (!route) return sendError(res, new LauncherRpcError("NotFound", `no such path: ${path}`));
    if (req.method !== route.method) {
      return sendError(res, new LauncherRpcError("BadRequest", `${path} takes ${route.method}, not ${req.method}`));
    }
    const timeoutMs = Number(req.headers[TIMEOUT_HEADER]);
    if (!Number.isFinite(timeoutMs)) {
      return sendError(res, new LauncherRpcError("BadRequest", `every request needs a ${TIMEOUT_HEADER} header`));
    }
    if (timeoutMs <= 0) return sendError(res, new LauncherRpcError("DeadlineExceeded", "deadline already passed"));
    const body = route.method === "POST" ? await readJson(req, this.#options.maxBodyBytes ?? 4 << 20) : undefined;
    if (body instanceof LauncherRpcError) return sendError(res, body);
    const parent = propagation.extract(ROOT_CONTEXT, req.headers, headerGetter);
    const result = await this.#run(path, route, body, timeoutMs, parent);
    if (result instanceof LauncherRpcError) return sendError(res, result);
    sendJson(res, path === PATHS.migrate ? 202 : 200, result);
  }

  async #run(path: string, route: { run: Route }, body: unknown, timeoutMs: number, parent: Context): Promise<unknown> {
    const span =
      POLLED_PATHS.has(path) && !trace.getSpanContext(parent)
        ? trace.wrapSpanContext(INVALID_SPAN_CONTEXT)
        : tracer.startSpan(`launcher ${path.slice(4)}`, { kind: SpanKind.SERVER }, parent);
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<LauncherRpcError>((resolve) => {
      timer = setTimeout(() => {
        controller.abort(new LauncherRpcError("DeadlineExceeded", `deadline of ${timeoutMs} ms exceeded`));
        resolve(new LauncherRpcError("DeadlineExceeded", `${path}: deadline of ${timeoutMs} ms exceeded`));
      }, timeoutMs);
    });
    try {
      // Validation throws synchronously inside run(); the async wrapper turns that into a rejection too.
      const work = context.with(trace.setSpan(parent, span), async () => route.run(body, controller.signal));
      const result = await Promise.race([work.catch((error: unknown) => toRpcError(error)), deadline]);
      if (result instanceof LauncherRpcError) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: result.message });
        if (result.code === "Internal")
          this.#options.logger.error({ err: result.cause ?? result, path }, "command failed");
      }
      return result;
    } finally {
      clearTimeout(timer);
      span.end();
    }
  }

  #subscribe(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
    const sub = { res, seq: 0 };
    this.#subscribers.add(sub);
    const drop = (): void => {
      this.#subscribers.delete(sub);
    };
    req.socket.once("close", drop);
    res.once("close", drop);
    writeEvent(sub, { type: "domain", transition: "snapshot", info: this.#options.service.info() });
  }

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.#track(socket);
    socket.on("error", () => socket.destroy()); // a peer vanishing mid-stream is routine
    const path = (req.url ?? "").split("?")[0] ?? "";
    const upgrade = String(req.headers.upgrade ?? "").toLowerCase();
    if (path.startsWith(`${PATHS.portForward}/`) && upgrade === PORT_FORWARD_PROTOCOL) {
      this.#portForward(path, socket, head).catch((error: unknown) => {
        // Last resort, as for commands: the peer sees a 500 and the launcher keeps serving.
        this.#options.logger.error({ err: error, path }, "port-forward upgrade failed unexpectedly");
        refuseUpgrade(socket, new LauncherRpcError("Internal", "internal error"));
      });
      return;
    }
    const endpoint = this.#options.console;
    if (path !== PATHS.console || upgrade !== CONSOLE_PROTOCOL || !endpoint) {
      const status = !endpoint && path === PATHS.console ? "503 Service Unavailable" : "400 Bad Request";
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${CONSOLE_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`);
    const scrollback = endpoint.scrollback();
    if (scrollback.byteLength > 0) socket.write(scrollback);
    const unsubscribe = endpoint.subscribe((chunk) => {
      if (!socket.destroyed) socket.write(chunk);
    });
    if (head.byteLength > 0) endpoint.write(head);
    socket.on("data", (data: Buffer) => endpoint.write(data));
    socket.once("end", () => socket.destroy()); // the client hung up: no half-open consoles
    socket.once("close", unsubscribe);
  }

  /** `/v1/portforward/{port}/{protocol}`: connect to the guest first, then switch protocols and splice the two. */
  async #portForward(path: string, socket: Duplex, head: Buffer): Promise<void> {
    const target = parsePortForwardPath(path);
    if (target instanceof LauncherRpcError) return refuseUpgrade(socket, target);
    const endpoint = this.#options.portForward;
    if (!endpoint) return refuseUpgrade(socket, new LauncherRpcError("Unavailable", "port-forward is not served"));
    let guest: Duplex;
    try {
      guest = await endpoint.dial(target.port, target.protocol);
    } catch (error) {
      return refuseUpgrade(socket, toRpcError(error));
    }
    if (socket.destroyed) {
      guest.destroy(); // the handler gave up while we dialled
      return;
    }
    this.#track(guest);
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${PORT_FORWARD_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`,
    );
    if (head.byteLength > 0) guest.write(head);
    splice(socket, guest);
  }
}

/** Port and protocol of a port-forward path, or the BadRequest saying what is wrong with it. */
export function parsePortForwardPath(path: string): { port: number; protocol: PortForwardProtocol } | LauncherRpcError {
  const m = /^\/v1\/portforward\/([^/]*)\/([^/]*)$/.exec(path);
  if (!m) return new LauncherRpcError("BadRequest", `${path}: expected ${PATHS.portForward}/{port}/{protocol}`);
  const [, rawPort = "", protocol = ""] = m;
  const port = /^\d{1,5}$/.test(rawPort) ? Number(rawPort) : Number.NaN;
  if (!(port >= 1 && port <= 65535)) return new LauncherRpcError("BadRequest", `invalid port "${rawPort}"`);
  if (protocol !== "tcp") return new LauncherRpcError("BadRequest", `unsupported protocol "${protocol}"`);
  return { port, protocol };
}

/**
 * Carries bytes both ways between two streams with backpressure: an end of one side's input ends the other's
 * output (a TCP half-close crosses), and either side closing or failing destroys both.
 */
function splice(a: Duplex, b: Duplex): void {
  a.pipe(b);
  b.pipe(a);
  const destroyBoth = (): void => {
    a.destroy();
    b.destroy();
  };
  a.once("close", destroyBoth);
  b.once("close", destroyBoth);
  a.on("error", destroyBoth);
  b.on("error", destroyBoth);
}

/** Answers an upgrade request that is refused with the protocol's error body, then closes. */
function refuseUpgrade(socket: Duplex, error: LauncherRpcError): void {
  if (socket.destroyed) return;
  const code = isLauncherErrorCode(error.code) ? error.code : "Internal";
  const body = JSON.stringify({ error: { code, message: error.message } } satisfies ErrorBody);
  socket.end(
    `HTTP/1.1 ${error.status} ${code}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** The answer of a command that returns nothing. */
async function done(work: Promise<void>): Promise<{ ok: true }> {
  await work;
  return { ok: true };
}

function toRpcError(error: unknown): LauncherRpcError {
  if (error instanceof LauncherRpcError) return error;
  return new LauncherRpcError("Internal", error instanceof Error ? error.message : String(error), { cause: error });
}

function writeEvent(sub: { res: ServerResponse; seq: number }, event: LauncherEventBody): void {
  if (sub.res.destroyed || sub.res.writableEnded) return;
  sub.seq += 1;
  sub.res.write(`${JSON.stringify({ ...event, seq: sub.seq, time: new Date().toISOString() })}\n`);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value ?? null);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: ServerResponse, error: LauncherRpcError): void {
  const code = isLauncherErrorCode(error.code) ? error.code : "Internal";
  const body: ErrorBody = { error: { code, message: error.message } };
  sendJson(res, error.status, body);
}

async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > maxBytes) return new LauncherRpcError("PayloadTooLarge", `request body over ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch (error) {
    return new LauncherRpcError("BadRequest", `request body is not JSON: ${(error as Error).message}`);
  }
}
