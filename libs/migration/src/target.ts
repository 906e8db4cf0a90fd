/**
 * The target side: listen with a fresh one-time secret, hand the source its address, and wait for the guest.
 *
 *   prepareIncoming(vm, {tls: this side's identity})
 *     --> { destination {host, port, secret, certificate}, trustPeer, done }
 *   trustPeer(source's certificate)   (virt-handler's exchange: before the source may connect)
 *     --source connects, TLS with both certificates pinned--> done resolves (the guest runs here)
 *   cancel() or a failed transfer: done rejects and the Vm is left unstarted (the caller discards it)
 */
import { type MigrationTargetStats, MigrationTargetStream, type Vm } from "@kvt/vmm";
import type { Logger } from "pino";
import type { MigrationTarget, MigrationTlsIdentity } from "./types.ts";

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
  /** This side's TLS identity (the source must then present the certificate given to trustPeer()); `false` only
   *  under KubeVirt's migrations.disableTLS, at both ends: a plain stream. */
  readonly tls: MigrationTlsIdentity | false;
  readonly logger?: Logger;
}

/** A listening target. */
export interface IncomingMigration {
  /** What the source needs: address, the per-migration secret, and (TLS) this side's certificate. */
  readonly destination: MigrationTarget;
  /** The source's certificate (PEM), the only one the handshake accepts; throws on one OpenSSL cannot read, or once
   *  a source connected. May be called again (a source handler that restarted minted another) until then. */
  trustPeer(certificate: string): void;
  /** Resolves once the guest runs here; rejects (Vm untouched, not started) on any failure. */
  readonly done: Promise<MigrationTargetStats>;
  /** Stops waiting; `done` rejects. */
  cancel(): void;
}

/** Listens for one incoming migration into `vm` (created with the source's memory size and vCPU count, not started). */
export function prepareIncoming(vm: Vm, options: IncomingOptions): IncomingMigration {
  const host = options.host ?? "127.0.0.1";
  const stream = MigrationTargetStream.listen(vm, host, options.port ?? 0);
  // Web Crypto: node:crypto (and OpenSSL's start-up) is loaded at the first migration, not by every launcher.
  const secret = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");
  const log = options.logger;
  const accepted = stream.accept(secret, options.tls, options.ioTimeoutMs ?? 60_000, options.digest ?? false);
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
    destination: {
      host: options.advertiseHost ?? host,
      port: stream.port,
      secret,
      ...(options.tls ? { certificate: options.tls.certificate } : {}),
    },
    trustPeer: (certificate) => stream.trustPeer(certificate),
    done,
    cancel: () => stream.cancel(),
  };
}
