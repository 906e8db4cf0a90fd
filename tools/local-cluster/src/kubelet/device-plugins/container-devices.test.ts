import { describe, expect, it } from "vitest";
import type { ContainerPlan } from "../container-spec.ts";
import { withDevices } from "./container-devices.ts";

const plan: ContainerPlan = {
  kind: "process",
  name: "compute",
  argv: ["/node", "main.ts"],
  env: { A: "1", KVT_VOLUME_MOUNTS: '[{"mountPath":"/disks","hostPath":"/data/d","readOnly":false}]' },
  nice: 10,
};
const kvm = { containerPath: "/dev/kvm", hostPath: "/dev/kvm", permissions: "rw" };

describe("withDevices: a plugin's Allocate answer applied to a process container", () => {
  it("sets its envs, appends its mounts to KVT_VOLUME_MOUNTS and checks its device nodes exist", () => {
    const seen: string[] = [];
    const out = withDevices(
      plan,
      [
        { envs: { A: "2", KVM: "yes" }, devices: [kvm] },
        { mounts: [{ containerPath: "/run/x", hostPath: "/host/x", readOnly: true }], annotations: { a: "b" } },
      ],
      (p) => seen.push(p) > 0,
    );
    expect(seen).toEqual(["/dev/kvm"]);
    expect(out).toEqual({
      ...plan,
      env: {
        A: "2",
        KVM: "yes",
        KVT_VOLUME_MOUNTS: JSON.stringify([
          { mountPath: "/disks", hostPath: "/data/d", readOnly: false },
          { mountPath: "/run/x", hostPath: "/host/x", readOnly: true },
        ]),
      },
    });
  });

  it("cannot create the container when a device node is missing, moved, or a CDI device", () => {
    expect(withDevices(plan, [{ devices: [kvm] }], () => false)).toEqual({
      kind: "unrunnable",
      name: "compute",
      reason: "CreateContainerError",
      message: 'error gathering device information while adding custom device "/dev/kvm": no such file or directory',
    });
    const moved = withDevices(plan, [{ devices: [{ ...kvm, containerPath: "/dev/kvm0" }] }], () => true);
    expect(moved).toMatchObject({ kind: "unrunnable", reason: "CreateContainerError" });
    expect(moved.kind === "unrunnable" && moved.message).toMatch(/cannot make \/dev\/kvm appear at \/dev\/kvm0/);
    const cdi = withDevices(plan, [{ cdiDevices: [{ name: "vendor.com/gpu=0" }] }], () => true);
    expect(cdi.kind === "unrunnable" && cdi.message).toBe(
      "CDI devices are not supported by the local process runtime: vendor.com/gpu=0",
    );
  });

  it("leaves containers without devices, and tail containers, as they are", () => {
    expect(withDevices(plan, [], () => false)).toBe(plan);
    const tail: ContainerPlan = { kind: "tail", name: "guest-console-log", file: "/p/serial0.log" };
    expect(withDevices(tail, [{ devices: [kvm] }], () => false)).toBe(tail);
  });
});
