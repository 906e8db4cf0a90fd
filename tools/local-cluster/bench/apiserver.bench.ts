/**
 * `npm run bench -- apiserver`: the embedded API server in its own process (durable storage, TLS), driven by
 * several concurrent clients creating, updating and deleting VMI-sized objects while 10 watchers follow; then a
 * list of 10,000 objects. Prints a table and, last, one JSON line:
 *   {"area":"apiserver","writesPerSec":..,"watchP50Ms":..,"watchP99Ms":..,"list10kMs":..,"rssBytes":..,
 *    "serverCpuMsPerWrite":..,"clientCpuMsPerWrite":..,"loadAvg1m":..}
 *
 * The clients run in this process and share the machine's cores with the server, so they are kept cheap: the
 * writers are CLIENTS x IN_FLIGHT keep-alive TLS connections with one request in flight each, spoken to by a
 * minimal HTTP/1.1 client (node:https costs the client more CPU per request than the server spends); the watchers
 * use node:https and find each event's send stamp by Buffer searches, without decoding the event. The table also
 * gives the CPU time per write of the client and of each server thread (main, storage worker, V8 GC helpers).
 *
 * Environment: BENCH_OBJECTS (objects per phase, default 1500), BENCH_WATCHERS (default 10), BENCH_LIST_SIZE
 * (default 10,000; 0 skips the list), BENCH_NODE_ARGS (extra node flags for the server, e.g. --cpu-prof).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:https";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { connect, type TLSSocket } from "node:tls";
import { customResourceDefinitions } from "@kvt/api";
import { parse } from "yaml";
import { APISERVER_NODE_FLAGS } from "../src/apiserver/node-flags.ts";

const CLIENTS = 8;
const IN_FLIGHT = 4;
const OBJECTS = Number(process.env.BENCH_OBJECTS ?? 1500);
const WATCHERS = Number(process.env.BENCH_WATCHERS ?? 10);
const LIST_SIZE = Number(process.env.BENCH_LIST_SIZE ?? 10_000);

const dir = mkdtempSync(join(tmpdir(), "kvt-apiserver-bench-"));
const main = new URL("../src/apiserver/main.ts", import.meta.url).pathname;
const child = spawn(
  process.execPath,
  [
    ...APISERVER_NODE_FLAGS,
    ...(process.env.BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean),
    main,
    "--data-dir",
    dir,
    "--log-level",
    "warn",
  ],
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
/** The watchers' agent (node:https: its parser decodes the chunked watch streams). */
const agent = new Agent({ keepAlive: true, maxSockets: WATCHERS, ca });

/**
 * A minimal HTTP/1.1 keep-alive client on one TLS connection, one request at a time, for the writers: node:https
 * spends several times the API server's own per-request CPU on its side, and on this 2-core machine the clients
 * share the cores with the server. Real requests on real sockets all the same; answers need a Content-Length (all
 * the API server's non-watch answers carry one).
 */
class Connection {
  readonly #socket: TLSSocket;
  #chunks: Buffer[] = [];
  #received = 0;
  /** Where the current answer's body starts (-1: its head is still incomplete), its status and its end. */
  #bodyAt = -1;
  #code = 0;
  #total = 0;
  #waiter: { resolve: (r: { code: number; text: string }) => void; reject: (e: Error) => void } | undefined;

  constructor() {
    this.#socket = connect({ host: server.hostname, port: Number(server.port), ca });
    this.#socket.setNoDelay(true);
    this.#socket.on("data", (c: Buffer) => this.#onData(c));
    this.#socket.on("error", (e: Error) => this.#waiter?.reject(e));
    this.#socket.on("close", () => this.#waiter?.reject(new Error("the API server closed the connection")));
  }

