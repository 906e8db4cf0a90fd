import { describe, expect, it } from "vitest";
import type { KubeObject } from "../types.ts";
import { persistentVolumeClaimStrategy, persistentVolumeStrategy, storageClassStrategy } from "./storage.ts";

const pvc = (spec: Record<string, unknown>, status?: Record<string, unknown>): KubeObject => ({
  metadata: { name: "c", namespace: "ns" },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...spec },
  ...(status ? { status } : {}),
});
const pv = (spec: Record<string, unknown>): KubeObject => ({
  metadata: { name: "v" },
  spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/x" }, ...spec },
});
const sc = (extra: Record<string, unknown> = {}): KubeObject => ({
  metadata: { name: "s" },
  provisioner: "rancher.io/local-path",
  reclaimPolicy: "Delete",
  volumeBindingMode: "Immediate",
  ...extra,
});
const messages = (causes: { field?: string; message?: string }[]): string[] =>
  causes.map((c) => `${c.field}: ${c.message}`);

describe("persistentVolumeClaimStrategy", () => {
  it("defaults status.phase Pending and volumeMode Filesystem on create", () => {
    const o = pvc({});
    persistentVolumeClaimStrategy.prepareCreate!(o);
    expect(o.status).toEqual({ phase: "Pending" });
    expect((o.spec as { volumeMode: string }).volumeMode).toBe("Filesystem");
  });

  it.each([
    [{ accessModes: [] }, ["spec.accessModes: Required value: at least 1 access mode is required"]],
    [
      { accessModes: ["RWO"] },
      [
        'spec.accessModes: Unsupported value: "RWO": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"',
      ],
    ],
    [
      { accessModes: ["ReadWriteOncePod", "ReadWriteOnce"] },
      ["spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"],
    ],
    [{ resources: {} }, ["spec.resources[storage]: Required value"]],
    [
      { resources: { requests: { storage: "0" } } },
      ['spec.resources[storage]: Invalid value: "0": must be greater than zero'],
    ],
    [
      { resources: { requests: { storage: "lots" } } },
      ['spec.resources[storage]: Invalid value: "lots": must be a valid quantity'],
    ],
    [{ volumeMode: "Raw" }, ['spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"']],
  ])("refuses %j", (spec, expected) => {
    expect(messages(persistentVolumeClaimStrategy.validate!(pvc(spec), undefined))).toEqual(expected);
  });

  it("lets the controller set volumeName once and the default class be set once, and freezes the rest", () => {
    const old = pvc({ volumeMode: "Filesystem" });
    expect(persistentVolumeClaimStrategy.validate!(pvc({ volumeMode: "Filesystem", volumeName: "pv1" }), old)).toEqual(
      [],
    );
    expect(
      persistentVolumeClaimStrategy.validate!(pvc({ volumeMode: "Filesystem", storageClassName: "x" }), old),
    ).toEqual([]);
    const bound = pvc({ volumeMode: "Filesystem", volumeName: "pv1" }, { phase: "Bound" });
    expect(
      messages(persistentVolumeClaimStrategy.validate!(pvc({ volumeMode: "Filesystem", volumeName: "pv2" }), bound)),
    ).toEqual([
      "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
    ]);
    const grown = pvc({ volumeMode: "Filesystem", volumeName: "pv1", resources: { requests: { storage: "2Gi" } } });
    expect(persistentVolumeClaimStrategy.validate!(grown, bound)).toEqual([]);
  });
});

describe("persistentVolumeStrategy", () => {
  it("defaults phase Pending, reclaim policy Retain and volumeMode Filesystem", () => {
    const o = pv({});
    persistentVolumeStrategy.prepareCreate!(o);
    expect(o.status).toEqual({ phase: "Pending" });
    expect(o.spec).toMatchObject({ persistentVolumeReclaimPolicy: "Retain", volumeMode: "Filesystem" });
  });

  it.each([
    [{ hostPath: undefined }, ["spec: Required value: must specify a volume type"]],
    [{ nfs: { server: "s", path: "/" } }, ["spec.nfs: Forbidden: may not specify more than 1 volume type"]],
    [{ hostPath: { path: "" } }, ["spec.hostPath.path: Required value"]],
    [
      { hostPath: undefined, local: { path: "/d" } },
      ["spec.nodeAffinity: Required value: Local volume requires node affinity"],
    ],
    [{ capacity: {} }, ["spec.capacity: Required value"]],
    [{ accessModes: [] }, ["spec.accessModes: Required value"]],
    [
      { persistentVolumeReclaimPolicy: "Keep" },
      [
        'spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: "Delete", "Recycle", "Retain"',
      ],
    ],
  ])("refuses %j", (spec, expected) => {
    expect(messages(persistentVolumeStrategy.validate!(pv(spec), undefined))).toEqual(expected);
  });

  it("freezes the volume source after creation", () => {
    expect(messages(persistentVolumeStrategy.validate!(pv({ hostPath: { path: "/y" } }), pv({})))).toEqual([
      "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation",
    ]);
  });
});

describe("storageClassStrategy", () => {
  it("defaults reclaimPolicy Delete and volumeBindingMode Immediate", () => {
    const o: KubeObject = { metadata: { name: "s" }, provisioner: "p" };
    storageClassStrategy.prepareCreate!(o);
    expect(o).toMatchObject({ reclaimPolicy: "Delete", volumeBindingMode: "Immediate" });
  });

  it("refuses a missing provisioner and unknown modes", () => {
    expect(
      messages(storageClassStrategy.validate!(sc({ provisioner: undefined, volumeBindingMode: "Later" }), undefined)),
    ).toEqual([
      "provisioner: Required value",
      'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"',
    ]);
  });

  it("forbids changing parameters, provisioner, reclaimPolicy and volumeBindingMode", () => {
    const next = sc({
      parameters: { a: "b" },
      provisioner: "other.io/x",
      reclaimPolicy: "Retain",
      volumeBindingMode: "WaitForFirstConsumer",
    });
    expect(messages(storageClassStrategy.validate!(next, sc()))).toEqual([
      "parameters: Forbidden: updates to parameters are forbidden.",
      "provisioner: Forbidden: updates to provisioner are forbidden.",
      "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
      'volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable',
    ]);
  });
});
