/**
 * `npm run bench -- observability [--vmis N] [--migrations M] [--rounds R] [--variants off,on] [--scrape-interval S]
 * [--memory MiB] [--ws MiB]`: the cost of observability on the two figures that matter, VM start and live-migration
 * throughput. Variants (any of them, comma-separated; the first is the baseline):
 *
 *   off:     no trace export and nobody scrapes /metrics;
 *   traces:  every component exports its spans (`--traces FILE`, OTLP/JSON batches; with the file alone they are
 *            recorded by @kvt/observability's FileTracerProvider, no OpenTelemetry SDK), nobody scrapes;
 *   metrics: no trace export; every /metrics endpoint of the generated scrape config is scraped every S seconds
 *            (default 1: five times the local cluster's Prometheus rate, thirty times KubeVirt's);
 *   on:      both.
 *
 * Method. Each round starts one local cluster per variant, in alternating order (ABAB..., reversed every other
 * round: BA AB), so the drift of a shared machine's load hits every variant alike (default 8 rounds of off,on:
 * about 45 s per cluster, 12-13 minutes). Every component serves /metrics in every variant (its registry and process
 * metrics run in-process either way); the variants differ in who scrapes and whether spans are exported. In each
 * cluster:
 *  - VM start: N test-guest VMIs (default 2) one after another, create -> phase Running on this client's clock (polled
 *    every 20 ms; the periodic scraper is a child process, so it does not share the event loop that times this); the
 *    CPU the new launcher's JavaScript thread used by then is recorded too (tracing's share of a launcher's start).
 *    Each guest writes its working set once and then idles (`pattern=fill`, default 1920 MiB of 2048 MiB, see vmi());
 *    the next VM starts only after that fill (the launcher's resident memory covers it), so no start is timed
 *    against a filling guest and no migration moves a guest that still dirties memory.
 *  - Migration: M migrations (default 8), round-robin over the VMIs, each to the other node and back, one at a time
 *    (the next starts once the source launcher has exited). A 2 GiB guest takes 0.6-1.7 s to move here, so the
 *    figure is the data transfer, not the few ms of control traffic around it. The duration is the source launcher's
 *    own measurement (connect -> switch-over confirmed by the target), read from its handler as the delta of
 *    `kubevirt_vmi_migration_duration_seconds_sum`; throughput = guest memory / duration. The launcher's link rate
 *    (bytes on the wire / seconds of its bulk pass and dirty rounds, `kubevirt_vmi_migration_memory_transfer_rate_bytes`)
 *    is reported beside it. Durations depend on the position (which VMI, which direction: 1.5-2.0, 0.6-0.8,
 *    0.6-0.9, 0.9-1.4 s for the first four here, in every variant), so throughputs are compared per migration (same
 *    round and position in both variants: 64 pairs by default), and also per round and in aggregate (memory moved /
 *    summed seconds). A single migration varies by 10-20 % between clusters (the kernel's handling of 2 GiB of fresh
 *    guest memory on the target), so the medians of 64 pairs and of 8 round ratios, not any one pair, are the figure.
 *  - CPU: per component from /proc (the process, its live children and the children it reaped, so exited launchers
 *    count) over the whole workload and over each migration (VMIM create -> outcome recorded), far less noisy than
 *    wall-clock figures on a loaded machine; and the CPU ms one scrape costs each component (alternating quiet and
 *    scraping windows, with the VMs still running).
 *
 * Budgets: VM start +5 %, migration throughput -2 % (variant "on" vs the baseline). Prints a block per cluster, a
 * table per variant (median and spread) with the overheads against the baseline and, last, one JSON line:
 *   {"area":"observability","vmStartOverhead":..,"migrationThroughputLoss":..,"variants":{..},...}
 * vmStartOverhead is the ratio of the medians over all starts. migrationThroughputLoss is the median of the
 * per-migration ratios (`...PerMigration`: the same position in the same round, both variants; robust to the odd
 * slow migration, such as the first one of a run), `...Aggregate` that of memory moved / summed seconds, `...OfMedians`
 * that of the medians. `...Paired` figures are the median, p25/p75 and min..max of the per-round ratios of the same two
 * variants (they cancel the load drift between rounds).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { registerTestGuest } from "@kvt/images";
import { KUBEVIRT_V1, type KubeObject, type ResourceClient, RestClient, resourceClient } from "@kvt/kube";
import { type LocalCluster, startLocalCluster } from "@kvt/local-cluster";
import { testGuestPath } from "@kvt/vmm";

const VARIANTS = ["off", "traces", "metrics", "on"] as const;
type Variant = (typeof VARIANTS)[number];

const { values } = parseArgs({
  options: {
    vmis: { type: "string", default: "2" },
    migrations: { type: "string", default: "8" },
    rounds: { type: "string", default: "8" },
    variants: { type: "string", default: "off,on" },
    "scrape-interval": { type: "string", default: "1" },
    memory: { type: "string", default: "2048" },
    ws: { type: "string" },
  },
});
const COUNT = Number(values.vmis);
/** Migrations per cluster, round-robin over the VMIs (each one moves to the other node and back). */
const MIGRATIONS = Number(values.migrations);
const ROUNDS = Number(values.rounds);
const SCRAPE_MS = Number(values["scrape-interval"]) * 1000;
const variants = values.variants.split(",").map((v) => {
  if (!(VARIANTS as readonly string[]).includes(v))
    throw new Error(`unknown variant ${v}: one of ${VARIANTS.join(", ")}`);
  return v as Variant;
});
const BASE = variants[0];
const root = new URL("../../", import.meta.url).pathname;
const MEMORY_MIB = Number(values.memory);
/** The guest's working set (MiB), written once after boot: what a migration moves besides zero pages. */
const WS_MIB = Number(values.ws ?? Math.max(16, MEMORY_MIB - 128));
const MEMORY_BYTES = MEMORY_MIB * 2 ** 20;
const CLK_TCK = 100;

