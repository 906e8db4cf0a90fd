/**
 * Source side of a QEMU live migration: authenticate to the target relay, give QEMU a local unix socket joined to
 * that channel, start `migrate`, then follow `query-migrate` until it completes, fails or is canceled.
 *
 *   connectOutgoing (HMAC) --ok--> listenForQemu(unix) --> migrate-set-capabilities/parameters --> migrate
 *   (capability `block` when the guest has local writable disks: their blocks go first, in the same stream)
 *        |                                                   poll query-migrate every 200 ms:
 *        `--refused--> result {ok:false}                       active    -> progress event; timeouts -> migrate_cancel
 *                                                              completed -> result {ok, downtime, total}
 *                                                              failed / cancelled -> result {ok:false, reason}
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "@kvt/observability";
import type { MigrationOptions, MigrationProgress, MigrationResult, MigrationTarget } from "../machine.ts";
import { connectOutgoing, listenForQemu, type RelayTls } from "./migration-relay.ts";
import type { QmpClient } from "./qmp.ts";

/** What `query-migrate` returns (the fields we use). */
interface MigrateInfo {
  status?: string;
  "total-time"?: number;
  downtime?: number;
  "expected-downtime"?: number;
  "cpu-throttle-percentage"?: number;
  "error-desc"?: string;
  ram?: {
    transferred?: number;
    remaining?: number;
    "dirty-sync-count"?: number;
    "dirty-pages-rate"?: number;
    "page-size"?: number;
    mbps?: number;
  };
}

/** The hooks a migration needs from its machine. */
export interface MigrationContext {
  readonly qmp: QmpClient;
  readonly workDir: string;
  readonly log: Logger;
  readonly progress: (p: MigrationProgress) => void;
  /** Set by cancelMigration(): why the migration is being canceled. */
  readonly cancelReason: () => string | undefined;
  /**
   * Copy the guest's writable disks in the migration stream (QEMU's block migration, capability `block`): the
   * target's disks are fresh files of the same size. QEMU copies every writable disk, so the caller sets it only
   * when no writable disk is on shared storage (disks.ts localDisksBlocker refuses that mix).
   */
  readonly copyLocalDisks?: boolean;
}

const POLL_MS = 200;

/** Maps a `query-migrate` answer to a progress sample. */
export function progressOf(info: MigrateInfo): MigrationProgress {
  const ram = info.ram ?? {};
  return {
    iteration: ram["dirty-sync-count"] ?? 0,
    processedBytes: ram.transferred ?? 0,
    remainingBytes: ram.remaining ?? 0,
    dirtyRateBytesPerSec: (ram["dirty-pages-rate"] ?? 0) * (ram["page-size"] ?? 4096),
    transferRateBytesPerSec: Math.round(((ram.mbps ?? 0) * 1e6) / 8),
    expectedDowntimeMs: info["expected-downtime"] ?? 0,
    throttle: (info["cpu-throttle-percentage"] ?? 0) / 100,
  };
}

function failed(start: number, reason: string, info?: MigrateInfo): MigrationResult {
  return {
    ok: false,
    failureReason: reason,
    totalSeconds: (Date.now() - start) / 1000,
    bytesSent: info?.ram?.transferred ?? 0,
    iterations: info?.ram?.["dirty-sync-count"] ?? 0,
  };
}

/** The relay's TLS: this side's identity and the target's certificate, or false (migrations.disableTLS). */
function relayTls(target: MigrationTarget, options: MigrationOptions): RelayTls | false {
  if (options.tls === false) {
    if (target.certificate) throw new Error("the target listens for TLS and this source has migrations.disableTLS set");
    return false;
  }
  if (!target.certificate)
    throw new Error("the target gave no certificate: it expects an unencrypted stream (migrations.disableTLS)");
  return { ...options.tls, peerCertificate: target.certificate };
}

/** Runs one outgoing migration to `target`. Never throws for migration failures: they are in the result. */
export async function migrateOut(
  ctx: MigrationContext,
  target: MigrationTarget,
  options: MigrationOptions,
): Promise<MigrationResult> {
  const start = Date.now();
  let peer: Awaited<ReturnType<typeof connectOutgoing>>;
  try {
    peer = await connectOutgoing(target.host, target.port, target.secret, relayTls(target, options));
  } catch (err) {
    return failed(start, `migration target refused or unreachable: ${(err as Error).message}`);
  }
  const path = join(ctx.workDir, "migrate-out.sock");
  rmSync(path, { force: true });
  const server = await listenForQemu(path, peer);
  let info: MigrateInfo | undefined;
  let completed = false;
  try {
    const { qmp } = ctx;
    await qmp.execute("migrate-set-capabilities", {
      capabilities: [
        { capability: "auto-converge", state: options.allowAutoConverge },
        { capability: "events", state: true },
        { capability: "block", state: ctx.copyLocalDisks === true },
      ],
    });
    await qmp.execute("migrate-set-parameters", {
      "max-bandwidth": options.bandwidthBytesPerSec > 0 ? options.bandwidthBytesPerSec : 10 * 1024 ** 3,
      "downtime-limit": Math.max(1, Math.round(options.maxDowntimeMs)),
    });
    await qmp.execute("migrate", { uri: `unix:${path}` });
    let bestRemaining = Number.POSITIVE_INFINITY;
    let lastProgressAt = Date.now();
    let canceling: string | undefined;
    for (;;) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      info = await qmp.execute<MigrateInfo>("query-migrate");
      const status = info.status ?? "none";
      if (status === "completed") {
        completed = true;
        return {
          ok: true,
          downtimeMs: info.downtime ?? 0,
          totalSeconds: (info["total-time"] ?? Date.now() - start) / 1000,
          bytesSent: info.ram?.transferred ?? 0,
          iterations: info.ram?.["dirty-sync-count"] ?? 0,
        };
      }
      if (status === "failed")
        return failed(start, canceling ?? `QEMU migration failed: ${info["error-desc"] ?? "unknown error"}`, info);
      if (status === "cancelled") return failed(start, canceling ?? ctx.cancelReason() ?? "canceled", info);
      if (status === "none") return failed(start, "QEMU reports no migration in progress", info);
      const p = progressOf(info);
      ctx.progress(p);
      if (p.remainingBytes < bestRemaining) {
        bestRemaining = p.remainingBytes;
        lastProgressAt = Date.now();
      }
      if (canceling === undefined) {
        canceling = ctx.cancelReason();
        if (canceling === undefined && Date.now() - start > options.completionTimeoutSec * 1000)
          canceling = "completion timeout";
        if (canceling === undefined && Date.now() - lastProgressAt > options.progressTimeoutSec * 1000)
          canceling = "progress timeout";
        if (canceling !== undefined) {
          ctx.log.warn({ reason: canceling }, "canceling QEMU migration");
          await qmp.execute("migrate_cancel");
        }
      }
    }
  } catch (err) {
    return failed(start, `migration control failed: ${(err as Error).message}`, info);
  } finally {
    // After completion the relay drains the rest of the stream and ends by itself; otherwise drop the channel.
    if (!completed) peer.destroy();
    server.close();
    rmSync(path, { force: true });
  }
}
