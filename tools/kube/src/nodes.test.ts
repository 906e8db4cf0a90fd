import { describe, expect, it } from "vitest";
import type { NodeObject } from "./cluster-health.ts";
import { readySince } from "./nodes.ts";

const node = (status: string, lastHeartbeatTime?: string): NodeObject => ({
  status: { conditions: [{ type: "Ready", status, lastHeartbeatTime }] },
});

describe("readySince", () => {
  const since = Date.parse("2026-11-26T16:30:00.700Z");

  it("takes a Ready heartbeat from the second the kubelets started on (heartbeats have whole seconds)", () => {
    expect(readySince(node("True", "2026-11-26T16:30:00Z"), since)).toBe(true);
    expect(readySince(node("True", "2026-11-26T16:30:05Z"), since)).toBe(true);
  });

  it("ignores a Ready left in etcd by an earlier run, a node not Ready, and a node without conditions", () => {
    expect(readySince(node("True", "2026-11-26T16:29:59Z"), since)).toBe(false);
    expect(readySince(node("False", "2026-11-26T16:30:05Z"), since)).toBe(false);
    expect(readySince(node("True"), since)).toBe(false);
    expect(readySince(undefined, since)).toBe(false);
  });
});