  request(
    method: string,
    path: string,
    body: string | undefined,
    contentType: string,
  ): Promise<{ code: number; text: string }> {
    const head =
      `${method} ${path} HTTP/1.1\r\nHost: ${server.host}\r\nAuthorization: Bearer ${token}\r\n` +
      `Accept: application/json\r\nContent-Type: ${contentType}\r\nContent-Length: ${body === undefined ? 0 : Buffer.byteLength(body)}\r\n\r\n`;
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
      this.#socket.write(body === undefined ? head : head + body);
    });
  }

  #onData(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#received += chunk.length;
    if (this.#bodyAt < 0) {
      const buf = Buffer.concat(this.#chunks);
      this.#chunks = [buf];
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = buf.toString("latin1", 0, end);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
      if (length === undefined) {
        this.#waiter?.reject(new Error(`answer without Content-Length: ${head}`));
        return;
      }
      this.#code = Number(head.slice(9, 12));
      this.#bodyAt = end + 4;
      this.#total = this.#bodyAt + Number(length);
    }
    // Large answers (the 10,000-item list) arrive in many chunks: join them once, when complete.
    if (this.#received < this.#total) return;
    const buf = this.#chunks.length === 1 ? this.#chunks[0] : Buffer.concat(this.#chunks);
    const rest = buf.subarray(this.#total);
    this.#chunks = rest.length > 0 ? [rest] : [];
    this.#received = rest.length;
    const text = buf.toString("utf8", this.#bodyAt, this.#total);
    this.#bodyAt = -1;
    const w = this.#waiter;
    this.#waiter = undefined;
    w?.resolve({ code: this.#code, text });
  }

  close(): void {
    this.#socket.destroy();
  }
}

async function must(
  conn: Connection,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<string> {
  const r = await conn.request(method, path, body === undefined ? undefined : JSON.stringify(body), contentType);
  if (r.code >= 300) throw new Error(`${method} ${path}: ${r.code} ${r.text.slice(0, 300)}`);
  return r.text;
}

const lanes = Array.from({ length: CLIENTS * IN_FLIGHT }, () => new Connection());
const setup = lanes[0];
const vmiCrd = customResourceDefinitions().find((c) => c.spec.names.kind === "VirtualMachineInstance");
await must(setup, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", vmiCrd);
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
const SENT = Buffer.from('"bench/sent":"');
const DELETED = Buffer.from('{"type":"DELETED"');

/**
 * Scans a watch stream's bytes for each event's `bench/sent` stamp without decoding or parsing the event (native
 * Buffer searches only), so the 10 watchers cost the client little CPU next to the writers. One scanner per stream:
 * a line split across chunks is carried over.
 */
function lineScanner(): (chunk: Buffer) => void {
  let carry: Buffer | undefined;
  return (chunk) => {
    const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
    const now = performance.now();
    let start = 0;
    for (let nl = buf.indexOf(10, start); nl >= 0; nl = buf.indexOf(10, start)) {
      const at = buf.indexOf(SENT, start);
      if (at >= 0 && at < nl && buf.compare(DELETED, 0, DELETED.length, start, start + DELETED.length) !== 0) {
        const from = at + SENT.length;
        const sent = Number(buf.toString("latin1", from, buf.indexOf(34, from)));
        if (sent > 0) latencies.push(now - sent);
      }
      start = nl + 1;
    }
    carry = start < buf.length ? buf.subarray(start) : undefined;
  };
}
const watchReqs: ReturnType<typeof request>[] = [];
for (let i = 0; i < WATCHERS; i++) {
  const rv = JSON.parse(await must(setup, "GET", `${coll}?limit=1`)) as { metadata: { resourceVersion: string } };
  const scan = lineScanner();
  const req = request(
    {
      host: server.hostname,
      port: server.port,
      path: `${coll}?watch=true&resourceVersion=${rv.metadata.resourceVersion}`,
      agent,
      headers: { Authorization: `Bearer ${token}` },
    },
    (res) => res.on("data", (c: Buffer) => scan(c)),
  );
  req.on("error", () => undefined);
  req.end();
  watchReqs.push(req);
}
await new Promise((r) => setTimeout(r, 300));

/** Runs `op(0..total-1)` on all lanes (CLIENTS x IN_FLIGHT connections, one request in flight each). */
async function pool(total: number, op: (i: number, conn: Connection) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    lanes.map(async (conn) => {
      while (next < total) await op(next++, conn);
    }),
  );
}

/** The server's CPU time (user + system) in ms, from /proc: a load-independent cost per write. */
function serverCpuMs(): number {
  const f = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}
/** CPU ms of each server thread by name (main, storage worker, libuv pool, V8 helpers). */
function threadCpuMs(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${child.pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${child.pid}/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
      out.set(name, (out.get(name) ?? 0) + ((Number(f[11]) + Number(f[12])) * 1000) / 100);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}
const threads0 = threadCpuMs();
const cpu0 = serverCpuMs();
const clientCpu0 = process.cpuUsage();
const t0 = performance.now();
await pool(OBJECTS, (i, conn) => must(conn, "POST", coll, vmi(`vmi-${i}`)));
const tCreate = performance.now();
await pool(OBJECTS, (i, conn) =>
  must(
    conn,
    "PATCH",
    `${coll}/vmi-${i}`,
    { metadata: { annotations: { "bench/sent": String(performance.now()) }, labels: { phase: "Running" } } },
    "application/merge-patch+json",
  ),
);
const tUpdate = performance.now();
await pool(OBJECTS, (i, conn) => must(conn, "DELETE", `${coll}/vmi-${i}`));
const tDelete = performance.now();
const cpuPerWriteMs = (serverCpuMs() - cpu0) / (OBJECTS * 3);
const clientCpu = process.cpuUsage(clientCpu0);
const threads1 = threadCpuMs();
const threadMs = [...threads1].map(
  ([n, ms]) => `${n} ${Math.round(((ms - (threads0.get(n) ?? 0)) / (OBJECTS * 3)) * 1000) / 1000}`,
);
const clientCpuPerWriteMs = (clientCpu.user + clientCpu.system) / 1000 / (OBJECTS * 3);
const writes = OBJECTS * 3;
const writesPerSec = writes / ((tDelete - t0) / 1000);
await new Promise((r) => setTimeout(r, 500));
for (const w of watchReqs) w.destroy();

latencies.sort((a, b) => a - b);
const pct = (p: number): number =>
  latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? Number.NaN;

// 10,000 objects in one collection, then time a full list.
await pool(LIST_SIZE, (i, conn) =>
  must(conn, "POST", "/api/v1/namespaces/default/configmaps", {
    metadata: { name: `cm-${i}`, labels: { app: "bench" } },
    data: { payload: "x".repeat(1500) },
  }),
);
const listTimes: number[] = [];
let count = 0;
for (let i = 0; i < 5; i++) {
  const s = performance.now();
  const body = await must(setup, "GET", "/api/v1/namespaces/default/configmaps");
  listTimes.push(performance.now() - s);
  count = (JSON.parse(body) as { items: unknown[] }).items.length;
}
listTimes.sort((a, b) => a - b);
const list10kMs = listTimes[2] ?? Number.NaN;
const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0);

agent.destroy();
for (const l of lanes) l.close();
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
  ["bench client CPU ms per write", String(Math.round(clientCpuPerWriteMs * 1000) / 1000)],
  ["server CPU ms per write by thread", threadMs.join(", ")],
  ["load average (1 min) during the run", String(loadavg()[0]?.toFixed(1))],
  ["watchers / events measured", `${WATCHERS} / ${latencies.length}`],
  ["watch delivery p50 ms", String(r(pct(50)))],
  ["watch delivery p99 ms", String(r(pct(99)))],
  [`list ${count} objects (median of 5) ms`, String(r(list10kMs))],
  ["server RSS MiB", String(r(rssKb / 1024))],
];
for (const [k, v] of rows) process.stdout.write(`${k.padEnd(40)} ${v}\n`);
process.stdout.write(
  `${JSON.stringify({ area: "apiserver", writesPerSec: r(writesPerSec), watchP50Ms: r(pct(50)), watchP99Ms: r(pct(99)), list10kMs: r(list10kMs), rssBytes: rssKb * 1024, serverCpuMsPerWrite: Math.round(cpuPerWriteMs * 1000) / 1000, clientCpuMsPerWrite: Math.round(clientCpuPerWriteMs * 1000) / 1000, loadAvg1m: r(loadavg()[0] ?? 0) })}\n`,
);
