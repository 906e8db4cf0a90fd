import { describe, expect, it } from "vitest";
import type { V1Pod } from "../cluster/kube-models.ts";
import { type ContainerRunState, podPhase, podStatus } from "./pod-status.ts";

const c = (state: ContainerRunState["state"], exitCode?: number): ContainerRunState => ({
  name: `c${Math.random()}`,
  image: "i",
  state,
  exitCode,
});

describe("podPhase()", () => {
  it.each([
    ["no containers", [], "Pending"],
    ["one waiting", [c("running"), c("waiting")], "Pending"],
    ["all running", [c("running"), c("running")], "Running"],
    ["a sidecar still running", [c("terminated", 0), c("running")], "Running"],
    ["all exited 0", [c("terminated", 0), c("terminated", 0)], "Succeeded"],
    ["one exited non-zero", [c("terminated", 0), c("terminated", 1)], "Failed"],
    ["killed", [c("terminated", 137)], "Failed"],
  ] as const)("%s -> %s", (_name, containers, phase) => {
    expect(podPhase(containers)).toBe(phase);
  });
});

describe("podStatus()", () => {
  const pod: V1Pod = { metadata: { name: "p", uid: "u" }, spec: { containers: [] } };
  it("reports Ready and container states when everything runs", () => {
    const now = new Date("2026-11-22T00:00:00Z");
    const s = podStatus(
      pod,
      [{ name: "compute", image: "kubevirt/virt-launcher", state: "running", startedAt: now }],
      now,
    );
    expect(s.phase).toBe("Running");
    expect(s.conditions?.find((x) => x.type === "Ready")?.status).toBe("True");
    expect(s.containerStatuses?.[0]).toMatchObject({
      name: "compute",
      ready: true,
      state: { running: { startedAt: now.toISOString() } },
    });
  });

  it("keeps a condition's transition time while its status is unchanged", () => {
    const then = new Date("2026-11-22T00:00:00Z");
    const later = new Date("2026-11-22T00:05:00Z");
    const first = podStatus(pod, [c("running")], then);
    const second = podStatus({ ...pod, status: first }, [c("running")], later);
    expect(second.conditions?.find((x) => x.type === "Ready")?.lastTransitionTime).toBe(then.toISOString());
    const third = podStatus({ ...pod, status: second }, [c("terminated", 1)], later);
    expect(third.conditions?.find((x) => x.type === "Ready")).toMatchObject({
      status: "False",
      reason: "PodCompleted",
      lastTransitionTime: later.toISOString(),
    });
    expect(third.containerStatuses?.[0].state?.terminated).toMatchObject({ exitCode: 1, reason: "Error" });
  });
});

describe("podStatus() addresses", () => {
  it("reports the pod network's addresses, else the node's loopback", () => {
    const pod: V1Pod = { metadata: { name: "p" } };
    expect(podStatus(pod, [c("running")], new Date(), true, ["10.64.1.2"])).toMatchObject({
      podIP: "10.64.1.2",
      podIPs: [{ ip: "10.64.1.2" }],
    });
    expect(podStatus(pod, [c("running")], new Date()).podIP).toBe("127.0.0.1");
  });
});