interface Figures {
  readonly startSeconds: number[];
  /** CPU ms of each new launcher's JavaScript thread when its VM reached Running. */
  readonly launcherStartCpuMs: number[];
  /** Guest memory / migration duration of each migration that succeeded. */
  readonly throughputs: number[];
  /** The source launcher's measured link rate (bytes/s) of each migration that succeeded. */
  readonly transferRates: number[];
  /** The source launcher's duration of each migration that succeeded (connect to switch-over confirmed). */
  readonly migrationSeconds: number[];
  /** CPU seconds each component used per migration (VMIM create -> outcome recorded), mean over the run. */
  readonly cpuSecondsPerMigration: Record<string, number>;
  readonly migrationErrors: string[];
  /** CPU seconds used during the workload, by component (virt-handler = both nodes', launchers = all). */
  readonly cpuSeconds: Record<string, number>;
  /** CPU milliseconds one scrape of every /metrics endpoint costs each component, with the VMs still running. */
  readonly cpuMsPerScrape: Record<string, number>;
}

interface Phased extends KubeObject {
  spec?: unknown;
  status?: { phase?: string; nodeName?: string; migrationState?: { failureReason?: string } };
}

async function until<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  timeoutMs = 180_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * A test-guest VMI of MEMORY_MIB whose guest writes a WS_MIB working set once and then idles (`pattern=fill`): every
 * migration moves the same non-zero memory, and idle guests leave the two cores to the components being measured (the
 * default workload dirties memory flat out, one busy core per VM, which drowns the figures in contention).
 */
function vmi(name: string): Phased {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name, namespace: "default" },
    spec: {
      domain: {
        devices: {},
        firmware: {
          kernelBoot: {
            container: { image: "local/test-guest:latest", kernelPath: "/test-guest.elf" },
            kernelArgs: `pattern=fill ws=${WS_MIB} tick=1000`,
          },
        },
        resources: { requests: { memory: `${MEMORY_MIB}Mi` } },
      },
      terminationGracePeriodSeconds: 0,
    },
  };
}

/** The targets of a generated scrape config (`host:port`), by component (`virt-handler/node01`). */
function scrapeTargets(scrapeConfigPath: string): Map<string, string> {
  const text = readFileSync(scrapeConfigPath, "utf8");
  const pairs = text.matchAll(/targets: \["([^"]+)"\]\s+labels: \{ component: "([^"]+)" \}/g);
  return new Map([...pairs].map((m) => [m[2], m[1]]));
}

/** The periodic scraper: a process of its own, as Prometheus is (argv: interval ms, then host:port targets). */
const SCRAPER = `const [ms, ...targets] = process.argv.slice(1);
setInterval(() => {
  for (const t of targets) fetch("http://" + t + "/metrics").then((r) => r.text()).catch(() => "");
}, Number(ms));`;

/**
 * Scrapes every /metrics endpoint of a Prometheus scrape config every SCRAPE_MS until stopped, from a child process:
 * the bench's own event loop, which times VM starts and migrations, is not the scraper's.
 */
