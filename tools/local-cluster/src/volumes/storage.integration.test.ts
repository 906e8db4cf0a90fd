/**
 * The local cluster's storage end to end, in one process: the embedded API server with a storage directory (the
 * default class local-path, the local-block class, the PV controller, the provisioners), the scheduler and two
 * process-kubelets. The kubelets run testdata/volume-writer.ts in place of virt-launcher, which writes its
 * KVT_VOLUME_MOUNTS into /data (or onto the device at /dev/data). The Block claims' loop devices need root.
 */
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readlinkSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseQuantity } from "@kvt/api";
import {
  ApiError,
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
import { type Kubectl, kubectl } from "../apiserver/testdata/kubectl.ts";
import { currentRuntimeName, jsRuntime } from "../cluster/js-runtime.ts";
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1Pod, V1StorageClass } from "../cluster/kube-models.ts";
import { VOLUME_MOUNTS_ENV } from "../kubelet/container-spec.ts";
import { type NodeAgent, startNodeAgent } from "../kubelet/node-agent.ts";
import { podsLinkPath } from "../kubelet/pods-link.ts";
import { Scheduler } from "../scheduler/scheduler.ts";
import { LocalBlockProvisioner } from "./local-block-provisioner.ts";
import { listLoopDevices } from "./loop-devices.ts";

const WRITER = new URL("./testdata/volume-writer.ts", import.meta.url).pathname;
let dir: string;
let api: ApiServerHandle;
let pods: ResourceClient<V1Pod>;
let claims: ResourceClient<V1PersistentVolumeClaim>;
let volumes: ResourceClient<V1PersistentVolume>;
let classes: ResourceClient<V1StorageClass>;
let events: ResourceClient<CoreEvent>;
let scheduler: Scheduler;
let nodes: NodeAgent[];
let k: Kubectl;

const claim = (name: string, extra: Record<string, unknown> = {}): V1PersistentVolumeClaim => ({
  metadata: { name, namespace: "default" },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...extra },
});

const pod = (name: string, claimName: string): V1Pod => ({
  metadata: { name, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 5,
    containers: [
      {
        name: "compute",
        image: "kubevirt/virt-launcher",
        command: ["/usr/bin/virt-launcher-monitor"],
        volumeMounts: [
          { name: "data", mountPath: "/data" },
          { name: "scratch", mountPath: "/scratch" },
        ],
      },
    ],
    volumes: [
      { name: "data", persistentVolumeClaim: { claimName } },
      { name: "scratch", emptyDir: {} },
    ],
  },
});

/** A pod whose container uses claim `claimName` as a raw device at /dev/data (or, `asMount`, mounted at /data). */
const blockPod = (name: string, claimName: string, asMount = false): V1Pod => ({
  metadata: { name, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 5,
    containers: [
      {
        name: "compute",
        image: "kubevirt/virt-launcher",
        command: ["/usr/bin/virt-launcher-monitor"],
        ...(asMount
          ? { volumeMounts: [{ name: "data", mountPath: "/data" }] }
          : { volumeDevices: [{ name: "data", devicePath: "/dev/data" }] }),
      },
    ],
    volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
  },
});
const root = process.getuid?.() === 0;

const readClaim = (name: string): Promise<V1PersistentVolumeClaim> => claims.get("default", name);
const readPod = (name: string): Promise<V1Pod> => pods.get("default", name);
const gone = async (read: () => Promise<unknown>): Promise<true | undefined> => {
  try {
    await read();
    return undefined;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return true;
    throw err;
  }
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-storage-"));
  const logger = pino({ level: "silent" });
  api = await startApiServer({ inMemory: true, storageDir: join(dir, "storage"), logger });
  const transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
  pods = resourceClient(transport, CORE_V1.pods);
  claims = resourceClient(transport, CORE_V1.persistentVolumeClaims);
  volumes = resourceClient(transport, CORE_V1.persistentVolumes);
  classes = resourceClient(transport, CORE_V1.storageClasses);
  events = resourceClient(transport, CORE_V1.events);
  // The stand-in program runs on this test's runtime (Deno needs `run -A`), as a kubelet runs launchers on its own.
  const runtime = jsRuntime(currentRuntimeName(), dir);
  const layout = { projectRoot: dir, execPath: runtime.execPath, execArgs: runtime.execArgs, launcherEntry: WRITER };
  nodes = [];
  for (const nodeName of ["node01", "node02"])
    nodes.push(
      await startNodeAgent({ nodeName, transport, dataDir: join(dir, "nodes", nodeName), layout, log: logger }),
    );
  scheduler = new Scheduler({
    transport,
    parseQuantity: (q) => Number(parseQuantity(q).milliValue()) / 1000,
    log: logger,
  });
  await scheduler.start();
  k = kubectl(api.kubeconfigPath);
}, 60_000);

