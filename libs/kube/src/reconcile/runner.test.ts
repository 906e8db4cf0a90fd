import { type ObjectKey, objectKey } from "@kvt/api";
import { pino } from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
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