function scrapePeriodically(scrapeConfigPath: string): () => void {
  const targets = [...scrapeTargets(scrapeConfigPath).values()];
  const child = spawn(process.execPath, ["-e", SCRAPER, String(SCRAPE_MS), ...targets], { stdio: "ignore" });
  return () => child.kill();
}

/** The sum of a metric family's samples matching `labels` in a /metrics text. */
function sampleSum(text: string, name: string, match: (labels: string) => boolean): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, "gm")))
    if (match(m[1])) sum += Number(m[2]);
  return sum;
}

interface ProcStat {
  readonly ppid: number;
  /** utime + stime, in ticks. */
  readonly own: number;
  /** cutime + cstime of the children it reaped, in ticks. */
  readonly reaped: number;
}

/** Every process of this machine (that is still there while it is read). */
function processTable(): Map<number, ProcStat> {
  const table = new Map<number, ProcStat>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // f[0] is field 3 (state)
      table.set(Number(entry), {
        ppid: Number(f[1]),
        own: Number(f[11]) + Number(f[12]),
        reaped: Number(f[13]) + Number(f[14]),
      });
    } catch {
      // exited while listing
    }
  }
  return table;
}

/**
 * CPU ticks by component so far: each supervised component's own time; a kubelet's live descendants and the
 * children it reaped count as `virt-launcher` (the launchers, their QEMUs and guests).
 */
function cpuTicks(cluster: LocalCluster): Map<string, number> {
  const table = processTable();
  const children = new Map<number, number[]>();
  for (const [pid, s] of table) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  const subtree = (pid: number): number =>
    (children.get(pid) ?? []).reduce((sum, c) => sum + (table.get(c)?.own ?? 0) + subtree(c), 0);
  const out = new Map<string, number>();
  const add = (k: string, ticks: number) => out.set(k, (out.get(k) ?? 0) + ticks);
  const names = [
    "apiserver",
    "scheduler",
    "virt-api",
    "virt-controller",
    ...cluster.nodeNames.flatMap((n) => [`kubelet/${n}`, `virt-handler/${n}`]),
  ];
  for (const name of names) {
    const pid = cluster.supervisor.pidOf(name);
    const s = pid === undefined ? undefined : table.get(pid);
    if (pid === undefined || !s) continue;
    const component = name.split("/")[0];
    if (component === "kubelet") {
      add("kubelet", s.own);
      add("virt-launcher", s.reaped + subtree(pid));
    } else {
      add(component, s.own + s.reaped + subtree(pid));
    }
  }
  return out;
}

/** Every process under the kubelets: the launchers (and their monitors, QEMUs). */
function launcherPids(cluster: LocalCluster): Set<number> {
  const table = processTable();
  const children = new Map<number, number[]>();
  for (const [pid, s] of table) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  const out = new Set<number>();
  const walk = (pid: number): void => {
    for (const c of children.get(pid) ?? []) {
      out.add(c);
      walk(c);
    }
  };
  for (const n of cluster.nodeNames) {
    const pid = cluster.supervisor.pidOf(`kubelet/${n}`);
    if (pid !== undefined) walk(pid);
  }
  return out;
}

/** Resident bytes of a process (0 once it is gone). */
function residentBytes(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]) * 4096;
  } catch {
    return 0;
  }
}

/** CPU milliseconds the main (JavaScript) thread of process `pid` has used; NaN once it is gone. */
function mainThreadCpuMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** The virt-launcher processes under the kubelets. */
function launchers(cluster: LocalCluster): number[] {
  return [...launcherPids(cluster)].filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").includes("launcher");
    } catch {
      return false;
    }
  });
}

/** The launcher among the processes under the kubelets that were not in `before`. */
function newLauncher(cluster: LocalCluster, before: ReadonlySet<number>): number | undefined {
  return launchers(cluster).find((p) => !before.has(p));
}

/**
 * Waits until the guest of a launcher that was not among `before` has written its working set (the launcher's
 * resident memory covers it), so no migration starts while its guest still dirties memory and no VM start is timed
 * while another guest fills its memory.
 */
async function guestFilled(cluster: LocalCluster, before: ReadonlySet<number>): Promise<void> {
  const want = WS_MIB * 2 ** 20;
  await until(
    "the guest to write its working set",
    async () => ([...launcherPids(cluster)].some((p) => !before.has(p) && residentBytes(p) >= want) ? true : undefined),
    120_000,
  );
}

