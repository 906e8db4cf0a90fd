/**
 * The handler <-> launcher protocol, version 1: HTTP/1.1 + JSON over one unix socket per launcher (per VMI pod).
 *
 * ```
 *  virt-handler (LauncherClient)                            virt-launcher (LauncherServer)
 *        |                                                         |
 *        |  GET  /v1/info                 -> DomainInfo            |   every command request carries
 *        |  POST /v1/sync   {vmi?}        -> DomainInfo (boots)    |     x-kvt-timeout-ms: <ms left>
 *        |  POST /v1/pause | /v1/unpause | /v1/softreboot | /v1/kill     (its deadline; 504 when passed)
 *        |  POST /v1/shutdown {gracePeriodSeconds}  (ACPI, then kill)    traceparent: <W3C trace context>
 *        |  POST /v1/migration/prepare-target {migrationUid, tls}  |   target side: listens for the source
 *        |                  -> {host, port, secret, certificate}   |   (tls: its per-migration certificate+key)
 *        |  POST /v1/migration/source-certificate {migrationUid, certificate}
 *        |                                -> 200                   |   target side: the one source certificate
 *        |                                                         |   its TLS handshake accepts (pinned)
 *        |  POST /v1/migration/start {migrationUid, target, options, tls}
 *        |                                -> 202 (result: event)   |   source side: migrates in background
 *        |                                                         |   (target.certificate pinned; tls its own)
 *        |  POST /v1/migration/cancel {migrationUid}               |
 *        |  GET  /v1/stats                -> DomainStats           |
 *        |  GET  /v1/events  (NDJSON, chunked, long-lived)  <======|   events: a "domain" snapshot first,
 *        |                                                         |   then domain / migration-progress /
 *        |                                                         |   migration-result, pings every 10 s
 *        |  GET  /v1/console  Upgrade: kvt-console.v1  <==========>|   101, then raw serial bytes both ways
 *        |                                                         |   (scrollback first)
 *        |  GET  /v1/portforward/{port}/tcp                        |   the launcher (in the pod's network
 *        |       Upgrade: kvt-portforward.v1  <===================>|   namespace) connects to the guest's port
 *        |                                                         |   first: 101, then the connection's bytes
 *        |                                                         |   both ways (half-close carried); else an
 *        |                                                         |   error answer saying why it could not
 * ```
 *
 * Errors are `{"error":{"code","message"}}` with a matching HTTP status (see {@link LauncherErrorCode}). Only the
 * current version is served; an unknown `/vN/` path answers 404 with code `NotFound`.
 *
 * Domain states (the launcher's view of its guest):
 * ```
 *  NoDomain --sync--> Running <--pause/unpause--> Paused
 *     |                 |  `--guest powers off / shutdown--> Shutdown   (VMI Succeeded)
 *     |                 `--crash / kill-------------------> Crashed    (VMI Failed)
 *     |                 `--migration out succeeded--------> Migrated   (source launcher exits)
 *     `--prepare-target--> IncomingMigration --completed--> Running    (on the target)
 * ```
 */

import type { MigrationOutcome, MigrationProgress, MigrationTarget, MigrationTlsIdentity } from "@kvt/migration/types";

/** The protocol version, also the path prefix. */
export const PROTOCOL_VERSION = "v1";

/** Request paths of version 1. */
export const PATHS = {
  info: "/v1/info",
  sync: "/v1/sync",
  pause: "/v1/pause",
  unpause: "/v1/unpause",
  softReboot: "/v1/softreboot",
  shutdown: "/v1/shutdown",
  kill: "/v1/kill",
  prepareTarget: "/v1/migration/prepare-target",
  sourceCertificate: "/v1/migration/source-certificate",
  migrate: "/v1/migration/start",
  cancelMigration: "/v1/migration/cancel",
  stats: "/v1/stats",
  events: "/v1/events",
  console: "/v1/console",
  /** Prefix of `/v1/portforward/{port}/{protocol}`. */
  portForward: "/v1/portforward",
} as const;

/**
 * Paths virt-handler polls on an interval (domain info, per-VMI stats): traced only inside a caller's trace, since a
 * root span per poll would flood the trace store and cost every launcher CPU on every metrics round.
 */
export const POLLED_PATHS: ReadonlySet<string> = new Set([PATHS.info, PATHS.stats]);

/** Header carrying the time left until the request's deadline, in milliseconds (like gRPC's `grpc-timeout`). */
export const TIMEOUT_HEADER = "x-kvt-timeout-ms";

/** The `Upgrade` token of the console stream. */
export const CONSOLE_PROTOCOL = "kvt-console.v1";

/** The `Upgrade` token of a port-forward stream. */
export const PORT_FORWARD_PROTOCOL = "kvt-portforward.v1";

