/**
 * The guest's serial console as the launcher serves it: a {@link ConsoleEndpoint} over the current Machine (clients
 * attach through launcher-rpc's upgraded `/v1/console`), plus an append-only log file of everything the guest
 * printed (the launcher Pod's `guest-console-log` container tails it, as KubeVirt's virt-tail does).
 * The machine can be swapped in later (the guest is built on sync, after the server is up).
 */
import { appendFileSync } from "node:fs";
import type { ConsoleEndpoint } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import type { Machine } from "../machine/machine.ts";

/** Fans one machine's console out to clients and the log file. */
export class ConsoleHub implements ConsoleEndpoint {
  readonly #listeners = new Set<(chunk: Uint8Array) => void>();
  readonly #logPath: string | undefined;
  readonly #logger: Logger;
  #machine: Machine | undefined;
  #logBroken = false;

  /** `logPath`: the console log file, or undefined for none. */
  constructor(logPath: string | undefined, logger: Logger) {
    this.#logPath = logPath;
    this.#logger = logger;
  }

  /** Starts following `machine`'s console (call once, when the guest is built). */
  attach(machine: Machine): void {
    this.#machine = machine;
    machine.on("console", (chunk) => this.#onOutput(chunk));
  }

  scrollback(): Uint8Array {
    return this.#machine?.consoleScrollback() ?? new Uint8Array();
  }

  write(data: Uint8Array): void {
    // Input before the guest exists has nowhere to go; dropping it is what a serial line does.
    this.#machine?.writeConsole(data);
  }

  subscribe(listener: (chunk: Uint8Array) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #onOutput(chunk: Uint8Array): void {
    for (const listener of this.#listeners) listener(chunk);
    if (!this.#logPath || this.#logBroken) return;
    try {
      appendFileSync(this.#logPath, chunk);
    } catch (error) {
      // A full disk must not stop the guest: log once and keep serving the live console.
      this.#logBroken = true;
      this.#logger.warn({ err: error, path: this.#logPath }, "cannot write the console log; continuing without it");
    }
  }
}
