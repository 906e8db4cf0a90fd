/**
 * Live migration of a native-VMM guest (the {@link Machine} migration calls of NativeMachine), over @kvt/migration:
 *
 *   target launcher                                   source launcher
 *   prepareIncoming({tls}): Vm.create (same spec,     migrateTo(target, options):
 *     not started) -> listen, one-time secret           OutgoingMigration (bulk, dirty rounds under the policy:
 *     -> {host, port, secret, certificate} to the       bandwidth cap, max downtime, auto-converge, completion
 *     handler; trustSource(the source's certificate)    and progress timeouts) -> "migration-progress" events
 *   ... the source connects: TLS 1.3 (both
 *   certificates pinned), then authenticates (HMAC),
 *   memory + state arrive, the vCPUs start here         switch-over: pause, last pages + state, wait for the
 *     -> onRunning (the machine is "running")             target's confirmation -> only then the source Vm stops
 *   any failure -> onFailed (the Vm is discarded)      any failure or cancelMigration(): the guest runs on here
 *
 * The machine keeps the Vm's events (console, shutdown) wired; this module only moves the guest.
 */

import { type IncomingMigration, OutgoingMigration, prepareIncoming } from "@kvt/migration";
import type { Logger } from "@kvt/observability";
import { Vm, type VmControl, type VmOptions } from "@kvt/vmm";
import {
  type IncomingOptions,
  MachineUnsupportedError,
  type MigrationOptions,
  type MigrationProgress,
  type MigrationResult,
  type MigrationTarget,
} from "../machine.ts";

/** How long a prepared target waits for its source, and the bound on each network step (ms). */
export const INCOMING_TIMEOUT_MS = 120_000;
/** Bound on each blocking network step of the source (ms). */
export const OUTGOING_IO_TIMEOUT_MS = 10_000;

/**
 * The Vm options of a migration target: the source's machine (memory, vCPUs, and for Linux its platform devices),
 * without loading an ELF kernel: the memory and the vCPU state arrive from the source.
 */
export function incomingVmOptions(boot: VmOptions): VmOptions {
  const { kernel: _loadedBySource, ...machine } = boot;
  return machine;
}

function migratable(vm: VmControl | undefined, verb: string): Vm {
  if (!(vm instanceof Vm)) throw new MachineUnsupportedError(`cannot ${verb}: this VMM has no migration stream`);
  return vm;
}

/** What a listening target reports back to its machine. */
export interface IncomingCallbacks {
  /** The guest runs here now. */
  readonly onRunning: () => void;
  /** The transfer failed or was canceled; the Vm was never started. */
  readonly onFailed: (reason: string) => void;
}

/** One native guest's migrations, in either role. */
export class NativeMigration {
  readonly #log: Logger;
  readonly #host: string;
  readonly #port: number;
  #incoming: IncomingMigration | undefined;
  #outgoing: OutgoingMigration | undefined;

  /** `host`/`port`: where the target listens and what it hands to the source (default 127.0.0.1, any port). */
  constructor(logger: Logger, host = "127.0.0.1", port = 0) {
    this.#log = logger;
    this.#host = host;
    this.#port = port;
  }

  /** Target side: listens for the guest into `vm` (created, not started). */
  listen(vm: VmControl, options: IncomingOptions, callbacks: IncomingCallbacks): MigrationTarget {
    if (this.#incoming) throw new MachineUnsupportedError("an incoming migration is already prepared");
    const incoming = prepareIncoming(migratable(vm, "receive a migration"), {
      host: this.#host,
      port: this.#port,
      ioTimeoutMs: INCOMING_TIMEOUT_MS,
      tls: options.tls,
      logger: this.#log,
    });
    this.#incoming = incoming;
    incoming.done.then(
      (stats) => {
        this.#log.info(
          { receiveSeconds: stats.receiveSeconds, restoreMs: stats.restoreMs, bytes: stats.bytesReceived },
          "incoming migration completed; the guest runs here",
        );
        callbacks.onRunning();
      },
      (err: unknown) => callbacks.onFailed(`incoming migration failed: ${(err as Error).message}`),
    );
    this.#log.info({ host: incoming.destination.host, port: incoming.destination.port }, "waiting for the source");
    return incoming.destination;
  }

  /** Target side: pins the source's certificate for the prepared incoming migration. */
  trustSource(certificate: string): void {
    if (!this.#incoming) throw new MachineUnsupportedError("no incoming migration is prepared");
    this.#incoming.trustPeer(certificate);
    this.#log.info("the source's certificate is pinned for the incoming migration");
  }

  /** Target side: stops waiting (the listener's callbacks then report a failure). */
  cancelIncoming(): void {
    this.#incoming?.cancel();
  }

  /**
   * Source side: sends the guest in `vm` to `target`. On success the guest is paused here and the target confirmed
   * it runs there: the caller releases `vm`. On failure the guest runs on here. Never rejects for migration failures.
   */
  async migrate(
    vm: VmControl | undefined,
    target: MigrationTarget,
    options: MigrationOptions,
    onProgress: (p: MigrationProgress) => void,
  ): Promise<MigrationResult> {
    const source = migratable(vm, "migrate");
    if (this.#outgoing) throw new MachineUnsupportedError("a migration is already in progress");
    const outgoing = new OutgoingMigration(source, target, {
      ...options,
      ioTimeoutMs: OUTGOING_IO_TIMEOUT_MS,
      release: false, // the machine releases the Vm, so its state says "migrated" rather than a guest exit
      onProgress,
      logger: this.#log,
    });
    this.#outgoing = outgoing;
    const { tls, ...knobs } = options;
    this.#log.info({ host: target.host, port: target.port, tls: tls !== false, ...knobs }, "migration started");
    try {
      const r = await outgoing.run();
      return {
        ok: r.ok,
        ...(r.failureReason !== undefined ? { failureReason: r.failureReason } : {}),
        ...(r.downtimeMs !== undefined ? { downtimeMs: r.downtimeMs } : {}),
        totalSeconds: r.totalSeconds,
        bytesSent: r.bytesSent,
        iterations: r.iterations,
        // What of the guest's disks travelled in the stream: only local writable disks; a shared one (RWX claim)
        // is opened by the target and sends nothing (the nested lane's block-claim checks assert on it).
        diskBytes: r.diskBytes,
        diskZeroBytes: r.diskZeroBytes,
      };
    } finally {
      this.#outgoing = undefined;
    }
  }

  /** Source side: aborts the outgoing migration in flight (its result's failureReason is `reason`); no-op when none. */
  cancel(reason = "canceled"): void {
    this.#outgoing?.cancel(reason);
  }
}