/** Scrape / quiet window pairs of the scrape cost measure (a median over the rounds is reported). */
const COST_SCRAPES = 4;
/** How long one migration may take before the cluster gives up migrating (a 2 GiB guest takes 0.6-2 s here). */
const MIGRATION_TIMEOUT_MS = 60_000;

/** CPU nanoseconds the live processes of each component have used (all threads, /proc/PID/task/TID/schedstat). */
function cpuNanos(cluster: LocalCluster): Map<string, number> {
  const table = processTable();
  const children = new Map<number, number[]>();
  for (const [pid, s] of table) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  const nanosOf = (pid: number): number => {
    let ns = 0;
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      }
    } catch {
      // exited meanwhile
    }
    return ns;
  };
  const subtree = (pid: number): number =>
    (children.get(pid) ?? []).reduce((sum, c) => sum + nanosOf(c) + subtree(c), 0);
  const out = new Map<string, number>();
  const add = (k: string, ns: number) => out.set(k, (out.get(k) ?? 0) + ns);
  for (const name of [
    "virt-api",
    "virt-controller",
    ...cluster.nodeNames.flatMap((n) => [`kubelet/${n}`, `virt-handler/${n}`]),
  ]) {
    const pid = cluster.supervisor.pidOf(name);
    if (pid === undefined) continue;
    const component = name.split("/")[0];
    if (component === "kubelet") add("virt-launcher", subtree(pid));
    else add(component, nanosOf(pid) + subtree(pid));
  }
  return out;
}

/**
 * CPU milliseconds one scrape of every /metrics endpoint costs each component (virt-launcher: the stats calls it
 * answers), with the VMs still running: 2 x COST_SCRAPES windows of the bench's scrape interval, alternately quiet and
 * starting with a scrape of every target (ABAB, so background work and its drift fall on both kinds alike); the cost is
 * the difference of the two sums over COST_SCRAPES.
 */
async function scrapeCost(cluster: LocalCluster): Promise<Record<string, number>> {
  const targets = [...scrapeTargets(cluster.scrapeConfigPath).values()];
  const busy = new Map<string, number>();
  const quiet = new Map<string, number>();
  let mark = cpuNanos(cluster);
  for (let i = 0; i < 2 * COST_SCRAPES; i++) {
    const windowEnd = new Promise((r) => setTimeout(r, SCRAPE_MS));
    const scraping = i % 2 === 1;
    if (scraping) await Promise.all(targets.map((t) => fetch(`http://${t}/metrics`).then((r) => r.text())));
    await windowEnd;
    const now = cpuNanos(cluster);
    const into = scraping ? busy : quiet;
    for (const [k, v] of now) into.set(k, (into.get(k) ?? 0) + v - (mark.get(k) ?? 0));
    mark = now;
  }
  const out: Record<string, number> = {};
  for (const [k, v] of busy) out[k] = round((v - (quiet.get(k) ?? 0)) / 1e6 / COST_SCRAPES, 2);
  return out;
}

