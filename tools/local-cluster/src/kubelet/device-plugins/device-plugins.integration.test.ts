/**
 * The process-kubelet's device manager in a node, with the API server and the scheduler, and a device plugin over
 * real gRPC: the plugin's devices reach the Node's capacity and allocatable, a pod that requests them is scheduled,
 * its container gets the plugin's Allocate answer, a pod that wants more than is free stays Pending with the
 * scheduler's message (or, bound to the node directly, is rejected with the kubelet's), freed devices are reused,
 * and a plugin that goes leaves allocatable 0. The containers are testdata/stand-in-launcher.ts.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseQuantity } from "@kvt/api";
import { CORE_V1, kubeConfigFromFile, type ResourceClient, RestClient, resourceClient } from "@kvt/kube";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../../apiserver/apiserver.ts";
import { eventually } from "../../apiserver/extensions/testdata/fixtures.ts";
import { currentRuntimeName, jsRuntime } from "../../cluster/js-runtime.ts";
import type { V1Node, V1Pod } from "../../cluster/kube-models.ts";
import { Scheduler } from "../../scheduler/scheduler.ts";
import { type NodeAgent, startNodeAgent } from "../node-agent.ts";
import { startTestPlugin, type TestPlugin } from "./testdata/test-plugin.ts";

const STAND_IN = new URL("../testdata/stand-in-launcher.ts", import.meta.url).pathname;
const NODE = "node01";
const KVM = "devices.kubevirt.io/kvm";
const log = pino({ level: "silent" });
let dir: string;
let api: ApiServerHandle;
let pods: ResourceClient<V1Pod>;
let nodes: ResourceClient<V1Node>;
let agent: NodeAgent | undefined;
let scheduler: Scheduler | undefined;
let plugin: TestPlugin | undefined;

const podOf = (name: string, kvm: number, nodeName?: string): V1Pod => ({
  metadata: { name, namespace: "default" },
  spec: {
    ...(nodeName ? { nodeName } : {}),
    terminationGracePeriodSeconds: 5,
    containers: [
      {
        name: "compute",
        image: "kubevirt/virt-launcher",
        command: ["/usr/bin/virt-launcher-monitor"],
        resources: { requests: { cpu: "10m", [KVM]: String(kvm) }, limits: { [KVM]: String(kvm) } },
        // The stand-in listens in its sockets emptyDir, as a launcher does; without it, it exits and frees its devices.
        volumeMounts: [{ name: "sockets", mountPath: "/var/run/kubevirt/sockets" }],
      },
    ],
    volumes: [{ name: "sockets", emptyDir: {} }],
  },
});

/** The environment of the stand-in launcher of pod `uid`. */
function launcherEnv(uid: string): Record<string, string> | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv[0] === "/bin/sh" || !argv.some((a) => a.endsWith("stand-in-launcher.ts"))) continue;
      const env = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
      if (!env.includes(`POD_UID=${uid}`)) continue;
      return Object.fromEntries(
        env.filter(Boolean).map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
      );
    } catch {
      // The process ended while we looked.
    }
  }
  return undefined;
}

const phaseOf = async (name: string): Promise<V1Pod> => pods.get("default", name);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-devices-"));
  api = await startApiServer({ inMemory: true, storageDir: join(dir, "storage"), logger: log });
  const transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
  pods = resourceClient<V1Pod>(transport, CORE_V1.pods);
  nodes = resourceClient<V1Node>(transport, CORE_V1.nodes);
  const runtime = jsRuntime(currentRuntimeName(), dir);
  const dataDir = join(dir, "node");
  agent = await startNodeAgent({
    nodeName: NODE,
    transport,
    dataDir,
    cpus: 4,
    layout: {
      projectRoot: dir,
      execPath: runtime.execPath,
      execArgs: runtime.execArgs,
      launcherEntry: STAND_IN,
    },
    log,
  });
  // Schedulable only through the device: the node has no virt-handler here.
  scheduler = new Scheduler({
    transport,
    parseQuantity: (q) => Number(parseQuantity(q).milliValue()) / 1000,
    log,
    volumes: false,
  });
  await scheduler.start();
  plugin = await startTestPlugin(join(dataDir, "device-plugins"), KVM, { count: 2, devicePath: "/dev/null" });
}, 60_000);

