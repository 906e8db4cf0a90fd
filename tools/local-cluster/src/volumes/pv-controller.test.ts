/**
 * The PersistentVolume controller against the embedded API server (no storage directory: static volumes only):
 * pre-bound claims, protection of a bound volume, Lost claims, and a Delete policy no plugin can carry out.
 */
import {
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1PersistentVolume,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { eventually } from "../apiserver/extensions/testdata/fixtures.ts";

let api: ApiServerHandle;
let core: CoreV1Api;
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: false, logger: pino({ level: "silent" }) });
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfigPath);
  core = kc.makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await api?.stop();
});

const volume = (name: string, policy: string): V1PersistentVolume => ({
  metadata: { name },
  spec: {
    capacity: { storage: "1Gi" },
    accessModes: ["ReadWriteOnce"],
    persistentVolumeReclaimPolicy: policy,
    hostPath: { path: `/tmp/kvt-never-made/${name}` },
  },
});
const readClaim = (name: string) => core.readNamespacedPersistentVolumeClaim({ name, namespace: "default" });
const readVolume = (name: string) => core.readPersistentVolume({ name });
const phaseOf = async (
  read: () => Promise<{ status?: { phase?: string } }>,
  phase: string,
): Promise<true | undefined> => ((await read()).status?.phase === phase ? true : undefined);

describe("PersistentVolumeController", () => {
  it("makes a new unclaimed volume Available and binds a claim that names it", async () => {
    await core.createPersistentVolume({ body: volume("named", "Retain") });
    await eventually("Available", () => phaseOf(() => readVolume("named"), "Available"));
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name: "names-it" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          storageClassName: "",
          volumeName: "named",
        },
      },
    });
    await eventually("Bound", () => phaseOf(() => readClaim("names-it"), "Bound"));
    const claim = await readClaim("names-it");
    // The user set volumeName, so only the volume side was bound by the controller.
    expect(claim.metadata?.annotations?.["pv.kubernetes.io/bound-by-controller"]).toBeUndefined();
    expect(claim.metadata?.annotations?.["pv.kubernetes.io/bind-completed"]).toBe("yes");
    const pv = await readVolume("named");
    expect(pv.metadata?.annotations?.["pv.kubernetes.io/bound-by-controller"]).toBe("yes");
    expect(pv.spec?.claimRef).toMatchObject({ name: "names-it", namespace: "default", uid: claim.metadata?.uid });
    expect(pv.metadata?.finalizers).toEqual(["kubernetes.io/pv-protection"]);
  });

  it("keeps a deleted Bound volume Terminating; forced away, its claim is Lost", async () => {
    await core.deletePersistentVolume({ name: "named" });
    const terminating = await readVolume("named");
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();
    expect(terminating.status?.phase).toBe("Bound");
    await core.patchPersistentVolume({ name: "named", body: { metadata: { finalizers: null } } }, merge);
    await eventually("Lost", () => phaseOf(() => readClaim("names-it"), "Lost"));
    const events = await core.listNamespacedEvent({ namespace: "default" });
    expect(events.items.find((e) => e.reason === "ClaimLost")?.message).toBe(
      "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
    );
    await core.deleteNamespacedPersistentVolumeClaim({ name: "names-it", namespace: "default" });
  });

  it("fails a Released volume whose Delete policy no provisioner carries out", async () => {
    await core.createPersistentVolume({ body: volume("doomed", "Delete") });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name: "short-lived" },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, storageClassName: "" },
      },
    });
    await eventually("Bound", () => phaseOf(() => readClaim("short-lived"), "Bound"));
    await core.deleteNamespacedPersistentVolumeClaim({ name: "short-lived", namespace: "default" });
    await eventually("Failed", () => phaseOf(() => readVolume("doomed"), "Failed"));
    expect((await readVolume("doomed")).status?.message).toBe(
      'error getting deleter volume plugin for volume "doomed": no deletable volume plugin matched',
    );
  });
});
