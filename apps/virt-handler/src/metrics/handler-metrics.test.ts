import { kubeConfigFor, RestClient, WorkQueue } from "@kvt/kube";
import type { DomainInfo, DomainStats, MigrationInfo } from "@kvt/launcher-rpc";
import { catalogMismatches } from "@kvt/monitoring";
import { createMetricsRegistry } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { type MeteredLauncher, registerHandlerMetrics } from "./handler-metrics.ts";
import { registerVmiMetrics } from "./vmi-metrics.ts";

const stats: DomainStats = {
  state: "Running",
  vcpuSeconds: [1.5, 2.5],
  memoryBytes: 64 << 20,
  residentBytes: 32 << 20,
  launcherRssBytes: 80 << 20,
};

function launcher(name: string, migration?: MigrationInfo): MeteredLauncher {
  const info: DomainInfo = {
    protocolVersion: "v1",
    vmi: { namespace: "default", name, uid: `uid-${name}` },
    pod: {},
    pid: 1,
    state: "Running",
    backend: "native",
    ...(migration ? { migration } : {}),
  };
  return { info, gone: false, client: { stats: async () => stats } };
}

const running: MigrationInfo = {
  migrationUid: "m-running",
  role: "source",
  phase: "Running",
  progress: {
    iteration: 3,
    processedBytes: 300,
    remainingBytes: 100,
    dirtyRateBytesPerSec: 50,
    transferRateBytesPerSec: 200,
    expectedDowntimeMs: 10,
    throttle: 0.2,
  },
};
const done = (uid: string, ok: boolean): MigrationInfo => ({
  migrationUid: uid,
  role: "source",
  phase: ok ? "Succeeded" : "Failed",
  endTime: new Date(Date.now() + 1000).toISOString(),
  result: ok
    ? { ok, downtimeMs: 42, totalSeconds: 3, bytesSent: 400, iterations: 4 }
    : { ok, failureReason: "target connection lost", totalSeconds: 2, bytesSent: 10, iterations: 1 },
});

describe("virt-handler metrics", () => {
  it("serve every catalog metric of virt-handler with its type and labels", async () => {
    const registry = createMetricsRegistry();
    // What handler-app registers besides this directory's metrics: the API client and the workqueue.
    new RestClient(kubeConfigFor("http://127.0.0.1:1", "t"), { registry });
    new WorkQueue<string>({ name: "virt-handler-vm", registry }).add("default/a");
    const launchers = [launcher("a", running), launcher("b", done("m-ok", true)), launcher("c", done("m-bad", false))];
    const metrics = registerHandlerMetrics(registry, {
      nodeName: "node01",
      launchers: () => launchers,
      ready: () => true,
    });
    registerVmiMetrics(registry, { nodeName: "node01", reports: () => launchers.map((l) => l.info) });
    for (const l of launchers) metrics.observe(l.info.vmi.uid);
    const text = await registry.metrics();
    expect(catalogMismatches("virt-handler", text)).toEqual([]);
    expect(text).toContain('kubevirt_virt_handler_ready_status{node="node01"} 1');
    expect(text).toContain(
      'kubevirt_vmi_vcpu_seconds_total{name="a",namespace="default",node="node01",id="1",state="running"} 2.5',
    );
    expect(text).toContain('kubevirt_vmi_memory_domain_bytes{name="a",namespace="default",node="node01"} 67108864');
    expect(text).toContain('kubevirt_vmi_migration_progress_ratio{namespace="default",name="a",node="node01"} 0.75');
    expect(text).toContain(
      'kubevirt_vmi_migration_expected_completion_seconds{namespace="default",name="a",node="node01"} 0.51',
    );
    expect(text).toContain('kubevirt_vmi_migration_iterations{namespace="default",name="a",node="node01"} 3');
    expect(text).toContain(
      'kubevirt_vmi_migration_autoconverge_throttle_ratio{namespace="default",name="a",node="node01"} 0.2',
    );
    expect(text).toContain('kubevirt_vmi_migration_downtime_seconds_sum{node="node01",backend="native"} 0.042');
    expect(text).toContain(
      'kubevirt_vmi_migration_duration_seconds_count{node="node01",backend="native",result="failed"} 1',
    );
    expect(text).toContain('kubevirt_vmi_migration_failures_total{node="node01",reason="ConnectionLost"} 1');
    expect(text).toContain('kubevirt_vmi_migrations_succeeded_total{name="b",namespace="default",node="node01"} 1');
  });

  it("records each migration's outcome once however often its launcher changes", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const launchers = [launcher("b", done("m-ok", true))];
    const metrics = registerHandlerMetrics(registry, {
      nodeName: "node01",
      launchers: () => launchers,
      ready: () => false,
    });
    metrics.observe("uid-b");
    metrics.observe("uid-b");
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_vmi_migration_downtime_seconds_count{node="node01",backend="native"} 1');
    expect(text).toContain('kubevirt_virt_handler_ready_status{node="node01"} 0');
  });

  it("serves launcher stats from a cache: one /v1/stats round per max age however often it is scraped", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    let clock = 0;
    const calls: string[] = [];
    let seconds = 1;
    const counted = (name: string): MeteredLauncher => {
      const l = launcher(name);
      return {
        ...l,
        client: {
          stats: async () => {
            calls.push(name);
            return { ...stats, vcpuSeconds: [seconds] };
          },
        },
      };
    };
    const launchers: MeteredLauncher[] = [counted("a"), counted("b")];
    registerHandlerMetrics(
      registry,
      { nodeName: "node01", launchers: () => launchers, ready: () => true },
      { statsMaxAgeMs: 5_000, now: () => clock },
    );
    // vCPU seconds of `name` in a fresh scrape, or undefined when it has none.
    const vcpu = async (name: string) =>
      (await registry.metrics())
        .split("\n")
        .find((l) => l.startsWith(`kubevirt_vmi_vcpu_seconds_total{name="${name}"`))
        ?.split(" ")
        .at(-1);
    // The first scrape asks every launcher once, and the three stats families share that round.
    expect(await vcpu("a")).toBe("1");
    expect(calls.sort()).toEqual(["a", "b"]);
    // Scrapes every second for 4 s: served from the cache, no launcher is asked.
    seconds = 2;
    for (clock = 1_000; clock < 5_000; clock += 1_000) expect(await vcpu("a")).toBe("1");
    expect(calls).toHaveLength(2);
    // A VM that just started is asked at once, alone.
    clock = 4_500;
    launchers.push(counted("c"));
    expect(await vcpu("c")).toBe("2");
    expect(calls).toHaveLength(3);
    // Older than the max age: one new round for every running launcher.
    clock = 5_000;
    expect(await vcpu("a")).toBe("2");
    expect(calls.slice(3).sort()).toEqual(["a", "b", "c"]);
    // A launcher that does not answer is not asked again before the next round.
    clock = 5_500;
    launchers.push({
      ...launcher("d"),
      client: {
        stats: () => {
          calls.push("d");
          return Promise.reject(new Error("timeout"));
        },
      },
    });
    expect(await vcpu("d")).toBeUndefined();
    expect(await vcpu("d")).toBeUndefined();
    expect(calls.filter((c) => c === "d")).toHaveLength(1);
    calls.pop();
    // A launcher that stopped leaves the metrics at once, without a round.
    launchers[1] = { ...launchers[1], gone: true };
    clock = 6_000;
    expect(await vcpu("b")).toBeUndefined();
    expect(calls).toHaveLength(6);
  });
});
