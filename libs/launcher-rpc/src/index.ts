/** @kvt/launcher-rpc: the virt-handler <-> virt-launcher protocol (HTTP/1.1 + JSON over a unix socket per VMI). */

/** The handler side: commands, the event stream and the console. */
export { type CallOptions, LauncherClient, type LauncherClientOptions } from "./client.ts";
/** The typed error every failure becomes. */
export { isLauncherErrorCode, LauncherRpcError } from "./errors.ts";
/** Wire types, paths, header names and the protocol version (diagram in protocol.ts). */
export {
  type CancelMigrationRequest,
  CONSOLE_PROTOCOL,
  type DomainInfo,
  type DomainInterface,
  type DomainState,
  type DomainStats,
  type DomainTransition,
  ERROR_STATUS,
  type ErrorBody,
  EVENT_PING_INTERVAL_MS,
  type JsonObject,
  KUBEVIRT_MIGRATION_DEFAULTS,
  type LauncherErrorCode,
  type LauncherEvent,
  type LauncherEventBody,
  type MigrateRequest,
  type MigrateRequestOptions,
  type MigrationInfo,
  type MigrationProgress,
  type MigrationResult,
  type MigrationRole,
  type MigrationTarget,
  type MigrationTlsIdentity,
  PATHS,
  PORT_FORWARD_PROTOCOL,
  type PortForwardProtocol,
  PROTOCOL_VERSION,
  type PrepareTargetRequest,
  type ShutdownRequest,
  type SourceCertificateRequest,
  type SyncRequest,
  TIMEOUT_HEADER,
} from "./protocol.ts";
/** The launcher side: routes commands to a service, publishes events, serves the console and port-forwards. */
export {
  type ConsoleEndpoint,
  LauncherServer,
  type LauncherServerOptions,
  type LauncherService,
  type PortForwardEndpoint,
} from "./server.ts";
/** Where launchers put their sockets, so a handler finds them (and re-finds them after a restart). */
export {
  isLauncherSocketName,
  isPodUid,
  LAUNCHER_SOCKET_NAME,
  launcherSocketPath,
  podSocketDir,
  podSocketPath,
} from "./socket-path.ts";
