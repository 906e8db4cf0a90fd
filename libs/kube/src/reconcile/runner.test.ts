import { type ObjectKey, objectKey } from "@kvt/api";
import { pino } from "pino";
import { Registry } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { SyncError, TerminalError } from "../errors.ts";
import { ItemExponentialRateLimiter } from "../workqueue/rate-limiter.ts";
import { WorkQueue } from "../workqueue/workqueue.ts";
import { done, type ReconcileContext, type Result, requeueAfter } from "./result.ts";
import { Runner } from "./runner.ts";

function setup(reconcile: (key: ObjectKey, ctx: ReconcileContext) => Promise<Result>) {
  const registry = new Registry();
  const queue = new WorkQueue<ObjectKey>({
    name: "virt-controller-vm",
    registry,
    rateLimiter: new ItemExponentialRateLimiter(1, 50),
  });
  const runner = new Runner({
    controller: "vm",
    kind: "VirtualMachine",
    queue,
    reconciler: { reconcile },
    logger: pino({ level: "silent" }),
    registry,
    workers: 2,
  });
  return { registry, queue, runner };
}

describe("Runner", () => {
  it("retries a failing key with backoff until it succeeds, then forgets it", async () => {
    let calls = 0;
    const ids = new Set<string>();
    const { registry, queue, runner } = setup(async (_key, ctx) => {
      ids.add(ctx.reconcileId);
      if (++calls < 3) throw new Error("transient");
      return done();
    });
    const key = objectKey("d", "vm1");
    const running = runner.run();
    queue.add(key);
    while (calls < 3) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 5));
    expect(queue.numRequeues(key)).toBe(0);
    expect(ids.size).toBe(3);
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_reconcile_total{controller="vm",result="error"} 2');
    expect(text).toContain('kubevirt_reconcile_total{controller="vm",result="success"} 1');
    queue.shutDown();
    await running;
  });

  it("does not retry terminal errors or non-requeue SyncErrors", async () => {
    const errors = [new TerminalError("bad spec"), new SyncError("FailedCreate", "nope", { requeue: false })];
    let calls = 0;
    const { registry, queue, runner } = setup(async () => {
      throw errors[calls++ % 2];
    });
    await runner.processKey(objectKey("d", "a"));
    await runner.processKey(objectKey("d", "b"));
    expect(queue.length).toBe(0);
    expect(await registry.metrics()).toContain('kubevirt_reconcile_total{controller="vm",result="terminal"} 2');
    queue.shutDown();
  });

  it("requeues after the requested delay without counting a failure", async () => {
    const { queue, runner } = setup(async () => requeueAfter(5));
    const key = objectKey("d", "a");
    await runner.processKey(key);
    expect(queue.numRequeues(key)).toBe(0);
    expect(await queue.get()).toBe(key);
    queue.shutDown();
  });

  it("never runs one key on two workers at once", async () => {
    let active = 0;
    let maxActive = 0;
    let calls = 0;
    const { queue, runner } = setup(async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      calls++;
      await new Promise((r) => setTimeout(r, 10));
      active--;
      return done();
    });
    const running = runner.run();
    const key = objectKey("d", "a");
    queue.add(key);
    await new Promise((r) => setTimeout(r, 2));
    queue.add(key);
    queue.add(key);
    while (calls < 2) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 20));
    expect(maxActive).toBe(1);
    expect(calls).toBe(2);
    queue.shutDown();
    await running;
  });
});

describe("Runner tracing", () => {
  it("starts the reconcile span under the parent context the options give for the key", async () => {
    const { ROOT_CONTEXT, trace: api } = await import("@opentelemetry/api");
    const parent = api.setSpanContext(ROOT_CONTEXT, {
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      traceFlags: 1,
    });
    const seen: unknown[] = [];
    const tracer = {
      startActiveSpan: (_name: string, _opts: unknown, ctx: unknown, fn: (span: unknown) => unknown) => {
        seen.push(ctx);
        return fn({ end() {}, recordException() {}, setStatus() {} });
      },
    } as unknown as import("@opentelemetry/api").Tracer;
    const queue = new WorkQueue<ObjectKey>({ name: "q" });
    const runner = new Runner({
      controller: "migration",
      kind: "VirtualMachineInstanceMigration",
      queue,
      reconciler: { reconcile: async () => done() },
      logger: pino({ level: "silent" }),
      tracer,
      parentOf: () => parent,
    });
    await runner.processKey(objectKey("d", "m"));
    expect(seen).toEqual([parent]);
    queue.shutDown();
  });
});