afterAll(async () => {
  await plugin?.stop();
  await scheduler?.stop();
  await agent?.stop();
  await api?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("device plugins on the process-kubelet", () => {
  it("puts the plugin's devices into the Node's capacity and allocatable", async () => {
    const node = await eventually("the Node to advertise the devices", async () => {
      const n = await nodes.get("", NODE);
      return n.status?.allocatable?.[KVM] === "2" ? n : undefined;
    });
    expect(node.status?.capacity?.[KVM]).toBe("2");
  });

  it("schedules a pod that requests a device and gives its container the plugin's answer", async () => {
    await pods.create(podOf("one", 1));
    const pod = await eventually("pod one to run", async () => {
      const p = await phaseOf("one");
      return p.status?.phase === "Running" ? p : undefined;
    });
    expect(pod.spec?.nodeName).toBe(NODE);
    const env = await eventually("its container", async () => launcherEnv(pod.metadata!.uid!));
    expect(env.TEST_DEVICES).toBe("kvm0");
    expect(JSON.parse(env.KVT_VOLUME_MOUNTS)).toContainEqual({
      mountPath: "/var/run/test-device",
      hostPath: join(dir, "node", "device-plugins"),
      readOnly: true,
    });
    expect(plugin?.allocations).toEqual([["kvm0"]]);
  });

  it("leaves a pod that wants more devices than are free Pending, with the scheduler's message", async () => {
    await pods.create(podOf("too-many", 2));
    const pod = await eventually("pod too-many to be unschedulable", async () => {
      const p = await phaseOf("too-many");
      const c = p.status?.conditions?.find((x) => x.type === "PodScheduled");
      return c?.reason === "Unschedulable" ? p : undefined;
    });
    expect(pod.status?.phase).toBe("Pending");
    expect(pod.spec?.nodeName).toBeUndefined();
    expect(pod.status?.conditions?.find((x) => x.type === "PodScheduled")?.message).toBe(
      "0/1 nodes are available: 1 Insufficient devices.kubevirt.io/kvm.",
    );
  });

  it("rejects a pod bound to the node that wants more than is free, with the kubelet's admission error", async () => {
    await pods.create(podOf("direct", 2, NODE));
    const pod = await eventually("pod direct to be rejected", async () => {
      const p = await phaseOf("direct");
      return p.status?.phase === "Failed" ? p : undefined;
    });
    expect(pod.status?.reason).toBe("UnexpectedAdmissionError");
    expect(pod.status?.message).toBe(
      "Pod was rejected: Allocate failed due to requested number of devices unavailable for devices.kubevirt.io/kvm. Requested: 2, Available: 1, which is unexpected",
    );
    expect(plugin?.allocations).toEqual([["kvm0"]]);
    await pods.delete("default", "direct");
  });

  it("frees a deleted pod's device, so the waiting pod gets both", async () => {
    await pods.delete("default", "one");
    const pod = await eventually(
      "pod too-many to run",
      async () => {
        const p = await phaseOf("too-many");
        return p.status?.phase === "Running" ? p : undefined;
      },
      30_000,
    );
    const env = await eventually("its container", async () => launcherEnv(pod.metadata!.uid!));
    expect(env.TEST_DEVICES?.split(",").sort()).toEqual(["kvm0", "kvm1"]);
  });

  it("leaves allocatable 0 when the plugin goes", async () => {
    await plugin?.stop();
    plugin = undefined;
    const node = await eventually("allocatable 0", async () => {
      const n = await nodes.get("", NODE);
      return n.status?.allocatable?.[KVM] === "0" ? n : undefined;
    });
    expect(node.status?.capacity?.[KVM]).toBe("2"); // until the kubelet's 5 minute grace period ends
  });
});
