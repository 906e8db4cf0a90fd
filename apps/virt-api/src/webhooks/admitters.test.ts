import type { KubeVirtConfiguration, VmiPhase } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { FakeCluster, newVmi } from "../fake/fake-cluster.ts";
import type { KubeVirtConfigSource } from "../kube/kubevirt-config.ts";
import { type AdmissionRequest, parseReview, reviewResponse } from "./admission.ts";
import {
  mutateMigration,
  mutateVm,
  mutateVmiWith,
  validateMigrationCreate,
  validateMigrationPolicy,
  validateMigrationUpdate,
  validateVm,
  validateVmiCreate,
  validateVmiUpdate,
  webhookRoutes,
} from "./admitters.ts";

function req(object: Record<string, unknown>, extra: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    uid: "u1",
    kind: { group: "kubevirt.io", version: "v1", kind: "VirtualMachine" },
    resource: { group: "kubevirt.io", version: "v1", resource: "virtualmachines" },
    operation: "CREATE",
    namespace: "default",
    name: "vm1",
    object,
    ...extra,
  };
}

const goodSpec = {
  domain: { resources: { requests: { memory: "128Mi" } }, devices: { disks: [{ name: "root", disk: {} }] } },
  volumes: [{ name: "root", containerDisk: { image: "x" } }],
};

