import { createLogger } from "@kvt/observability";
import { afterEach, describe, expect, it, vi } from "vitest";
import { NodeHeartbeat } from "./heartbeat.ts";

afterEach(() => vi.useRealTimers());

describe("NodeHeartbeat", () => {
  it("retries a failed beat within seconds (the Node may not be registered yet), then beats every period", async () => {
    vi.useFakeTimers();
    let calls = 0;
    const api = {
      patchNode: () => (++calls <= 2 ? Promise.reject(new Error('nodes "n1" not found')) : Promise.resolve({})),
      patchNodeStatus: () => Promise.resolve({}),
    };
    const hb = new NodeHeartbeat({
      nodeName: "n1",
      api,
      logger: createLogger({ component: "test", level: "silent" }),
      periodMs: 60_000,
      kvm: true,
    });
    await hb.start();
    expect(calls).toBe(1); // failed
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toBe(2); // failed again: the next try 2 s later
    await vi.advanceTimersByTimeAsync(1999);
    expect(calls).toBe(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toBe(3); // written
    await vi.advanceTimersByTimeAsync(59_000);
    expect(calls).toBe(3); // back to the period
    await vi.advanceTimersByTimeAsync(13_000);
    expect(calls).toBe(4);
  });
});
