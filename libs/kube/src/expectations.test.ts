import { objectKey } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { Expectations, firstRejection } from "./expectations.ts";

describe("Expectations", () => {
  const key = objectKey("default", "vm1");

  it("is satisfied with nothing pending, unsatisfied until a create is observed", () => {
    const e = new Expectations();
    expect(e.satisfied(key)).toBe(true);
    e.expectCreations(key, 1);
    expect(e.satisfied(key)).toBe(false);
    e.creationObserved(key);
    expect(e.satisfied(key)).toBe(true);
  });

  it("tracks deletions by uid", () => {
    const e = new Expectations();
    e.expectDeletions(key, ["u1", "u2"]);
    e.deletionObserved(key, "u1");
    expect(e.satisfied(key)).toBe(false);
    e.deletionObserved(key, "u2");
    expect(e.satisfied(key)).toBe(true);
  });

  it("a failed create lowers the expectation", () => {
    const e = new Expectations();
    e.expectCreations(key, 2);
    e.lowerCreations(key);
    e.creationObserved(key);
    expect(e.satisfied(key)).toBe(true);
  });

  it("expires after the TTL so a lost event cannot block a key", () => {
    let now = 0;
    const e = new Expectations({ ttlMs: 1000, now: () => now });
    e.expectCreations(key);
    now = 1001;
    expect(e.satisfied(key)).toBe(true);
  });
});

describe("Expectations around writes", () => {
  const key = objectKey("default", "rs1");

  it("creating() raises the expectation before the create and keeps it when the create succeeds", async () => {
    const e = new Expectations();
    let seenSatisfied: boolean | undefined;
    await e.creating(key, async () => {
      seenSatisfied = e.satisfied(key);
      return "made";
    });
    expect(seenSatisfied).toBe(false);
    expect(e.satisfied(key)).toBe(false);
    e.creationObserved(key);
    expect(e.satisfied(key)).toBe(true);
  });

  it("creating() lowers the expectation and rethrows when the server refuses", async () => {
    const e = new Expectations();
    await expect(e.creating(key, () => Promise.reject(new Error("quota")))).rejects.toThrow("quota");
    expect(e.satisfied(key)).toBe(true);
  });

  it("creatingAll() keeps one expectation per accepted create and reports the first refusal", async () => {
    const e = new Expectations();
    const results = await e.creatingAll(key, [
      () => Promise.resolve(1),
      () => Promise.reject(new Error("first")),
      () => Promise.reject(new Error("second")),
      () => Promise.resolve(2),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected", "fulfilled"]);
    expect((firstRejection(results) as Error).message).toBe("first");
    e.creationObserved(key);
    expect(e.satisfied(key)).toBe(false);
    e.creationObserved(key);
    expect(e.satisfied(key)).toBe(true);
  });

  it("deleting() expects the uid and lowers it when the delete is refused", async () => {
    const e = new Expectations();
    await e.deleting(key, "u1", () => Promise.resolve());
    expect(e.satisfied(key)).toBe(false);
    e.deletionObserved(key, "u1");
    expect(e.satisfied(key)).toBe(true);
    await expect(e.deleting(key, "u2", () => Promise.reject(new Error("conflict")))).rejects.toThrow("conflict");
    expect(e.satisfied(key)).toBe(true);
  });

  it("firstRejection() is undefined when everything was fulfilled", () => {
    expect(firstRejection([{ status: "fulfilled", value: 1 }])).toBeUndefined();
  });
});
