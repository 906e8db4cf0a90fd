/**
 * Service routing end to end without VMs (needs root, as the cluster's pod network does): a real pod network
 * (bridge, Debian's CNI plugins, one namespace per pod), the embedded API server with its ClusterIP allocator and
 * EndpointSlice controller, and the service proxy writing its nftables table. TCP to a ClusterIP reaches the pods
 * behind it from the host, from another pod and from a pod behind the Service itself (hairpin); a Service without
 * a ready endpoint refuses; as kube-proxy, a UDP flow to an endpoint that stops serving is cleared from conntrack
 * (its next datagram goes to the other pod) and a TCP connection is left to drain; after the pod network is removed
 * (what the cluster's stop does) the table is gone.
 */
import { execFileSync, spawn } from "node:child_process";
import { createSocket } from "node:dgram";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { call, eventually } from "../apiserver/extensions/testdata/fixtures.ts";
import {
  createPodNetwork,
  type PodNetworkConfig,
  proxyNetworkOf,
  removePodNetwork,
} from "../network/cluster-network.ts";
import { inSandbox, PodNetwork, type PodSandbox } from "../network/pod-network.ts";
import { ServiceProxy } from "./service-proxy.ts";

const root = process.getuid?.() === 0;
const NS = "/api/v1/namespaces/default";

/** A TCP server in `sandbox` that answers every connection with `name` and the peer's address. */
function nameServer(sandbox: PodSandbox, name: string, port: number): Promise<() => void> {
  const script = `require("node:net").createServer((s)=>s.end("${name} "+s.remoteAddress+"\\n")).listen(${port},"0.0.0.0",()=>console.log("up"))`;
  const [cmd, ...args] = inSandbox([process.execPath, "-e", script], sandbox);
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.stdout.once("data", () => resolve(() => child.kill("SIGKILL")));
    child.once("exit", (code) => reject(new Error(`server ${name} exited ${code}`)));
  });
}

/** A TCP server in `sandbox` that keeps each connection open and answers every chunk with `name`. */
function streamServer(sandbox: PodSandbox, name: string, port: number): Promise<() => void> {
  const script = `require("node:net").createServer((s)=>s.on("data",()=>s.write("${name}\\n"))).listen(${port},"0.0.0.0",()=>console.log("up"))`;
  const [cmd, ...args] = inSandbox([process.execPath, "-e", script], sandbox);
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.stdout.once("data", () => resolve(() => child.kill("SIGKILL")));
    child.once("exit", (code) => reject(new Error(`server ${name} exited ${code}`)));
  });
}

/** A UDP server in `sandbox` that answers every datagram with `name`. */
function datagramServer(sandbox: PodSandbox, name: string, port: number): Promise<() => void> {
  const script = `const s=require("node:dgram").createSocket("udp4");s.on("message",(m,r)=>s.send("${name}",r.port,r.address));s.bind(${port},"0.0.0.0",()=>console.log("up"))`;
  const [cmd, ...args] = inSandbox([process.execPath, "-e", script], sandbox);
  const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.stdout.once("data", () => resolve(() => child.kill("SIGKILL")));
    child.once("exit", (code) => reject(new Error(`server ${name} exited ${code}`)));
  });
}

/** The host's conntrack entries of `protocol` flows to `ip:port` (Debian's conntrack -L). */
function flowsTo(ip: string, port: number, protocol = "tcp"): string {
  return execFileSync("conntrack", ["-L", "-p", protocol, "--orig-dst", ip, "--orig-port-dst", String(port)], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
}

/** Connects to ip:port from the host and resolves with what the server says (rejects with the socket error). */
function fromHost(ip: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const s = connect({ host: ip, port, timeout: 5000 });
    s.on("data", (d) => {
      got += d.toString();
    });
    s.once("end", () => resolve(got));
    s.once("timeout", () => {
      s.destroy();
      reject(new Error(`no answer from ${ip}:${port}`));
    });
    s.once("error", reject);
  });
}