afterAll(async () => {
  await scheduler?.stop();
  for (const n of nodes ?? []) await n.stop();
  k?.cleanup();
  await api?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("local-path storage on the local cluster", () => {
  it("provisions, binds and hands a claim to the pod's process, then removes it all with the claim", async () => {
    const started = performance.now();
    await claims.create(claim("data"));
    await pods.create(pod("writer", "data"));
    const bound = await eventually(
      "the claim to be Bound",
      async () => {
        const c = await readClaim("data");
        return c.status?.phase === "Bound" ? c : undefined;
      },
      20_000,
    );
    const boundMs = performance.now() - started;
    process.stdout.write(`${JSON.stringify({ area: "local-path", pvcAndPodCreateToBoundMs: Math.round(boundMs) })}\n`);
    expect(bound.spec?.storageClassName).toBe("local-path"); // the default class, applied at admission
    expect(bound.metadata?.annotations).toMatchObject({
      "pv.kubernetes.io/bind-completed": "yes",
      "pv.kubernetes.io/bound-by-controller": "yes",
      "volume.kubernetes.io/storage-provisioner": "rancher.io/local-path",
    });
    expect(bound.status).toMatchObject({ accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } });
    const running = await eventually(
      "the pod to run",
      async () => {
        const p = await readPod("writer");
        return p.status?.phase === "Running" ? p : undefined;
      },
      30_000,
    );
    const node = running.spec!.nodeName!;
    expect(bound.metadata?.annotations?.["volume.kubernetes.io/selected-node"]).toBe(node);
    const pv: V1PersistentVolume = await volumes.get("", bound.spec!.volumeName!);
    const volumeDir = join(dir, "storage", `${pv.metadata!.name!}_default_data`);
    expect(pv.spec).toMatchObject({
      hostPath: { path: volumeDir, type: "DirectoryOrCreate" },
      capacity: { storage: "1Gi" },
      persistentVolumeReclaimPolicy: "Delete",
      claimRef: { namespace: "default", name: "data", uid: bound.metadata?.uid },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [node] }] },
          ],
        },
      },
    });
    expect(pv.status?.phase).toBe("Bound");
    expect(existsSync(volumeDir)).toBe(true);

    const agent = nodes.find((n) => n.nodeName === node)!;
    const plan = agent.kubelet.containerPlan("default", "writer", "compute");
    const mounts = JSON.parse(plan?.kind === "process" ? (plan.env[VOLUME_MOUNTS_ENV] ?? "") : "") as unknown;
    // Containers are told their emptyDirs through the short link of the node's pods directory (pods-link.ts).
    const uid = running.metadata!.uid!;
    const scratch = join(podsLinkPath(join(dir, "nodes", node)), uid, "volumes", "kubernetes.io~empty-dir", "scratch");
    expect(mounts).toEqual([
      { mountPath: "/data", hostPath: volumeDir, readOnly: false },
      { mountPath: "/scratch", hostPath: scratch, readOnly: false },
    ]);
    const written = await eventually("the process to write into its volume", async () =>
      existsSync(join(volumeDir, "mounts.json")) ? readFileSync(join(volumeDir, "mounts.json"), "utf8") : undefined,
    );
    expect(JSON.parse(written)).toEqual(mounts);

    const table = await k.run(["get", "pv,pvc,sc"]);
    expect(table.stdout).toMatch(
      /NAME\s+CAPACITY\s+ACCESS MODES\s+RECLAIM POLICY\s+STATUS\s+CLAIM\s+STORAGECLASS\s+VOLUMEATTRIBUTESCLASS\s+REASON\s+AGE/,
    );
    expect(table.stdout).toMatch(/persistentvolumeclaim\/data\s+Bound\s+pvc-\S+\s+1Gi\s+RWO\s+local-path\s+<unset>/);
    expect(table.stdout).toMatch(
      /storageclass.storage.k8s.io\/local-path \(default\)\s+rancher.io\/local-path\s+Delete\s+WaitForFirstConsumer\s+false/,
    );

    // The claim goes first: kubernetes.io/pvc-protection keeps it (Terminating) while the running pod uses it.
    await claims.delete("default", "data");
    await new Promise((r) => setTimeout(r, 300));
    const protectedClaim = await readClaim("data");
    expect(protectedClaim.metadata?.deletionTimestamp).toBeDefined();
    expect(protectedClaim.metadata?.finalizers).toEqual(["kubernetes.io/pvc-protection"]);
    expect(existsSync(volumeDir)).toBe(true);
    await pods.delete("default", "writer");
    await eventually(
      "the pod, claim and volume to be gone",
      async () =>
        (await gone(() => readPod("writer"))) &&
        (await gone(() => readClaim("data"))) &&
        (await gone(() => volumes.get("", pv.metadata!.name!)))
          ? true
          : undefined,
      30_000,
    );
    expect(existsSync(volumeDir)).toBe(false);
    expect(existsSync(scratch)).toBe(false);
  }, 90_000);

  it("keeps a pod's containers ContainerCreating until its claim is bound, with a FailedMount event", async () => {
    await claims.create(claim("late"));
    // Bound to a node by hand: no scheduler names the node on the claim, so it stays Pending (as on Kubernetes).
    const pinned = pod("pinned", "late");
    pinned.spec!.nodeName = "node01";
    await pods.create(pinned);
    const waiting = await eventually("the pod to report ContainerCreating", async () => {
      const p = await readPod("pinned");
      return p.status?.containerStatuses?.[0]?.state?.waiting?.reason === "ContainerCreating" ? p : undefined;
    });
    expect(waiting.status?.phase).toBe("Pending");
    expect(waiting.status?.conditions?.find((c) => c.type === "PodReadyToStartContainers")?.status).toBe("False");
    const event = await eventually("a FailedMount event", async () =>
      (await events.list("default")).items.find(
        (e) => e.reason === "FailedMount" && e.involvedObject.name === "pinned",
      ),
    );
    expect(event).toMatchObject({ type: "Warning", source: { component: "kubelet", host: "node01" } });
    expect(event.message).toBe(
      "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: error processing PVC default/late: PVC is not bound",
    );
    await claims.mergePatch("default", "late", {
      metadata: { annotations: { "volume.kubernetes.io/selected-node": "node01" } },
    });
    await eventually(
      "the pod to run once its claim is bound",
      async () => ((await readPod("pinned")).status?.phase === "Running" ? true : undefined),
      20_000,
    );
    await pods.delete("default", "pinned");
    await claims.delete("default", "late");
  }, 60_000);

  it("keeps pods whose claims are missing or unbound Immediate claims Pending, with kube-scheduler's message", async () => {
    await claims.create(claim("no-class", { storageClassName: "" }));
    await pods.create(pod("orphan", "missing"));
    await pods.create(pod("immediate", "no-class"));
    const message = (name: string) => async (): Promise<string | undefined> =>
      (await readPod(name)).status?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "False")?.message;
    expect(await eventually("orphan unschedulable", message("orphan"))).toBe(
      '0/2 nodes are available: persistentvolumeclaim "missing" not found.',
    );
    expect(await eventually("immediate unschedulable", message("immediate"))).toBe(
      "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    );
    for (const name of ["orphan", "immediate"]) await pods.delete("default", name, { gracePeriodSeconds: 0 });
  });

  it("binds a static hostPath PV of an Immediate class at once, and Retain keeps it Released with its files", async () => {
    await classes.create({
      metadata: { name: "manual" },
      provisioner: "kubernetes.io/no-provisioner",
      volumeBindingMode: "Immediate",
    });
    const path = join(dir, "static");
    await volumes.create({
      metadata: { name: "static" },
      spec: {
        capacity: { storage: "2Gi" },
        accessModes: ["ReadWriteOnce", "ReadWriteMany"],
        storageClassName: "manual",
        hostPath: { path, type: "DirectoryOrCreate" },
      },
    });
    await claims.create(claim("static-claim", { storageClassName: "manual", accessModes: ["ReadWriteMany"] }));
    const bound = await eventually("the static claim to be Bound", async () => {
      const c = await readClaim("static-claim");
      return c.status?.phase === "Bound" ? c : undefined;
    });
    expect(bound.spec?.volumeName).toBe("static");
    expect(bound.status?.capacity?.storage).toBe("2Gi");
    await claims.delete("default", "static-claim");
    const released = await eventually("the volume to be Released", async () => {
      const v = await volumes.get("", "static");
      return v.status?.phase === "Released" ? v : undefined;
    });
    expect(released.spec?.claimRef?.name).toBe("static-claim");
    await volumes.delete("", "static");
  });

  it('gives a claim made while no class was default the default class later, and leaves "" classless', async () => {
    const local = await classes.get("", "local-path");
    await classes.delete("", "local-path");
    await claims.create(claim("early"));
    await claims.create(claim("none", { storageClassName: "" }));
    expect((await readClaim("early")).spec?.storageClassName).toBeUndefined();
    await classes.create({ ...local, metadata: { name: "local-path", annotations: local.metadata?.annotations } });
    await eventually("the default class on the early claim", async () =>
      (await readClaim("early")).spec?.storageClassName === "local-path" ? true : undefined,
    );
    expect((await readClaim("none")).spec?.storageClassName).toBe("");
    for (const name of ["early", "none"]) await claims.delete("default", name);
  });

  it("refuses bad claims with the API server's causes and stores nothing", async () => {
    const bad = await claims
      .create({
        metadata: { name: "bad", namespace: "default" },
        spec: { accessModes: [], resources: { requests: { storage: "-1" } } },
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(bad).toBeInstanceOf(ApiError);
    expect((bad as ApiError).code).toBe(422);
    expect((bad as ApiError).status?.details?.causes).toEqual([
      {
        reason: "FieldValueRequired",
        field: "spec.accessModes",
        message: "Required value: at least 1 access mode is required",
      },
      {
        reason: "FieldValueInvalid",
        field: "spec.resources[storage]",
        message: 'Invalid value: "-1": must be greater than zero',
      },
    ]);
    expect(await gone(() => readClaim("bad"))).toBe(true);
  });
});

