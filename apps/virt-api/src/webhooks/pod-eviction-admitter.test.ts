import type { EvictionStrategy, JsonPatchOp, VirtualMachineInstance } from "@kvt/api";
import { describe, expect, it } from "vitest";
import type { AdmissionRequest } from "./admission.ts";
import {
  decideLauncherEviction,
  type EvictionCluster,
  type EvictionPod,
  validatePodEviction,
} from "./pod-eviction-admitter.ts";

function vmi(
  o: { strategy?: EvictionStrategy; migratable?: boolean; node?: string; marked?: string } = {},
): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "v", namespace: "default" },
    spec: { domain: { devices: {} }, ...(o.strategy ? { evictionStrategy: o.strategy } : {}) },
    status: {
      phase: "Running",
      nodeName: o.node ?? "n1",
      ...(o.marked ? { evacuationNodeName: o.marked } : {}),
      conditions:
        o.migratable === undefined ? [] : [{ type: "LiveMigratable", status: o.migratable ? "True" : "False" }],
    },
  };
}

function launcher(o: { node?: string; phase?: string; name?: string } = {}): EvictionPod {
  return {
    metadata: {
      name: o.name ?? "virt-launcher-v-abcde",
      namespace: "default",
      labels: { "kubevirt.io": "virt-launcher" },
      annotations: { "kubevirt.io/domain": "v" },
    },
    spec: { nodeName: o.node ?? "n1" },
    status: { phase: o.phase ?? "Running" },
  };
}

const TRIGGERED = 'Eviction triggered evacuation of VMI "default/v"';

describe("decideLauncherEviction() (KubeVirt's decision table)", () => {
  it.each<[string, VirtualMachineInstance, EvictionPod, EvictionStrategy | undefined, unknown]>([
    ["no strategy", vmi({ migratable: true }), launcher(), undefined, { kind: "allow" }],
    ["None", vmi({ migratable: true }), launcher(), "None", { kind: "allow" }],
    [
      "LiveMigrate, migratable",
      vmi({ migratable: true }),
      launcher(),
      "LiveMigrate",
      {
        kind: "evacuate",
        node: "n1",
        message: TRIGGERED,
      },
    ],
    [
      "LiveMigrate, not migratable",
      vmi({ migratable: false }),
      launcher(),
      "LiveMigrate",
      {
        kind: "deny",
        message: "VMI v is configured with an eviction strategy but is not live-migratable",
      },
    ],
    [
      "LiveMigrate, no condition yet",
      vmi(),
      launcher(),
      "LiveMigrate",
      {
        kind: "deny",
        message: "VMI v is configured with an eviction strategy but is not live-migratable",
      },
    ],
    [
      "LiveMigrateIfPossible, migratable",
      vmi({ migratable: true }),
      launcher(),
      "LiveMigrateIfPossible",
      {
        kind: "evacuate",
        node: "n1",
        message: TRIGGERED,
      },
    ],
    [
      "LiveMigrateIfPossible, not migratable",
      vmi({ migratable: false }),
      launcher(),
      "LiveMigrateIfPossible",
      {
        kind: "allow",
      },
    ],
    [
      "External, not migratable",
      vmi({ migratable: false }),
      launcher(),
      "External",
      {
        kind: "evacuate",
        node: "n1",
        message: TRIGGERED,
      },
    ],
    [
      "already marked",
      vmi({ migratable: true, marked: "n1" }),
      launcher(),
      "LiveMigrate",
      {
        kind: "deny",
        message: `Evacuation in progress: ${TRIGGERED}`,
      },
    ],
    [
      "a migration target's pod",
      vmi({ migratable: true }),
      launcher({ node: "n2" }),
      "LiveMigrate",
      {
        kind: "deny",
        message: "Eviction request for target Pod",
      },
    ],
  ])("%s", (_name, v, pod, strategy, want) => {
    expect(decideLauncherEviction(v, pod, strategy)).toEqual(want);
  });
});

class FakeEvictionCluster implements EvictionCluster {
  readonly pods = new Map<string, EvictionPod>();
  readonly vmis = new Map<string, VirtualMachineInstance>();
  readonly patches: { name: string; patch: readonly JsonPatchOp[]; dryRun: boolean }[] = [];
  clusterStrategy: EvictionStrategy | undefined;
  failPatch = false;

  getPod(_ns: string, name: string): Promise<EvictionPod | undefined> {
    return Promise.resolve(this.pods.get(name));
  }
  getVmi(_ns: string, name: string): Promise<VirtualMachineInstance | undefined> {
    return Promise.resolve(this.vmis.get(name));
  }
  patchVmi(_ns: string, name: string, patch: readonly JsonPatchOp[], dryRun: boolean): Promise<void> {
    if (this.failPatch) return Promise.reject(new Error("the server is on fire"));
    this.patches.push({ name, patch, dryRun });
    return Promise.resolve();
  }
  clusterEvictionStrategy(): Promise<EvictionStrategy | undefined> {
    return Promise.resolve(this.clusterStrategy);
  }
}