function vm(spec: Record<string, unknown>): Record<string, unknown> {
  return { apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", metadata: { name: "vm1" }, spec };
}

describe("VM validation", () => {
  it.each([
    [{ runStrategy: "Always", template: { spec: goodSpec } }, undefined],
    [{ running: true, template: { spec: goodSpec } }, undefined],
    [{ template: { spec: goodSpec } }, "RunStrategy must be specified"],
    [
      { running: true, runStrategy: "Always", template: { spec: goodSpec } },
      "Running and RunStrategy are mutually exclusive",
    ],
    [{ runStrategy: "Sometimes", template: { spec: goodSpec } }, "Invalid RunStrategy (Sometimes)"],
    [{ runStrategy: "Always" }, "missing virtual machine template."],
    [
      { runStrategy: "Always", template: { spec: { ...goodSpec, volumes: [] } } },
      "spec.template.spec.domain.devices.disks[0].Name 'root' not found.",
    ],
    [
      { runStrategy: "Always", template: { spec: { ...goodSpec, evictionStrategy: "Sometimes" } } },
      "unrecognized option: Sometimes",
    ],
  ])("validateVm(%j) -> %s", async (spec, message) => {
    const result = await validateVm("kubevirt")(req(vm(spec)));
    if (message === undefined) expect(result).toEqual({ allowed: true });
    else {
      expect(result.allowed).toBe(false);
      expect(JSON.stringify(result)).toContain(message);
    }
  });

  it("a denial becomes an AdmissionReview with 422 Invalid, the joined message and field causes", async () => {
    const r = req(vm({ template: { spec: { domain: { devices: {} } } } }));
    const review = reviewResponse(r, await validateVm("kubevirt")(r)) as { response: Record<string, unknown> };
    expect(review.response).toMatchObject({
      uid: "u1",
      allowed: false,
      status: { code: 422, reason: "Invalid", message: expect.stringContaining("RunStrategy must be specified") },
    });
    const causes = (review.response.status as { details: { causes: Array<{ field: string; reason?: string }> } })
      .details.causes;
    expect(causes.length).toBeGreaterThanOrEqual(1);
    expect(causes.every((c) => typeof c.reason === "string" && !("type" in c))).toBe(true);
  });
});

describe("mutation", () => {
  it("mutateVm replaces /spec with the defaulted spec (firmware UUID) as a base64 JSONPatch", async () => {
    const r = req(vm({ runStrategy: "Always", template: { spec: goodSpec } }));
    const review = reviewResponse(r, await mutateVm(r)) as { response: { patchType: string; patch: string } };
    expect(review.response.patchType).toBe("JSONPatch");
    const patch = JSON.parse(Buffer.from(review.response.patch, "base64").toString()) as Array<{
      op: string;
      path: string;
      value: { template: { spec: { domain: { firmware: { uuid: string } } } } };
    }>;
    expect(patch[0]?.op).toBe("replace");
    expect(patch[0]?.path).toBe("/spec");
    expect(patch[0]?.value.template.spec.domain.firmware.uuid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("mutateMigration adds the vmi-name label and the finalizer", async () => {
    const result = await mutateMigration(req({ metadata: { generateName: "m-" }, spec: { vmiName: "vm1" } }));
    expect(result).toMatchObject({
      allowed: true,
      patch: [
        {
          op: "replace",
          path: "/metadata",
          value: {
            generateName: "m-",
            labels: { "kubevirt.io/vmi-name": "vm1" },
            finalizers: [expect.stringMatching(/^kubevirt.io\/migrationJobFinalize/)],
          },
        },
      ],
    });
  });
});

describe("VMI", () => {
  it("create validation requires memory", async () => {
    const meta = { metadata: { name: "vmi1" } };
    expect((await validateVmiCreate("kubevirt")(req({ ...meta, spec: { domain: { devices: {} } } }))).allowed).toBe(
      false,
    );
    expect(await validateVmiCreate("kubevirt")(req({ ...meta, spec: goodSpec }))).toEqual({ allowed: true });
  });

  it("update of the spec is denied to users and allowed to KubeVirt's service accounts", async () => {
    const admit = validateVmiUpdate("kubevirt");
    const base = { operation: "UPDATE" as const, oldObject: { spec: goodSpec } };
    const changed = { spec: { ...goodSpec, hostname: "x" } };
    const denied = await admit(req(changed, { ...base, userInfo: { username: "alice" } }));
    expect(JSON.stringify(denied)).toContain("update of VMI object is restricted");
    const allowed = await admit(
      req(changed, { ...base, userInfo: { username: "system:serviceaccount:kubevirt:kubevirt-handler" } }),
    );
    expect(allowed.allowed).toBe(true);
  });
});

describe("the KubeVirt CR's network settings", () => {
  const network = (settings: NonNullable<KubeVirtConfiguration["network"]>): KubeVirtConfigSource => ({
    configuration: () => Promise.resolve({ network: settings }),
  });
  const vmiReq = (spec: Record<string, unknown>) =>
    req(
      { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstance", metadata: { name: "vmi1" }, spec },
      {
        kind: { group: "kubevirt.io", version: "v1", kind: "VirtualMachineInstance" },
        resource: { group: "kubevirt.io", version: "v1", resource: "virtualmachineinstances" },
      },
    );
  const bridged = {
    ...goodSpec,
    domain: {
      ...goodSpec.domain,
      devices: { ...goodSpec.domain.devices, interfaces: [{ name: "default", bridge: {} }] },
    },
    networks: [{ name: "default", pod: {} }],
  };

  it("a bridge on the pod network is refused with KubeVirt's cause when permitBridgeInterfaceOnPodNetwork is false", async () => {
    expect(await validateVmiCreate("kubevirt", network({}))(vmiReq(bridged))).toEqual({ allowed: true });
    const denied = await validateVmiCreate(
      "kubevirt",
      network({ permitBridgeInterfaceOnPodNetwork: false }),
    )(vmiReq(bridged));
    expect(denied).toMatchObject({
      allowed: false,
      code: 422,
      causes: [
        {
          reason: "FieldValueInvalid",
          message: "Bridge on pod network configuration is not enabled under kubevirt-config",
          field: "spec.domain.devices.interfaces[0].name",
        },
      ],
    });
  });

  it("a VMI without interfaces gets the CR's defaultNetworkInterface (KubeVirt's default: bridge)", async () => {
    const interfacesOf = async (settings: Record<string, unknown>) => {
      const result = await mutateVmiWith(undefined, network(settings))(vmiReq(structuredClone(goodSpec)));
      if (!result.allowed) throw new Error(result.message);
      const spec = result.patch?.find((p) => p.path === "/spec")?.value as { domain: { devices: { interfaces: [] } } };
      return spec.domain.devices.interfaces;
    };
    expect(await interfacesOf({})).toEqual([{ name: "default", bridge: {} }]);
    expect(await interfacesOf({ defaultNetworkInterface: "masquerade" })).toEqual([
      { name: "default", masquerade: {} },
    ]);
  });

  it("defaulting to a bridge the CR forbids answers 400 with KubeVirt's message", async () => {
    const mutate = mutateVmiWith(undefined, network({ permitBridgeInterfaceOnPodNetwork: false }));
    expect(await mutate(vmiReq(structuredClone(goodSpec)))).toEqual({
      allowed: false,
      code: 400,
      message: "bridge interface is not enabled in kubevirt-config",
    });
    const vmValidation = validateVm("kubevirt", undefined, network({ permitBridgeInterfaceOnPodNetwork: false }));
    expect(await vmValidation(req(vm({ running: true, template: { spec: goodSpec } })))).toEqual({
      allowed: false,
      code: 400,
      message: "bridge interface is not enabled in kubevirt-config",
    });
  });
});

describe("migrations", () => {
  it.each<[VmiPhase | undefined, string | undefined]>([
    [undefined, 'the VMI "default/vm1" does not exist'],
    ["Succeeded", "Cannot migrate VMI in finalized state."],
    ["Running", undefined],
  ])("create with VMI phase %s -> %s", async (phase, message) => {
    const cluster = new FakeCluster();
    if (phase) cluster.addVmi(newVmi("vm1", phase));
    const result = await validateMigrationCreate(cluster, "kubevirt")(req({ spec: { vmiName: "vm1" } }, { name: "" }));
    if (message === undefined) expect(result.allowed).toBe(true);
    else expect(result).toMatchObject({ allowed: false, code: 400, message });
  });

  it("create is denied while another migration of the VMI is in flight", async () => {
    const cluster = new FakeCluster().addVmi(newVmi("vm1", "Running"));
    cluster.addVmim({
      metadata: { name: "m0", namespace: "default", uid: "uid-m0", labels: { "kubevirt.io/vmi-name": "vm1" } },
      spec: { vmiName: "vm1" },
      status: { phase: "Running" },
    });
    const result = await validateMigrationCreate(cluster, "kubevirt")(req({ spec: { vmiName: "vm1" } }, { name: "" }));
    expect(JSON.stringify(result)).toContain("in-flight migration detected. Active migration job (uid-m0)");
  });

  it("create is denied for a VMI that is not live-migratable", async () => {
    const cluster = new FakeCluster().addVmi(
      newVmi("vm1", "Running", [
        { type: "LiveMigratable", status: "False", reason: "DisksNotLiveMigratable", message: "rwo" } as never,
      ]),
    );
    const result = await validateMigrationCreate(cluster, "kubevirt")(req({ spec: { vmiName: "vm1" } }));
    expect(JSON.stringify(result)).toContain("Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: rwo");
  });

  it("create with a wrongly typed vmiName is denied before any lookup (fuzz lane: it was a 500)", async () => {
    const cluster = new FakeCluster();
    const names = Array.from({ length: 2000 }, () => "vm1");
    const result = await validateMigrationCreate(cluster, "kubevirt")(req({ spec: { vmiName: names } }, { name: "" }));
    expect(result).toMatchObject({ allowed: false });
    expect(JSON.stringify(result)).toContain("spec.vmiName");
  });

  it("the spec is immutable on update", async () => {
    const r = req({ spec: { vmiName: "b" } }, { operation: "UPDATE", oldObject: { spec: { vmiName: "a" } } });
    expect((await validateMigrationUpdate(r)).allowed).toBe(false);
  });

  it("MigrationPolicy maxDowntimeMs must be in 1..2000000", async () => {
    // A MigrationPolicy's spec.selectors is required (the CRD's schema); @kvt/api's validation checks it too.
    const policy = (spec: Record<string, unknown>) => req({ spec: { selectors: {}, ...spec } });
    const denied = await validateMigrationPolicy(policy({ maxDowntimeMs: 0 }));
    expect(denied.allowed).toBe(false);
    expect(denied).toMatchObject({
      code: 422,
      causes: [{ reason: "FieldValueInvalid", field: "spec.maxDowntimeMs", message: "must be between 1 and 2000000" }],
    });
    expect((await validateMigrationPolicy(policy({ maxDowntimeMs: 300 }))).allowed).toBe(true);
    expect((await validateMigrationPolicy(policy({ completionTimeoutPerGiB: -1 }))).allowed).toBe(false);
    expect((await validateMigrationPolicy(policy({ bandwidthPerMigration: "-1Mi" }))).allowed).toBe(false);
  });
});

describe("wrongly typed objects (fuzz lane: a string domain was a 500)", () => {
  const vmObject = { spec: { runStrategy: "Halted", template: { spec: { domain: "99999999999999999999Ei" } } } };
  it.each([
    ["/virtualmachines-mutate", vmObject],
    ["/virtualmachines-validate", vmObject],
    ["/virtualmachineinstances-mutate", { spec: { domain: 5 } }],
    ["/migration-mutate-create", { spec: { vmiName: [] } }],
  ])("%s refuses %j with its type errors", async (path, object) => {
    const admit = webhookRoutes(new FakeCluster(), "kubevirt")[path];
    const result = await admit?.(req(object));
    expect(result).toMatchObject({ allowed: false });
    expect(JSON.stringify(result)).toContain("must be of type");
  });
});

describe("parseReview", () => {
  it.each([
    [null],
    [{ kind: "AdmissionReview", apiVersion: "admission.k8s.io/v1beta1", request: {} }],
    [{ kind: "AdmissionReview", apiVersion: "admission.k8s.io/v1" }],
  ])("rejects %j", (body) => {
    expect(() => parseReview(body)).toThrow();
  });

  // Found by the API fuzz lane: a scalar object reached the admitters and answered 500 "Cannot create property".
  const review = (request: Record<string, unknown>) => ({
    kind: "AdmissionReview",
    apiVersion: "admission.k8s.io/v1",
    request: { uid: "u", operation: "CREATE", kind: { kind: "VirtualMachine" }, resource: {}, ...request },
  });
  it.each([
    [{ object: 255 }, "the AdmissionReview request's object is not a JSON object"],
    [{ object: "1e400" }, "the AdmissionReview request's object is not a JSON object"],
    [{ object: [] }, "the AdmissionReview request's object is not a JSON object"],
    [{ oldObject: -0.000001 }, "the AdmissionReview request's oldObject is not a JSON object"],
    [{ kind: "VirtualMachine" }, "the AdmissionReview request has no kind/resource"],
    [{ name: 12 }, "the AdmissionReview request's name is not a string"],
  ])("rejects a request with %j as a bad review", (request, message) => {
    expect(() => parseReview(review(request))).toThrow(message);
  });
});
