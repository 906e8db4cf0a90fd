/**
 * A real Prometheus (Debian's `prometheus` package) for e2e tests: started on loopback with the cluster's generated
 * scrape configuration (interval shortened to 1 s so a short migration is seen), queried over its HTTP API, and
 * stopped with its temporary storage removed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureHostTools, freePort } from "@kvt/runtime";
import { eventually } from "@kvt/testing";
import { CLUSTER_WAIT } from "./cluster-wait.ts";

/** One series of an instant query's answer. */
export interface PromSample {
  readonly metric: Record<string, string>;
  readonly value: [number, string];
}

/** A running Prometheus. */
export interface Prometheus {
  readonly url: string;
  /** Runs an instant query; rejects on a PromQL error. */
  query(expr: string): Promise<PromSample[]>;
  /** Runs a range query (1 s steps) from `startMs` to now; resolves to the number of series with any sample. */
  seriesOver(expr: string, startMs: number): Promise<number>;
  stop(): Promise<void>;
}

/**
 * The prometheus binary (Debian's package), installed by the project's one installer when missing
 * (`ensureHostTools`: apt-get as root, else a HostToolError naming the command to run).
 */
export async function prometheusBinary(): Promise<string> {
  await ensureHostTools([{ bin: "prometheus", pkg: "prometheus" }], (line) => console.log(`[prometheus] ${line}`));
  return "prometheus";
}

/** Starts Prometheus on 127.0.0.1 scraping what `scrapeConfigPath` lists; resolves once it is ready. */
export async function startPrometheus(binary: string, scrapeConfigPath: string): Promise<Prometheus> {
  const dir = mkdtempSync(join(tmpdir(), "kvt-e2e-prometheus-"));
  const config = join(dir, "prometheus.yml");
  writeFileSync(
    config,
    readFileSync(scrapeConfigPath, "utf8").replace(/scrape_interval: \S+/, "scrape_interval: 1s\n  scrape_timeout: 1s"),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    binary,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited ${child.exitCode}: ${stderr}`);
      const r = await fetch(`${url}/-/ready`);
      if (!r.ok) throw new Error(`prometheus not ready: ${r.status}`);
      return true;
    },
    { ...CLUSTER_WAIT, timeoutMs: 60_000, what: "Prometheus to be ready" },
  );
  return {
    url,
    async query(expr) {
      const r = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`);
      const body = (await r.json()) as { status: string; error?: string; data?: { result: PromSample[] } };
      if (body.status !== "success") throw new Error(`PromQL ${expr}: ${body.error ?? r.status}`);
      return body.data?.result ?? [];
    },
    async seriesOver(expr, startMs) {
      const q = new URLSearchParams({
        query: expr,
        start: String(startMs / 1000),
        end: String(Date.now() / 1000),
        step: "1",
      });
      const r = await fetch(`${url}/api/v1/query_range?${q.toString()}`);
      const body = (await r.json()) as { status: string; error?: string; data?: { result: { values: unknown[] }[] } };
      if (body.status !== "success") throw new Error(`PromQL ${expr}: ${body.error ?? r.status}`);
      return (body.data?.result ?? []).filter((s) => s.values.length > 0).length;
    },
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
