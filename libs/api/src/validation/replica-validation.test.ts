import { describe, expect, it } from "vitest";
import { customResourceDefinitions } from "../crds/crds.ts";
import { labelSelectorOf } from "../semantics/label-selector.ts";
import type { VirtualMachineInstanceReplicaSet, VirtualMachinePool } from "../types.ts";
import { validateVmirs, validateVmPool } from "./replica-validation.ts";

const vmiSpec = {
  domain: { devices: {}, memory: { guest: "128Mi" } },
};

function rs(mutate: (r: VirtualMachineInstanceReplicaSet) => void = () => {}): VirtualMachineInstanceReplicaSet {
  const r: VirtualMachineInstanceReplicaSet = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstanceReplicaSet",
    metadata: { name: "rs", namespace: "default" },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: { metadata: { labels: { app: "web" } }, spec: structuredClone(vmiSpec) },
    },
  };
  mutate(r);
  return r;
}

function pool(mutate: (p: VirtualMachinePool) => void = () => {}): VirtualMachinePool {
  const p: VirtualMachinePool = {
    apiVersion: "pool.kubevirt.io/v1beta1",
    kind: "VirtualMachinePool",
    metadata: { name: "pool", namespace: "default" },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      virtualMachineTemplate: {
        metadata: { labels: { app: "web" } },
        spec: { runStrategy: "Always", template: { spec: structuredClone(vmiSpec) } },
      },
    },
  };
  mutate(p);
  return p;
}

describe("labelSelectorOf (apimachinery LabelSelectorAsSelector)", () => {
  it.each([
    [{ matchLabels: { b: "2", a: "1" } }, "a=1,b=2"],
    [{ matchExpressions: [{ key: "t", operator: "In", values: ["y", "x"] }] }, "t in (x,y)"],
    [{ matchExpressions: [{ key: "t", operator: "NotIn", values: ["x"] }] }, "t notin (x)"],
    [{ matchExpressions: [{ key: "t", operator: "Exists" }] }, "t"],
    [{ matchExpressions: [{ key: "t", operator: "DoesNotExist" }] }, "!t"],
    [{}, ""],
  ])("%j prints %j", (spec, expected) => {
    expect(labelSelectorOf(spec).string).toBe(expected);
  });

  it("an empty selector matches everything, a missing one nothing", () => {
    expect(labelSelectorOf({}).matches({ a: "1" })).toBe(true);
    expect(labelSelectorOf(undefined).matches({ a: "1" })).toBe(false);
  });

  it("expressions match as Kubernetes matches them", () => {
    const s = labelSelectorOf({
      matchLabels: { app: "web" },
      matchExpressions: [
        { key: "tier", operator: "NotIn", values: ["db"] },
        { key: "gone", operator: "DoesNotExist" },
      ],
    });
    expect(s.matches({ app: "web" })).toBe(true);
    expect(s.matches({ app: "web", tier: "db" })).toBe(false);
    expect(s.matches({ app: "web", gone: "" })).toBe(false);
    expect(s.matches({ app: "db" })).toBe(false);
  });

  it("refuses an unknown operator with apimachinery's message", () => {
    expect(() => labelSelectorOf({ matchExpressions: [{ key: "a", operator: "Gt", values: ["1"] }] })).toThrow(
      '"Gt" is not a valid label selector operator',
    );
  });
});

describe("validateVmirs (KubeVirt vmirs-admitter)", () => {
  it("accepts a replica set whose selector matches its template labels", () => {
    expect(validateVmirs(rs())).toEqual([]);
  });

  it.each([
    [
      "selector does not match the template labels",
      (r: VirtualMachineInstanceReplicaSet) => {
        r.spec.selector = { matchLabels: { app: "db" } };
      },
      { type: "FieldValueInvalid", message: "selector does not match labels.", field: "spec.selector" },
    ],
    [
      "invalid selector operator",
      (r: VirtualMachineInstanceReplicaSet) => {
        r.spec.selector = { matchExpressions: [{ key: "app", operator: "Bogus" }] };
      },
      {
        type: "FieldValueInvalid",
        message: '"Bogus" is not a valid label selector operator',
        field: "spec.selector",
      },
    ],
    [
      "missing template",
      (r: VirtualMachineInstanceReplicaSet) => {
        delete (r.spec as { template?: unknown }).template;
      },
      { type: "FieldValueRequired", message: "missing virtual machine template.", field: "spec.template" },
    ],
    [
      "template without a domain",
      (r: VirtualMachineInstanceReplicaSet) => {
        delete (r.spec.template.spec as { domain?: unknown }).domain;
      },
      {
        type: "FieldValueRequired",
        message: "spec.template.spec.domain is a required field",
        field: "spec.template.spec.domain",
      },
    ],
  ])("%s", (_name, mutate, expected) => {
    expect(validateVmirs(rs(mutate))).toContainEqual(expected);
  });
});

