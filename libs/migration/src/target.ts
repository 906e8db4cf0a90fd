/**
 * The target side: listen with a fresh one-time secret, hand the source its address, and wait for the guest.
 *
 *   prepareIncoming(vm) --> { destination {host, port, secret}, done } --source connects--> done resolves
 *                                                                        (the guest runs here)
 *   cancel() or a failed transfer: done rejects and the Vm is left unstarted (the caller discards it)
 */
import { type MigrationTargetStats, MigrationTargetStream, type Vm } from "@kvt/vmm";
import type { Logger } from "pino";
import type { MigrationTarget } from "./types.ts";

/** Options of prepareIncoming. */
export interface IncomingOptions {
  /** Address to listen on (default 127.0.0.1) and to advertise (default: the same). */
  readonly host?: string;
  readonly advertiseHost?: string;
  /** Port, 0 = any free port (default). */
  readonly port?: number;
  /** How long to wait for the source, and the bound on each network step (ms). Default 60 s. */
  readonly ioTimeoutMs?: number;
  /** Add a full-memory SHA-256 taken before the vCPUs start (slow; tests). */
  readonly digest?: boolean;
  /** Decrypt the stream (default true; false only with KubeVirt's migrations.disableTLS, and at both ends). */
  readonly encrypt?: boolean;
  readonly logger?: Logger;
}

/** A listening target. */
export interface IncomingMigration {
  /** What the source needs: address and the per-migration secret. */
  readonly destination: MigrationTarget;
  /** Resolves once the guest runs here; rejects (Vm untouched, not started) on any failure. */
  readonly done: Promise<MigrationTargetStats>;
  /** Stops waiting; `done` rejects. */
  cancel(): void;
}

/** Listens for one incoming migration into `vm` (created with the source's memory size and vCPU count, not started). */
export function prepareIncoming(vm: Vm, options: IncomingOptions = {}): IncomingMigration {
  const host = options.host ?? "127.0.0.1";
  const stream = MigrationTargetStream.listen(vm, host, options.port ?? 0);
  // Web Crypto: node:crypto (and OpenSSL's start-up) is loaded at the first migration, not by every launcher.
  const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");
  const log = options.logger;
  const accepted = stream.accept(
    secret,
    options.ioTimeoutMs ?? 60_000,
    options.digest ?? false,
    options.encrypt ?? true,
  );
  const done = accepted.then(
    (stats) => {
      log?.info(
        { receiveSeconds: stats.receiveSeconds, hugePageBytes: stats.hugePageBytes },
        "incoming migration done",
      );
      return stats;
    },
    (e: unknown) => {
      log?.warn({ err: e }, "incoming migration failed");
      throw e;
    },
  );
  return {
    destination: { host: options.advertiseHost ?? host, port: stream.port, secret },
    done,
    cancel: () => stream.cancel(),
  };
}
