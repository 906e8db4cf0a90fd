import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LoopDevice, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { eventually } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import {
  type BlockDevices,
  claimsToProvision,
  devicesToRelease,
  LOCAL_BLOCK_CLASS,
  LOCAL_BLOCK_PROVISIONER,
  type LocalBlockApi,
  LocalBlockReconciler,
  localBlockKubeconfig,
  localBlockManifests,
  runLocalBlockProvisioner,
  volumeNamesOfFiles,
  volumesToDelete,
} from "./local-block.ts";

const BASE = "/c/storage/local-block";
const logger = createLogger({ component: "test", level: "silent" });
const sc = localBlockManifests().find((m) => m.kind === "StorageClass") as V1StorageClass;

function claim(name: string, over: { mode?: string; modes?: string[]; node?: string; ours?: boolean } = {}) {
  const annotations: Record<string, string> = {};
  if (over.ours !== false) annotations["volume.kubernetes.io/storage-provisioner"] = LOCAL_BLOCK_PROVISIONER;
  if (over.node !== "") annotations["volume.kubernetes.io/selected-node"] = over.node ?? "node01";
  return {
    metadata: { name, namespace: "default", uid: `u-${name}`, resourceVersion: "7", annotations },
    spec: {
      accessModes: over.modes ?? ["ReadWriteOnce"],
      volumeMode: over.mode ?? "Block",
      storageClassName: LOCAL_BLOCK_CLASS,
      resources: { requests: { storage: "1000" } },
    },
    status: { phase: "Pending" },
  } as V1PersistentVolumeClaim;
}

/** An API server holding lists; writes land in them, events are recorded. */
class FakeApi implements LocalBlockApi {
  classes: V1StorageClass[] = [sc];
  claims: V1PersistentVolumeClaim[] = [];
  volumes: V1PersistentVolume[] = [];
  events: string[] = [];
  failCreate = false;
  listClasses = async () => this.classes;
  listClaims = async () => this.claims;
  listVolumes = async () => this.volumes;
  async createVolume(pv: V1PersistentVolume) {
    if (this.failCreate) throw new Error("the server said no");
    if (!this.volumes.some((v) => v.metadata?.name === pv.metadata?.name)) this.volumes.push(pv);
  }
  async deleteVolume(pv: V1PersistentVolume) {
    this.volumes = this.volumes.filter((v) => v.metadata?.name !== pv.metadata?.name);
  }
  event(c: V1PersistentVolumeClaim, type: string, reason: string, message: string) {
    this.events.push(`${c.metadata?.name} ${type} ${reason}: ${message}`);
  }
}

/** Devices as a map link -> [device, bytes]. */
class FakeDevices implements BlockDevices {
  readonly made = new Map<string, { device: string; bytes: bigint }>();
  reattached: string[] = [];
  #next = 0;
  make(link: string, bytes: bigint) {
    const device = `/dev/loop${this.#next++}`;
    this.made.set(link, { device, bytes });
    return device;
  }
  reattach(link: string) {
    this.reattached.push(link);
    return "/dev/loop9";
  }
  remove(link: string) {
    const d = this.made.get(link);
    this.made.delete(link);
    return d ? [d.device] : [];
  }
}

describe("claimsToProvision", () => {
  it("takes a Pending Block claim of local-block handed to it with a selected node, once", () => {
    const c = claim("a");
    expect(claimsToProvision([sc], [c], [])).toEqual([{ claim: c, sc }]);
    expect(claimsToProvision([sc], [c], [{ metadata: { name: "pvc-u-a" } }])).toEqual([]);
  });

  it("waits for the selected node (WaitForFirstConsumer) and for kube-controller-manager's annotation", () => {
    expect(claimsToProvision([sc], [claim("a", { node: "" })], [])).toEqual([]);
    expect(claimsToProvision([sc], [claim("a", { ours: false })], [])).toEqual([]);
    const immediate = { ...sc, volumeBindingMode: "Immediate" };
    expect(claimsToProvision([immediate], [claim("a", { node: "" })], [])).toHaveLength(1);
  });

  it("leaves bound, deleted and other classes' claims alone", () => {
    const bound = claim("a");
    bound.spec!.volumeName = "pv1";
    const deleting = claim("b");
    deleting.metadata!.deletionTimestamp = "2026-11-27T00:00:00Z";
    const other = claim("c");
    other.spec!.storageClassName = "local-path";
    const lost = claim("d");
    lost.status!.phase = "Lost";
    expect(claimsToProvision([sc], [bound, deleting, other, lost], [])).toEqual([]);
    // A class of the same name served by another provisioner is not ours.
    expect(claimsToProvision([{ ...sc, provisioner: "rancher.io/local-path" }], [claim("e")], [])).toEqual([]);
  });

  it("refuses a Filesystem claim with a message naming the filesystem class", () => {
    const [work] = claimsToProvision([sc], [claim("a", { mode: "Filesystem" })], []);
    expect(work?.refusal).toMatch(/volumeMode Block only, not Filesystem: use a filesystem class \(local-path\)/);
  });
});