/** The same from inside a pod's namespace. */
function fromPod(sandbox: PodSandbox, ip: string, port: number): string {
  const script = `const s=require("node:net").connect(${port},"${ip}");s.setTimeout(5000,()=>process.exit(3));s.on("data",(d)=>process.stdout.write(d));s.on("error",(e)=>{console.error(e.code);process.exit(2)})`;
  const [cmd, ...args] = inSandbox([process.execPath, "-e", script], sandbox);
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

function tableExists(table: string): boolean {
  try {
    execFileSync("nft", ["list", "table", "ip", table], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe.runIf(root)("service proxy (ClusterIP -> pods through nftables, root)", () => {
  let dir: string;
  let config: PodNetworkConfig;
  let api: ApiServerHandle;
  let proxy: ServiceProxy;
  const stops: (() => void)[] = [];
  const sandboxes: Record<string, PodSandbox> = {};

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-svcproxy-"));
    config = await createPodNetwork(dir, ["node01", "node02"], () => undefined);
    api = await startApiServer({ inMemory: true, serviceClusterIpRange: config.serviceCidr });
    const transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
    const network = proxyNetworkOf(config);
    if (!network) throw new Error("the plan has no service range");
    proxy = new ServiceProxy({ transport, network, log: pino({ level: "silent" }) });
    await proxy.start();
    for (const [name, node] of [
      ["a", "node01"],
      ["b", "node02"],
    ] as const) {
      const sandbox = await new PodNetwork(config, node).attach({
        uid: `0000-svc-${name}`,
        namespace: "default",
        name,
      });
      sandboxes[name] = sandbox;
      stops.push(await nameServer(sandbox, name, 8080));
      stops.push(await streamServer(sandbox, name, 8081));
      stops.push(await datagramServer(sandbox, name, 8082));
      const pod = await call(api, "POST", `${NS}/pods`, {
        metadata: { name, labels: { app: "echo" } },
        spec: {
          nodeName: node,
          containers: [
            {
              name: "c",
              image: "x",
              ports: [
                { name: "web", containerPort: 8080 },
                { name: "stream", containerPort: 8081 },
                { name: "datagram", containerPort: 8082, protocol: "UDP" },
              ],
            },
          ],
        },
      });
      expect(pod.code).toBe(201);
      const ip = sandbox.ips[0];
      const status = { phase: "Running", podIP: ip, podIPs: [{ ip }], conditions: [{ type: "Ready", status: "True" }] };
      expect((await call(api, "PUT", `${NS}/pods/${name}/status`, { ...pod.body, status })).code).toBe(200);
    }
  }, 60_000);

  afterAll(async () => {
    for (const stop of stops) stop();
    await proxy?.stop();
    await api?.stop();
    if (config) await removePodNetwork(config);
    rmSync(dir, { recursive: true, force: true });
  });

  it("routes a ClusterIP from the host, from another pod and from a pod behind it; refuses one with no endpoint", async () => {
    const created = await call(api, "POST", `${NS}/services`, {
      metadata: { name: "echo" },
      spec: { selector: { app: "echo" }, ports: [{ port: 80, targetPort: "web" }] },
    });
    expect(created.code).toBe(201);
    const ip = (created.body.spec as { clusterIP: string }).clusterIP;
    // Both pods answer through the ClusterIP (random choice: ask until each has), seeing the bridge's address.
    const seen = await eventually(
      "both pods behind the ClusterIP",
      async () => {
        const names = new Set<string>();
        for (let i = 0; i < 20; i++) names.add(await fromHost(ip, 80));
        return names.size === 2 ? [...names].sort() : undefined;
      },
      20_000,
    );
    expect(seen).toEqual([`a ${config.gateway}\n`, `b ${config.gateway}\n`]);
    const sa = sandboxes.a;
    const sb = sandboxes.b;
    for (let i = 0; i < 6; i++) {
      expect(fromPod(sb, ip, 80)).toMatch(/^[ab] /);
      expect(fromPod(sa, ip, 80)).toMatch(/^[ab] /); // a reaches itself half the time: hairpin
    }
    const empty = await call(api, "POST", `${NS}/services`, {
      metadata: { name: "nobody" },
      spec: { selector: { app: "none" }, ports: [{ port: 80 }] },
    });
    const emptyIp = (empty.body.spec as { clusterIP: string }).clusterIP;
    await eventually("the empty Service refused", async () =>
      (await fromHost(emptyIp, 80).then(
        () => "answered",
        (e: NodeJS.ErrnoException) => e.code,
      )) === "ECONNREFUSED"
        ? true
        : undefined,
    );
    // The route to the Service's pods goes when they are no longer ready.
    const b = (await call(api, "GET", `${NS}/pods/b`)).body as { status: Record<string, unknown> };
    const unready = { ...b, status: { ...b.status, conditions: [{ type: "Ready", status: "False" }] } };
    expect((await call(api, "PUT", `${NS}/pods/b/status`, unready)).code).toBe(200);
    await eventually("only a behind the ClusterIP", async () => {
      for (let i = 0; i < 10; i++) if (!(await fromHost(ip, 80)).startsWith("a ")) return undefined;
      return true;
    });
  }, 60_000);

  it("clears the UDP flows of an endpoint that stops serving, and leaves its TCP connections (kube-proxy's)", async () => {
    const setReady = async (name: string, ready: boolean): Promise<void> => {
      const pod = (await call(api, "GET", `${NS}/pods/${name}`)).body as { status: Record<string, unknown> };
      const conditions = [{ type: "Ready", status: ready ? "True" : "False" }];
      expect(
        (await call(api, "PUT", `${NS}/pods/${name}/status`, { ...pod, status: { ...pod.status, conditions } })).code,
      ).toBe(200);
    };
    await setReady("b", true);
    const created = await call(api, "POST", `${NS}/services`, {
      metadata: { name: "stream" },
      spec: {
        selector: { app: "echo" },
        ports: [
          { name: "stream", port: 81, targetPort: "stream" },
          { name: "datagram", port: 82, protocol: "UDP", targetPort: "datagram" },
        ],
      },
    });
    const ip = (created.body.spec as { clusterIP: string }).clusterIP;
    const addressOf = (name: string | undefined): string => `src=${sandboxes[name ?? ""]?.ips[0]} `;

    // UDP: one socket (one flow) to the ClusterIP; the pod that answered stops serving; the proxy clears the flow,
    // and the next datagram of the same socket meets the other pod.
    const udp = createSocket("udp4");
    const answers: string[] = [];
    udp.on("message", (m) => answers.push(m.toString()));
    const tcp = await eventually("a connection through the ClusterIP", async () => {
      const s = connect({ host: ip, port: 81 });
      return new Promise<ReturnType<typeof connect> | undefined>((resolve) => {
        s.once("connect", () => resolve(s));
        s.once("error", () => resolve(undefined));
      });
    });
    const replies: string[] = [];
    let failure: NodeJS.ErrnoException | undefined;
    tcp.on("data", (d: Buffer) => replies.push(...d.toString().trim().split("\n")));
    tcp.on("error", (e: NodeJS.ErrnoException) => {
      failure = e;
    });
    try {
      const first = await eventually("the first datagram's answer", async () => {
        udp.send("1", 82, ip);
        await new Promise((r) => setTimeout(r, 100));
        return answers[0];
      });
      await eventually("the UDP flow in conntrack, DNATed to that pod", async () =>
        flowsTo(ip, 82, "udp").includes(addressOf(first)) ? true : undefined,
      );
      await setReady(first, false);
      await eventually("the UDP flow cleared", async () =>
        flowsTo(ip, 82, "udp").includes(addressOf(first)) ? undefined : true,
      );
      const other = first === "a" ? "b" : "a";
      const next = answers.length;
      udp.send("2", 82, ip);
      expect(await eventually("the next datagram's answer", async () => answers[next])).toBe(other);
      await setReady(first, true);

      // TCP: the pod that answered stops serving; its connection keeps its entry and its pod, as with kube-proxy.
      tcp.write("1");
      const tcpFirst = await eventually("the first answer", async () => replies[0]);
      await eventually("the TCP flow in conntrack, DNATed to that pod", async () =>
        flowsTo(ip, 81).includes(addressOf(tcpFirst)) ? true : undefined,
      );
      await setReady(tcpFirst ?? "", false);
      const table = (): string => execFileSync("nft", ["list", "table", "ip", config.bridge], { encoding: "utf8" });
      await eventually("the proxy's table without that pod's stream port", async () =>
        table().includes(`${sandboxes[tcpFirst ?? ""]?.ips[0]}:8081`) ? undefined : true,
      );
      await new Promise((r) => setTimeout(r, 300)); // a clearing would follow the table at once
      expect(flowsTo(ip, 81)).toContain(addressOf(tcpFirst));
      tcp.write("2");
      expect(await eventually("the second answer", async () => replies[1])).toBe(tcpFirst);
      expect(failure).toBeUndefined();
    } finally {
      udp.close();
      tcp.destroy();
    }
  }, 60_000);

  it("leaves no table behind once the pod network is removed", async () => {
    expect(tableExists(config.bridge)).toBe(true);
    await proxy.stop();
    await removePodNetwork(config);
    expect(tableExists(config.bridge)).toBe(false);
  });
});