/** Transport protocols a port-forward reaches the guest with (KubeVirt's portforward subresource's `tcp`, `udp`). */
export type PortForwardProtocol = "tcp";

/** Interval of `ping` events on the event stream, so a dead peer is noticed. */
export const EVENT_PING_INTERVAL_MS = 10_000;

/** A JSON object (the VMI travels as one; its schema belongs to @kvt/api). */
export type JsonObject = { [key: string]: unknown };

/** The launcher's view of its guest (see the state diagram above). */
export type DomainState = "NoDomain" | "IncomingMigration" | "Running" | "Paused" | "Shutdown" | "Crashed" | "Migrated";

/** Which side of a migration a launcher plays. */
export type MigrationRole = "source" | "target";

/** Progress samples travel as the engine reports them. */
export type { MigrationProgress };

/** How a migration ended: the engine's outcome, as every backend reports it. */
export type MigrationResult = MigrationOutcome;

/** What a launcher knows about the migration it takes part in. */
export interface MigrationInfo {
  readonly migrationUid: string;
  readonly role: MigrationRole;
  /** `Preparing`/`Ready` on a target before the source connects; `Running`; then `Succeeded` or `Failed`. */
  readonly phase: "Preparing" | "Ready" | "Running" | "Succeeded" | "Failed";
  /** ISO time the source started sending / the target became ready. */
  readonly startTime?: string;
  readonly endTime?: string;
  readonly progress?: MigrationProgress;
  readonly result?: MigrationResult;
  /** Target side, once Ready: where the source connects (the secret is only in prepare-target's answer). */
  readonly targetAddress?: { readonly host: string; readonly port: number };
}

/** Who a launcher is and what its guest is doing: the answer to `/v1/info` and `/v1/sync`. */
export interface DomainInfo {
  readonly protocolVersion: typeof PROTOCOL_VERSION;
  /** The VMI this launcher serves (from its start-up arguments). */
  readonly vmi: { readonly namespace: string; readonly name: string; readonly uid: string };
  /** The launcher's Pod, from the downward API, when known. */
  readonly pod: { readonly name?: string; readonly uid?: string };
  /** The launcher process id (the handler watches it to tell "exited" from "slow"). */
  readonly pid: number;
  readonly state: DomainState;
  /** Why the guest is in `state`, e.g. `GuestShutdown`, `Killed`, `vcpu exit: triple fault`. */
  readonly reason?: string;
  /** Which machine backend runs the guest, once it has one. */
  readonly backend?: "native" | "qemu";
  /** True when the guest is emulated (KubeVirt's SoftwareEmulation condition). */
  readonly emulated?: boolean;
  /** Why the backend was chosen, for the SoftwareEmulation condition message. */
  readonly backendReason?: string;
  /** ISO time the guest started running here. */
  readonly startedAt?: string;
  /** Why the guest cannot be live-migrated, when it cannot (KubeVirt's LiveMigratable=False reason). */
  readonly notMigratableReason?: string;
  readonly migration?: MigrationInfo;
  /** The guest's network interfaces as this launcher wired them (the VMI's status.interfaces). */
  readonly interfaces?: readonly DomainInterface[];
}

/** One wired guest interface, in the shape of a VMI's status.interfaces entry. */
export interface DomainInterface {
  /** The interface's name in the VMI spec. */
  readonly name: string;
  readonly mac: string;
  /** The address the interface is reached at (masquerade: the pod's IP), first of ipAddresses. */
  readonly ipAddress?: string;
  readonly ipAddresses?: readonly string[];
  /** The pod interface it is bound to (eth0). */
  readonly podInterfaceName?: string;
  /** Where the information comes from (KubeVirt's "domain"; "guest-agent" needs an agent). */
  readonly infoSource: string;
  readonly queueCount?: number;
}

/** `/v1/stats`: counters for the per-VMI metrics. */
export interface DomainStats {
  readonly state: DomainState;
  /** Seconds each vCPU spent running guest code, by vCPU index. */
  readonly vcpuSeconds: readonly number[];
  readonly memoryBytes: number;
  /** Guest memory actually backed on the host, when known. */
  readonly residentBytes?: number;
  /** Resident memory of the launcher process itself. */
  readonly launcherRssBytes: number;
}

/** `/v1/sync`: boot the guest if it is not running yet. `vmi` is required when the launcher was started without one. */
export interface SyncRequest {
  readonly vmi?: JsonObject;
}

/** `/v1/shutdown`: ask the guest to power off, kill it after the grace period. */
export interface ShutdownRequest {
  /** Seconds; 0 kills at once. The VMI's terminationGracePeriodSeconds (default 30). */
  readonly gracePeriodSeconds: number;
}

