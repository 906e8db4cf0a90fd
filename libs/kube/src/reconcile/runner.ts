/**
 * The runner owns everything cross-cutting about a controller: workers pulling keys from the workqueue, retries
 * (per-key exponential backoff and an overall rate limit), `reconcileId` in the log context, one span per reconcile
 * named `reconcile <Kind>`, and the metrics `<prefix>_reconcile_total{controller,result}` and
 * `<prefix>_reconcile_time_seconds{controller}`. "The retry logic should not be part of the business logic."
 *
 * ```
 *  queue.get() ─> span + logger ─> reconcile(key)
 *       ^                             ├─ Result{}               -> forget(key)                 result=success
 *       │                             ├─ Result{requeueAfterMs} -> forget(key), addAfter(key)  result=requeue
 *       │                             ├─ TerminalError / SyncError{requeue:false} -> forget    result=terminal
 *       └──── queue.done(key) <───────└─ other throw            -> addRateLimited(key)         result=error
 * ```
 * Tracing costs nothing when it is off: with no tracer provider registered (no SDK) and no trace context on the
 * object, the reconcile runs without a span (the context gets a shared non-recording one) and outside
 * `context.with`. With an SDK, every reconcile gets a real span; with an object's trace context but no SDK, a
 * non-recording span still carries that context so writes made by the reconcile propagate it.
 * The per-reconcile child logger is built only when the reconcile logs through it (pino serializes the bindings of
 * a child at creation, even when the level discards every line).
 */