describe("validateVmPool (KubeVirt vmpool-admitter)", () => {
  it("accepts a pool whose selector matches its VM template labels", () => {
    expect(validateVmPool(pool(), undefined)).toEqual([]);
  });

  it.each([
    ["0", 0, "maxUnavailable must be greater than 0"],
    ["50", "50", "maxUnavailable percentage must end with %"],
    ["0%", "0%", "maxUnavailable percentage value 0 must be between 1 and 100"],
    ["101%", "101%", "maxUnavailable percentage value 101 must be between 1 and 100"],
    ["x%", "x%", 'maxUnavailable percentage value "x" is invalid: strconv.Atoi: parsing "x": invalid syntax'],
  ])("maxUnavailable %s is refused", (_name, value, message) => {
    const causes = validateVmPool(
      pool((p) => {
        p.spec.maxUnavailable = value;
      }),
      undefined,
    );
    expect(causes).toEqual([{ type: "FieldValueInvalid", message, field: "spec.maxUnavailable" }]);
  });

  it("refuses two scale-in strategies at once", () => {
    const causes = validateVmPool(
      pool((p) => {
        p.spec.scaleInStrategy = { unmanaged: {}, proactive: {} };
      }),
      undefined,
    );
    expect(causes).toEqual([
      {
        type: "FieldValueInvalid",
        message: "only one strategy can be configured at a time: but found unmanaged, proactive strategies",
        field: "spec.scaleInStrategy",
      },
    ]);
  });

  it("refuses a selector change on update", () => {
    const next = pool((p) => {
      p.spec.selector = { matchLabels: {} };
    });
    expect(validateVmPool(next, pool())).toContainEqual({
      type: "FieldValueInvalid",
      message: "selector is immutable after creation.",
      field: "spec.selector",
    });
  });

  it("validates the VM template as a VM (RunStrategy must be specified)", () => {
    const causes = validateVmPool(
      pool((p) => {
        delete p.spec.virtualMachineTemplate.spec!.runStrategy;
      }),
      undefined,
    );
    expect(causes).toContainEqual({
      type: "FieldValueInvalid",
      message: "RunStrategy must be specified",
      field: "spec.virtualMachineTemplate.spec.running",
    });
  });
});

describe("the VMIRS and VirtualMachinePool CRDs", () => {
  const byKind = (kind: string) => customResourceDefinitions().find((c) => c.spec.names.kind === kind)!;

  it.each([
    [
      "VirtualMachineInstanceReplicaSet",
      "virtualmachineinstancereplicasets.kubevirt.io",
      ["vmirs", "vmirss"],
      ["v1", "v1alpha3"],
      "v1",
    ],
    [
      "VirtualMachinePool",
      "virtualmachinepools.pool.kubevirt.io",
      ["vmpool", "vmpools"],
      ["v1alpha1", "v1beta1"],
      "v1beta1",
    ],
  ])("%s: %s, short names %j, versions %j, stored %s", (kind, name, shortNames, versions, stored) => {
    const crd = byKind(kind);
    expect(crd.metadata.name).toBe(name);
    expect(crd.spec.names.shortNames).toEqual(shortNames);
    expect(crd.spec.versions.map((v) => v.name)).toEqual(versions);
    expect(crd.spec.versions.filter((v) => v.storage).map((v) => v.name)).toEqual([stored]);
    for (const v of crd.spec.versions) {
      expect(v.additionalPrinterColumns?.map((c) => c.name)).toEqual(["Desired", "Current", "Ready", "Age"]);
      expect(v.subresources).toEqual({
        status: {},
        scale: {
          specReplicasPath: ".spec.replicas",
          statusReplicasPath: ".status.replicas",
          labelSelectorPath: ".status.labelSelector",
        },
      });
    }
  });
});