describe("Runner without a tracer provider", () => {
  const traced = {
    traceId: "0af7651916cd43dd8448eb211c80319c",
    spanId: "b7ad6b7169203331",
    traceFlags: 1,
  };

  it("runs a reconcile of an untraced object with no span and no active context", async () => {
    const api = await import("@opentelemetry/api");
    const tracer = api.trace.getTracer("test"); // a ProxyTracer: no provider is registered in this process
    const started = vi.spyOn(tracer, "startActiveSpan");
    const seen: { recording: boolean; valid: boolean; active: unknown }[] = [];
    const queue = new WorkQueue<ObjectKey>({ name: "q" });
    const runner = new Runner({
      controller: "vmi",
      kind: "VirtualMachineInstance",
      queue,
      reconciler: {
        reconcile: async (_key, ctx) => {
          const sc = ctx.span.spanContext();
          seen.push({
            recording: ctx.span.isRecording(),
            valid: api.isSpanContextValid(sc),
            active: api.trace.getActiveSpan(),
          });
          return done();
        },
      },
      logger: pino({ level: "silent" }),
      tracer,
      parentOf: () => api.ROOT_CONTEXT, // what contextFromTraceparent(undefined) answers
    });
    await runner.processKey(objectKey("d", "a"));
    expect(started).not.toHaveBeenCalled();
    expect(seen).toEqual([{ recording: false, valid: false, active: undefined }]);
    queue.shutDown();
  });

  it("still carries an object's trace context (a non-recording span under it) so writes propagate it", async () => {
    const api = await import("@opentelemetry/api");
    const tracer = api.trace.getTracer("test");
    const started = vi.spyOn(tracer, "startActiveSpan");
    let seenTraceId: string | undefined;
    const queue = new WorkQueue<ObjectKey>({ name: "q" });
    const runner = new Runner({
      controller: "migration",
      kind: "VirtualMachineInstanceMigration",
      queue,
      reconciler: {
        reconcile: async (_key, ctx) => {
          seenTraceId = ctx.span.spanContext().traceId;
          return done();
        },
      },
      logger: pino({ level: "silent" }),
      tracer,
      parentOf: () => api.trace.setSpanContext(api.ROOT_CONTEXT, traced),
    });
    await runner.processKey(objectKey("d", "m"));
    expect(started).toHaveBeenCalledTimes(1);
    expect(seenTraceId).toBe(traced.traceId);
    queue.shutDown();
  });

  it("starts real spans once a provider is registered", async () => {
    const api = await import("@opentelemetry/api");
    const tracer = api.trace.getTracer("test");
    const names: string[] = [];
    const sdkTracer = {
      startActiveSpan: (name: string, _opts: unknown, _ctx: unknown, fn: (span: unknown) => unknown) => {
        names.push(name);
        return fn({ end() {}, recordException() {}, setStatus() {} });
      },
    } as unknown as import("@opentelemetry/api").Tracer;
    const queue = new WorkQueue<ObjectKey>({ name: "q" });
    const runner = new Runner({
      controller: "vm",
      kind: "VirtualMachine",
      queue,
      reconciler: { reconcile: async () => done() },
      logger: pino({ level: "silent" }),
      tracer,
    });
    await runner.processKey(objectKey("d", "a"));
    expect(names).toEqual([]);
    api.trace.setGlobalTracerProvider({ getTracer: () => sdkTracer });
    try {
      await runner.processKey(objectKey("d", "a"));
    } finally {
      api.trace.disable();
    }
    expect(names).toEqual(["reconcile VirtualMachine"]);
    queue.shutDown();
  });

  it("builds the per-reconcile child logger only when the reconcile logs", async () => {
    const logger = pino({ level: "silent" });
    const child = vi.spyOn(logger, "child");
    let logs = false;
    const queue = new WorkQueue<ObjectKey>({ name: "q" });
    const runner = new Runner({
      controller: "vm",
      kind: "VirtualMachine",
      queue,
      reconciler: {
        reconcile: async (_key, ctx) => {
          if (logs) ctx.logger.debug("reconciling");
          return done();
        },
      },
      logger,
    });
    await runner.processKey(objectKey("d", "a"));
    expect(child).not.toHaveBeenCalled();
    logs = true;
    await runner.processKey(objectKey("d", "a"));
    expect(child).toHaveBeenCalledTimes(1);
    expect(child.mock.calls[0][0]).toMatchObject({ controller: "vm", key: "d/a" });
    queue.shutDown();
  });
});
