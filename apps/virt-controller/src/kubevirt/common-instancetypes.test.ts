import { type BundledObject, commonInstancetypes, instancetypeResourceType, type KubeVirt, objectKey } from "@kvt/api";
import type { KubeObject } from "@kvt/kube";
import { FakeApi, reconcileWithGuard } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import {
  type ClusterObjectView,
  CommonInstancetypesController,
  deployed,
  deploymentEnabled,
  MANAGED_BY,
  planCommonInstancetypes,
} from "./common-instancetypes.ts";

type Kind = BundledObject["kind"];
const IT: Kind = "VirtualMachineClusterInstancetype";
const PREF: Kind = "VirtualMachineClusterPreference";
const bundle = commonInstancetypes();
const nano = bundle.find((o) => o.metadata.name === "u1.nano")!;

const kv = (enabled?: boolean): KubeVirt => ({
  apiVersion: "kubevirt.io/v1",
  kind: "KubeVirt",
  metadata: { name: "kubevirt", namespace: "kubevirt" },
  spec: { configuration: enabled === undefined ? {} : { commonInstancetypesDeployment: { enabled } } },
});

/** The stored objects: every bundled object as deployed, with `edit` applied to a copy of u1.nano. */
function storedWith(edit?: (o: ClusterObjectView & { spec: { cpu: { guest: number } } }) => void) {
  const all = bundle.map((o) => ({ ...deployed(o), metadata: { ...deployed(o).metadata, resourceVersion: "7" } }));
  const n = all.find((o) => o.metadata.name === "u1.nano") as unknown as ClusterObjectView & {
    spec: { cpu: { guest: number } };
  };
  edit?.(n);
  return new Map<Kind, ClusterObjectView[]>([
    [IT, all.filter((o) => o.kind === IT)],
    [PREF, all.filter((o) => o.kind === PREF)],
  ]);
}

describe("deploymentEnabled", () => {
  it("is on unless the CR sets commonInstancetypesDeployment.enabled to false (KubeVirt 1.4's default)", () => {
    expect(deploymentEnabled(kv())).toBe(true);
    expect(deploymentEnabled(kv(true))).toBe(true);
    expect(deploymentEnabled(kv(false))).toBe(false);
  });
});

