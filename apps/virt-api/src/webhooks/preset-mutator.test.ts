import type { VirtualMachineInstancePreset } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { FakeCluster } from "../fake/fake-cluster.ts";
import type { AdmissionRequest } from "./admission.ts";
import { mutateVmiWith } from "./admitters.ts";

const request = (object: Record<string, unknown>): AdmissionRequest => ({
  uid: "u1",
  kind: { group: "kubevirt.io", version: "v1", kind: "VirtualMachineInstance" },
  resource: { group: "kubevirt.io", version: "v1", resource: "virtualmachineinstances" },
  operation: "CREATE",
  namespace: "default",
  name: "v1",
  object,
});

const vmi = {
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachineInstance",
  metadata: { name: "v1", namespace: "default", labels: { "kubevirt.io/vmPreset": "small" } },
  spec: { domain: { devices: {}, resources: {} } },
};

const preset = (name: string, requests: Record<string, string>): VirtualMachineInstancePreset => ({
  metadata: { name, namespace: "default" },
  spec: {
    selector: { matchLabels: { "kubevirt.io/vmPreset": "small" } },
    domain: { devices: {}, resources: { requests } },
  },
});

describe("the VMI mutating webhook applies VirtualMachineInstancePresets", () => {
  it("a matching preset's requests land in the patched spec, with the preset annotation", async () => {
    const cluster = new FakeCluster();
    cluster.presets.push(preset("small", { memory: "64Mi" }));
    const result = await mutateVmiWith(cluster)(request(vmi));
    expect(result.allowed).toBe(true);
    const patch = result.allowed ? (result.patch ?? []) : [];
    const spec = patch.find((p) => p.path === "/spec")?.value as { domain: { resources: { requests: object } } };
    expect(spec.domain.resources.requests).toEqual({ memory: "64Mi" });
    const meta = patch.find((p) => p.path === "/metadata")?.value as { annotations: Record<string, string> };
    expect(meta.annotations["virtualmachinepreset.kubevirt.io/small"]).toBe("kubevirt.io/v1");
  });

  it("conflicting presets refuse the VMI with 422", async () => {
    const cluster = new FakeCluster();
    cluster.presets.push(preset("a", { memory: "64Mi" }), preset("b", { memory: "128Mi" }));
    expect(await mutateVmiWith(cluster)(request(vmi))).toEqual({
      allowed: false,
      code: 422,
      message:
        "VirtualMachinePresets cannot be applied due to conflicts: presets 'b' and 'a' conflict: spec.resources.requests[memory]: 128Mi != 64Mi",
    });
  });

  it("presets of another namespace do not apply", async () => {
    const cluster = new FakeCluster();
    cluster.presets.push({ ...preset("small", { memory: "64Mi" }), metadata: { name: "small", namespace: "other" } });
    const result = await mutateVmiWith(cluster)(request(vmi));
    const patch = result.allowed ? (result.patch ?? []) : [];
    const meta = patch.find((p) => p.path === "/metadata")?.value as { annotations?: Record<string, string> };
    expect(meta?.annotations?.["virtualmachinepreset.kubevirt.io/small"]).toBeUndefined();
  });
});