async function measure(variant: Variant): Promise<Figures> {
  const dataDir = mkdtempSync(join(tmpdir(), `kvt-bench-obs-${variant}-`));
  const traces = variant === "traces" || variant === "on";
  const scraped = variant === "metrics" || variant === "on";
  const cluster = await startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 2,
    ...(traces ? { tracesFile: join(dataDir, "traces.jsonl") } : {}),
    progress: () => {},
  });
  const stopScraping = scraped ? scrapePeriodically(cluster.scrapeConfigPath) : () => {};
  const targets = scrapeTargets(cluster.scrapeConfigPath);
  const handlerMetrics = async (node: string | undefined): Promise<string> => {
    const target = targets.get(`virt-handler/${node}`);
    return target ? await (await fetch(`http://${target}/metrics`)).text() : "";
  };
  const migratedSeconds = (text: string): number =>
    sampleSum(text, "kubevirt_vmi_migration_duration_seconds_sum", (l) => l.includes('result="succeeded"'));
  try {
    // Let the components finish starting (informer lists, first heartbeats) before counting their CPU.
    await new Promise((r) => setTimeout(r, 3_000));
    const cpuBefore = cpuTicks(cluster);
    const rest = new RestClient(cluster.kubeConfig, { userAgent: "observability-bench" });
    const vmis = resourceClient<Phased>(rest, KUBEVIRT_V1.virtualMachineInstances);
    const vmims = resourceClient<Phased>(rest, KUBEVIRT_V1.virtualMachineInstanceMigrations);
    const startSeconds: number[] = [];
    const launcherStartCpuMs: number[] = [];
    for (let i = 0; i < COUNT; i++) {
      const name = `obs-${i}`;
      const launchersBefore = launcherPids(cluster);
      const t0 = performance.now();
      await vmis.create(vmi(name));
      // Polled every 20 ms: the start takes about 0.2 s, a coarser poll would add its own quantum to the figure.
      await until(
        `${name} Running`,
        async () => {
          const v = await vmis.get("default", name);
          return v.status?.phase === "Running" ? v : undefined;
        },
        180_000,
        20,
      );
      startSeconds.push((performance.now() - t0) / 1000);
      // The launcher's own start-up work (its JavaScript thread, up to the VM running), which tracing adds to.
      const launcher = newLauncher(cluster, launchersBefore);
      if (launcher !== undefined) launcherStartCpuMs.push(mainThreadCpuMs(launcher));
      await guestFilled(cluster, launchersBefore);
    }
    const throughputs: number[] = [];
    const transferRates: number[] = [];
    const migrationSeconds: number[] = [];
    const migrationErrors: string[] = [];
    const cpuPerMigration = new Map<string, number>();
    // Settle after the last fill: the migrations start from a quiet cluster in every variant.
    await new Promise((r) => setTimeout(r, 1_000));
    for (let i = 0; i < MIGRATIONS; i++) {
      const vmiName = `obs-${i % COUNT}`;
      const name = `obs-mig-${i}`;
      const source = (await vmis.get("default", vmiName)).status?.nodeName;
      const before = migratedSeconds(await handlerMetrics(source));
      const cpu0 = cpuTicks(cluster);
      await vmims.create({
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceMigration",
        metadata: { name, namespace: "default" },
        spec: { vmiName },
      });
      const m = await until(
        "the migration to finish",
        async () => {
          const m = await vmims.get("default", name);
          return m.status?.phase === "Succeeded" || m.status?.phase === "Failed" ? m : undefined;
        },
        MIGRATION_TIMEOUT_MS,
      ).catch(() => undefined);
      if (m === undefined) {
        // A migration that never ends is a finding, not a reason to lose the run: say where it stood, and move no
        // more guests in this cluster (its rounds' per-migration pairs are left out; the other figures stand).
        const status = (client: ResourceClient<Phased>, n: string): Promise<Phased | undefined> =>
          client.get("default", n).catch(() => undefined);
        const [mig, inst] = await Promise.all([status(vmims, name), status(vmis, vmiName)]);
        migrationErrors.push(
          `${name} (${vmiName}) not finished after ${MIGRATION_TIMEOUT_MS / 1000} s: VMIM ${JSON.stringify(mig?.status ?? {})}, VMI ${JSON.stringify(inst?.status?.migrationState ?? {})}`,
        );
        break;
      }
      if (m.status?.phase !== "Succeeded") {
        migrationErrors.push(`${m.status?.phase}: ${m.status?.migrationState?.failureReason ?? "no failure reason"}`);
        continue;
      }
      // The handler records the outcome when the source launcher reports it, which may follow the VMIM's phase.
      const text = await until(
        "the source handler to record the migration",
        async () => {
          const t = await handlerMetrics(source);
          return migratedSeconds(t) - before > 0 ? t : undefined;
        },
        10_000,
      ).catch(() => undefined);
      const cpu1 = cpuTicks(cluster);
      for (const [k, v] of cpu1) cpuPerMigration.set(k, (cpuPerMigration.get(k) ?? 0) + (v - (cpu0.get(k) ?? 0)));
      if (text === undefined) {
        migrationErrors.push("the source handler recorded no duration");
        continue;
      }
      const seconds = migratedSeconds(text) - before;
      migrationSeconds.push(seconds);
      throughputs.push(MEMORY_BYTES / seconds);
      // The source launcher's own measure of its link: bytes on the wire / seconds of its bulk pass and dirty rounds
      // (the policy's estimate, without connection set-up and switch-over).
      const rate = sampleSum(text, "kubevirt_vmi_migration_memory_transfer_rate_bytes", (l) =>
        l.includes(`name="${vmiName}"`),
      );
      if (rate > 0) transferRates.push(rate);
      // The next migration starts once the source launcher is gone (releasing its guest memory takes CPU).
      await until(
        "the source launcher to exit",
        async () => (launchers(cluster).length <= COUNT ? true : undefined),
        30_000,
      ).catch(() => {});
    }
    // Give the cluster time to settle after the last migration (the source launcher exits, exports its spans).
    await new Promise((r) => setTimeout(r, 1_000));
    const cpuAfter = cpuTicks(cluster);
    const cpuSeconds: Record<string, number> = {};
    for (const [k, v] of cpuAfter) cpuSeconds[k] = (v - (cpuBefore.get(k) ?? 0)) / CLK_TCK;
    stopScraping(); // the scrape cost is measured against an unscraped baseline
    const done = Math.max(1, migrationSeconds.length);
    const cpuSecondsPerMigration: Record<string, number> = {};
    for (const [k, v] of cpuPerMigration) cpuSecondsPerMigration[k] = v / CLK_TCK / done;
    return {
      startSeconds,
      launcherStartCpuMs,
      throughputs,
      transferRates,
      migrationSeconds,
      migrationErrors,
      cpuSeconds,
      cpuSecondsPerMigration,
      cpuMsPerScrape: await scrapeCost(cluster),
    };
  } finally {
    stopScraping();
    await cluster.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const quantile = (xs: readonly number[], q: number): number => {
  const s = [...xs].filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const i = (s.length - 1) * q;
  return s[Math.floor(i)] + (s[Math.ceil(i)] - s[Math.floor(i)]) * (i - Math.floor(i));
};
const median = (xs: readonly number[]): number => quantile(xs, 0.5);
const round = (x: number, digits: number): number => Number(x.toFixed(digits));
const spread = (xs: readonly number[], digits: number) => ({
  p50: round(median(xs), digits),
  p25: round(quantile(xs, 0.25), digits),
  p75: round(quantile(xs, 0.75), digits),
  min: round(quantile(xs, 0), digits),
  max: round(quantile(xs, 1), digits),
  n: xs.length,
});

registerTestGuest(testGuestPath());
const results = new Map<Variant, Figures[]>(variants.map((v) => [v, []]));
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? variants : [...variants].reverse();
  for (const variant of order) {
    const t0 = performance.now();
    const f = await measure(variant);
    const took = (performance.now() - t0) / 1000;
    results.get(variant)!.push(f);
    const list = (r: Record<string, number>) =>
      Object.entries(r)
        .map(([k, v]) => `${k} ${v.toFixed(2)}`)
        .join(", ");
    process.stdout.write(
      `round ${r + 1} ${variant.padEnd(7)}  VM start P50 ${median(f.startSeconds).toFixed(3)} s (launcher thread ${median(f.launcherStartCpuMs).toFixed(0)} ms CPU)  migration P50 ${median(f.migrationSeconds).toFixed(3)} s = ${(median(f.throughputs) / 2 ** 20).toFixed(1)} MiB/s, link ${(median(f.transferRates) / 2 ** 20).toFixed(1)} MiB/s${f.migrationErrors.length > 0 ? ` (${f.migrationErrors.join("; ")})` : ""}  load ${loadavg()[0].toFixed(2)}, ${took.toFixed(0)} s\n` +
        `        migrations s: ${f.migrationSeconds.map((x) => x.toFixed(3)).join(" ")}\n` +
        `        CPU s per run: ${list(f.cpuSeconds)}\n        CPU s per migration: ${list(f.cpuSecondsPerMigration)}\n`,
    );
  }
}

