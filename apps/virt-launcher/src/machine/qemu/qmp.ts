/**
 * A QMP (QEMU Machine Protocol) client over QEMU's unix socket: JSON objects, one per line.
 *
 *   connect --> {"QMP": {...}} greeting --> {"execute":"qmp_capabilities"} --> ready
 *   ready: {"execute": cmd, "arguments": {...}, "id": n} --> {"return": ..., "id": n} | {"error": {...}, "id": n}
 *          asynchronous {"event": NAME, "data": {...}, "timestamp": {...}} at any time
 *
 * Malformed lines from the peer are logged and dropped, never thrown.
 */
import { EventEmitter } from "node:events";
import { connect, type Socket } from "node:net";
import type { Logger } from "@kvt/observability";

/** An error QEMU answered a command with. */
export class QmpError extends Error {
  /** QEMU's error class, e.g. `GenericError`, `CommandNotFound`. */
  readonly errorClass: string;
  constructor(command: string, errorClass: string, desc: string) {
    super(`QMP ${command}: ${errorClass}: ${desc}`);
    this.name = "QmpError";
    this.errorClass = errorClass;
  }
}

/** A QMP event: its name and data. */
export interface QmpEvent {
  readonly event: string;
  readonly data: Record<string, unknown>;
}

interface Pending {
  readonly command: string;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: Error) => void;
}

type QmpMessage = {
  QMP?: unknown;
  return?: unknown;
  error?: { class?: string; desc?: string };
  id?: number;
  event?: string;
  data?: Record<string, unknown>;
};

/** Events: `event` (QmpEvent), `close` (). */
export class QmpClient extends EventEmitter<{ event: [QmpEvent]; close: [] }> {
  readonly #socket: Socket;
  readonly #log: Logger;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #buffer = "";
  #closed = false;

  private constructor(socket: Socket, log: Logger) {
    super();
    this.#socket = socket;
    this.#log = log;
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => this.#onData(chunk));
    socket.on("error", (err) => this.#log.debug({ err }, "qmp socket error"));
    socket.on("close", () => this.#onClose());
  }

  /**
   * Connects to the QMP socket at `path`, retrying until QEMU has created it or `timeoutMs` passes, reads the
   * greeting and negotiates capabilities.
   */
  static async connect(path: string, log: Logger, timeoutMs = 15_000): Promise<QmpClient> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const socket = await new Promise<Socket>((resolve, reject) => {
          const s = connect(path);
          s.once("connect", () => resolve(s));
          s.once("error", reject);
        });
        const client = new QmpClient(socket, log);
        await client.#greeting(Math.max(1000, deadline - Date.now()));
        await client.execute("qmp_capabilities");
        return client;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(`cannot connect to QMP at ${path}: ${(err as Error).message}`, { cause: err });
        await new Promise((r) => setTimeout(r, 25));
      }
    }
  }

  /** Runs a QMP command; resolves with its `return` value, rejects with {@link QmpError}. */
  execute<T = unknown>(command: string, args?: Record<string, unknown>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error(`QMP ${command}: connection closed`));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { command, resolve: resolve as (v: unknown) => void, reject });
      this.#socket.write(
        `${JSON.stringify(args ? { execute: command, arguments: args, id } : { execute: command, id })}\n`,
      );
    });
  }

  /** Closes the connection; pending commands fail. */
  close(): void {
    this.#socket.destroy();
  }

  #greetingWaiter?: (err?: Error) => void;

  #greeting(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no QMP greeting")), timeoutMs);
      this.#greetingWaiter = (err) => {
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
    });
  }

  #onData(chunk: string): void {
    this.#buffer += chunk;
    for (let nl = this.#buffer.indexOf("\n"); nl >= 0; nl = this.#buffer.indexOf("\n")) {
      const line = this.#buffer.slice(0, nl).trim();
      this.#buffer = this.#buffer.slice(nl + 1);
      if (line !== "") this.#onLine(line);
    }
    if (this.#buffer.length > 16 << 20) {
      this.#log.warn("QMP line too long; closing");
      this.close();
    }
  }

  #onLine(line: string): void {
    let msg: QmpMessage;
    try {
      msg = JSON.parse(line) as QmpMessage;
    } catch {
      this.#log.warn({ line: line.slice(0, 200) }, "malformed QMP line");
      return;
    }
    if (msg.QMP !== undefined) {
      this.#greetingWaiter?.();
      this.#greetingWaiter = undefined;
    } else if (typeof msg.event === "string") {
      this.emit("event", { event: msg.event, data: msg.data ?? {} });
    } else if (typeof msg.id === "number") {
      const p = this.#pending.get(msg.id);
      if (!p) return;
      this.#pending.delete(msg.id);
      if (msg.error) p.reject(new QmpError(p.command, msg.error.class ?? "Error", msg.error.desc ?? "unknown error"));
      else p.resolve(msg.return);
    }
  }

  #onClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#greetingWaiter?.(new Error("QMP connection closed"));
    for (const p of this.#pending.values()) p.reject(new Error(`QMP ${p.command}: connection closed`));
    this.#pending.clear();
    this.emit("close");
  }
}
