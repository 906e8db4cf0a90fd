/**
 * The live-migration engine's own types, in a module with no runtime dependency (`@kvt/migration/types`), so the
 * launcher protocol (libs/launcher-rpc) and virt-handler can name them without loading the engine or the VMM:
 *
 *   KubeVirt MigrationConfiguration (API) --virt-handler--> MigrateRequest.options (launcher-rpc, KubeVirt's units)
 *     --virt-launcher, once, at the RPC boundary--> MigrationOptions (here: what the engine and both backends take)
 */

/** Where a migration source sends the guest: the target's address and the one-time secret of the handshake. */
export interface MigrationTarget {
  readonly host: string;
  readonly port: number;
  /** One-time secret both sides prove knowledge of (HMAC challenge) before any guest memory moves. */
  readonly secret: string;
  /** The target's certificate (PEM) when it listens for TLS: the only one the source's handshake accepts (pinned).
   *  Absent: the target expects a plain stream (KubeVirt's migrations.disableTLS). */
  readonly certificate?: string;
}

/**
 * One side's TLS identity for one migration: a certificate and private key (PEM) its virt-handler minted for it
 * (@kvt/certs mintMigrationCertificate). The peer accepts exactly this certificate, given to it by its own handler.
 */
export interface MigrationTlsIdentity {
  readonly certificate: string;
  readonly key: string;
}

/** The knobs of one migration, resolved from the VMI's `migrationState.migrationConfiguration`. */
export interface MigrationOptions {
  /** Link cap in bytes/s; 0 = unlimited. */
  readonly bandwidthBytesPerSec: number;
  /** Switch over once the pending pages fit in this much downtime. */
  readonly maxDowntimeMs: number;
  readonly allowAutoConverge: boolean;
  /** Whole-migration limit in seconds; 0 = none. KubeVirt's formula (completionTimeoutPerGiB x the data size) has one
   *  owner, `acceptableCompletionTimeSeconds` in @kvt/api: callers resolve it there and pass the seconds here. */
  readonly completionTimeoutSec: number;
  /** Fail when the remaining bytes reach no new low for this long; 0 = none. */
  readonly progressTimeoutSec: number;
  /** The source's TLS identity: the stream runs over TLS 1.3, the target's certificate pinned; `false` only under
   *  KubeVirt's migrations.disableTLS (at both ends): a plain stream. */
  readonly tls: MigrationTlsIdentity | false;
}

/** Progress of a live migration (source side), in KubeVirt's migration metric terms. */
export interface MigrationProgress {
  readonly iteration: number;
  readonly processedBytes: number;
  readonly remainingBytes: number;
  readonly dirtyRateBytesPerSec: number;
  readonly transferRateBytesPerSec: number;
  readonly expectedDowntimeMs: number;
  /** Auto-converge throttle applied to the vCPUs, 0..1. */
  readonly throttle: number;
}

/** How a migration ended, as every backend reports it (the engine's MigrationResult adds its own detail). */
export interface MigrationOutcome {
  readonly ok: boolean;
  /** Why it failed, e.g. `canceled`, `target connection lost`, `completion timeout`. */
  readonly failureReason?: string;
  /** Guest paused on the source until running on the target. */
  readonly downtimeMs?: number;
  readonly totalSeconds: number;
  readonly bytesSent: number;
  readonly iterations: number;
  /** Our VMM: bytes of copied disks (`migrate: "copy"`: emptyDisk, containerDisk overlays, RWO claims) sent with
   *  data, part of bytesSent. Disks on shared storage (RWX claims, shared hostDisks) are opened by the target and
   *  never sent: they count in neither figure. */
  readonly diskBytes?: number;
  /** Our VMM: bytes of copied disks sent as zero-range markers (holes, zero blocks). */
  readonly diskZeroBytes?: number;
}
