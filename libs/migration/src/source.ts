/**
 * The source side of a live migration: drives MigrationSourceStream round by round under the ConvergencePolicy.
 *
 *   connect+auth -> bulk -> [collect -> decide -> (throttle) -> send pending]* -> switch-over -> release
 *        \___________\___________\________________________________________\__ error/cancel/timeout:
 *                                                  throttle off, dirty log off, the guest runs on here
 *
 * Progress is reported after every collection; the result carries the measured downtime and totals.
 */

import { type MigrationDowntimePhases, MigrationSourceStream, type MigrationTlsInfo, type Vm } from "@kvt/vmm";
import type { Logger } from "pino";
import { ConvergencePolicy } from "./policy.ts";
import type {
  MigrationOptions,
  MigrationOutcome,
  MigrationProgress,
  MigrationTarget,
  MigrationTlsIdentity,
} from "./types.ts";

/**
 * How a migration ended (source side): the launcher protocol's result (failureReason e.g. "canceled", "completion
 * timeout (..)", "target abandoned: ..", "connect: ECONNREFUSED"; downtimeMs = guest paused on the source until running
 * on the target; bytesSent = wire bytes, frame headers included; iterations = the bulk pass, every dirty round and the
 * final round) plus the engine's detail.
 */
export interface MigrationResult extends MigrationOutcome {
  /** Where that downtime went (pause, final dirty log, final pages, state save, target resume). */
  readonly downtimePhases?: MigrationDowntimePhases;
  /** Whether the policy reached the downtime budget (false when it gave up). */
  readonly converged: boolean;
  readonly dataPages: number;
  readonly zeroPages: number;
  /** Bytes of copied disks (`migrate: "copy"`) sent with data (part of bytesSent; pending disk blocks count in the
   *  convergence policy's remaining bytes like dirty pages). */
  readonly diskBytes: number;
  /** Bytes of copied disks sent as zero-range markers. */
  readonly diskZeroBytes: number;
  /** SHA-256 of all guest RAM at switch-over, when `digest` was asked for (tests). */
  readonly memoryDigest?: string;
  /** What the TLS handshake settled (cipher, who carried the records); absent for a plain stream. */
  readonly tls?: MigrationTlsInfo;
}

/** Options of one outgoing migration. */
export interface OutgoingOptions extends MigrationOptions {
  /** Bound on each blocking network step (ms). Default 10 s. */
  readonly ioTimeoutMs?: number;
  /** Stop the source guest once the target confirmed (default true). */
  readonly release?: boolean;
  /** Add a full-memory SHA-256 at switch-over (slow; tests). */
  readonly digest?: boolean;
  readonly onProgress?: (p: MigrationProgress) => void;
  /** Awaited after the policy decided to switch over, before the guest pauses (orchestration and tests). */
  readonly beforeSwitchOver?: () => Promise<void>;
  readonly logger?: Logger;
}

/** The source's TLS from its identity and the target's certificate; both or neither (migrations.disableTLS). */
function pinned(
  tls: MigrationTlsIdentity | false,
  dest: MigrationTarget,
): { certificate: string; key: string; peerCertificate: string } | false {
  if (tls === false) {
    if (dest.certificate)
      throw new Error(
        "the target listens for TLS and this source has migrations.disableTLS set: KubeVirt's migrations.disableTLS must be the same at both ends",
      );
    return false;
  }
  if (!dest.certificate)
    throw new Error(
      "the target gave no certificate: it expects an unencrypted stream (migrations.disableTLS) and this source TLS; KubeVirt's migrations.disableTLS must be the same at both ends",
    );
  return { ...tls, peerCertificate: dest.certificate };
}

/** One outgoing migration. Create, then `run()` once; `cancel()` at any time. */
export class OutgoingMigration {
  readonly #vm: Vm;
  readonly #dest: MigrationTarget;
  readonly #o: OutgoingOptions;
  #stream?: MigrationSourceStream;
  #cancelReason?: string;
  #timer?: ReturnType<typeof setTimeout>;

  constructor(vm: Vm, destination: MigrationTarget, options: OutgoingOptions) {
    this.#vm = vm;
    this.#dest = destination;
    this.#o = options;
  }

  /** Aborts the migration; `run()` then resolves with failureReason `reason` and the guest runs on here. */
  cancel(reason = "canceled"): void {
    this.#cancelReason ??= reason;
    this.#stream?.cancel();
  }

