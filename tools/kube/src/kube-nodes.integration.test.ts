/**
 * Real nodes end to end: `up` with two nodes (a kubelet and containerd each, in network namespaces of their own),
 * a pod on each node from the cluster's registry (our pause image as the sandbox and as a container, busybox
 * serving HTTP), pod-to-pod traffic between the two nodes' pod CIDRs, the API server reaching the kubelets (logs,
 * exec), a Block claim of local-block as one pod's raw device, then `down` (that pod still running) leaving no
 * namespace, link, route, nft table, mount, cgroup, process or loop device behind.
 * Needs the binaries of `npm run kube -- build` (tens of minutes cold, so CI does not build them yet) and root:
 * without them the suite is skipped and says so.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { cidrsOverlap, processAlive } from "@kvt/local-cluster";
import { afterAll, describe, expect, it } from "vitest";
import { binDir, DEFAULT_DATA_DIR } from "./build.ts";
import { type ClusterState, down, readNetwork, readState, type UpResult, up } from "./cluster.ts";
import { BUILT, kubectlWithInput, ROOT, skipNote } from "./integration.test-util.ts";
import { clusterTag } from "./node-network.ts";

const why = skipNote("network namespaces, cgroups and mounts");

const run = promisify(execFile);

/** kubectl from the build with the admin kubeconfig; resolves with stdout, rejects with stderr on failure. */
function kubectl(kubeconfig: string, ...args: string[]): Promise<string> {
  return kubectlWithInput(kubeconfig, "", ...args);
}

/**
 * A pod pinned (through the scheduler) to `node`: busybox's httpd answering its own name, and a pause container;
 * with `blockClaim`, that claim as the raw device /dev/xvda of the web container.
 */
function webPod(name: string, node: string, images: UpResult["images"], blockClaim?: string): string {
  const block = blockClaim ? [{ name: "block", persistentVolumeClaim: { claimName: blockClaim } }] : [];
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", labels: { app: name } },
    spec: {
      nodeSelector: { "kubernetes.io/hostname": node },
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "web",
          image: images.busybox,
          command: [
            "sh",
            "-c",
            "mkdir -p /www && hostname > /www/index.html && echo serving && exec httpd -f -p 8080 -h /www",
          ],
          volumeMounts: [{ name: "kubelet-pods", mountPath: "/pods", readOnly: true }],
          ...(blockClaim ? { volumeDevices: [{ name: "block", devicePath: "/dev/xvda" }] } : {}),
        },
        { name: "pause", image: images.pause },
      ],
      // What virt-handler mounts: the node's kubelet pods directory, which each node has on its own.
      volumes: [{ name: "kubelet-pods", hostPath: { path: "/var/lib/kubelet/pods", type: "Directory" } }, ...block],
    },
  });
}

/** The loop devices of the machine: device and backing file. */
async function loopDevices(): Promise<{ name: string; "back-file": string }[]> {
  const out = (await run("losetup", ["--list", "--json", "--output", "NAME,BACK-FILE"])).stdout;
  return out.trim() === ""
    ? []
    : (JSON.parse(out) as { loopdevices: { name: string; "back-file": string }[] }).loopdevices;
}

/**
 * Whatever of the cluster with tag `tag` and directory `dir` is still on the host (empty lists when clean); loop
 * devices over its files or, the kubelets' (backed by `.../volumeDevices/<pv>/<pod uid>`), over one of `volumes`.
 */
async function leftovers(tag: string, dir: string, volumes: readonly string[]): Promise<Record<string, string[]>> {
  const names = (await run("ip", ["netns", "list"])).stdout.split("\n").map((l) => l.split(" ")[0]);
  const links = JSON.parse((await run("ip", ["-j", "link", "show"])).stdout) as { ifname: string }[];
  const routes = JSON.parse((await run("ip", ["-j", "route", "show"])).stdout) as { dev?: string; dst: string }[];
  const tables = (await run("nft", ["list", "tables"])).stdout.split("\n");
  const mounts = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "");
  const cgroups = readdirSync("/sys/fs/cgroup").flatMap((h) =>
    existsSync(join("/sys/fs/cgroup", h, `kvtk-${tag}-node01`)) ? [h] : [],
  );
  const processes = readdirSync("/proc").filter((p) => {
    if (!/^\d+$/.test(p)) return false;
    try {
      const cmdline = readFileSync(`/proc/${p}/cmdline`, "utf8");
      return cmdline.includes(dir) || cmdline.includes(`/run/kvtk-${tag}`);
    } catch {
      return false; // exited meanwhile
    }
  });
  return {
    namespaces: names.filter((n) => n?.includes(tag)),
    links: links.map((l) => l.ifname).filter((n) => n.includes(tag)),
    routes: routes.filter((r) => r.dev?.includes(tag)).map((r) => r.dst),
    nftTables: tables.filter((t) => t.includes(tag)),
    mounts: mounts.filter((m) => m.startsWith(dir) || m.startsWith(`/run/kvtk-${tag}`)),
    cgroups,
    processes,
    runDir: existsSync(`/run/kvtk-${tag}`) ? [`/run/kvtk-${tag}`] : [],
    loopDevices: (await loopDevices())
      .filter(
        (d) => d["back-file"].startsWith(dir) || volumes.some((v) => d["back-file"].includes(`/volumeDevices/${v}/`)),
      )
      .map((d) => `${d.name} ${d["back-file"]}`),
  };
}

