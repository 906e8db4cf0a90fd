/**
 * The guest's serial console as the launcher serves it: a {@link ConsoleEndpoint} over the current Machine (clients
 * attach through launcher-rpc's upgraded `/v1/console`), plus an append-only log file of everything the guest
 * printed, rotated at virtlogd's size cap (console-log.ts; the launcher Pod's `guest-console-log` container tails
 * it, as KubeVirt's virt-tail does).
 * The machine can be swapped in later (the guest is built on sync, after the server is up).
 */
import type { ConsoleEndpoint } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import type { Machine } from "../machine/machine.ts";
import { type ConsoleLogLimits, RotatingConsoleLog } from "./console-log.ts";

/** Fans one machine's console out to clients and the log file. */
export class ConsoleHub implements ConsoleEndpoint {
  readonly #listeners = new Set<(chunk: Uint8Array) => void>();
  readonly #log: RotatingConsoleLog | undefined;
  #machine: Machine | undefined;

  /** `logPath`: the console log file, or undefined for none; `limits`: its size cap (virtlogd's by default). */
  constructor(logPath: string | undefined, logger: Logger, limits?: ConsoleLogLimits) {
    // A full disk must not stop the guest: the failure is logged once and the live console keeps serving.
    this.#log = logPath
      ? new RotatingConsoleLog(logPath, limits, (err) =>
          logger.warn({ err, path: logPath }, "cannot write the console log; dropping output until it can"),
        )
      : undefined;
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
    this.#log?.write(chunk);
  }
}
