/**
 * A launcher's spans of a live migration, built from what the domain manager already sees (the migrate call, the
 * machine's progress events, the result, the target's completion), so the backends need no tracing code:
 *
 *   source:  migrate VirtualMachineInstance                      (the whole outgoing migration, in the migrate RPC's trace)
 *              ├─ handshake                                     migrate call -> first progress event
 *              ├─ send memory bulk pass                         iteration 1: every page once
 *              ├─ send memory iteration                         each pre-copy iteration (bytes, dirty rate, remaining)
 *              └─ switch over                                   guest paused on the source: migration.downtime_ms
 *   target:  receive VirtualMachineInstance                     (prepare-target -> incoming completed, in its RPC's trace)
 *              └─ resume VirtualMachineInstance                 the guest runs on the target
 *
 * Span names are fixed; identities and figures are attributes (`kubevirt.migration.uid`, `migration.iteration`).
 */
import type { MigrationProgress, MigrationResult } from "@kvt/launcher-rpc";
import { type Context, context, type Span, SpanStatusCode, trace } from "@opentelemetry/api";

const tracer = trace.getTracer("virt-launcher");

/** The spans of one outgoing migration. */
export class SourceMigrationTrace {
  readonly #root: Span;
  readonly #ctx: Context;
  #step: Span | undefined;
  #iteration = -1;
  #iterationStart = 0;
  #processed = 0;

  /** Starts the migration span under the active context (the migrate RPC's) and its handshake step. */
  constructor(migrationUid: string, target: string) {
    this.#root = tracer.startSpan("migrate VirtualMachineInstance", {
      attributes: { "kubevirt.migration.uid": migrationUid, "migration.role": "source", "migration.target": target },
    });
    this.#ctx = trace.setSpan(context.active(), this.#root);
    this.#step = tracer.startSpan("handshake", {}, this.#ctx);
  }

  /** A progress event: a new iteration ends the previous step and starts the next one. */
  progress(p: MigrationProgress): void {
    if (p.iteration !== this.#iteration) {
      this.#step?.end();
      this.#iteration = p.iteration;
      this.#iterationStart = this.#processed;
      const name = p.iteration <= 1 ? "send memory bulk pass" : "send memory iteration";
      this.#step = tracer.startSpan(name, {}, this.#ctx);
    }
    this.#processed = p.processedBytes;
    this.#step?.setAttributes(figures(p, p.processedBytes - this.#iterationStart));
  }

  /** The result: the switch-over span (its measured downtime ends now) and the end of the migration span. */
  end(result: MigrationResult): void {
    const now = Date.now();
    this.#step?.end(result.downtimeMs === undefined ? now : now - result.downtimeMs);
    this.#step = undefined;
    if (result.ok && result.downtimeMs !== undefined) {
      const switchOver = tracer.startSpan(
        "switch over",
        { startTime: now - result.downtimeMs, attributes: { "migration.downtime_ms": result.downtimeMs } },
        this.#ctx,
      );
      switchOver.end(now);
    }
    this.#root.setAttributes({
      "migration.result": result.ok ? "succeeded" : "failed",
      "migration.bytes_sent": result.bytesSent,
      "migration.iterations": result.iterations,
      ...(result.downtimeMs === undefined ? {} : { "migration.downtime_ms": result.downtimeMs }),
    });
    if (!result.ok) this.#root.setStatus({ code: SpanStatusCode.ERROR, message: result.failureReason ?? "failed" });
    this.#root.end(now);
  }
}

/** The spans of one incoming migration. */
export class TargetMigrationTrace {
  readonly #root: Span;
  #ended = false;

  /** Starts the receive span under the active context (the prepare-target RPC's). */
  constructor(migrationUid: string) {
    this.#root = tracer.startSpan("receive VirtualMachineInstance", {
      attributes: { "kubevirt.migration.uid": migrationUid, "migration.role": "target" },
    });
  }

  /** The guest runs here now: a resume span, then the receive span ends. */
  completed(): void {
    if (this.#ended) return;
    this.#ended = true;
    tracer.startSpan("resume VirtualMachineInstance", {}, trace.setSpan(context.active(), this.#root)).end();
    this.#root.end();
  }

  /** The incoming migration was abandoned (the launcher stops without the guest). */
  failed(reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#root.setStatus({ code: SpanStatusCode.ERROR, message: reason });
    this.#root.end();
  }
}

function figures(p: MigrationProgress, bytes: number): Record<string, number> {
  return {
    "migration.iteration": p.iteration,
    "migration.bytes": bytes,
    "migration.processed_bytes": p.processedBytes,
    "migration.remaining_bytes": p.remainingBytes,
    "migration.dirty_rate_bytes_per_sec": p.dirtyRateBytesPerSec,
    "migration.transfer_rate_bytes_per_sec": p.transferRateBytesPerSec,
    "migration.throttle": p.throttle,
  };
}