describe("planCommonInstancetypes", () => {
  it("creates the whole bundle on an empty cluster, each with virt-operator's managed-by label", () => {
    const plan = planCommonInstancetypes(bundle, new Map(), true);
    expect(plan.create).toHaveLength(bundle.length);
    expect(plan.create.filter((o) => o.kind === IT)).toHaveLength(65);
    expect(plan.create.filter((o) => o.kind === PREF)).toHaveLength(54);
    for (const o of plan.create) expect(o.metadata.labels[MANAGED_BY.key]).toBe("virt-operator");
    expect(plan.update).toEqual([]);
    expect(plan.delete).toEqual([]);
  });

  it("writes nothing when every object is as deployed", () => {
    expect(planCommonInstancetypes(bundle, storedWith(), true)).toEqual({ create: [], update: [], delete: [] });
  });

  it("restores an edited managed object, keeping its resourceVersion and the labels others added", () => {
    const existing = storedWith((n) => {
      n.spec.cpu.guest = 8;
      (n.metadata as { labels: Record<string, string> }).labels.team = "a";
    });
    const plan = planCommonInstancetypes(bundle, existing, true);
    expect(plan.create).toEqual([]);
    expect(plan.update).toHaveLength(1);
    const [u] = plan.update as (BundledObject & { metadata: { resourceVersion?: string } })[];
    expect(u?.metadata.name).toBe("u1.nano");
    expect(u?.spec).toEqual(nano.spec);
    expect(u?.metadata.resourceVersion).toBe("7");
    expect(u?.metadata.labels.team).toBe("a");
    expect(u?.metadata.labels[MANAGED_BY.key]).toBe("virt-operator");
  });

  it("adopts an object of the bundle's release (its version label) that lacks the managed-by label", () => {
    const existing = storedWith((n) => {
      delete (n.metadata as { labels: Record<string, string> }).labels[MANAGED_BY.key];
    });
    const plan = planCommonInstancetypes(bundle, existing, true);
    expect(plan.update.map((o) => o.metadata.name)).toEqual(["u1.nano"]);
    expect(plan.update[0]?.metadata.labels[MANAGED_BY.key]).toBe("virt-operator");
  });

  it("leaves an admin's own object of a bundled name alone", () => {
    const existing = storedWith((n) => {
      (n.metadata as { labels: Record<string, string> }).labels = { mine: "yes" };
      n.spec.cpu.guest = 3;
    });
    expect(planCommonInstancetypes(bundle, existing, true)).toEqual({ create: [], update: [], delete: [] });
  });

  it("does not rewrite an object whose generation is the one this controller wrote", () => {
    const existing = storedWith((n) => {
      n.spec.cpu.guest = 8;
    });
    const plan = planCommonInstancetypes(bundle, existing, true, (_kind, o) => o.metadata?.name === "u1.nano");
    expect(plan.update).toEqual([]);
  });

  it("deletes only the managed objects when disabled", () => {
    const existing = storedWith((n) => {
      (n.metadata as { labels: Record<string, string> }).labels = { mine: "yes" };
    });
    const plan = planCommonInstancetypes(bundle, existing, false);
    expect(plan.create).toEqual([]);
    expect(plan.update).toEqual([]);
    expect(plan.delete).toHaveLength(bundle.length - 1);
    expect(plan.delete).not.toContainEqual({ kind: IT, name: "u1.nano" });
  });
});

describe("CommonInstancetypesController", () => {
  const type = instancetypeResourceType;

  function harness(cr: KubeVirt | undefined) {
    const api = new FakeApi();
    let current = cr;
    /** Preference creates to refuse, as a webhook that does not serve yet refuses them. */
    let refuse = 0;
    const client = (kind: Kind) => {
      const real = api.client<KubeObject>(type(kind));
      return {
        ...real,
        create: async (o: KubeObject) => {
          if (kind === PREF && refuse > 0) {
            refuse--;
            throw new Error('failed calling webhook "virtualmachineclusterpreference-validator.kubevirt.io"');
          }
          return real.create(o);
        },
      };
    };
    const controller = new CommonInstancetypesController({
      kubevirt: () => current,
      bundle: commonInstancetypes,
      stored: (kind) => api.all<ClusterObjectView>(type(kind)),
      client,
    });
    const run = async () =>
      (await reconcileWithGuard(controller, objectKey("kubevirt", "kubevirt"), [])).requeueAfterMs;
    return { api, run, setCr: (c: KubeVirt) => (current = c), refuse: (n: number) => (refuse = n) };
  }

  it("does nothing before the KubeVirt CR exists", async () => {
    const h = harness(undefined);
    expect(await h.run()).toBeUndefined();
    expect(h.api.writes()).toEqual([]);
  });

  it("deploys the bundle, retries what failed (virt-api's webhooks not serving yet), removes it when disabled", async () => {
    const h = harness(kv());
    h.refuse(1);
    expect(await h.run()).toBe(2_000);
    expect(h.api.all(type(IT))).toHaveLength(65);
    expect(h.api.all(type(PREF))).toHaveLength(53);

    expect(await h.run()).toBeUndefined();
    expect(h.api.all(type(PREF))).toHaveLength(54);
    const writes = h.api.writes().length;
    expect(await h.run()).toBeUndefined();
    expect(h.api.writes()).toHaveLength(writes);

    h.setCr(kv(false));
    expect(await h.run()).toBeUndefined();
    expect(h.api.all(type(IT))).toEqual([]);
    expect(h.api.all(type(PREF))).toEqual([]);
  });
});
