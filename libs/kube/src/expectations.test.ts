import { objectKey } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { Expectations } from "./expectations.ts";

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