/** `/v1/migration/prepare-target`: listen for an incoming migration. */
export interface PrepareTargetRequest {
  readonly migrationUid: string;
  readonly vmi?: JsonObject;
  /** Listen for an unencrypted stream (KubeVirt's migrations.disableTLS): sent as is, or read from the VMI's
   *  status.migrationState.migrationConfiguration when the request is parsed. */
  readonly disableTLS?: boolean;
  /** This launcher's TLS identity for the migration (virt-handler mints it); required unless disableTLS. A
   *  repeated prepare keeps the first one and answers its certificate again. */
  readonly tls?: MigrationTlsIdentity;
}

/**
 * `/v1/migration/source-certificate`: the source launcher's certificate (PEM), which its handler sent this
 * launcher's handler in their exchange: the only one the target's TLS handshake accepts. Replaces an earlier one
 * until the source connects (then 409).
 */
export interface SourceCertificateRequest {
  readonly migrationUid: string;
  readonly certificate: string;
}

/** Where the source should send the guest (the answer to prepare-target): the engine's MigrationTarget. */
export type { MigrationTarget, MigrationTlsIdentity };

/**
 * Migration knobs in KubeVirt's units, normalised from `migrationState.migrationConfiguration` by the handler; the
 * launcher resolves them into the engine's MigrationOptions once, when the request arrives.
 */
export interface MigrateRequestOptions {
  /** Bytes per second; 0 = unlimited (KubeVirt bandwidthPerMigration). */
  readonly bandwidthBytesPerSec: number;
  /** Switch-over downtime budget (KubeVirt default 900 here as there). */
  readonly maxDowntimeMs: number;
  readonly allowAutoConverge: boolean;
  readonly allowPostCopy: boolean;
  /** KubeVirt completionTimeoutPerGiB (default 150 s). */
  readonly completionTimeoutPerGiB: number;
  /** KubeVirt progressTimeout (default 150 s): abort when remaining bytes do not decrease for this long. */
  readonly progressTimeoutSeconds: number;
  /** KubeVirt migrations.disableTLS: the stream goes unencrypted (the target reads the same setting from the VMI's
   *  migrationState). Absent = false: encrypted. */
  readonly disableTLS?: boolean;
}

/** KubeVirt's defaults (virt-config.go): unlimited bandwidth, 900 ms downtime, 150 s per GiB, 150 s progress. */
export const KUBEVIRT_MIGRATION_DEFAULTS: MigrateRequestOptions = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 900,
  allowAutoConverge: false,
  allowPostCopy: false,
  completionTimeoutPerGiB: 150,
  progressTimeoutSeconds: 150,
};

/** `/v1/migration/start`: live-migrate to a prepared target. Answers 202; the outcome arrives as an event. */
export interface MigrateRequest {
  readonly migrationUid: string;
  /** With TLS, `target.certificate` is the target launcher's certificate: the only one the source accepts. */
  readonly target: MigrationTarget;
  readonly options: MigrateRequestOptions;
  /** This launcher's TLS identity for the migration (virt-handler mints it); required unless options.disableTLS. */
  readonly tls?: MigrationTlsIdentity;
}

/** `/v1/migration/cancel`. */
export interface CancelMigrationRequest {
  readonly migrationUid: string;
}

/** What changed, on a `domain` event. */
export type DomainTransition =
  | "snapshot"
  | "started"
  | "paused"
  | "resumed"
  | "shutdown"
  | "crashed"
  | "migrated"
  | "incoming-ready"
  | "incoming-completed"
  | "rebooted";

/** An event on the `/v1/events` stream, without its envelope. */
export type LauncherEventBody =
  | { readonly type: "domain"; readonly transition: DomainTransition; readonly info: DomainInfo }
  | { readonly type: "migration-progress"; readonly migrationUid: string; readonly progress: MigrationProgress }
  | { readonly type: "migration-result"; readonly migrationUid: string; readonly result: MigrationResult }
  | { readonly type: "ping" };

/** An event on the `/v1/events` stream: a body plus a per-connection sequence number and the ISO time. */
export type LauncherEvent = LauncherEventBody & { readonly seq: number; readonly time: string };

/** Error codes and the HTTP status each travels with. */
export const ERROR_STATUS = {
  BadRequest: 400,
  NotFound: 404,
  Conflict: 409,
  PayloadTooLarge: 413,
  Internal: 500,
  Unavailable: 503,
  DeadlineExceeded: 504,
} as const;

/** Why a launcher request failed. */
export type LauncherErrorCode = keyof typeof ERROR_STATUS;

/** The JSON body of an error response. */
export interface ErrorBody {
  readonly error: { readonly code: LauncherErrorCode; readonly message: string };
}
