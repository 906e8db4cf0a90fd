/**
 * The PersistentVolume controller against the embedded API server (no storage directory: static volumes only):
 * pre-bound claims, protection of a bound volume, Lost claims, and a Delete policy no plugin can carry out.
 */
import {
  CORE_V1,
  type CoreEvent,
  kubeConfigFromFile,
  type ResourceClient,
  RestClient,
  resourceClient,
} from "@kvt/kube";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { eventually } from "../apiserver/extensions/testdata/fixtures.ts";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "../cluster/kube-models.ts";

let api: ApiServerHandle;
let volumes: ResourceClient<V1PersistentVolume>;
let claims: ResourceClient<V1PersistentVolumeClaim>;
let events: ResourceClient<CoreEvent>;

beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: false, logger: pino({ level: "silent" }) });
  const transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
  volumes = resourceClient(transport, CORE_V1.persistentVolumes);
  claims = resourceClient(transport, CORE_V1.persistentVolumeClaims);
  events = resourceClient(transport, CORE_V1.events);
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
const readClaim = (name: string) => claims.get("default", name);
const readVolume = (name: string) => volumes.get("", name);
const phaseOf = async (
  read: () => Promise<{ status?: { phase?: string } }>,
  phase: string,
): Promise<true | undefined> => ((await read()).status?.phase === phase ? true : undefined);

describe("PersistentVolumeController", () => {
  it("makes a new unclaimed volume Available and binds a claim that names it", async () => {
    await volumes.create(volume("named", "Retain"));
    await eventually("Available", () => phaseOf(() => readVolume("named"), "Available"));
    await claims.create({
      metadata: { name: "names-it", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "",
        volumeName: "named",
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
    await volumes.delete("", "named");
    const terminating = await readVolume("named");
    expect(terminating.metadata?.deletionTimestamp).toBeDefined();
    expect(terminating.status?.phase).toBe("Bound");
    await volumes.mergePatch("", "named", { metadata: { finalizers: null } });
    await eventually("Lost", () => phaseOf(() => readClaim("names-it"), "Lost"));
    const list = await events.list("default");
    expect(list.items.find((e) => e.reason === "ClaimLost")?.message).toBe(
      "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
    );
    await claims.delete("default", "names-it");
  });

  it("does not bind a claim to a volume of the other volumeMode, named or not, as kube-controller-manager", async () => {
    await volumes.create({
      ...volume("raw", "Retain"),
      spec: { ...volume("raw", "Retain").spec, volumeMode: "Block" },
    });
    await eventually("Available", () => phaseOf(() => readVolume("raw"), "Available"));
    const fsClaim = (name: string, extra: Record<string, unknown> = {}): V1PersistentVolumeClaim => ({
      metadata: { name, namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "",
        ...extra,
      },
    });
    await claims.create(fsClaim("wants-raw", { volumeName: "raw" }));
    await claims.create(fsClaim("any-fs"));
    const mismatch = await eventually("a VolumeMismatch event", async () =>
      (await events.list("default")).items.find((e) => e.involvedObject.name === "wants-raw"),
    );
    expect(mismatch).toMatchObject({
      type: "Warning",
      reason: "VolumeMismatch",
      message: 'Cannot bind to requested volume "raw": incompatible volumeMode',
    });
    await eventually("FailedBinding for the unnamed claim", async () =>
      (await events.list("default")).items.find((e) => e.involvedObject.name === "any-fs"),
    );
    expect((await readClaim("any-fs")).status?.phase).toBe("Pending");
    expect((await readVolume("raw")).spec?.claimRef).toBeUndefined();
    // A Block claim naming it binds.
    await claims.create(fsClaim("raw-claim", { volumeName: "raw", volumeMode: "Block" }));
    await eventually("Bound", () => phaseOf(() => readClaim("raw-claim"), "Bound"));
    for (const name of ["wants-raw", "any-fs", "raw-claim"]) await claims.delete("default", name);
  });

  it("fails a Released volume whose Delete policy no provisioner carries out", async () => {
    await volumes.create(volume("doomed", "Delete"));
    await claims.create({
      metadata: { name: "short-lived", namespace: "default" },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, storageClassName: "" },
    });
    await eventually("Bound", () => phaseOf(() => readClaim("short-lived"), "Bound"));
    await claims.delete("default", "short-lived");
    await eventually("Failed", () => phaseOf(() => readVolume("doomed"), "Failed"));
    expect((await readVolume("doomed")).status?.message).toBe(
      'error getting deleter volume plugin for volume "doomed": no deletable volume plugin matched',
    );
  });
});
