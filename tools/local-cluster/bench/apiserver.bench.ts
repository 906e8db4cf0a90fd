/**
 * `npm run bench -- apiserver`: the embedded API server in its own process (durable storage, TLS), driven by
 * several concurrent clients creating, updating and deleting VMI-sized objects while 10 watchers follow; then a
 * list of 10,000 objects. Prints a table and, last, one JSON line:
 *   {"area":"apiserver","writesPerSec":..,"watchP50Ms":..,"watchP99Ms":..,"list10kMs":..,"rssBytes":..}
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:https";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { customResourceDefinitions } from "@kvt/api";
import { parse } from "yaml";

const CLIENTS = 8;
const IN_FLIGHT = 4;
const OBJECTS = Number(process.env.BENCH_OBJECTS ?? 1500);
const WATCHERS = 10;
const LIST_SIZE = 10_000;

const dir = mkdtempSync(join(tmpdir(), "kvt-apiserver-bench-"));
const main = new URL("../src/apiserver/main.ts", import.meta.url).pathname;
const child = spawn(
  process.execPath,
  [...(process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean), main, "--data-dir", dir, "--log-level", "warn"],
  { stdio: ["ignore", "pipe", "inherit"] },
);
await new Promise<void>((resolve, reject) => {
  child.stdout.on("data", (d: Buffer) => {
    if (d.toString().includes("listening on")) resolve();
  });
  child.once("exit", (code) => reject(new Error(`apiserver exited with ${code}`)));
});
const kc = parse(readFileSync(join(dir, "kubeconfig"), "utf8")) as {
  clusters: { cluster: { server: string; "certificate-authority-data": string } }[];
  users: { user: { token: string } }[];
};
const server = new URL(kc.clusters[0]?.cluster.server ?? "");
const ca = Buffer.from(kc.clusters[0]?.cluster["certificate-authority-data"] ?? "", "base64");
const token = kc.users[0]?.user.token ?? "";
const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS * IN_FLIGHT + WATCHERS + 4, ca });

function call(
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<{ code: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: server.hostname,
        port: server.port,
        method,
        path,
        agent,
        headers: { Authorization: `Bearer ${token}`, "Content-Type": contentType, Accept: "application/json" },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ code: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

async function must(method: string, path: string, body?: unknown, contentType?: string): Promise<string> {
  const r = await call(method, path, body, contentType);
  if (r.code >= 300) throw new Error(`${method} ${path}: ${r.code} ${r.text.slice(0, 300)}`);
  return r.text;
}

const vmiCrd = customResourceDefinitions().find((c) => c.spec.names.kind === "VirtualMachineInstance");
await must("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", vmiCrd);
const coll = "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances";

function vmi(name: string): Record<string, unknown> {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: {
      name,
      labels: { "kubevirt.io/vm": name, app: "bench" },
      annotations: { "bench/sent": String(performance.now()) },
    },
    spec: {
      domain: {
        cpu: { cores: 1, sockets: 1, threads: 1 },
        resources: { requests: { memory: "128Mi" } },
        devices: {
          disks: [
            { name: "containerdisk", disk: { bus: "virtio" } },
            { name: "cloudinitdisk", disk: { bus: "virtio" } },
          ],
          interfaces: [{ name: "default", masquerade: {} }],
        },
        machine: { type: "q35" },
      },
      networks: [{ name: "default", pod: {} }],
      terminationGracePeriodSeconds: 0,
      volumes: [
        { name: "containerdisk", containerDisk: { image: "local/test-guest:latest" } },
        {
          name: "cloudinitdisk",
          cloudInitNoCloud: { userData: "#cloud-config\npassword: fedora\nchpasswd: { expire: False }\n".repeat(8) },
        },
      ],
    },
  };
}

// Watchers: measure the time from the write's send to the event's arrival.
const latencies: number[] = [];
const watchReqs: ReturnType<typeof request>[] = [];
for (let i = 0; i < WATCHERS; i++) {
  const rv = JSON.parse(await must("GET", `${coll}?limit=1`)) as { metadata: { resourceVersion: string } };
  const req = request(
    {
      host: server.hostname,
      port: server.port,
      path: `${coll}?watch=true&resourceVersion=${rv.metadata.resourceVersion}`,
      agent,
      headers: { Authorization: `Bearer ${token}` },
    },
    (res) => {
      let buf = "";
      res.on("data", (c: Buffer) => {
        buf += c.toString();
        let nl = buf.indexOf("\n");
        while (nl >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          // Cheap extraction (no JSON.parse of every event), so the watchers do not starve the writers of CPU.
          const sent = Number(/"bench\/sent":"([\d.]+)"/.exec(line)?.[1]);
          if (!line.startsWith('{"type":"DELETED"') && sent > 0) latencies.push(performance.now() - sent);
          nl = buf.indexOf("\n");
        }
      });
    },
  );
  req.on("error", () => undefined);
  req.end();
  watchReqs.push(req);
}
await new Promise((r) => setTimeout(r, 300));

async function pool(total: number, op: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS * IN_FLIGHT }, async () => {
      while (next < total) await op(next++);
    }),
  );
}

/** The server's CPU time (user + system) in ms, from /proc: a load-independent cost per write. */
function serverCpuMs(): number {
  const f = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}
