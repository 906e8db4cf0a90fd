/**
 * Observability end to end: a real Prometheus (Debian's package) scrapes the local cluster with the scrape config
 * `npm start` writes while a test-guest VM starts and live-migrates (virtctl migrate); then every dashboard panel
 * query returns data, the migration metrics match the VMIM's status, and the trace file holds one trace for the
 * migration, started by virtctl (its tracing configured), with spans from virt-api, virt-controller, both
 * virt-handlers and both virt-launchers, correctly parented, whose downtime attribute equals the downtime virt-handler
 * reports.
 */
import { allQueries } from "@kvt/monitoring";
import { eventually } from "@kvt/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { getJson, kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { vmiOrUndefined } from "../lib/objects.ts";
import { type Prometheus, prometheusBinary, startPrometheus } from "../lib/prometheus.ts";
import { type FlatSpan, readSpans } from "../lib/traces.ts";

const NAME = "e2e-observed";

interface VmimView {
  metadata: { name: string; uid: string; creationTimestamp: string };
  spec: { vmiName: string };
  status?: {
    phase?: string;
    migrationState?: {
      sourceNode?: string;
      targetNode?: string;
      startTimestamp?: string;
      endTimestamp?: string;
      completed?: boolean;
      failureReason?: string;
    };
  };
}

/** Panels fed only by failed migrations; this run has none (a successful migration is what it observes). */
const NEEDS_A_FAILURE = /kubevirt_vmi_migration_failed|kubevirt_vmi_migration_failures_total/;