function review(name: string, eviction: Record<string, unknown> = {}, dryRun = false): AdmissionRequest {
  return {
    uid: "u",
    kind: { group: "policy", version: "v1", kind: "Eviction" },
    resource: { group: "", version: "v1", resource: "pods" },
    subResource: "eviction",
    operation: "CREATE",
    namespace: "default",
    name,
    dryRun,
    object: { apiVersion: "policy/v1", kind: "Eviction", metadata: { name }, ...eviction },
  };
}

describe("validatePodEviction()", () => {
  const setup = (v: VirtualMachineInstance, pod: EvictionPod = launcher()): FakeEvictionCluster => {
    const c = new FakeEvictionCluster();
    c.vmis.set("v", v);
    c.pods.set(pod.metadata.name ?? "", pod);
    return c;
  };

  it("marks a LiveMigrate VMI for evacuation and answers 429 so the drain retries", async () => {
    const c = setup(vmi({ strategy: "LiveMigrate", migratable: true }));
    const r = await validatePodEviction(c)(review("virt-launcher-v-abcde"));
    expect(r).toEqual({ allowed: false, code: 429, message: TRIGGERED });
    expect(c.patches).toEqual([
      { name: "v", dryRun: false, patch: [{ op: "add", path: "/status/evacuationNodeName", value: "n1" }] },
    ]);
  });

  it("uses the KubeVirt CR's evictionStrategy when the VMI has none", async () => {
    const c = setup(vmi({ migratable: true }));
    c.clusterStrategy = "LiveMigrate";
    expect(await validatePodEviction(c)(review("virt-launcher-v-abcde"))).toMatchObject({ allowed: false, code: 429 });
    c.clusterStrategy = "None";
    expect(await validatePodEviction(c)(review("virt-launcher-v-abcde"))).toEqual({ allowed: true });
  });

  it("marks in dry run only (request dryRun or deleteOptions.dryRun All), and records a descheduler's eviction", async () => {
    const c = setup(vmi({ strategy: "External" }));
    await validatePodEviction(c)(review("virt-launcher-v-abcde", {}, true));
    await validatePodEviction(c)(
      review("virt-launcher-v-abcde", {
        metadata: { name: "virt-launcher-v-abcde", annotations: { "requested-by": "sigs.k8s.io/descheduler" } },
        deleteOptions: { dryRun: ["All"] },
      }),
    );
    expect(c.patches.map((p) => p.dryRun)).toEqual([true, true]);
    expect(c.patches[1]?.patch).toContainEqual({
      op: "add",
      path: "/metadata/annotations",
      value: { "kubevirt.io/eviction-source": "descheduler" },
    });
  });

  it("denies with KubeVirt's message when the mark cannot be written", async () => {
    const c = setup(vmi({ strategy: "LiveMigrate", migratable: true }));
    c.failPatch = true;
    expect(await validatePodEviction(c)(review("virt-launcher-v-abcde"))).toEqual({
      allowed: false,
      code: 429,
      message: "kubevirt failed marking the vmi for eviction: the server is on fire",
    });
  });

  it.each([
    ["a missing pod", "nope", undefined],
    ["a pod that is not a launcher", "web", { metadata: { name: "web", labels: { app: "web" } } }],
    ["a completed launcher", "virt-launcher-v-abcde", launcher({ phase: "Succeeded" })],
  ])("lets the eviction of %s through", async (_n, name, pod) => {
    const c = setup(vmi({ strategy: "LiveMigrate", migratable: true }), pod ?? launcher({ name: "other" }));
    expect(await validatePodEviction(c)(review(name))).toEqual({ allowed: true });
    expect(c.patches).toEqual([]);
  });

  it("denies a launcher whose VMI is gone, as KubeVirt does", async () => {
    const c = new FakeEvictionCluster();
    c.pods.set("virt-launcher-v-abcde", launcher());
    expect(await validatePodEviction(c)(review("virt-launcher-v-abcde"))).toEqual({
      allowed: false,
      code: 429,
      message: 'kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io "v" not found',
    });
  });

  it("refuses to evict a hotplug volume pod of a running VMI", async () => {
    const c = setup(vmi({ strategy: "None" }));
    const hp: EvictionPod = {
      metadata: {
        name: "hp-volume-x",
        namespace: "default",
        labels: { "kubevirt.io": "hotplug-disk" },
        ownerReferences: [{ name: "virt-launcher-v-abcde" }],
      },
    };
    c.pods.set("hp-volume-x", hp);
    expect(await validatePodEviction(c)(review("hp-volume-x"))).toEqual({
      allowed: false,
      code: 429,
      message: "cannot evict hotplug pod: hp-volume-x associated with running vmi: v in namespace default",
    });
  });
});