const cpu0 = serverCpuMs();
const t0 = performance.now();
await pool(OBJECTS, (i) => must("POST", coll, vmi(`vmi-${i}`)).then(() => undefined));
const tCreate = performance.now();
await pool(OBJECTS, (i) =>
  must(
    "PATCH",
    `${coll}/vmi-${i}`,
    { metadata: { annotations: { "bench/sent": String(performance.now()) }, labels: { phase: "Running" } } },
    "application/merge-patch+json",
  ).then(() => undefined),
);
const tUpdate = performance.now();
await pool(OBJECTS, (i) => must("DELETE", `${coll}/vmi-${i}`).then(() => undefined));
const tDelete = performance.now();
const cpuPerWriteMs = (serverCpuMs() - cpu0) / (OBJECTS * 3);
const writes = OBJECTS * 3;
const writesPerSec = writes / ((tDelete - t0) / 1000);
await new Promise((r) => setTimeout(r, 500));
for (const w of watchReqs) w.destroy();

latencies.sort((a, b) => a - b);
const pct = (p: number): number =>
  latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? Number.NaN;

// 10,000 objects in one collection, then time a full list.
await pool(LIST_SIZE, (i) =>
  must("POST", "/api/v1/namespaces/default/configmaps", {
    metadata: { name: `cm-${i}`, labels: { app: "bench" } },
    data: { payload: "x".repeat(1500) },
  }).then(() => undefined),
);
const listTimes: number[] = [];
let count = 0;
for (let i = 0; i < 5; i++) {
  const s = performance.now();
  const body = await must("GET", "/api/v1/namespaces/default/configmaps");
  listTimes.push(performance.now() - s);
  count = (JSON.parse(body) as { items: unknown[] }).items.length;
}
listTimes.sort((a, b) => a - b);
const list10kMs = listTimes[2] ?? Number.NaN;
const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0);

agent.destroy();
child.kill("SIGTERM");
await new Promise((r) => child.once("exit", r));
rmSync(dir, { recursive: true, force: true });

const r = (n: number): number => Math.round(n * 10) / 10;
const rows: [string, string][] = [
  ["clients x in-flight", `${CLIENTS} x ${IN_FLIGHT}`],
  ["objects (create+patch+delete each)", String(OBJECTS)],
  ["create phase writes/s", String(r(OBJECTS / ((tCreate - t0) / 1000)))],
  ["update phase writes/s", String(r(OBJECTS / ((tUpdate - tCreate) / 1000)))],
  ["delete phase writes/s", String(r(OBJECTS / ((tDelete - tUpdate) / 1000)))],
  ["durable writes/s (all)", String(r(writesPerSec))],
  ["server CPU ms per write (incl. 10 watchers)", String(Math.round(cpuPerWriteMs * 1000) / 1000)],
  ["load average (1 min) during the run", String(loadavg()[0]?.toFixed(1))],
  ["watchers / events measured", `${WATCHERS} / ${latencies.length}`],
  ["watch delivery p50 ms", String(r(pct(50)))],
  ["watch delivery p99 ms", String(r(pct(99)))],
  [`list ${count} objects (median of 5) ms`, String(r(list10kMs))],
  ["server RSS MiB", String(r(rssKb / 1024))],
];
for (const [k, v] of rows) process.stdout.write(`${k.padEnd(40)} ${v}\n`);
process.stdout.write(
  `${JSON.stringify({ area: "apiserver", writesPerSec: r(writesPerSec), watchP50Ms: r(pct(50)), watchP99Ms: r(pct(99)), list10kMs: r(list10kMs), rssBytes: rssKb * 1024, serverCpuMsPerWrite: Math.round(cpuPerWriteMs * 1000) / 1000 })}\n`,
);