describe.skipIf(!BUILT || !ROOT)(`two real nodes: kubelet + containerd in network namespaces${why}`, () => {
  // A fresh directory that `up` makes (nothing is made when the suite is skipped).
  const clusterDir = join(tmpdir(), `kvt-kube-nodes-${randomUUID().slice(0, 8)}`);
  const where = { dataDir: DEFAULT_DATA_DIR, clusterDir };
  const tag = clusterTag(clusterDir);
  afterAll(async () => {
    await down(where);
    rmSync(clusterDir, { recursive: true, force: true });
  }, 120_000); // down takes 15-25 s on a loaded host

  it("runs a pod on each node that reaches the other node's pod, and goes down leaving nothing", async () => {
    const result = await up({ ...where, nodes: 2, log: () => undefined });
    const { kubeconfig, images } = result;
    expect(result.nodes.map((n) => n.name)).toEqual(["node01", "node02"]);
    const [cidr1, cidr2] = result.nodes.map((n) => n.podCidr);
    expect(cidrsOverlap(cidr1, cidr2)).toBe(false);

    const nodes = JSON.parse(await kubectl(kubeconfig, "get", "nodes", "-o", "json")) as {
      items: { metadata: { name: string }; status: { conditions: { type: string; status: string }[] } }[];
    };
    expect(
      nodes.items.map((n) => [n.metadata.name, n.status.conditions.find((c) => c.type === "Ready")?.status]),
    ).toEqual([
      ["node01", "True"],
      ["node02", "True"],
    ]);

    // A Block claim of local-block (a loop device made by the host provisioner) as web-node01's raw device.
    const claim = {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "raw", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        volumeMode: "Block",
        storageClassName: "local-block",
        resources: { requests: { storage: "16Mi" } },
      },
    };
    await kubectlWithInput(kubeconfig, JSON.stringify(claim), "create", "-f", "-");
    for (const node of ["node01", "node02"]) {
      const pod = webPod(`web-${node}`, node, images, node === "node01" ? "raw" : undefined);
      await kubectlWithInput(kubeconfig, pod, "create", "-f", "-");
    }
    await kubectl(kubeconfig, "wait", "--for=condition=Ready", "pod/web-node01", "pod/web-node02", "--timeout=120s");
    const pods = JSON.parse(await kubectl(kubeconfig, "get", "pods", "-o", "json")) as {
      items: { metadata: { name: string; uid: string }; spec: { nodeName: string }; status: { podIP: string } }[];
    };
    const ipOf = (name: string): string => pods.items.find((p) => p.metadata.name === name)?.status.podIP ?? "";
    expect(pods.items.map((p) => [p.metadata.name, p.spec.nodeName])).toEqual([
      ["web-node01", "node01"],
      ["web-node02", "node02"],
    ]);
    expect(cidrsOverlap(`${ipOf("web-node01")}/32`, cidr1)).toBe(true);
    expect(cidrsOverlap(`${ipOf("web-node02")}/32`, cidr2)).toBe(true);

    // Across nodes, both ways (exec goes API server -> kubelet -> containerd's stream server).
    const fetchFrom = (pod: string, address: string): Promise<string> =>
      kubectl(kubeconfig, "exec", pod, "-c", "web", "--", "timeout", "10", "wget", "-qO-", `http://${address}/`);
    expect(await fetchFrom("web-node01", `${ipOf("web-node02")}:8080`)).toBe("web-node02");
    expect(await fetchFrom("web-node02", `${ipOf("web-node01")}:8080`)).toBe("web-node01");
    // Nothing off this machine: a pod has no route out of its node.
    await expect(
      kubectl(kubeconfig, "exec", "web-node01", "-c", "web", "--", "timeout", "5", "wget", "-qO-", "http://192.0.2.1/"),
    ).rejects.toThrow(/exit code 1/);
    expect(await kubectl(kubeconfig, "logs", "web-node02", "-c", "web")).toBe("serving");

    // Each node's /var/lib/kubelet is its own (a mount namespace per node): a pod sees its node's pods only.
    const uid = (name: string): string => pods.items.find((p) => p.metadata.name === name)?.metadata.uid ?? "";
    const podsSeenBy = async (pod: string): Promise<string[]> =>
      (await kubectl(kubeconfig, "exec", pod, "-c", "web", "--", "ls", "/pods")).split(/\s+/);
    // (local-path-provisioner's pod runs on one of the nodes too.)
    const [seen1, seen2] = [await podsSeenBy("web-node01"), await podsSeenBy("web-node02")];
    expect(seen1).toContain(uid("web-node01"));
    expect(seen1).not.toContain(uid("web-node02"));
    expect(seen2).toContain(uid("web-node02"));
    expect(seen2).not.toContain(uid("web-node01"));

    // Services through each node's kube-proxy (nftables): a ClusterIP to the other node's pod, and the
    // `kubernetes` Service to the API server on the bridge.
    const service = { apiVersion: "v1", kind: "Service", metadata: { name: "web", namespace: "default" } };
    const spec = { selector: { app: "web-node02" }, ports: [{ port: 80, targetPort: 8080 }] };
    await kubectlWithInput(kubeconfig, JSON.stringify({ ...service, spec }), "create", "-f", "-");
    const clusterIp = await kubectl(kubeconfig, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}");
    await expect
      .poll(() => fetchFrom("web-node01", `${clusterIp}:80`).catch((e: Error) => e.message), { timeout: 30_000 })
      .toBe("web-node02");
    // The node itself reaches it too (a hostNetwork client, as on a real node with its default route).
    const get = `fetch("http://${clusterIp}/").then(async (r) => console.log(await r.text()))`;
    const fromNode = await run("ip", ["netns", "exec", `kvtk-${tag}-1`, process.execPath, "-e", get], {
      timeout: 30_000,
    });
    expect(fromNode.stdout.trim()).toBe("web-node02");
    const apiserver = await kubectl(
      kubeconfig,
      ...["exec", "web-node02", "-c", "web", "--", "sh", "-c", "timeout 5 nc 10.96.0.1 443 </dev/null; echo $?"],
    );
    expect(apiserver).toBe("0");

    // Each node's sandboxes run the registry's pause image (nobody else could have provided it), as does the pause
    // container: containerd's own list of its containers says so. One node also runs the storage provisioner's pod.
    const provisionerNode = await kubectl(
      kubeconfig,
      ...["-n", "local-path-storage", "get", "pods", "-o", "jsonpath={.items[*].spec.nodeName}"],
    );
    for (const node of ["node01", "node02"]) {
      const socket = `/run/kvtk-${tag}/${node}/containerd.sock`;
      const ctr = join(binDir(DEFAULT_DATA_DIR), "ctr");
      const { stdout } = await run(ctr, ["--address", socket, "--namespace", "k8s.io", "containers", "list"]);
      const byImage = stdout
        .split("\n")
        .slice(1)
        .filter(Boolean)
        .map((l) => l.split(/\s+/)[1]);
      const provisioner = node === provisionerNode ? 1 : 0;
      // the web pod's sandbox and pause container, and the provisioner pod's sandbox where it runs
      expect(byImage.filter((i) => i === images.pause)).toHaveLength(2 + provisioner);
      expect(byImage.filter((i) => i === images.busybox)).toHaveLength(1);
      expect(byImage.filter((i) => i === images.localPath)).toHaveLength(provisioner);
    }

    // The pod's writes to its raw device land in the claim's file on the host: the kubelet in its mount namespace
    // mapped the host's loop device.
    const pv = await kubectl(kubeconfig, "get", "pvc", "raw", "-o", "jsonpath={.spec.volumeName}");
    const link = await kubectl(kubeconfig, "get", "pv", pv, "-o", "jsonpath={.spec.local.path}");
    expect(link.startsWith(join(clusterDir, "storage", "local-block"))).toBe(true);
    const write = "echo raw-marker | dd of=/dev/xvda bs=512 count=1 conv=sync,fsync 2>/dev/null; echo $?";
    expect(await kubectl(kubeconfig, "exec", "web-node01", "-c", "web", "--", "sh", "-c", write)).toBe("0");
    expect(readFileSync(`${link}.img`, "latin1").slice(0, 11)).toBe("raw-marker\n");

    const state = readState(where) as ClusterState;
    const pids = [state.supervisorPid, ...Object.values(state.pids)];
    // the supervisor, 4 control plane, the registry, the local-block provisioner, 3 per node
    expect(pids).toHaveLength(13);
    expect(readNetwork(where)?.nodes).toHaveLength(2);
    expect(await down(where)).toBe(true);
    expect(pids.filter((pid) => processAlive(pid))).toEqual([]);
    // down with the pod still running: its device and the kubelet's own loop device over it go too.
    expect(await leftovers(tag, clusterDir, [pv])).toEqual({
      namespaces: [],
      links: [],
      routes: [],
      nftTables: [],
      mounts: [],
      cgroups: [],
      processes: [],
      runDir: [],
      loopDevices: [],
    });
  }, 400_000);
});
