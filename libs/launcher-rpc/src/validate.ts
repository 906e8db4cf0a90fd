/**
 * Validation of request bodies on the server: anything a peer sends is checked before a service sees it, and bad
 * input becomes a `BadRequest` naming the field.
 */
import { LauncherRpcError } from "./errors.ts";
import type {
  CancelMigrationRequest,
  JsonObject,
  MigrateRequest,
  MigrateRequestOptions,
  MigrationTarget,
  MigrationTlsIdentity,
  PrepareTargetRequest,
  ShutdownRequest,
  SourceCertificateRequest,
  SyncRequest,
} from "./protocol.ts";

function bad(message: string): LauncherRpcError {
  return new LauncherRpcError("BadRequest", message);
}

/** True for a plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function object(value: unknown, what: string): JsonObject {
  if (!isObject(value)) throw bad(`${what} must be a JSON object`);
  return value;
}

function str(o: JsonObject, key: string, what: string): string {
  const v = o[key];
  if (typeof v !== "string" || v.length === 0 || v.length > 4096)
    throw bad(`${what}.${key} must be a non-empty string`);
  return v;
}

function num(o: JsonObject, key: string, what: string, min: number, max: number): number {
  const v = o[key];
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) {
    throw bad(`${what}.${key} must be a number in [${min}, ${max}]`);
  }
  return v;
}

function bool(o: JsonObject, key: string, what: string): boolean {
  const v = o[key];
  if (typeof v !== "boolean") throw bad(`${what}.${key} must be a boolean`);
  return v;
}

/** A PEM block of `label` (`CERTIFICATE`, `PRIVATE KEY`): what OpenSSL then parses in full. */
function pem(o: JsonObject, key: string, what: string, label: string): string {
  const v = o[key];
  const begin = `-----BEGIN ${label}-----`;
  if (
    typeof v !== "string" ||
    v.length > 16_384 ||
    !v.trimStart().startsWith(begin) ||
    !v.includes(`-----END ${label}-----`)
  )
    throw bad(`${what}.${key} must be a PEM ${label.toLowerCase()} (${begin} ...)`);
  return v;
}

function identity(value: unknown, what: string): MigrationTlsIdentity {
  const o = object(value, what);
  return { certificate: pem(o, "certificate", what, "CERTIFICATE"), key: pem(o, "key", what, "PRIVATE KEY") };
}

/** Why TLS material is required: the stream runs over TLS unless KubeVirt's migrations.disableTLS is set. */
const TLS_REQUIRED = "is required unless KubeVirt's migrations.disableTLS is set (the migration runs over TLS)";

function optionalVmi(o: JsonObject, what: string): JsonObject | undefined {
  if (o.vmi === undefined) return undefined;
  return object(o.vmi, `${what}.vmi`);
}

/** Parses a `/v1/sync` body. */
export function parseSync(body: unknown): SyncRequest {
  const o = object(body ?? {}, "sync request");
  const vmi = optionalVmi(o, "sync request");
  return vmi ? { vmi } : {};
}

/** Parses a `/v1/shutdown` body. */
export function parseShutdown(body: unknown): ShutdownRequest {
  const o = object(body, "shutdown request");
  return { gracePeriodSeconds: num(o, "gracePeriodSeconds", "shutdown request", 0, 86_400 * 365) };
}

/** Parses a `/v1/migration/prepare-target` body. */
export function parsePrepareTarget(body: unknown): PrepareTargetRequest {
  const o = object(body, "prepare-target request");
  const vmi = optionalVmi(o, "prepare-target request");
  const migrationUid = str(o, "migrationUid", "prepare-target request");
  const explicit = o.disableTLS === undefined ? false : bool(o, "disableTLS", "prepare-target request");
  if (explicit || disableTLSOf(vmi)) return { migrationUid, ...(vmi ? { vmi } : {}), disableTLS: true };
  if (o.tls === undefined) throw bad(`prepare-target request.tls ${TLS_REQUIRED}`);
  return { migrationUid, ...(vmi ? { vmi } : {}), tls: identity(o.tls, "prepare-target request.tls") };
}

/** Parses a `/v1/migration/source-certificate` body. */
export function parseSourceCertificate(body: unknown): SourceCertificateRequest {
  const o = object(body, "source-certificate request");
  return {
    migrationUid: str(o, "migrationUid", "source-certificate request"),
    certificate: pem(o, "certificate", "source-certificate request", "CERTIFICATE"),
  };
}

function parseTarget(value: unknown): MigrationTarget {
  const o = object(value, "migrate request.target");
  return {
    host: str(o, "host", "target"),
    port: num(o, "port", "target", 1, 65_535),
    secret: str(o, "secret", "target"),
    ...(o.certificate === undefined ? {} : { certificate: pem(o, "certificate", "target", "CERTIFICATE") }),
  };
}

function parseOptions(value: unknown): MigrateRequestOptions {
  const o = object(value, "migrate request.options");
  const w = "options";
  return {
    bandwidthBytesPerSec: num(o, "bandwidthBytesPerSec", w, 0, Number.MAX_SAFE_INTEGER),
    maxDowntimeMs: num(o, "maxDowntimeMs", w, 1, 2_000_000),
    allowAutoConverge: bool(o, "allowAutoConverge", w),
    allowPostCopy: bool(o, "allowPostCopy", w),
    completionTimeoutPerGiB: num(o, "completionTimeoutPerGiB", w, 0, Number.MAX_SAFE_INTEGER),
    progressTimeoutSeconds: num(o, "progressTimeoutSeconds", w, 0, Number.MAX_SAFE_INTEGER),
    ...(o.disableTLS === undefined ? {} : { disableTLS: bool(o, "disableTLS", w) }),
  };
}

/** KubeVirt's migrations.disableTLS as the VMI's migrationState records it (a prepare-target request's VMI). */
function disableTLSOf(vmi: JsonObject | undefined): boolean {
  if (!vmi) return false;
  const status = isObject(vmi?.status) ? vmi.status : undefined;
  const state = isObject(status?.migrationState) ? status.migrationState : undefined;
  const cfg = isObject(state?.migrationConfiguration) ? state.migrationConfiguration : undefined;
  return cfg?.disableTLS === true;
}

/** Parses a `/v1/migration/start` body. */
export function parseMigrate(body: unknown): MigrateRequest {
  const o = object(body, "migrate request");
  const target = parseTarget(o.target);
  const options = parseOptions(o.options);
  const base = { migrationUid: str(o, "migrationUid", "migrate request"), target, options };
  if (options.disableTLS === true) return base;
  if (o.tls === undefined) throw bad(`migrate request.tls ${TLS_REQUIRED}`);
  if (target.certificate === undefined) throw bad(`migrate request.target.certificate ${TLS_REQUIRED}`);
  return { ...base, tls: identity(o.tls, "migrate request.tls") };
}

/** Parses a `/v1/migration/cancel` body. */
export function parseCancelMigration(body: unknown): CancelMigrationRequest {
  const o = object(body, "cancel-migration request");
  return { migrationUid: str(o, "migrationUid", "cancel-migration request") };
}
