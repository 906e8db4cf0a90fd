/**
 * The pod network with the real CNI plugins from Debian (bridge, host-local, loopback, portmap), real network
 * namespaces and a real bridge: needs root (the process-kubelet runs as root). Every namespace, link and file the
 * test makes is removed at the end, and the test checks that they are.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createPodNetwork,
  linkExists,
  namespacesWithPrefix,
  type PodNetworkConfig,
  removePodNetwork,
} from "./cluster-network.ts";
import { KubeletNetwork } from "./kubelet-network.ts";
import { inSandbox, PodNetwork, type PodSandbox } from "./pod-network.ts";

const root = process.getuid?.() === 0;
let dir: string;
let config: PodNetworkConfig;

/** Runs a one-connection TCP echo server inside `sandbox` on `port`; resolves once it listens. */
function echoServer(sandbox: PodSandbox, port: number): Promise<() => void> {
  const script = `require("node:net").createServer((s)=>s.pipe(s)).listen(${port},"0.0.0.0",()=>console.log("up"))`;
  const child = spawn(
    inSandbox([process.execPath, "-e", script], sandbox)[0],
    inSandbox([process.execPath, "-e", script], sandbox).slice(1),
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  return new Promise((resolve, reject) => {
    child.stdout.once("data", () => resolve(() => child.kill("SIGKILL")));
    child.once("exit", (code) => reject(new Error(`echo server exited ${code}`)));
  });
}

/** Sends a line to ip:port from this namespace and resolves with the echo. */
function echo(ip: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: ip, port, timeout: 5000 }, () => s.write("hello\n"));
    s.once("data", (d) => {
      resolve(d.toString());
      s.destroy();
    });
    s.once("timeout", () => reject(new Error(`no answer from ${ip}:${port}`)));
    s.once("error", reject);
  });
}

