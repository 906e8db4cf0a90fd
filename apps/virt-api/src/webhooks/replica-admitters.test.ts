import { describe, expect, it } from "vitest";
import type { AdmissionRequest } from "./admission.ts";
import { validateVmirs, validateVmirsWith, validateVmPool } from "./admitters.ts";

const vmiSpec = { domain: { devices: {}, resources: { requests: { memory: "128Mi" } } } };

function req(kind: string, resource: string, object: Record<string, unknown>, extra: Partial<AdmissionRequest> = {}) {
  const group = kind === "VirtualMachinePool" ? "pool.kubevirt.io" : "kubevirt.io";
  const version = kind === "VirtualMachinePool" ? "v1beta1" : "v1";
  return {
    uid: "u1",
    kind: { group, version, kind },
    resource: { group, version, resource },
    operation: "CREATE",
    namespace: "default",
    name: "x",
    object,
    ...extra,
  } as AdmissionRequest;
}

const rs = (selector: Record<string, unknown>) => ({
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachineInstanceReplicaSet",
  metadata: { name: "x" },
  spec: { replicas: 1, selector, template: { metadata: { labels: { app: "web" } }, spec: vmiSpec } },
});

const pool = (selector: Record<string, unknown>) => ({
  apiVersion: "pool.kubevirt.io/v1beta1",
  kind: "VirtualMachinePool",
  metadata: { name: "x" },
  spec: {
    selector,
    virtualMachineTemplate: {
      metadata: { labels: { app: "web" } },
      spec: { runStrategy: "Always", template: { spec: vmiSpec } },
    },
  },
});

describe("/virtualmachinereplicaset-validate", () => {
  it("allows a replica set whose selector matches its template", async () => {
    const r = await validateVmirs(
      req("VirtualMachineInstanceReplicaSet", "virtualmachineinstancereplicasets", rs({ matchLabels: { app: "web" } })),
    );
    expect(r.allowed).toBe(true);
  });

  it("denies a selector that does not match, with KubeVirt's cause", async () => {
    const r = await validateVmirs(
      req("VirtualMachineInstanceReplicaSet", "virtualmachineinstancereplicasets", rs({ matchLabels: { app: "db" } })),
    );
    expect(r).toMatchObject({
      allowed: false,
      code: 422,
      causes: [{ reason: "FieldValueInvalid", message: "selector does not match labels.", field: "spec.selector" }],
    });
  });
});

describe("/virtualmachinepool-validate", () => {
  it("denies a selector change on update", async () => {
    const old = pool({ matchLabels: { app: "web" } });
    const next = pool({ matchLabels: {} });
    const r = await validateVmPool("kubevirt")(
      req("VirtualMachinePool", "virtualmachinepools", next, { operation: "UPDATE", oldObject: old }),
    );
    expect(r).toMatchObject({
      allowed: false,
      causes: [{ message: "selector is immutable after creation.", field: "spec.selector" }],
    });
  });

  it("allows a valid pool", async () => {
    const r = await validateVmPool("kubevirt")(
      req("VirtualMachinePool", "virtualmachinepools", pool({ matchLabels: { app: "web" } })),
    );
    expect(r.allowed).toBe(true);
  });
});

describe("replica sets and pools follow the CR's feature gates", () => {
  const hostDisk = {
    domain: { devices: { disks: [{ name: "hd", disk: {} }] }, resources: { requests: { memory: "128Mi" } } },
    volumes: [{ name: "hd", hostDisk: { path: "/var/lib/hd.img", type: "DiskOrCreate", capacity: "1Mi" } }],
  };
  const gates = (featureGates: string[]) => ({
    configuration: () => Promise.resolve({ developerConfiguration: { featureGates } }),
  });
  const object = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstanceReplicaSet",
    metadata: { name: "x" },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: "web" } },
      template: { metadata: { labels: { app: "web" } }, spec: hostDisk },
    },
  };
  const request = req("VirtualMachineInstanceReplicaSet", "virtualmachineinstancereplicasets", object);

  it("a hostDisk template is refused until HostDisk is on", async () => {
    expect(await validateVmirsWith(gates([]))(request)).toMatchObject({
      allowed: false,
      causes: [{ message: "HostDisk feature gate is not enabled", field: "spec.template.spec.volumes[0]" }],
    });
    expect(await validateVmirsWith(gates(["HostDisk"]))(request)).toEqual({ allowed: true });
  });

  it("a pool's template too", async () => {
    const p = pool({ matchLabels: { app: "web" } });
    p.spec.virtualMachineTemplate.spec.template.spec = hostDisk;
    const r = req("VirtualMachinePool", "virtualmachinepools", p);
    expect((await validateVmPool("kubevirt", gates([]))(r)).allowed).toBe(false);
    expect(await validateVmPool("kubevirt", gates(["HostDisk"]))(r)).toEqual({ allowed: true });
  });
});