describe("volumesToDelete", () => {
  const pv = (phase: string, by = LOCAL_BLOCK_PROVISIONER, reclaim = "Delete"): V1PersistentVolume => ({
    metadata: { name: `pv-${phase}-${by}-${reclaim}`, annotations: { "pv.kubernetes.io/provisioned-by": by } },
    spec: { persistentVolumeReclaimPolicy: reclaim, local: { path: `${BASE}/x` } },
    status: { phase },
  });
  it("reclaims only Released PVs of ours with reclaim policy Delete", () => {
    const released = pv("Released");
    expect(
      volumesToDelete([
        released,
        pv("Bound"),
        pv("Released", "rancher.io/local-path"),
        pv("Released", undefined, "Retain"),
      ]),
    ).toEqual([released]);
  });
});

describe("LocalBlockReconciler", () => {
  it("provisions a Block PV pre-bound to the claim, every node allowed, then reclaims it when Released", async () => {
    const api = new FakeApi();
    const devices = new FakeDevices();
    const r = new LocalBlockReconciler(api, devices, BASE, logger);
    api.claims = [claim("rwo"), claim("rwx", { modes: ["ReadWriteMany"] })];
    expect((await r.pass()).provisioned).toEqual(["pvc-u-rwo", "pvc-u-rwx"]);
    const pv = api.volumes[0];
    expect(pv.spec).toMatchObject({
      volumeMode: "Block",
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Delete",
      storageClassName: LOCAL_BLOCK_CLASS,
      local: { path: `${BASE}/pvc-u-rwo_default_rwo` },
      claimRef: { namespace: "default", name: "rwo", uid: "u-rwo" },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "Exists" }] }],
        },
      },
    });
    expect(pv.metadata?.annotations?.["pv.kubernetes.io/provisioned-by"]).toBe(LOCAL_BLOCK_PROVISIONER);
    // 1000 bytes rounded up to two 512-byte sectors.
    expect(devices.made.get(`${BASE}/pvc-u-rwo_default_rwo`)?.bytes).toBe(1024n);
    expect(api.events).toContain("rwo Normal ProvisioningSucceeded: Successfully provisioned volume pvc-u-rwo");
    // The next pass sees the PVs and makes nothing more.
    expect((await r.pass()).provisioned).toEqual([]);
    // The claim goes: kube-controller-manager marks its PV Released.
    api.claims = [];
    api.volumes = api.volumes.map((v) => ({ ...v, status: { phase: "Released" } }));
    expect((await r.pass()).deleted).toEqual(["pvc-u-rwo", "pvc-u-rwx"]);
    expect(api.volumes).toEqual([]);
    expect(devices.made.size).toBe(0);
  });

  it("reattaches the devices of its PVs once, at the first pass", async () => {
    const api = new FakeApi();
    const devices = new FakeDevices();
    api.claims = [claim("a")];
    await new LocalBlockReconciler(api, devices, BASE, logger).pass();
    api.volumes = api.volumes.map((v) => ({ ...v, status: { phase: "Bound" } }));
    const restarted = new LocalBlockReconciler(api, devices, BASE, logger);
    await restarted.pass();
    await restarted.pass();
    expect(devices.reattached).toEqual([`${BASE}/pvc-u-a_default_a`]);
  });

  it("refuses a Filesystem claim with one event, and reports a failed PV create on the claim", async () => {
    const api = new FakeApi();
    const r = new LocalBlockReconciler(api, new FakeDevices(), BASE, logger);
    api.claims = [claim("fs", { mode: "Filesystem" })];
    expect((await r.pass()).refused).toEqual(["default/fs"]);
    await r.pass();
    expect(api.events.filter((e) => e.startsWith("fs Warning ProvisioningFailed"))).toHaveLength(1);
    api.claims = [claim("b")];
    api.failCreate = true;
    expect((await r.pass()).provisioned).toEqual([]);
    expect(api.events).toContain("b Warning ProvisioningFailed: the server said no");
    api.failCreate = false;
    expect((await r.pass()).provisioned).toEqual(["pvc-u-b"]); // retried
  });

  it("never removes a Released PV's storage outside its directory", async () => {
    const api = new FakeApi();
    const devices = new FakeDevices();
    devices.make("/etc/passwd-link", 512n);
    api.volumes = [
      {
        metadata: {
          name: "pv-x",
          uid: "x",
          annotations: { "pv.kubernetes.io/provisioned-by": LOCAL_BLOCK_PROVISIONER },
        },
        spec: { persistentVolumeReclaimPolicy: "Delete", local: { path: "/etc/passwd-link" } },
        status: { phase: "Released" },
      },
    ];
    expect((await new LocalBlockReconciler(api, devices, BASE, logger).pass()).deleted).toEqual([]);
    expect(devices.made.has("/etc/passwd-link")).toBe(true);
    expect(api.volumes).toHaveLength(1);
  });
});