/** Runs `argv` inside `sandbox` and returns its stdout (throws on a non-zero exit). */
function inPod(sandbox: PodSandbox, argv: string[]): string {
  const [cmd, ...args] = inSandbox(argv, sandbox);
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

describe.runIf(root)("pod network (real CNI plugins, root)", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-podnet-"));
    config = await createPodNetwork(dir, ["node01", "node02"], () => undefined);
  });
  afterAll(async () => {
    if (config) await removePodNetwork(config);
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives pods on two nodes addresses in their node's range, reachable from each other and the host", async () => {
    const a = new PodNetwork(config, "node01");
    const b = new PodNetwork(config, "node02");
    const sa = await a.attach({ uid: "0000-aaaa", namespace: "default", name: "a" });
    const sb = await b.attach({ uid: "0000-bbbb", namespace: "default", name: "b" });
    const [n] = config.clusterCidr.split(".").slice(1, 2);
    expect(sa.ips[0]).toMatch(new RegExp(`^10\\.${n}\\.1\\.\\d+$`));
    expect(sb.ips[0]).toMatch(new RegExp(`^10\\.${n}\\.2\\.\\d+$`));
    // loopback is up inside, eth0 carries the address, and there is no default route out of the machine.
    expect(inPod(sa, ["ip", "-br", "addr", "show", "lo"])).toContain("127.0.0.1/8");
    expect(inPod(sa, ["ip", "-br", "addr", "show", "eth0"])).toContain(`${sa.ips[0]}/16`);
    expect(inPod(sa, ["ip", "route"])).not.toContain("default");
    const stop = await echoServer(sa, 7007);
    try {
      expect(await echo(sa.ips[0], 7007)).toBe("hello\n"); // host -> pod over the bridge
      const script = `const s=require("node:net").connect(7007,"${sa.ips[0]}",()=>s.write("pod\\n"));s.on("data",(d)=>{process.stdout.write(d);s.destroy()})`;
      expect(inPod(sb, [process.execPath, "-e", script])).toBe("pod\n"); // pod -> pod across nodes
    } finally {
      stop();
    }
    // Off-cluster addresses are unreachable from a pod (no route), so nothing leaves the machine.
    expect(() => inPod(sa, ["ip", "route", "get", "192.0.2.1"])).toThrow(/unreachable/i);
  });

  it("maps a hostPort with portmap (reachable at the host's 127.0.0.1) and DEL removes the pod's rules", async () => {
    const a = new PodNetwork(config, "node01");
    const uid = "0000-ffff";
    const sb = await a.attach({
      uid,
      namespace: "default",
      name: "f",
      portMappings: [{ hostPort: 18_087, containerPort: 7008, protocol: "tcp" }],
    });
    const stop = await echoServer(sb, 7008);
    try {
      expect(await echo("127.0.0.1", 18_087)).toBe("hello\n");
    } finally {
      stop();
    }
    await a.detach(uid);
    const nat = execFileSync("iptables", ["-t", "nat", "-S"], { encoding: "utf8" });
    expect(nat).not.toContain("18087");
  });

  it("adopts an intact sandbox with its address, and rebuilds a damaged one", async () => {
    const a = new PodNetwork(config, "node01");
    const first = await a.attach({ uid: "0000-cccc", namespace: "default", name: "c" });
    const again = await a.attach({ uid: "0000-cccc", namespace: "default", name: "c" });
    expect(again).toEqual(first);
    inPod(first, ["ip", "link", "delete", "eth0"]); // damage: CHECK now fails
    const rebuilt = await a.attach({ uid: "0000-cccc", namespace: "default", name: "c" });
    expect(inPod(rebuilt, ["ip", "-br", "addr", "show", "eth0"])).toContain(rebuilt.ips[0]);
    await a.detach("0000-cccc");
    expect(existsSync(rebuilt.netnsPath)).toBe(false);
    await a.detach("0000-cccc"); // idempotent
  });

  it("a new start removes a crashed run's namespaces, and removal leaves nothing behind", async () => {
    const a = new PodNetwork(config, "node01");
    const left = await a.attach({ uid: "0000-dddd", namespace: "default", name: "d" });
    config = await createPodNetwork(dir, ["node01", "node02"], () => undefined); // as after a crash
    expect(existsSync(left.netnsPath)).toBe(false);
    expect(await namespacesWithPrefix(config.netnsPrefix)).toEqual([]);
    const fresh = await new PodNetwork(config, "node01").attach({ uid: "0000-dddd", namespace: "default", name: "d" });
    expect(fresh.ips).toHaveLength(1);
    await removePodNetwork(config);
    expect(await namespacesWithPrefix(config.netnsPrefix)).toEqual([]);
    expect(await linkExists(config.bridge)).toBe(false);
    expect(existsSync(join(config.stateDir, "ipam"))).toBe(false);
    // No pod of any cluster maps a port now (unless another cluster on this machine does): portmap's chains went.
    const nat = execFileSync("iptables", ["-t", "nat", "-S"], { encoding: "utf8" });
    if (!nat.includes("-A CNI-HOSTPORT-DNAT ")) expect(nat).not.toContain("CNI-HOSTPORT");
  });
});

describe.runIf(root)("a restarted kubelet (real CNI plugins, root)", () => {
  let restartDir: string;
  let restartConfig: PodNetworkConfig;
  beforeAll(async () => {
    restartDir = mkdtempSync(join(tmpdir(), "kvt-podnet-restart-"));
    restartConfig = await createPodNetwork(restartDir, ["node01"], () => undefined);
  });
  afterAll(async () => {
    if (restartConfig) await removePodNetwork(restartConfig);
    rmSync(restartDir, { recursive: true, force: true });
  });

  it("reports a pod's recorded addresses before it re-checks the sandbox, then adopts it unchanged", async () => {
    const pod = {
      metadata: { uid: "0000-eeee", namespace: "default", name: "e" },
      spec: { containers: [{ name: "c", command: ["/usr/bin/virt-launcher"] }] },
    };
    const first = new KubeletNetwork(restartConfig, "node01");
    await first.attach(pod);
    const ips = first.podIPs("0000-eeee");
    expect(ips?.[0]).toMatch(/^10\./);
    const restarted = new KubeletNetwork(restartConfig, "node01"); // a new kubelet process: nothing in memory
    expect(restarted.podIPs("0000-eeee")).toEqual(ips);
    await restarted.attach(pod);
    expect(restarted.podIPs("0000-eeee")).toEqual(ips);
    await restarted.detach("0000-eeee");
    expect(restarted.podIPs("0000-eeee")).toBeUndefined();
  });
});
