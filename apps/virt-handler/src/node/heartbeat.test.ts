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
    };
    const hb = new NodeHeartbeat({
      nodeName: "n1",
      api,
      logger: createLogger({ component: "test", level: "silent" }),
      periodMs: 60_000,
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

  it("is schedulable only while the device plugins are registered, and follows them between beats", async () => {
    vi.useFakeTimers();
    const labels: string[] = [];
    let registered = false;
    const hb = new NodeHeartbeat({
      nodeName: "n1",
      api: {
        patchNode: async (_n, patch) => {
          labels.push(
            (patch as { metadata: { labels: Record<string, string> } }).metadata.labels["kubevirt.io/schedulable"],
          );
        },
      },
      logger: createLogger({ component: "test", level: "silent" }),
      periodMs: 60_000,
      devicePlugins: { initialized: () => registered },
    });
    const started = hb.start();
    await vi.advanceTimersByTimeAsync(3000);
    expect(labels).toEqual([]); // the first beat waits for the plugins (up to 10 s)
    registered = true;
    await vi.advanceTimersByTimeAsync(1000);
    await started;
    expect(labels).toEqual(["true"]);
    registered = false; // the kubelet restarted: the plugins register again
    await vi.advanceTimersByTimeAsync(1000);
    expect(labels).toEqual(["true", "false"]);
    registered = true;
    await vi.advanceTimersByTimeAsync(1000);
    expect(labels).toEqual(["true", "false", "true"]);
    await hb.stop();
    expect(labels.at(-1)).toBe("false");
  });

  it("beats unschedulable after 10 s when the plugins never register (no kubelet)", async () => {
    vi.useFakeTimers();
    const labels: string[] = [];
    const hb = new NodeHeartbeat({
      nodeName: "n1",
      api: {
        patchNode: async (_n, patch) => {
          labels.push(
            (patch as { metadata: { labels: Record<string, string> } }).metadata.labels["kubevirt.io/schedulable"],
          );
        },
      },
      logger: createLogger({ component: "test", level: "silent" }),
      devicePlugins: { initialized: () => false },
    });
    const started = hb.start();
    await vi.advanceTimersByTimeAsync(10_000);
    await started;
    expect(labels).toEqual(["false"]);
    await hb.stop();
  });
});
