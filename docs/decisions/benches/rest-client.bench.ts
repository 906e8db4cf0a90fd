/**
 * The client-side CPU cost of one request through libs/kube's RestClient and through @kubernetes/client-node, for
 * docs/decisions/0002-rest-client.md: a list of 100 ConfigMaps, and one watch event. The embedded API server runs in
 * its own process; only this process's CPU time (process.cpuUsage, user + system) is counted. A watch event's cost is
 * the CPU of a child process that only watches, from its first event to its last, divided by the events.
 * Prints one JSON line. Run from the repository root:
 *   node docs/decisions/benches/rest-client.bench.ts
 * Environment: BENCH_LISTS (lists per client, default 400), BENCH_EVENTS (watch events per client, default 1500).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, Watch } from "@kubernetes/client-node";
import { RestClient } from "@kvt/kube";

const LISTS = Number(process.env.BENCH_LISTS ?? 400);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1500);
const NS = "default";

if (process.argv[2] === "--watcher") {
  const [, , , kind, kubeconfig] = process.argv;
  const wkc = new KubeConfig();
  wkc.loadFromFile(kubeconfig ?? "");
  const path = `/api/v1/namespaces/${NS}/configmaps`;
  // Start from "now": the objects listed before are not events.
  const list = await new RestClient(wkc).request<{ metadata: { resourceVersion: string } }>({ method: "GET", path });
  const rv = list.metadata.resourceVersion;
  let events = 0;
  let before = process.cpuUsage();
  const onEvent = (): void => {
    if (++events === 1) before = process.cpuUsage(); // from the first event: connection set-up is not counted
    if (events === EVENTS) {
      const d = process.cpuUsage(before);
      process.stdout.write(`cpuUsPerEvent ${(d.user + d.system) / (EVENTS - 1)}\n`);
      process.exit(0);
    }
  };
  if (kind === "ours") await new RestClient(wkc).watch(path, { resourceVersion: rv }, onEvent, () => {});
  else await new Watch(wkc).watch(path, { resourceVersion: rv }, onEvent, () => {});
  process.stdout.write("ready\n");
  await new Promise(() => {});
}

const dir = mkdtempSync(join(tmpdir(), "kvt-rest-bench-"));
const main = new URL("../../../tools/local-cluster/src/apiserver/main.ts", import.meta.url).pathname;
const server = spawn(process.execPath, [main, "--data-dir", dir, "--log-level", "warn"], {
  stdio: ["ignore", "pipe", "inherit"],
});
await new Promise<void>((resolve, reject) => {
  server.stdout.on("data", (d: Buffer) => {
    if (d.toString().includes("listening on")) resolve();
  });
  server.once("exit", (code) => reject(new Error(`apiserver exited with ${code}`)));
});

const kc = new KubeConfig();
kc.loadFromFile(join(dir, "kubeconfig"));
const ours = new RestClient(kc);
const core = kc.makeApiClient(CoreV1Api);
const path = `/api/v1/namespaces/${NS}/configmaps`;
let seq = 0;
const create = (): Promise<unknown> =>
  ours.request({ method: "POST", path, body: { metadata: { name: `cm-${seq++}` }, data: { k: "v".repeat(200) } } });

/** CPU microseconds of this process spent in `work`. */
async function cpuOf(work: () => Promise<void>): Promise<number> {
  const before = process.cpuUsage();
  await work();
  const d = process.cpuUsage(before);
  return d.user + d.system;
}

for (let i = 0; i < 100; i++) await create();

async function listCost(list: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 50; i++) await list(); // warm-up: connections, JIT
  return (
    (await cpuOf(async () => {
      for (let i = 0; i < LISTS; i++) await list();
    })) / LISTS
  );
}

const oursList = () => ours.request({ method: "GET", path });
const nodeList = () => core.listNamespacedConfigMap({ namespace: NS });
// Alternate twice so that neither client always runs on a warmer process.
const listUs = { ours: [] as number[], clientNode: [] as number[] };
for (let round = 0; round < 2; round++) {
  listUs.ours.push(await listCost(oursList));
  listUs.clientNode.push(await listCost(nodeList));
}

/** In a child process (so that the writes' CPU is not counted): one watch, CPU from ready to the EVENTS-th event. */
async function watchCost(kind: "ours" | "clientNode"): Promise<number> {
  const child = spawn(
    process.execPath,
    [new URL(import.meta.url).pathname, "--watcher", kind, join(dir, "kubeconfig")],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  const line = (prefix: string): Promise<string> =>
    new Promise((resolve) => {
      const check = (): void => {
        const l = out.split("\n").find((x) => x.startsWith(prefix));
        if (l) resolve(l.slice(prefix.length));
        else setTimeout(check, 5);
      };
      check();
    });
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  await line("ready");
  for (let i = 0; i < EVENTS; i++) await create();
  return Number(await line("cpuUsPerEvent "));
}

const watchUs = { ours: [] as number[], clientNode: [] as number[] };
for (let round = 0; round < 2; round++) {
  watchUs.ours.push(await watchCost("ours"));
  watchUs.clientNode.push(await watchCost("clientNode"));
}

server.kill("SIGTERM");
await new Promise((r) => server.once("exit", r));
rmSync(dir, { recursive: true, force: true });
const min = (xs: number[]): number => Math.round(Math.min(...xs));
console.log(
  JSON.stringify({
    area: "rest-client",
    listItems: 100,
    lists: LISTS,
    events: EVENTS,
    listCpuUsPerRequest: { ours: min(listUs.ours), clientNode: min(listUs.clientNode) },
    watchCpuUsPerEvent: { ours: min(watchUs.ours), clientNode: min(watchUs.clientNode) },
    rounds: { listUs, watchUs },
  }),
);