import { randomUUID } from "node:crypto";
import { type ObjectKey, splitKey } from "@kvt/api";
import {
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  ProxyTracer,
  type Span,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { Logger } from "pino";
import { Counter, Histogram, type Registry } from "prom-client";
import { SyncError, TerminalError } from "../errors.ts";
import type { WorkQueue } from "../workqueue/workqueue.ts";
import type { Reconciler } from "./result.ts";

/** Options for {@link Runner}. */
export interface RunnerOptions {
  /** Controller name: the `controller` metric label and log field (e.g. `vm`). */
  readonly controller: string;
  /** Kind reconciled, for the span name (`reconcile VirtualMachine`). */
  readonly kind: string;
  readonly queue: WorkQueue<ObjectKey>;
  readonly reconciler: Reconciler;
  readonly logger: Logger;
  /** Concurrent workers; default 3. A key is never processed by two at once. */
  readonly workers?: number;
  readonly registry?: Registry;
  /** Metric name prefix; default `kubevirt`. */
  readonly metricPrefix?: string;
  /** Default: the global tracer provider's `@kvt/kube`. */
  readonly tracer?: Tracer;
  /**
   * The parent context of `key`'s reconcile span, e.g. from the object's `kubevirt.io/traceparent` annotation, so
   * the reconcile joins the trace of the request that created the object. Undefined: a root span.
   */
  readonly parentOf?: (key: ObjectKey) => Context | undefined;
}

interface RunnerMetrics {
  total: Counter<"controller" | "result">;
  time: Histogram<"controller">;
}
const metricsByRegistry = new WeakMap<Registry, Map<string, RunnerMetrics>>();

function runnerMetrics(registry: Registry, prefix: string): RunnerMetrics {
  let byPrefix = metricsByRegistry.get(registry);
  if (!byPrefix) {
    byPrefix = new Map();
    metricsByRegistry.set(registry, byPrefix);
  }
  let m = byPrefix.get(prefix);
  if (!m) {
    m = {
      total: new Counter({
        name: `${prefix}_reconcile_total`,
        help: "Total number of reconciles, by controller and result (success, requeue, error, terminal).",
        labelNames: ["controller", "result"],
        registers: [registry],
      }),
      time: new Histogram({
        name: `${prefix}_reconcile_time_seconds`,
        help: "Time one reconcile takes, in seconds.",
        labelNames: ["controller"],
        buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
        registers: [registry],
      }),
    };
    byPrefix.set(prefix, m);
  }
  return m;
}

/** The span a reconcile gets when nothing is traced: records nothing, carries no context. */
const NON_RECORDING_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * True when spans from `tracer` may be recorded: a tracer handed in by the app (an SDK tracer) always; the API's
 * ProxyTracer (what `trace.getTracer()` returns before any SDK is registered) only once a provider is registered,
 * which `trace.getTracer()` then shows by returning the SDK's own tracer instead of a ProxyTracer.
 */
function mayRecord(tracer: Tracer): boolean {
  return !(tracer instanceof ProxyTracer) || !(trace.getTracer("@kvt/kube") instanceof ProxyTracer);
}

/** Drives one controller's workqueue. */
export class Runner {
  readonly #o: RunnerOptions;
  readonly #metrics: RunnerMetrics | undefined;
  readonly #tracer: Tracer;
  /** Set once spans may be recorded (a provider, once registered, stays). */
  #tracing = false;
  #workers: Promise<void>[] = [];

  constructor(options: RunnerOptions) {
    this.#o = options;
    this.#metrics = options.registry ? runnerMetrics(options.registry, options.metricPrefix ?? "kubevirt") : undefined;
    this.#tracer = options.tracer ?? trace.getTracer("@kvt/kube");
  }

  /** Starts the workers; they stop when the queue shuts down. Resolves when all have stopped. */
  run(): Promise<void> {
    const n = this.#o.workers ?? 3;
    this.#workers = Array.from({ length: n }, () => this.#work());
    return Promise.all(this.#workers).then(() => undefined);
  }

  async #work(): Promise<void> {
    for (;;) {
      const key = await this.#o.queue.get();
      if (key === undefined) return;
      try {
        await this.processKey(key);
      } finally {
        this.#o.queue.done(key);
      }
    }
  }

  /** Reconciles `key` once, applying the retry policy. Exposed for tests; workers call it. */
  async processKey(key: ObjectKey): Promise<void> {
    const parent = this.#o.parentOf?.(key);
    this.#tracing ||= mayRecord(this.#tracer);
    if (!this.#tracing && (!parent || !trace.getSpanContext(parent))) {
      await this.#reconcile(key, NON_RECORDING_SPAN);
      return;
    }
    const { controller, kind } = this.#o;
    const { namespace, name } = splitKey(key);
    await this.#tracer.startActiveSpan(
      `reconcile ${kind}`,
      { attributes: { "k8s.namespace.name": namespace, "k8s.object.name": name, "kubevirt.controller": controller } },
      parent ?? context.active(),
      async (span) => {
        try {
          await this.#reconcile(key, span);
        } finally {
          span.end();
        }
      },
    );
  }

  async #reconcile(key: ObjectKey, span: Span): Promise<void> {
    const { controller, queue, logger: base } = this.#o;
    const reconcileId = randomUUID();
    let logger: Logger | undefined;
    const ctx = {
      reconcileId,
      span,
      get logger(): Logger {
        logger ??= base.child({ controller, key, reconcileId });
        return logger;
      },
    };
    const started = performance.now();
    let result: string;
    try {
      const r = await this.#o.reconciler.reconcile(key, ctx);
      queue.forget(key);
      if (r.requeueAfterMs !== undefined) {
        queue.addAfter(key, r.requeueAfterMs);
        result = "requeue";
      } else result = "success";
    } catch (error) {
      result = this.#handleError(key, error, ctx.logger);
      span.recordException(error instanceof Error ? error : new Error(String(error)));
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    }
    this.#metrics?.total.inc({ controller, result });
    this.#metrics?.time.observe({ controller }, (performance.now() - started) / 1000);
  }

  #handleError(key: ObjectKey, error: unknown, logger: Logger): string {
    const { queue } = this.#o;
    if (error instanceof TerminalError || (error instanceof SyncError && !error.requeue)) {
      logger.error(
        { err: error, reason: error instanceof SyncError ? error.reason : "Terminal" },
        "reconcile failed; not retrying",
      );
      queue.forget(key);
      return "terminal";
    }
    const retries = queue.numRequeues(key);
    const reason = error instanceof SyncError ? error.reason : "Error";
    // Early retries are routine (cache lag, conflicts); log them quietly and escalate when they persist.
    if (retries < 5) logger.debug({ err: error, reason, retries }, "reconcile failed; retrying");
    else logger.warn({ err: error, reason, retries }, "reconcile failed; retrying");
    queue.addRateLimited(key);
    return "error";
  }
}