describe("runLocalBlockProvisioner (fake API and devices)", () => {
  const FAST = { timeoutMs: 10_000, intervalMs: 20 };
  /** A cluster directory with the provisioner's kubeconfig, a fake API whose changes the test announces. */
  function harness() {
    const dir = mkdtempSync(join(tmpdir(), "kvt-local-block-"));
    mkdirSync(join(dir, "storage"), { recursive: true });
    writeFileSync(localBlockKubeconfig(dir), "{}");
    const api = Object.assign(new FakeApi(), { synced: false, start() {}, stop() {} });
    let passes = 0;
    const listClaims = api.listClaims;
    api.listClaims = async () => {
      passes++;
      return listClaims();
    };
    let changed: () => void = () => {};
    const stop = new AbortController();
    const run = runLocalBlockProvisioner(dir, logger, stop.signal, {
      resyncMs: 3_600_000, // only a change can start a pass in these tests
      devices: new FakeDevices(),
      api: (_kubeconfig, _logger, onChange) => {
        changed = onChange;
        return api;
      },
    });
    return { dir, api, passes: () => passes, change: () => changed(), stop, run };
  }

  it("passes once its watches have synced, then at each change, and not otherwise", async () => {
    const h = harness();
    try {
      h.api.synced = true;
      h.change();
      await eventually(async () => h.passes() === 1, FAST);
      h.api.claims = [claim("rwo")];
      h.change();
      await eventually(async () => h.api.volumes.some((v) => v.metadata?.name === "pvc-u-rwo"), FAST);
      const after = h.passes();
      await new Promise((r) => setTimeout(r, 300));
      expect(h.passes()).toBe(after);
    } finally {
      h.stop.abort();
      await h.run;
      rmSync(h.dir, { recursive: true, force: true });
    }
  });

  it("ends when up writes its kubeconfig anew, so the supervisor restarts it with the new token", async () => {
    const h = harness();
    try {
      h.api.synced = true;
      h.change();
      await eventually(async () => h.passes() === 1, FAST);
      const later = new Date(Date.now() + 5000);
      utimesSync(localBlockKubeconfig(h.dir), later, later);
      h.change();
      await expect(h.run).rejects.toThrow(/was written anew/);
    } finally {
      h.stop.abort();
      rmSync(h.dir, { recursive: true, force: true });
    }
  });
});

describe("devicesToRelease", () => {
  const dev = (device: string, file: string): LoopDevice => ({ device, file, deleted: false, autoclear: false });
  it("detaches the kubelets' devices over our PVs first, then ours, and nothing else", () => {
    const devices = [
      dev("/dev/loop1", `${BASE}/pvc-a_default_x.img`),
      dev("/dev/loop2", "/var/lib/kubelet/plugins/kubernetes.io~local-volume/volumeDevices/pvc-a/pod-uid-1"),
      dev("/dev/loop3", "/var/lib/kubelet/plugins/kubernetes.io~local-volume/volumeDevices/pvc-other/pod-uid-2"),
      dev("/dev/loop4", "/c/storage/pvc-a_default_x.img"),
      dev("/dev/loop5", "/other/cluster/storage/local-block/pvc-b_default_y.img"),
    ];
    expect(
      devicesToRelease(devices, BASE, volumeNamesOfFiles([`${BASE}/pvc-a_default_x.img`, `${BASE}/pvc-a_default_x`])),
    ).toEqual(["/dev/loop2", "/dev/loop1"]);
  });
});

describe("localBlockManifests", () => {
  it("grants the provisioner's account only what it uses, and the class serves Block claims with Delete", () => {
    const role = localBlockManifests().find((m) => m.kind === "ClusterRole") as { rules: unknown[] };
    expect(role.rules).toEqual([
      { apiGroups: [""], resources: ["persistentvolumes"], verbs: ["create", "delete", "get", "list", "watch"] },
      { apiGroups: [""], resources: ["persistentvolumeclaims"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["storage.k8s.io"], resources: ["storageclasses"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["events"], verbs: ["create"] },
    ]);
    expect(sc).toMatchObject({ provisioner: LOCAL_BLOCK_PROVISIONER, reclaimPolicy: "Delete" });
  });
});
