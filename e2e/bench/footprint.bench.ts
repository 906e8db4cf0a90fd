/**
 * `npm run bench -- footprint [--settle SECONDS]`: the memory the local cluster holds with the demo VM running.
 *
 * Starts a fresh two-node local cluster exactly as `npm start` does, creates and starts the seed's `vm-cirros`, waits
 * for its VMI to be Running and the cluster to settle, then reads every process of the cluster from /proc: each
 * supervised component (the API server, the scheduler, the service proxy, virt-api, virt-controller, a process-kubelet
 * and a virt-handler per node: every process the cluster's supervisor started) and everything below the kubelets (the demo VM's virt-launcher and its guest: QEMU here, where the host's
 * KVM cannot run Linux). Per component it reports VmRSS (what `ps` shows; the shared Node binary is counted in every
 * process) and PSS (shared pages split between the processes mapping them: the fair share of the machine).
 *
 * Last line: `{"area":"footprint","components":{<name>: rssBytes},"pssBytes":{...},"totalRssBytes":..,
 * "totalPssBytes":..,"guestRssBytes":..}`; `totalRssBytes` counts every process, the guest included.
 */
import { readdirSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { eventually } from "@kvt/testing";
import { getJson, kubectlOk } from "../lib/cli.ts";
import { startE2eCluster } from "../lib/cluster.ts";
import { demoVmYaml } from "../lib/manifests.ts";

const { values } = parseArgs({ options: { settle: { type: "string", default: "20" } } });
const SETTLE_MS = Number(values.settle) * 1000;

interface Proc {
  readonly ppid: number;
  readonly comm: string;
}

/** pid -> parent and command name, for every process still there when read. */
function processTable(): Map<number, Proc> {
  const table = new Map<number, Proc>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      table.set(Number(entry), { ppid, comm });
    } catch {
      // The process ended while the table was read: it holds no memory any more.
    }
  }
  return table;
}

/** Resident and proportional set sizes of one process in bytes (0 when it is gone). */
function memoryOf(pid: number): { rss: number; pss: number } {
  const kib = (text: string, field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text);
    return m ? Number(m[1]) * 1024 : 0;
  };
  try {
    const rss = kib(readFileSync(`/proc/${pid}/status`, "utf8"), "VmRSS");
    const pss = kib(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"), "Pss");
    return { rss, pss };
  } catch {
    return { rss: 0, pss: 0 };
  }
}

/** Every descendant of `pid` in `table`. */
function descendants(table: Map<number, Proc>, pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const [p, s] of table) children.set(s.ppid, [...(children.get(s.ppid) ?? []), p]);
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);

const { cluster, cleanup } = await startE2eCluster();
try {
  const kc = cluster.kubeconfig;
  await kubectlOk(kc, ["apply", "-f", "-"], demoVmYaml());
  await kubectlOk(kc, ["patch", "vm", "vm-cirros", "--type", "merge", "-p", '{"spec":{"running":true}}']);
  await eventually(
    async () => (await getJson<{ status?: { phase?: string } }>(kc, "vmi", "vm-cirros")).status?.phase === "Running",
    { timeoutMs: 300_000, intervalMs: 1000, what: "vm-cirros to be Running" },
  );
  process.stdout.write(`vm-cirros is Running; settling for ${SETTLE_MS / 1000} s\n`);
  await new Promise((r) => setTimeout(r, SETTLE_MS));

  const table = processTable();
  const rss = new Map<string, number>();
  const pss = new Map<string, number>();
  const add = (component: string, pid: number): void => {
    const m = memoryOf(pid);
    rss.set(component, (rss.get(component) ?? 0) + m.rss);
    pss.set(component, (pss.get(component) ?? 0) + m.pss);
  };
  let guestRss = 0;
  const names = cluster.supervisor.names();
  for (const name of names) {
    const pid = cluster.supervisor.pidOf(name);
    if (pid === undefined) throw new Error(`${name} is not running`);
    add(name, pid);
    for (const child of descendants(table, pid)) {
      const comm = table.get(child)?.comm ?? "";
      // Below a kubelet: the launchers and their guests; below anything else: that component's own helpers.
      const isGuest = comm.startsWith("qemu");
      const component = name.startsWith("kubelet/") ? (isGuest ? "guest" : "virt-launcher") : name;
      add(component, child);
      if (isGuest) guestRss += memoryOf(child).rss;
    }
  }
  const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
  process.stdout.write("component            RSS MiB   PSS MiB\n");
  for (const [name, bytes] of [...rss].sort((a, b) => b[1] - a[1]))
    process.stdout.write(`${name.padEnd(20)} ${mib(bytes).padStart(7)}   ${mib(pss.get(name) ?? 0).padStart(7)}\n`);
  process.stdout.write(`${"total".padEnd(20)} ${mib(sum(rss)).padStart(7)}   ${mib(sum(pss)).padStart(7)}\n`);
  process.stdout.write(
    `${JSON.stringify({
      area: "footprint",
      components: Object.fromEntries(rss),
      pssBytes: Object.fromEntries(pss),
      totalRssBytes: sum(rss),
      totalPssBytes: sum(pss),
      guestRssBytes: guestRss,
    })}\n`,
  );
} finally {
  await cleanup();
}