  /** Runs the migration to its end. Never rejects: failures are in the result. */
  async run(): Promise<MigrationResult> {
    const t0 = performance.now();
    const policy = new ConvergencePolicy(this.#o);
    const cap = this.#o.bandwidthBytesPerSec;
    const log = this.#o.logger;
    let iterations = 0;
    let sent = 0;
    let converged = false;
    if (this.#o.completionTimeoutSec > 0) {
      // The policy checks between rounds; this catches a single round that overruns.
      this.#timer = setTimeout(
        () => this.cancel(`completion timeout (${this.#o.completionTimeoutSec} s)`),
        this.#o.completionTimeoutSec * 1000,
      );
    }
    const result = (ok: boolean, extra: Partial<MigrationResult>): MigrationResult => {
      const totals = this.#stream?.totals();
      return {
        ok,
        totalSeconds: (performance.now() - t0) / 1000,
        bytesSent: totals?.bytesSent ?? 0,
        iterations,
        converged,
        dataPages: totals?.dataPages ?? 0,
        zeroPages: totals?.zeroPages ?? 0,
        diskBytes: totals?.diskBytes ?? 0,
        diskZeroBytes: totals?.diskZeroBytes ?? 0,
        ...(totals?.tls ? { tls: totals.tls } : {}),
        ...extra,
      };
    };
    try {
      this.#stream = await MigrationSourceStream.connect(this.#vm, {
        host: this.#dest.host,
        port: this.#dest.port,
        secret: this.#dest.secret,
        ioTimeoutMs: this.#o.ioTimeoutMs,
        tls: pinned(this.#o.tls, this.#dest),
      });
      if (this.#cancelReason) this.#stream.cancel();
      const bulk = await this.#stream.bulk(cap);
      iterations = 1;
      sent += bulk.bytesSent;
      policy.observeTransfer(bulk.bytesSent, bulk.seconds);
      for (;;) {
        const c = await this.#stream.collect();
        const d = policy.decide({
          elapsedMs: performance.now() - t0,
          pendingBytes: c.pendingBytes,
          newDirtyBytes: c.newDirtyBytes,
          intervalSec: c.secondsSinceLast,
        });
        this.#o.onProgress?.({
          iteration: iterations,
          processedBytes: sent,
          remainingBytes: c.pendingBytes,
          dirtyRateBytesPerSec: policy.dirtyRateBytesPerSec,
          transferRateBytesPerSec: policy.bandwidthBytesPerSec,
          expectedDowntimeMs: d.kind === "fail" ? Number.POSITIVE_INFINITY : d.expectedDowntimeMs,
          throttle: policy.throttlePercent / 100,
        });
        if (d.kind === "fail") {
          log?.warn({ reason: d.reason, iterations }, "migration gave up");
          return result(false, { failureReason: d.reason });
        }
        if (d.kind === "switch-over") {
          converged = true;
          await this.#o.beforeSwitchOver?.();
          const sw = await this.#stream.switchOver(cap, this.#o.digest ?? false);
          iterations++;
          log?.info({ downtimeMs: sw.downtimeMs, phases: sw.downtimePhases, iterations }, "migration completed");
          this.#stream.close(); // before the release: the stream uses the machine
          if (this.#o.release ?? true) this.#vm.stop();
          return result(true, {
            downtimeMs: sw.downtimeMs,
            downtimePhases: sw.downtimePhases,
            memoryDigest: sw.memoryDigest,
          });
        }
        if (d.throttlePercent !== policy.throttlePercent || d.throttlePercent > 0) {
          this.#vm.setCpuThrottle(d.throttlePercent);
        }
        const r = await this.#stream.sendPending(cap);
        iterations++;
        sent += r.bytesSent;
        policy.observeTransfer(r.bytesSent, r.seconds);
      }
    } catch (e) {
      const reason = this.#cancelReason ?? (e instanceof Error ? e.message : String(e));
      log?.warn({ reason, iterations }, "migration failed; the guest runs on here");
      return result(false, { failureReason: reason });
    } finally {
      clearTimeout(this.#timer);
      if (this.#vm.state !== "stopped") {
        if (policy.throttlePercent > 0) this.#vm.setCpuThrottle(0);
      }
      this.#stream?.close();
    }
  }
}
