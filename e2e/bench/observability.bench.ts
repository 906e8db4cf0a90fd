/**
 * `npm run bench -- observability [--vmis N] [--rounds R]`: the cost of observability on the two figures that
 * matter, VM start and live-migration throughput, with tracing and metrics on vs off. Each round starts a local
 * cluster twice, the two modes in turn (off first in odd rounds, on first in even ones, so drift of this shared
 * machine's load hits both alike):
 *
 *   off: no trace export (the components' tracers are no-ops) and nobody scrapes /metrics;
 *   on:  every component exports its spans (`--traces FILE`, OTLP/JSON batches) and all /metrics endpoints
 *        of the generated scrape config are scraped every second (ten times Prometheus' usual rate).
 *
 * In each cluster it creates N test-guest VMIs one after another (create -> phase Running, this client's clock),
 * then live-migrates the first one (VMIM create -> Succeeded), and reads the migration's duration and guest memory
 * from the source virt-handler's metrics (throughput = guest memory / migration duration).
 * Budgets: VM start +5 %, migration throughput -2 %. Prints a table and, last, one JSON line:
 *   {"area":"observability","vmStartP50SecondsOff":..,"vmStartP50SecondsOn":..,"vmStartOverhead":..,...}
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { CustomObjectsApi } from "@kubernetes/client-node";
import { registerTestGuest } from "@kvt/images";
import { startLocalCluster } from "@kvt/local-cluster";
import { testGuestPath } from "@kvt/vmm";

const { values } = parseArgs({
  options: {
    vmis: { type: "string", default: "4" },
    rounds: { type: "string", default: "1" },
  },
});
const COUNT = Number(values.vmis);
const ROUNDS = Number(values.rounds);
const root = new URL("../../", import.meta.url).pathname;
const GROUP = { group: "kubevirt.io", version: "v1", namespace: "default" };

interface Figures {
  readonly startSeconds: number[];
  /** NaN when the migration did not succeed (see `migrationError`). */
  readonly migrationSeconds: number;
  readonly memoryBytes: number;
  readonly migrationError?: string;
}

interface Phased {
  status?: { phase?: string; nodeName?: string };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 180_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function vmi(name: string): Record<string, unknown> {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name },
    spec: {
      domain: {
        devices: { disks: [{ name: "containerdisk", disk: { bus: "virtio" } }] },
        resources: { requests: { memory: "64Mi" } },
      },
      terminationGracePeriodSeconds: 0,
      volumes: [{ name: "containerdisk", containerDisk: { image: "local/test-guest:latest" } }],
    },
  };
}

/** The targets of a generated scrape config (`host:port`), by component (`virt-handler/node01`). */
function scrapeTargets(scrapeConfigPath: string): Map<string, string> {
  const text = readFileSync(scrapeConfigPath, "utf8");
  const pairs = text.matchAll(/targets: \["([^"]+)"\]\s+labels: \{ component: "([^"]+)" \}/g);
  return new Map([...pairs].map((m) => [m[2], m[1]]));
}

/** Scrapes every /metrics endpoint of a Prometheus scrape config every second until stopped. */
function scrapeEverySecond(scrapeConfigPath: string): () => void {
  const targets = [...scrapeTargets(scrapeConfigPath).values()];
  const timer = setInterval(() => {
    for (const t of targets) {
      fetch(`http://${t}/metrics`)
        .then((r) => r.text())
        .catch(() => "");
    }
  }, 1_000);
  return () => clearInterval(timer);
}

