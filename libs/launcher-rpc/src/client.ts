/**
 * The handler side of the protocol (see protocol.ts for the diagram): one client per launcher socket. Every command
 * carries a deadline (the `x-kvt-timeout-ms` header, and the client gives up at the same moment) and the caller's
 * trace context (`traceparent`). Failures are {@link LauncherRpcError}s: `Unavailable` when nothing listens.
 */
import { type IncomingMessage, request } from "node:http";
import type { Duplex } from "node:stream";
import { context, INVALID_SPAN_CONTEXT, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { isLauncherErrorCode, LauncherRpcError } from "./errors.ts";
import {
  type CancelMigrationRequest,
  CONSOLE_PROTOCOL,
  type DomainInfo,
  type DomainStats,
  EVENT_PING_INTERVAL_MS,
  type LauncherEvent,
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
import { isObject } from "./validate.ts";

/** Per-call options. */
export interface CallOptions {
  /** Deadline, relative; default the client's `timeoutMs`. */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** Options for {@link LauncherClient}. */
export interface LauncherClientOptions {
  /** Default deadline of a command; default 10 s (KubeVirt's cmd-client uses 5/20/60 s tiers). */
  readonly timeoutMs?: number;
}

const tracer = trace.getTracer("@kvt/launcher-rpc");

/** Talks to the launcher listening on `socketPath`. Stateless: safe to share, cheap to create. */
export class LauncherClient {
  /** The socket this client talks to. */
  readonly socketPath: string;
  readonly #timeoutMs: number;

  constructor(socketPath: string, options: LauncherClientOptions = {}) {
    this.socketPath = socketPath;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
  }

  /** Who the launcher is and what its guest is doing. */
  info(options?: CallOptions): Promise<DomainInfo> {
    return this.#call<DomainInfo>("GET", PATHS.info, undefined, options);
  }

  /** Boots the guest unless it already runs (idempotent). Resolves with the domain once it executes. */
  sync(body: SyncRequest = {}, options?: CallOptions): Promise<DomainInfo> {
    return this.#call<DomainInfo>("POST", PATHS.sync, body, options);
  }

  /** Pauses all vCPUs. `Conflict` unless Running. */
  async pause(options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.pause, {}, options);
  }

  /** Resumes a paused guest. `Conflict` unless Paused. */
  async unpause(options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.unpause, {}, options);
  }

  /** Asks the guest to reboot. */
  async softReboot(options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.softReboot, {}, options);
  }

  /** Asks the guest to power off, killing it after the grace period; resolves once it is down. Give a deadline above the grace period. */
  async shutdown(body: ShutdownRequest, options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.shutdown, body, options);
  }

  /** Stops the guest at once. */
  async kill(options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.kill, {}, options);
  }

  /** Target side: listen for the source; returns where it should connect, the one-time secret and (TLS) the
   *  target's certificate. */
  prepareTarget(body: PrepareTargetRequest, options?: CallOptions): Promise<MigrationTarget> {
    return this.#call<MigrationTarget>("POST", PATHS.prepareTarget, body, options);
  }

  /** Target side: the source launcher's certificate, the only one the target's TLS handshake will accept. */
  async sourceCertificate(body: SourceCertificateRequest, options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.sourceCertificate, body, options);
  }

  /** Source side: start migrating; progress and the result arrive on the event stream. */
  async migrate(body: MigrateRequest, options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.migrate, body, options);
  }

  /** Source side: abort the migration `migrationUid`; the guest keeps running here. */
  async cancelMigration(body: CancelMigrationRequest, options?: CallOptions): Promise<void> {
    await this.#call("POST", PATHS.cancelMigration, body, options);
  }

  /** Counters for the per-VMI metrics. */
  stats(options?: CallOptions): Promise<DomainStats> {
    return this.#call<DomainStats>("GET", PATHS.stats, undefined, options);
  }

  /**
   * Follows the event stream: `onEvent` gets a `domain` snapshot first, then every change. Resolves when the
   * launcher ends the stream (it is exiting) or `signal` aborts; rejects with `Unavailable` when the connection
   * cannot be made, breaks, or stays silent for three ping intervals.
   */
  watchEvents(onEvent: (event: LauncherEvent) => void, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const req = request({ socketPath: this.socketPath, path: PATHS.events, method: "GET", agent: false });
      let idle: ReturnType<typeof setTimeout> | undefined;
      const arm = (why = "event stream silent for too long"): void => {
        clearTimeout(idle);
        idle = setTimeout(() => fail(unavailable(why)), EVENT_PING_INTERVAL_MS * 3);
      };
      const onAbort = (): void => finish();
      const finish = (): void => {
        clearTimeout(idle);
        signal?.removeEventListener("abort", onAbort);
        req.destroy();
        resolve();
      };
      const fail = (error: LauncherRpcError): void => {
        clearTimeout(idle);
        signal?.removeEventListener("abort", onAbort);
        req.destroy();
        reject(error);
      };
      if (signal?.aborted) return finish();
      signal?.addEventListener("abort", onAbort, { once: true });
      // A launcher that accepts the connection but never answers (its event loop blocked) is as silent as one that
      // stops pinging: the same deadline, so the handler's reconnect loop never waits on it forever.
      arm("event stream: no answer from the launcher");
      req.on("error", (error) => fail(toUnavailable(error)));
      req.on("response", (res) => {
        if (res.statusCode !== 200) return fail(unavailable(`event stream answered ${res.statusCode}`));
        arm();
        let buffered = "";
        res.setEncoding("utf8");
        res.on("data", (text: string) => {
          arm();
          buffered += text;
          for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            const event = parseEvent(line);
            if (event) onEvent(event);
          }
        });
        res.on("end", finish);
        res.on("error", (error) => fail(toUnavailable(error)));
      });
      req.end();
    });
  }

  /** Opens the serial console: a raw byte stream both ways, starting with the scrollback. The caller closes it. */
  openConsole(options?: CallOptions): Promise<Duplex> {
    const timeoutMs = options?.timeoutMs ?? this.#timeoutMs;
    return new Promise<Duplex>((resolve, reject) => {
      const req = request({
        socketPath: this.socketPath,
        path: PATHS.console,
        method: "GET",
        agent: false,
        headers: { connection: "Upgrade", upgrade: CONSOLE_PROTOCOL, [TIMEOUT_HEADER]: String(timeoutMs) },
      });
      const timer = setTimeout(() => {
        req.destroy();
        reject(new LauncherRpcError("DeadlineExceeded", `console: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      req.on("upgrade", (_res, socket: Duplex, head: Buffer) => {
        clearTimeout(timer);
        if (head.byteLength > 0) socket.unshift(head);
        resolve(socket);
      });
      req.on("response", (res) => {
        clearTimeout(timer);
        res.resume();
        reject(
          new LauncherRpcError(res.statusCode === 503 ? "Unavailable" : "BadRequest", `console: ${res.statusCode}`),
        );
      });
      req.on("error", (error) => {
        clearTimeout(timer);
        reject(toUnavailable(error));
      });
      req.end();
    });
  }

  /**
   * Opens a connection to the guest's `port` through the launcher (which dials it inside the pod's network namespace
   * before answering): a raw byte stream both ways, TCP's half-close included. Rejects with the launcher's reason
   * (e.g. `Unavailable` with `dial tcp 10.0.2.2:23: connect: connection refused`) when it cannot connect. The caller
   * closes the stream.
   */
  openPortForward(port: number, protocol: PortForwardProtocol = "tcp", options?: CallOptions): Promise<Duplex> {
    const timeoutMs = options?.timeoutMs ?? this.#timeoutMs;
    const path = `${PATHS.portForward}/${port}/${protocol}`;
    return new Promise<Duplex>((resolve, reject) => {
      const req = request({
        socketPath: this.socketPath,
        path,
        method: "GET",
        agent: false,
        headers: { connection: "Upgrade", upgrade: PORT_FORWARD_PROTOCOL, [TIMEOUT_HEADER]: String(timeoutMs) },
      });
      const timer = setTimeout(() => {
        req.destroy();
        reject(new LauncherRpcError("DeadlineExceeded", `${path}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      req.on("upgrade", (_res, socket: Duplex, head: Buffer) => {
        clearTimeout(timer);
        if (head.byteLength > 0) socket.unshift(head);
        resolve(socket);
      });
      req.on("response", (res) => {
        readBody(res).then(
          (text) => {
            clearTimeout(timer);
            reject(refusal(res.statusCode ?? 0, text));
          },
          (error: unknown) => {
            clearTimeout(timer);
            reject(toUnavailable(error));
          },
        );
      });
      req.on("error", (error) => {
        clearTimeout(timer);
        reject(toUnavailable(error));
      });
      req.end();
    });
  }

  async #call<T>(method: "GET" | "POST", path: string, body: unknown, options?: CallOptions): Promise<T> {
    const span =
      POLLED_PATHS.has(path) && !trace.getSpanContext(context.active())
        ? trace.wrapSpanContext(INVALID_SPAN_CONTEXT)
        : tracer.startSpan(`launcher-rpc ${path.slice(4)}`, { kind: SpanKind.CLIENT });
    try {
      return await context.with(trace.setSpan(context.active(), span), () =>
        this.#send<T>(method, path, body, options?.timeoutMs ?? this.#timeoutMs, options?.signal),
      );
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  }

  #send<T>(method: string, path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = { [TIMEOUT_HEADER]: String(Math.max(1, Math.round(timeoutMs))) };
    propagation.inject(context.active(), headers);
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(payload);
    }
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted) return reject(new LauncherRpcError("Unavailable", `${path}: aborted by the caller`));
      const req = request({ socketPath: this.socketPath, path, method, headers, agent: false }, (res) => {
        readBody(res).then(
          (text) => {
            cleanup();
            const result = decode<T>(path, res.statusCode ?? 0, text);
            if (result instanceof LauncherRpcError) reject(result);
            else resolve(result);
          },
          (error: unknown) => fail(toUnavailable(error)),
        );
      });
      const cleanup = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const fail = (error: LauncherRpcError): void => {
        cleanup();
        req.destroy();
        reject(error);
      };
      const onAbort = (): void => fail(new LauncherRpcError("Unavailable", `${path}: aborted by the caller`));
      const timer = setTimeout(
        () => fail(new LauncherRpcError("DeadlineExceeded", `${path}: no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (error) => fail(toUnavailable(error)));
      req.end(payload);
    });
  }
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      text += chunk;
    });
    res.on("end", () => resolve(text));
    res.on("error", reject);
  });
}

function decode<T>(path: string, status: number, text: string): T | LauncherRpcError {
  let value: unknown;
  try {
    value = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    return new LauncherRpcError("Internal", `${path}: answer ${status} is not JSON`);
  }
  if (status >= 200 && status < 300) return value as T;
  const error = isObject(value) && isObject(value.error) ? value.error : undefined;
  const code = isLauncherErrorCode(error?.code) ? error.code : "Internal";
  const message = typeof error?.message === "string" ? error.message : `status ${status}`;
  return new LauncherRpcError(code, `${path}: ${message}`);
}

/** The error of a refused upgrade: the launcher's code and message as sent (the caller names the path). */
function refusal(status: number, text: string): LauncherRpcError {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // not the protocol's error body: the status says enough
  }
  const error = isObject(value) && isObject(value.error) ? value.error : undefined;
  const code = isLauncherErrorCode(error?.code) ? error.code : status === 503 ? "Unavailable" : "Internal";
  return new LauncherRpcError(code, typeof error?.message === "string" ? error.message : `launcher answered ${status}`);
}

function parseEvent(line: string): LauncherEvent | undefined {
  if (line.trim().length === 0) return undefined;
  try {
    const value: unknown = JSON.parse(line);
    return isObject(value) && typeof value.type === "string" ? (value as unknown as LauncherEvent) : undefined;
  } catch {
    return undefined; // a torn line from a dying launcher: the next snapshot carries the truth anyway
  }
}

function unavailable(message: string): LauncherRpcError {
  return new LauncherRpcError("Unavailable", message);
}

function toUnavailable(error: unknown): LauncherRpcError {
  if (error instanceof LauncherRpcError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  return new LauncherRpcError("Unavailable", `launcher unreachable${code ? ` (${code})` : ""}`, { cause: error });
}
