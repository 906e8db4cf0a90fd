import { objectKey } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { UnobservedWrites } from "./unobserved-writes.ts";

describe("UnobservedWrites", () => {
  const key = objectKey("d", "a");

  it("holds a key back while the cache still shows the version the write replaced, then forgets it", () => {
    const w = new UnobservedWrites();
    expect(w.pending(key, "5")).toBe(false);
    w.wrote(key, "5");
    expect(w.pending(key, "5")).toBe(true);
    expect(w.pending(key, "6")).toBe(false);
    expect(w.size).toBe(0);
    expect(w.pending(key, "5")).toBe(false);
  });

  it("lets a reconcile through once the TTL has passed (a lost watch event cannot stall the key)", () => {
    let now = 0;
    const w = new UnobservedWrites({ ttlMs: 1000, now: () => now });
    w.wrote(key, "5");
    now = 999;
    expect(w.pending(key, "5")).toBe(true);
    now = 1000;
    expect(w.pending(key, "5")).toBe(false);
  });

  it("ignores writes without a base version and forgets deleted keys", () => {
    const w = new UnobservedWrites();
    w.wrote(key, undefined);
    expect(w.size).toBe(0);
    w.wrote(key, "5");
    w.forget(key);
    expect(w.pending(key, "5")).toBe(false);
  });
});