const all = (v: Variant) => results.get(v)!;
const starts = (v: Variant) => all(v).flatMap((f) => f.startSeconds);
const throughputs = (v: Variant) => all(v).flatMap((f) => f.throughputs);
const transferRates = (v: Variant) => all(v).flatMap((f) => f.transferRates);
const cpuTotal = (f: Figures) => Object.values(f.cpuSeconds).reduce((a, b) => a + b, 0);
const cpuPerMigrationTotal = (f: Figures) => Object.values(f.cpuSecondsPerMigration).reduce((a, b) => a + b, 0);
const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
/** Guest memory moved / launcher seconds over the migrations of `fs` (each migration weighs by its duration). */
const aggregateThroughput = (fs: readonly Figures[]) =>
  sum(fs.map((f) => f.migrationSeconds.length * MEMORY_BYTES)) / sum(fs.flatMap((f) => f.migrationSeconds));
/** The launchers' link rates over the migrations of `fs`, aggregated the same way (bytes / summed seconds). */
const aggregateLinkRate = (fs: readonly Figures[]) =>
  sum(fs.map((f) => f.transferRates.length)) / sum(fs.flatMap((f) => f.transferRates.map((r) => 1 / r)));
/**
 * Throughput ratios (baseline seconds / variant seconds) of the same migration (round, position) in both variants:
 * a position's VMI, direction and history are the same in both, which cancels what differs between positions.
 */
