/**
 * The local cluster's Service routing (tools/local-cluster/src/proxy), for docs/decisions/0014-service-proxy.md:
 *   - sync: rendering and loading the whole nftables table (`nft -f -`, one transaction) for 10, 100 and 1000
 *     Services of 2 endpoints each;
 *   - connect: a TCP connect and the server's first byte, from the host to a pod, through the ClusterIP
 *     (DNAT + masquerade) against the pod IP directly (no rule on the path), median of BENCH_CONNECTIONS.
 * Everything runs inside throwaway network namespaces (a "host" one with the bridge and the table, one pod), removed
 * at the end; needs root and Debian's nft. Prints one JSON line. Run from the repository root:
 *   node docs/decisions/benches/service-proxy.bench.ts
 */
import { execFileSync, spawn } from "node:child_process";
import {
  renderRuleset,
  type ServiceInfo,
  type SliceInfo,
  serviceRoutes,
} from "../../../tools/local-cluster/src/proxy/nft-ruleset.ts";

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 300);
const HOST = `kvtb-host-${process.pid}`;
const POD = `kvtb-pod-${process.pid}`;
const NET = { table: "kvtb", bridge: "kvtb-br", clusterCidr: "10.250.0.0/16", serviceCidr: "10.251.0.0/16" };
const POD_IP = "10.250.1.5";

const sh = (argv: string[], input?: string): string =>
  execFileSync(argv[0] ?? "", argv.slice(1), { encoding: "utf8", input, stdio: ["pipe", "pipe", "pipe"] });
const inHost = (argv: string[], input?: string): string => sh(["ip", "netns", "exec", HOST, ...argv], input);

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return Number((s[Math.floor(s.length / 2)] ?? 0).toFixed(3));
}

function setUp(): void {
  sh(["ip", "netns", "add", HOST]);
  sh(["ip", "netns", "add", POD]);
  inHost(["ip", "link", "set", "lo", "up"]);
  inHost(["ip", "link", "add", NET.bridge, "type", "bridge"]);
  inHost(["ip", "addr", "add", "10.250.0.1/16", "dev", NET.bridge]);
  inHost(["ip", "link", "set", NET.bridge, "up"]);
  inHost(["ip", "route", "add", NET.serviceCidr, "dev", NET.bridge, "src", "10.250.0.1"]);
  inHost(["sh", "-c", `echo 1 > /proc/sys/net/ipv4/conf/${NET.bridge}/forwarding`]);
  sh(["ip", "link", "add", "kvtb-v", "netns", HOST, "type", "veth", "peer", "name", "eth0", "netns", POD]);
  inHost(["ip", "link", "set", "kvtb-v", "master", NET.bridge, "up"]);
  for (const argv of [
    ["ip", "link", "set", "lo", "up"],
    ["ip", "addr", "add", `${POD_IP}/16`, "dev", "eth0"],
    ["ip", "link", "set", "eth0", "up"],
    ["ip", "route", "add", NET.serviceCidr, "via", "10.250.0.1"],
  ])
    sh(["ip", "netns", "exec", POD, ...argv]);
}

function tearDown(): void {
  for (const ns of [POD, HOST]) {
    try {
      sh(["ip", "netns", "delete", ns]);
    } catch {
      // not made (set-up failed early)
    }
  }
}

/** Services 10.251.x.y:80 -> two endpoints each (the first one is the real pod). */
function cluster(count: number): { services: ServiceInfo[]; slices: SliceInfo[] } {
  const services: ServiceInfo[] = [];
  const slices: SliceInfo[] = [];
  for (let i = 0; i < count; i++) {
    const name = `svc-${i}`;
    const ip = `10.251.${Math.floor(i / 250)}.${(i % 250) + 2}`;
    services.push({ namespace: "bench", name, clusterIP: ip, ports: [{ name: "", port: 80, protocol: "TCP" }] });
    const eps = i === 0 ? [POD_IP] : [`10.250.2.${(i % 250) + 2}`, `10.250.3.${(i % 250) + 2}`];
    slices.push({
      namespace: "bench",
      serviceName: name,
      ports: [{ name: "", port: 8080, protocol: "TCP" }],
      endpoints: eps.map((a) => ({ addresses: [a], ready: true, serving: true, terminating: false })),
    });
  }
  return { services, slices };
}

function syncMs(count: number): number {
  const { services, slices } = cluster(count);
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    inHost(["nft", "-f", "-"], renderRuleset(NET, serviceRoutes(NET, services, slices)));
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** Median ms from connect() to the first byte, over CONNECTIONS connections to ip:port, from the host namespace. */
function connectMs(ip: string, port: number): number {
  const script = `const net=require("node:net");const out=[];let n=0;
const one=()=>{const t=performance.now();const s=net.connect(${port},"${ip}");s.once("data",()=>{out.push(performance.now()-t);s.destroy();if(++n<${CONNECTIONS})one();else console.log(JSON.stringify(out))});s.once("error",(e)=>{console.error(e.message);process.exit(1)})};one();`;
  return median(JSON.parse(inHost([process.execPath, "-e", script])) as number[]);
}

async function main(): Promise<void> {
  setUp();
  const server = spawn(
    "ip",
    [
      "netns",
      "exec",
      POD,
      process.execPath,
      "-e",
      `require("node:net").createServer((s)=>s.end("x")).listen(8080,()=>console.log("up"))`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  try {
    await new Promise((resolve) => server.stdout.once("data", resolve));
    const sync = { services10: syncMs(10), services100: syncMs(100), services1000: syncMs(1000) };
    syncMs(1); // the one Service whose endpoint is the pod
    const viaClusterIp = connectMs("10.251.0.2", 80);
    const direct = connectMs(POD_IP, 8080);
    console.log(JSON.stringify({ area: "service-proxy", syncMs: sync, connectMs: { viaClusterIp, direct } }));
  } finally {
    server.kill("SIGKILL");
    tearDown();
  }
}

await main();
