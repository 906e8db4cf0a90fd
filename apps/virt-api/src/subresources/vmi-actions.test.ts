import type { ApiError } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { FakeCluster, FakeHandler, newVm, newVmi } from "../fake/fake-cluster.ts";
import { guestOsInfo, pauseVmi, softRebootVmi, unpauseVmi, validateConsole } from "./vmi-actions.ts";

function target(cluster: FakeCluster, handler = new FakeHandler()) {
  return { client: cluster, handler, namespace: "default", name: "vm1" };
}

async function refusal(p: Promise<unknown>): Promise<[number, string]> {
  try {
    await p;
  } catch (error) {
    return [(error as ApiError).code, (error as ApiError).message];
  }
  throw new Error("expected a refusal");
}

const PAUSED = [{ type: "Paused", status: "True" }];

describe("pause", () => {
  it("pause() on a Running VMI calls the handler's pause with the options", async () => {
    const handler = new FakeHandler();
    await pauseVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running")), handler), {});
    expect(handler.calls).toEqual([{ verb: "put", vmi: "vm1", sub: "pause", body: {} }]);
  });

  it("pause --dry-run validates but does not call the handler", async () => {
    const handler = new FakeHandler();
    await pauseVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running")), handler), { dryRun: ["All"] });
    expect(handler.calls).toEqual([]);
  });

  it.each([
    [
      newVmi("vm1", "Running", PAUSED),
      409,
      'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "vm1": VMI is already paused',
    ],
    [newVmi("vm1", "Scheduling"), 409, "VM is not running"],
    [
      newVmi("vm1", "Running", [], { livenessProbe: { httpGet: { port: 80 } } }),
      403,
      "Pausing VMIs with a non-GuestAgentPing LivenessProbe is not supported",
    ],
  ])("pause is refused (%#) with %i", async (vmi, code, message) => {
    const handler = new FakeHandler();
    const [c, m] = await refusal(pauseVmi(target(new FakeCluster().addVmi(vmi), handler), {}));
    expect(c).toBe(code);
    expect(m).toContain(message);
    expect(handler.calls).toEqual([]);
  });

  it("pause of a missing VMI is 404 virtualmachineinstance.kubevirt.io not found", async () => {
    expect(await refusal(pauseVmi(target(new FakeCluster()), {}))).toEqual([
      404,
      'virtualmachineinstance.kubevirt.io "vm1" not found',
    ]);
  });

  it("a handler failure is 500 with the handler's message", async () => {
    const handler = new FakeHandler();
    handler.fail = "launcher unreachable";
    const [code, message] = await refusal(
      pauseVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running")), handler), {}),
    );
    expect(code).toBe(500);
    expect(message).toBe("Internal error occurred: launcher unreachable");
  });
});

describe("unpause", () => {
  it("unpause() on a paused VMI calls the handler", async () => {
    const handler = new FakeHandler();
    await unpauseVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running", PAUSED)), handler), {});
    expect(handler.calls.map((c) => c.sub)).toEqual(["unpause"]);
  });

  it("unpause of a VMI that is not paused is 409 VMI is not paused", async () => {
    const [code, message] = await refusal(unpauseVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running"))), {}));
    expect(code).toBe(409);
    expect(message).toMatch(/VMI is not paused$/);
  });

  it("unpause while the VM has a snapshot in progress is 409", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Always" }, { snapshotInProgress: "snap1" }))
      .addVmi(newVmi("vm1", "Running", PAUSED));
    expect((await refusal(unpauseVmi(target(cluster), {})))[1]).toContain("VM snapshot is in progress");
  });
});

describe("softreboot and guestosinfo", () => {
  it("softreboot of a paused VMI is 409 VMI is paused", async () => {
    const [code, message] = await refusal(
      softRebootVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running", PAUSED)))),
    );
    expect(code).toBe(409);
    expect(message).toMatch(/VMI is paused$/);
  });

  it("softreboot without agent and with ACPI disabled is 409", async () => {
    const vmi = newVmi("vm1", "Running", [], { domain: { features: { acpi: { enabled: false } } } });
    expect((await refusal(softRebootVmi(target(new FakeCluster().addVmi(vmi)))))[1]).toContain(
      "VMI neither have the agent connected nor the ACPI feature enabled",
    );
  });

  it("softreboot of a running VMI calls the handler", async () => {
    const handler = new FakeHandler();
    await softRebootVmi(target(new FakeCluster().addVmi(newVmi("vm1", "Running")), handler));
    expect(handler.calls.map((c) => c.sub)).toEqual(["softreboot"]);
  });

  it("guestosinfo needs a connected agent", async () => {
    expect((await refusal(guestOsInfo(target(new FakeCluster().addVmi(newVmi("vm1", "Running"))))))[1]).toContain(
      "VMI does not have guest agent connected",
    );
    const vmi = newVmi("vm1", "Running", [{ type: "AgentConnected", status: "True" }]);
    expect(await guestOsInfo(target(new FakeCluster().addVmi(vmi)))).toEqual({ name: "debian", kernelRelease: "6.1" });
  });
});

describe("console preconditions", () => {
  it.each([
    [newVmi("vm1", "Running"), undefined],
    [newVmi("vm1", "Scheduled"), 400],
    [newVmi("vm1", "Failed"), 409],
    [newVmi("vm1", "Running", [], { domain: { devices: { autoattachSerialConsole: false } } }), 400],
  ])("validateConsole (%#) -> %s", (vmi, code) => {
    expect(validateConsole(vmi)?.code).toBe(code);
  });
});