/** The sum of a metric family's samples matching `labels` in a /metrics text. */
function sampleSum(text: string, name: string, match: (labels: string) => boolean): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} (\\S+)$`, "gm")))
    if (match(m[1])) sum += Number(m[2]);
  return sum;
}

async function measure(mode: "on" | "off"): Promise<Figures> {
  const dataDir = mkdtempSync(join(tmpdir(), `kvt-bench-obs-${mode}-`));
  const cluster = await startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 2,
    ...(mode === "on" ? { tracesFile: join(dataDir, "traces.jsonl") } : {}),
    progress: () => {},
  });
  const stopScraping = mode === "on" ? scrapeEverySecond(cluster.scrapeConfigPath) : () => {};
  try {
    const api = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const vmis = { ...GROUP, plural: "virtualmachineinstances" };
    const startSeconds: number[] = [];
    for (let i = 0; i < COUNT; i++) {
      const name = `obs-${i}`;
      const t0 = performance.now();
      await api.createNamespacedCustomObject({ ...vmis, body: vmi(name) });
      await until(`${name} Running`, async () => {
        const v = (await api.getNamespacedCustomObject({ ...vmis, name })) as Phased;
        return v.status?.phase === "Running" ? v : undefined;
      });
      startSeconds.push((performance.now() - t0) / 1000);
    }
    const source = ((await api.getNamespacedCustomObject({ ...vmis, name: "obs-0" })) as Phased).status?.nodeName;
    const t0 = performance.now();
    await api.createNamespacedCustomObject({
      ...GROUP,
      plural: "virtualmachineinstancemigrations",
      body: {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceMigration",
        metadata: { name: "obs-mig" },
        spec: { vmiName: "obs-0" },
      },
    });
    const phase = await until("the migration to finish", async () => {
      const m = (await api.getNamespacedCustomObject({
        ...GROUP,
        plural: "virtualmachineinstancemigrations",
        name: "obs-mig",
      })) as Phased;
      return m.status?.phase === "Succeeded" || m.status?.phase === "Failed" ? m.status.phase : undefined;
    });
    const clientSeconds = (performance.now() - t0) / 1000;
    if (phase !== "Succeeded") {
      const m = (await api.getNamespacedCustomObject({
        ...GROUP,
        plural: "virtualmachineinstancemigrations",
        name: "obs-mig",
      })) as { status?: { migrationState?: { failureReason?: string } } };
      const why = m.status?.migrationState?.failureReason ?? "no failure reason";
      return { startSeconds, migrationSeconds: Number.NaN, memoryBytes: 0, migrationError: `${phase}: ${why}` };
    }
    // The handler's own measurement of the migration (start of sending to switch-over done), from its /metrics.
    const handlerTarget = scrapeTargets(cluster.scrapeConfigPath).get(`virt-handler/${source}`);
    let migrationSeconds = clientSeconds;
    if (handlerTarget) {
      const text = await (await fetch(`http://${handlerTarget}/metrics`)).text();
      const s = sampleSum(text, "kubevirt_vmi_migration_duration_seconds_sum", (l) => l.includes('result="succeeded"'));
      if (s > 0) migrationSeconds = s;
    }
    return { startSeconds, migrationSeconds, memoryBytes: 64 * 1024 * 1024 };
  } finally {
    stopScraping();
    await cluster.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor((s.length - 1) / 2)];
};

registerTestGuest(testGuestPath());
const results: Record<"on" | "off", Figures[]> = { on: [], off: [] };
for (let round = 0; round < ROUNDS; round++) {
  const order: ("on" | "off")[] = round % 2 === 0 ? ["off", "on"] : ["on", "off"];
  for (const mode of order) {
    const f = await measure(mode);
    results[mode].push(f);
    process.stdout.write(
      `round ${round + 1} ${mode.padEnd(3)}  VM start P50 ${median(f.startSeconds).toFixed(3)} s  migration ${f.migrationError ?? `${f.migrationSeconds.toFixed(3)} s`}  load ${loadavg()[0].toFixed(2)}\n`,
    );
  }
}
const startP50 = (mode: "on" | "off") => median(results[mode].flatMap((f) => f.startSeconds));
const throughput = (mode: "on" | "off") =>
  median(results[mode].filter((f) => !f.migrationError).map((f) => f.memoryBytes / f.migrationSeconds));
const migrationErrors = [...results.off, ...results.on].flatMap((f) => (f.migrationError ? [f.migrationError] : []));
const figures = {
  area: "observability",
  vmis: COUNT,
  rounds: ROUNDS,
  vmStartP50SecondsOff: Number(startP50("off").toFixed(3)),
  vmStartP50SecondsOn: Number(startP50("on").toFixed(3)),
  vmStartOverhead: Number((startP50("on") / startP50("off") - 1).toFixed(4)),
  migrationThroughputBytesPerSecOff: Math.round(throughput("off")),
  migrationThroughputBytesPerSecOn: Math.round(throughput("on")),
  migrationThroughputLoss: Number((1 - throughput("on") / throughput("off")).toFixed(4)),
  budget: { vmStartOverhead: 0.05, migrationThroughputLoss: 0.02 },
  ...(migrationErrors.length > 0 ? { migrationErrors } : {}),
  loadAverage1m: Number(loadavg()[0].toFixed(2)),
};
process.stdout.write(`${JSON.stringify(figures)}\n`);