describe("raw block volumes on the local cluster", () => {
  it("refuses a Block claim of the default class with the provisioner library's message", async () => {
    await claims.create(claim("raw-default", { volumeMode: "Block" }));
    await pods.create(blockPod("raw-default-user", "raw-default"));
    const event = await eventually("a ProvisioningFailed event", async () =>
      (await events.list("default")).items.find(
        (e) => e.reason === "ProvisioningFailed" && e.involvedObject.name === "raw-default",
      ),
    );
    expect(event.message).toBe("rancher.io/local-path does not support block volume provisioning");
    expect((await readClaim("raw-default")).status?.phase).toBe("Pending");
    await pods.delete("default", "raw-default-user", { gracePeriodSeconds: 0 });
    await claims.delete("default", "raw-default");
  });

  it("refuses a Filesystem claim of the local-block class", async () => {
    await claims.create(claim("fs-on-block", { storageClassName: "local-block" }));
    await pods.create(pod("fs-on-block-user", "fs-on-block"));
    const event = await eventually("a ProvisioningFailed event", async () =>
      (await events.list("default")).items.find(
        (e) => e.reason === "ProvisioningFailed" && e.involvedObject.name === "fs-on-block",
      ),
    );
    expect(event.message).toBe(
      "kubevirt-ts.io/local-block provisions volumeMode Block only, not Filesystem: use a filesystem class (local-path)",
    );
    await pods.delete("default", "fs-on-block-user", { gracePeriodSeconds: 0 });
    await claims.delete("default", "fs-on-block");
  });

  it.runIf(root)(
    "provisions a loop device for a Block claim, hands it to the pod at its devicePath, detaches it with the claim",
    async () => {
      await claims.create(
        claim("raw", {
          volumeMode: "Block",
          storageClassName: "local-block",
          resources: { requests: { storage: "16Mi" } },
        }),
      );
      await pods.create(blockPod("raw-user", "raw"));
      const bound = await eventually(
        "the Block claim to be Bound",
        async () => {
          const c = await readClaim("raw");
          return c.status?.phase === "Bound" ? c : undefined;
        },
        20_000,
      );
      const pv: V1PersistentVolume = await volumes.get("", bound.spec!.volumeName!);
      const link = join(dir, "storage", "local-block", `${pv.metadata!.name!}_default_raw`);
      const running = await eventually(
        "the pod to run",
        async () => {
          const p = await readPod("raw-user");
          return p.status?.phase === "Running" ? p : undefined;
        },
        30_000,
      );
      expect(pv.spec).toMatchObject({
        volumeMode: "Block",
        local: { path: link },
        capacity: { storage: "16Mi" },
        storageClassName: "local-block",
        persistentVolumeReclaimPolicy: "Delete",
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: "kubernetes.io/hostname", operator: "In", values: [running.spec!.nodeName!] },
                ],
              },
            ],
          },
        },
      });
      // A real loop device over a sparse file of the claim's size, reached through the PV's stable link.
      const device = readlinkSync(link);
      expect(listLoopDevices()).toContainEqual(
        expect.objectContaining({ device, file: `${link}.img`, deleted: false }),
      );
      const sectors = Number(readFileSync(`/sys/class/block/${device.replace("/dev/", "")}/size`, "utf8"));
      expect(sectors * 512).toBe(16 * 2 ** 20);
      const agent = nodes.find((n) => n.nodeName === running.spec!.nodeName)!;
      const plan = agent.kubelet.containerPlan("default", "raw-user", "compute");
      const mounts = JSON.parse(plan?.kind === "process" ? (plan.env[VOLUME_MOUNTS_ENV] ?? "") : "") as unknown;
      expect(mounts).toEqual([{ mountPath: "/dev/data", hostPath: device, readOnly: false }]);
      const written = await eventually("the process to write onto its device", async () => {
        const head = Buffer.alloc(512);
        const fd = openSync(`${link}.img`, "r");
        readSync(fd, head, 0, head.length, 0);
        closeSync(fd);
        const text = head.toString("utf8");
        return text.startsWith("kvt-block:") ? text.slice("kvt-block:".length, text.indexOf("\n")) : undefined;
      });
      expect(JSON.parse(written)).toEqual(mounts);

      // Mounting a Block claim is refused as kubelet refuses it; the pod waits in ContainerCreating.
      const misuse = blockPod("raw-misuse", "raw", true);
      misuse.spec!.nodeName = running.spec!.nodeName;
      await pods.create(misuse);
      const failed = await eventually("a FailedMount event for the mount of a Block claim", async () =>
        (await events.list("default")).items.find(
          (e) => e.reason === "FailedMount" && e.involvedObject.name === "raw-misuse",
        ),
      );
      expect(failed.message).toBe(
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: volume data has volumeMode Block, but is specified in volumeMounts",
      );
      expect((await readPod("raw-misuse")).status?.phase).toBe("Pending");
      await pods.delete("default", "raw-misuse", { gracePeriodSeconds: 0 });

      // The cluster stops: its devices go; it starts again: the same file gets a device and the link follows it.
      const provisioner = new LocalBlockProvisioner(
        api.service,
        join(dir, "storage", "local-block"),
        pino({ level: "silent" }),
      );
      provisioner.stop();
      expect(listLoopDevices().some((d) => d.file === `${link}.img`)).toBe(false);
      provisioner.resume();
      const again = readlinkSync(link);
      expect(listLoopDevices()).toContainEqual(expect.objectContaining({ device: again, file: `${link}.img` }));
      expect(readFileSync(again).subarray(0, 10).toString()).toBe("kvt-block:");

      await pods.delete("default", "raw-user");
      await claims.delete("default", "raw");
      await eventually(
        "the pod, claim and volume to be gone",
        async () =>
          (await gone(() => readPod("raw-user"))) &&
          (await gone(() => readClaim("raw"))) &&
          (await gone(() => volumes.get("", pv.metadata!.name!)))
            ? true
            : undefined,
        30_000,
      );
      expect(listLoopDevices().some((d) => d.file === `${link}.img`)).toBe(false);
      expect(existsSync(link)).toBe(false);
      expect(existsSync(`${link}.img`)).toBe(false);
    },
    90_000,
  );

  it.runIf(root)(
    "detaches its loop devices when the API server stops, and attaches them again when it starts",
    async () => {
      const own = join(dir, "restarted");
      const start = (): Promise<ApiServerHandle> =>
        startApiServer({
          dataDir: join(own, "apiserver"),
          storageDir: join(own, "storage"),
          logger: pino({ level: "silent" }),
        });
      let server = await start();
      try {
        const client = resourceClient<V1PersistentVolumeClaim>(
          new RestClient(kubeConfigFromFile(server.kubeconfigPath)),
          CORE_V1.persistentVolumeClaims,
        );
        // The node named by hand, as the scheduler would: the claim is provisioned without a pod.
        await client.create({
          ...claim("kept", { volumeMode: "Block", storageClassName: "local-block" }),
          metadata: {
            name: "kept",
            namespace: "default",
            annotations: { "volume.kubernetes.io/selected-node": "node01" },
          },
        });
        const bound = await eventually("the claim to be Bound", async () => {
          const c = await client.get("default", "kept");
          return c.status?.phase === "Bound" ? c : undefined;
        });
        const link = join(own, "storage", "local-block", `${bound.spec!.volumeName!}_default_kept`);
        expect(listLoopDevices().some((d) => d.device === readlinkSync(link) && d.file === `${link}.img`)).toBe(true);
        await server.stop();
        expect(listLoopDevices().some((d) => d.file === `${link}.img`)).toBe(false);
        server = await start();
        expect(listLoopDevices()).toContainEqual(
          expect.objectContaining({ device: readlinkSync(link), file: `${link}.img` }),
        );
      } finally {
        await server.stop();
      }
      expect(listLoopDevices().some((d) => d.file.startsWith(own))).toBe(false);
    },
  );
});
