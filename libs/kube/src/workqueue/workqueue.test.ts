import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { BucketRateLimiter, ItemExponentialRateLimiter, MaxOfRateLimiter } from "./rate-limiter.ts";
import { WorkQueue } from "./workqueue.ts";

describe("WorkQueue", () => {
  it("de-duplicates a key added twice before it is taken", async () => {
    const q = new WorkQueue({ name: "t" });
    q.add("a");
    q.add("a");
    q.add("b");
    expect(q.length).toBe(2);
    expect(await q.get()).toBe("a");
    expect(await q.get()).toBe("b");
  });

  it("never hands a key being processed to a second worker; re-queues it on done()", async () => {
    const q = new WorkQueue({ name: "t" });
    q.add("a");
    const first = await q.get();
    q.add("a");
    expect(q.length).toBe(0);
    let second: string | undefined;
    const pending = q.get().then((k) => {
      second = k;
    });
    await Promise.resolve();
    expect(second).toBeUndefined();
    q.done(first!);
    await pending;
    expect(second).toBe("a");
  });

  it("addAfter delivers the key later, keeping the earliest of two delays", async () => {
    const q = new WorkQueue({ name: "t" });
    q.addAfter("a", 10_000);
    q.addAfter("a", 5);
    expect(q.length).toBe(0);
    expect(await q.get()).toBe("a");
    q.shutDown();
  });

  it("shutDown() resolves waiting get() calls with undefined", async () => {
    const q = new WorkQueue({ name: "t" });
    const p = q.get();
    q.shutDown();
    expect(await p).toBeUndefined();
    q.add("x");
    expect(await q.get()).toBeUndefined();
  });

  it("counts adds, retries and depth in kubevirt_workqueue_* metrics", async () => {
    const registry = new Registry();
    const q = new WorkQueue({
      name: "virt-controller-vm",
      registry,
      rateLimiter: new ItemExponentialRateLimiter(1, 10),
    });
    q.add("a");
    q.add("b");
    q.addRateLimited("c");
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_workqueue_adds_total{name="virt-controller-vm"} 2');
    expect(text).toContain('kubevirt_workqueue_retries_total{name="virt-controller-vm"} 1');
    expect(text).toContain('kubevirt_workqueue_depth{name="virt-controller-vm"} 2');
    q.shutDown();
  });
});

describe("rate limiters", () => {
  it("per-key backoff doubles from the base to the cap and resets on forget", () => {
    const l = new ItemExponentialRateLimiter(5, 1_000_000);
    expect([l.when("k"), l.when("k"), l.when("k")]).toEqual([5, 10, 20]);
    expect(l.numRequeues("k")).toBe(3);
    for (let i = 0; i < 40; i++) l.when("k");
    expect(l.when("k")).toBe(1_000_000);
    l.forget("k");
    expect(l.when("k")).toBe(5);
  });

  it("the bucket allows the burst at once, then spaces retries at 1/qps", () => {
    let now = 0;
    const b = new BucketRateLimiter(10, 100, () => now);
    for (let i = 0; i < 100; i++) expect(b.when(`k${i}`)).toBe(0);
    expect(b.when("x")).toBeCloseTo(100);
    expect(b.when("y")).toBeCloseTo(200);
    now = 1000;
    expect(b.when("z")).toBe(0);
  });

  it("the default combination takes the larger delay", () => {
    let now = 0;
    const l = new MaxOfRateLimiter(new ItemExponentialRateLimiter(5, 1000), new BucketRateLimiter(10, 1, () => now));
    expect(l.when("a")).toBe(5);
    expect(l.when("a")).toBeCloseTo(100);
    now = 10_000;
    expect(l.when("a")).toBe(20);
  });
});