const perMigrationRatios = (v: Variant): number[] =>
  all(v).flatMap((f, i) => {
    const base = all(BASE)[i].migrationSeconds;
    return f.migrationSeconds.length === base.length ? f.migrationSeconds.map((x, j) => base[j] / x) : [];
  });
/** Per-round ratios of variant `v` to the baseline (paired by round). */
const paired = (v: Variant, pick: (f: Figures) => number): number[] =>
  all(v).map((f, i) => pick(f) / pick(all(BASE)[i]));
const perVariant: Record<string, unknown> = {};
for (const v of variants) {
  const components = [...new Set(all(v).flatMap((f) => Object.keys(f.cpuSeconds)))].sort();
  perVariant[v] = {
    vmStartSeconds: spread(starts(v), 3),
    launcherStartCpuMs: spread(
      all(v).flatMap((f) => f.launcherStartCpuMs),
      1,
    ),
    migrationThroughputMiBPerSec: spread(
      throughputs(v).map((t) => t / 2 ** 20),
      1,
    ),
    migrationSeconds: spread(
      all(v).flatMap((f) => f.migrationSeconds),
      3,
    ),
    migrationLinkMiBPerSec: spread(
      transferRates(v).map((t) => t / 2 ** 20),
      1,
    ),
    cpuSecondsPerMigration: Object.fromEntries(
      [
        ["total", all(v).map(cpuPerMigrationTotal)] as const,
        ...components.map((c) => [c, all(v).map((f) => f.cpuSecondsPerMigration[c] ?? 0)] as const),
      ].map(([c, xs]) => [c, round(median(xs), 3)]),
    ),
    cpuMsPerScrape: Object.fromEntries(
      components.map((c) => [c, round(median(all(v).map((f) => f.cpuMsPerScrape[c] ?? 0)), 2)]),
    ),
    cpuSecondsPerRun: Object.fromEntries(
      [
        ["total", all(v).map(cpuTotal)] as const,
        ...components.map((c) => [c, all(v).map((f) => f.cpuSeconds[c] ?? 0)] as const),
      ].map(([c, xs]) => [c, round(median(xs), 2)]),
    ),
    ...(v === BASE
      ? {}
      : {
          vmStartOverhead: round(median(starts(v)) / median(starts(BASE)) - 1, 4),
          migrationThroughputLoss: round(1 - median(perMigrationRatios(v)), 4),
          migrationThroughputLossAggregate: round(1 - aggregateThroughput(all(v)) / aggregateThroughput(all(BASE)), 4),
          migrationThroughputLossOfMedians: round(1 - median(throughputs(v)) / median(throughputs(BASE)), 4),
          vmStartOverheadPaired: spread(
            paired(v, (f) => median(f.startSeconds)).map((x) => x - 1),
            4,
          ),
          migrationThroughputLossPaired: spread(
            paired(v, (f) => aggregateThroughput([f])).map((x) => 1 - x),
            4,
          ),
          migrationThroughputLossPerMigration: spread(
            perMigrationRatios(v).map((x) => 1 - x),
            4,
          ),
          migrationLinkRateLoss: round(1 - aggregateLinkRate(all(v)) / aggregateLinkRate(all(BASE)), 4),
          migrationLinkRateLossPaired: spread(
            paired(v, (f) => aggregateLinkRate([f])).map((x) => 1 - x),
            4,
          ),
          cpuPerMigrationOverheadPaired: spread(
            paired(v, cpuPerMigrationTotal).map((x) => x - 1),
            4,
          ),
          cpuOverheadPaired: spread(
            paired(v, cpuTotal).map((x) => x - 1),
            4,
          ),
        }),
  };
}
for (const v of variants) {
  const p = perVariant[v] as {
    vmStartSeconds: ReturnType<typeof spread>;
    launcherStartCpuMs: ReturnType<typeof spread>;
    migrationThroughputMiBPerSec: ReturnType<typeof spread>;
    migrationSeconds: ReturnType<typeof spread>;
    migrationLinkMiBPerSec: ReturnType<typeof spread>;
    cpuSecondsPerRun: Record<string, number>;
    cpuSecondsPerMigration: Record<string, number>;
    cpuMsPerScrape: Record<string, number>;
  };
  const list = (r: Record<string, number>) =>
    Object.entries(r)
      .map(([k, x]) => `${k} ${x}`)
      .join(", ");
  const t = p.migrationThroughputMiBPerSec;
  process.stdout.write(
    `${v.padEnd(7)}  VM start P50 ${p.vmStartSeconds.p50} s [p25 ${p.vmStartSeconds.p25} .. p75 ${p.vmStartSeconds.p75}] (launcher thread ${p.launcherStartCpuMs.p50} ms CPU)  migration P50 ${p.migrationSeconds.p50} s, ${t.p50} MiB/s [p25 ${t.p25} .. p75 ${t.p75}], link ${p.migrationLinkMiBPerSec.p50} MiB/s [p25 ${p.migrationLinkMiBPerSec.p25} .. p75 ${p.migrationLinkMiBPerSec.p75}]\n` +
      `         migration throughput over all: ${(aggregateThroughput(all(v)) / 2 ** 20).toFixed(1)} MiB/s, link ${(aggregateLinkRate(all(v)) / 2 ** 20).toFixed(1)} MiB/s\n` +
      `         CPU s per run: ${list(p.cpuSecondsPerRun)}\n         CPU s per migration: ${list(p.cpuSecondsPerMigration)}\n         CPU ms per scrape: ${list(p.cpuMsPerScrape)}\n`,
  );
  if (v === BASE) continue;
  const o = perVariant[v] as Record<string, number | ReturnType<typeof spread>>;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const sp = (k: string) => {
    const x = o[k] as ReturnType<typeof spread>;
    return `${pct(x.p50)} [${pct(x.p25)} .. ${pct(x.p75)}, min ${pct(x.min)} max ${pct(x.max)}, n ${x.n}]`;
  };
  process.stdout.write(
    `${v} vs ${BASE}: VM start ${pct(o.vmStartOverhead as number)} (per round ${sp("vmStartOverheadPaired")})\n` +
      `         migration throughput loss ${pct(o.migrationThroughputLoss as number)} per migration ${sp("migrationThroughputLossPerMigration")}; per round ${sp("migrationThroughputLossPaired")}; aggregate ${pct(o.migrationThroughputLossAggregate as number)}; link rate (aggregate) ${pct(o.migrationLinkRateLoss as number)}\n` +
      `         CPU per migration ${sp("cpuPerMigrationOverheadPaired")}\n`,
  );
}
const head = variants.includes("on") && BASE !== "on" ? (perVariant.on as Record<string, unknown>) : undefined;
const migrationErrors = variants.flatMap((v) => all(v).flatMap((f) => f.migrationErrors.map((e) => `${v}: ${e}`)));
const figures = {
  area: "observability",
  vmis: COUNT,
  migrations: MIGRATIONS,
  rounds: ROUNDS,
  baseline: BASE,
  scrapeIntervalSeconds: SCRAPE_MS / 1000,
  guestMemoryMiB: MEMORY_MIB,
  guestWrittenMiB: WS_MIB,
  ...(head
    ? {
        vmStartP50SecondsOff: (perVariant[BASE] as { vmStartSeconds: { p50: number } }).vmStartSeconds.p50,
        vmStartP50SecondsOn: (head as { vmStartSeconds: { p50: number } }).vmStartSeconds.p50,
        vmStartOverhead: head.vmStartOverhead,
        migrationThroughputLoss: head.migrationThroughputLoss,
        migrationThroughputLossAggregate: head.migrationThroughputLossAggregate,
        vmStartOverheadPaired: head.vmStartOverheadPaired,
        migrationThroughputLossPaired: head.migrationThroughputLossPaired,
        migrationThroughputLossPerMigration: head.migrationThroughputLossPerMigration,
        migrationLinkRateLoss: head.migrationLinkRateLoss,
        migrationLinkRateLossPaired: head.migrationLinkRateLossPaired,
        cpuPerMigrationOverheadPaired: head.cpuPerMigrationOverheadPaired,
        cpuOverheadPaired: head.cpuOverheadPaired,
      }
    : {}),
  budget: { vmStartOverhead: 0.05, migrationThroughputLoss: 0.02 },
  variants: perVariant,
  ...(migrationErrors.length > 0 ? { migrationErrors } : {}),
  loadAverage1m: round(loadavg()[0], 2),
};
process.stdout.write(`${JSON.stringify(figures)}\n`);