describe("observability: metrics and traces of a VM start and a live migration", () => {
  const kubeconfig = inject("kubeconfig");
  const tracesFile = inject("tracesFile");
  let prometheus: Prometheus | undefined;
  const startedAt = Date.now();
  let migration: VmimView | undefined;
  let sourceNode = "";
  /** The source node's migration-duration sum and count before this migration (other suites migrate on the same
   * cluster, so the histogram's node series may gain their migrations too). */
  let durationSumBefore = 0;
  let durationCountBefore = 0;
  const value = async (expr: string): Promise<number> => {
    const r = await prometheus!.query(expr);
    return r.length === 0 ? Number.NaN : Number(r[0].value[1]);
  };
  const durationSum = (node: string) => value(`sum(kubevirt_vmi_migration_duration_seconds_sum{node="${node}"})`);
  const durationCount = (node: string) => value(`sum(kubevirt_vmi_migration_duration_seconds_count{node="${node}"})`);

  beforeAll(async () => {
    prometheus = await startPrometheus(await prometheusBinary(), inject("scrapeConfig"));
  });

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--wait=false"]);
    await prometheus?.stop();
  });

  it("a test-guest VM starts and live-migrates to the other node with virtctl migrate", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { running: true })));
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 120_000, what: "the VMI to be Running" },
    );
    sourceNode = vmi.status?.nodeName ?? "";
    // Baseline: once Prometheus scrapes, wait two scrape intervals (1 s) so earlier migrations are in the sum.
    await eventually(
      async () => {
        expect(await prometheus!.query("up == 1")).not.toHaveLength(0);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "Prometheus to scrape the cluster" },
    );
    await new Promise((r) => setTimeout(r, 2_500));
    durationSumBefore = (await durationSum(sourceNode)) || 0; // no series yet: no migration from that node so far
    durationCountBefore = (await durationCount(sourceNode)) || 0;
    // virtctl's own tracing configured (as OTEL_* would): the trace starts at the `virtctl migrate` request.
    process.env.KUBEVIRT_TRACES_FILE = tracesFile;
    const r = await virtctl(kubeconfig, ["migrate", NAME]).finally(() => {
      delete process.env.KUBEVIRT_TRACES_FILE;
    });
    expect(r.code, r.stderr).toBe(0);
    migration = await eventually(
      async () => {
        const list = await getJson<{ items: VmimView[] }>(kubeconfig, "vmim");
        const m = list.items.find((i) => i.spec.vmiName === NAME);
        expect(m?.status?.phase).toMatch(/^(Succeeded|Failed)$/);
        return m!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 150_000, what: "the migration to finish" },
    );
    // The VMIM's status says why a migration failed (migrationState.failureReason).
    expect(migration.status?.phase, JSON.stringify(migration.status)).toBe("Succeeded");
    const after = await vmiOrUndefined(kubeconfig, NAME);
    expect(after?.status?.nodeName).not.toBe(sourceNode);
  });

  it("every dashboard panel query returns data from Prometheus", async () => {
    expect(migration?.status?.phase).toBe("Succeeded");
    const queries = allQueries().filter((q) => !NEEDS_A_FAILURE.test(q.expr));
    const empty = await eventually(
      async () => {
        const missing: string[] = [];
        for (const q of queries) {
          if ((await prometheus!.seriesOver(q.expr, startedAt)) === 0)
            missing.push(`${q.dashboard} / ${q.panel}: ${q.expr}`);
        }
        expect(missing).toEqual([]);
        return missing;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, intervalMs: 2_000, what: "every panel query to return data" },
    );
    expect(empty).toEqual([]);
  });

  it("the migration metrics match the VMIM's status", async () => {
    const m = migration!;
    const ms = m.status?.migrationState;
    await eventually(
      async () => {
        expect(await value('sum(kubevirt_vmi_migration_succeeded{namespace="default"})')).toBeGreaterThanOrEqual(1);
        expect(await value(`kubevirt_vmi_migrations_succeeded_total{name="${NAME}"}`)).toBe(1);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the success counters" },
    );
    // The success is counted by the source node's handler.
    const succeeded = await prometheus!.query(`kubevirt_vmi_migrations_succeeded_total{name="${NAME}"}`);
    expect(succeeded[0]?.metric.node).toBe(ms?.sourceNode ?? sourceNode);
    // Duration: what this migration added to the handler's histogram against the VMIM's own start/end (status
    // timestamps have 1 s precision). Another suite's migration from the same node may have ended meanwhile: then
    // the added sum holds this migration and theirs, so it is at least this migration's duration.
    const node = ms?.sourceNode ?? sourceNode;
    const seconds = (await durationSum(node)) - durationSumBefore;
    const added = (await durationCount(node)) - durationCountBefore;
    expect(added).toBeGreaterThanOrEqual(1);
    expect(ms?.startTimestamp && ms.endTimestamp, JSON.stringify(ms)).toBeTruthy();
    const reported = (Date.parse(ms!.endTimestamp!) - Date.parse(ms!.startTimestamp!)) / 1000;
    if (added === 1) expect(Math.abs(seconds - reported)).toBeLessThanOrEqual(2);
    else expect(seconds, `${added} migrations from ${node} ended meanwhile`).toBeGreaterThanOrEqual(reported - 2);
    expect(await value("sum(kubevirt_vmi_migration_downtime_seconds_count)")).toBeGreaterThanOrEqual(1);
    // virt-controller's gauge, scraped on its own schedule: the last scrape may predate the VMIM's Succeeded.
    await eventually(
      async () => {
        expect(await value("sum(kubevirt_vmi_migrations_in_running_phase)")).toBe(0);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "no migration left in the Running phase" },
    );
  });

  it("one trace holds the migration's spans from all six processes, correctly parented, with the reported downtime", async () => {
    const name = migration!.metadata.name;
    const trace = await eventually(
      () => {
        const spans = readSpans(tracesFile);
        const ids = new Set(
          spans.filter((s) => s.attributes["kubevirt.migration.name"] === name).map((s) => s.traceId),
        );
        expect([...ids]).toHaveLength(1);
        const t = spans.filter((s) => ids.has(s.traceId));
        expect(processesOf(t)).toEqual(
          expect.arrayContaining(["virt-api", "virt-controller", "virt-handler@node01", "virt-handler@node02"]),
        );
        expect(new Set(t.filter((s) => s.service === "virt-launcher").map((s) => s.pod)).size).toBe(2);
        expect(t.some((s) => s.attributes["migration.downtime_ms"] !== undefined)).toBe(true);
        // A parent span is exported when it ends, after its children (a handler's command span outlives the
        // launcher's request span under it): wait until every parent has been written.
        const spanIds = new Set(t.map((s) => s.spanId));
        expect(t.filter((s) => s.parentSpanId && !spanIds.has(s.parentSpanId)).map((s) => s.name)).toEqual([]);
        return t;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, intervalMs: 1_000, what: "the migration's trace in the trace file" },
    );
    // Parenting: one root, virtctl's request (it sent its traceparent), whose child is virt-api's subresource span;
    // every other span's parent in the same trace.
    const ids = new Set(trace.map((s) => s.spanId));
    const roots = trace.filter((s) => !s.parentSpanId);
    expect(roots.map((s) => `${s.service}: ${s.name}`)).toEqual(["virtctl: migrate VirtualMachine"]);
    const api = trace.find((s) => s.service === "virt-api" && s.name === "migrate VirtualMachine");
    expect(api?.parentSpanId).toBe(roots[0].spanId);
    expect(trace.filter((s) => s.parentSpanId && !ids.has(s.parentSpanId)).map((s) => s.name)).toEqual([]);
    // Span names are low-cardinality: no object names in them.
    for (const s of trace) expect(s.name).not.toContain(NAME);
    // The switch-over's measured downtime is the downtime the source handler reports.
    const downtimeMs = Number(
      trace.find((s) => s.attributes["migration.downtime_ms"] !== undefined)?.attributes["migration.downtime_ms"],
    );
    const reported = await prometheus!.query(`kubevirt_vmi_migration_last_downtime_seconds{name="${NAME}"}`);
    expect(reported).toHaveLength(1);
    expect(downtimeMs).toBeCloseTo(Number(reported[0].value[1]) * 1000, 3);
  });
});

function processesOf(spans: readonly FlatSpan[]): string[] {
  return [...new Set(spans.map((s) => (s.service === "virt-handler" ? `virt-handler@${s.node}` : s.service)))].sort();
}
