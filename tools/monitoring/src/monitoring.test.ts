import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { isKnownMetric, METRICS, metricNamesIn } from "./catalog.ts";
import { allQueries, DASHBOARDS, renderDashboard } from "./dashboards.ts";
import { ensurePromtool } from "./promtool.ts";

const root = new URL("../", import.meta.url).pathname;
const rulesFile = `${root}rules/kubevirt-ts.rules.yaml`;

interface RuleFile {
  groups: { name: string; rules: { record?: string; alert?: string; expr: string }[] }[];
}
const rules = (parse(readFileSync(rulesFile, "utf8")) as RuleFile).groups.flatMap((g) => g.rules);
const recorded = rules.flatMap((r) => (r.record ? [r.record] : []));

describe("dashboards", () => {
  it.each(Object.keys(DASHBOARDS))("%s on disk matches the generator (run npm run gen -w @kvt/monitoring)", (file) => {
    const onDisk = JSON.parse(readFileSync(`${root}dashboards/${file}`, "utf8")) as unknown;
    expect(onDisk).toEqual(renderDashboard(DASHBOARDS[file]));
  });

  it("every panel query uses only metrics the components export", () => {
    const unknown = allQueries().flatMap((q) =>
      metricNamesIn(q.expr)
        .filter((n) => !isKnownMetric(n))
        .map((n) => `${q.dashboard} / ${q.panel}: ${n}`),
    );
    expect(unknown).toEqual([]);
  });

  it("uses the datasource variable on every panel", () => {
    for (const d of Object.values(DASHBOARDS)) {
      const json = JSON.stringify(renderDashboard(d));
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana variable syntax.
      expect(json).toContain('"uid":"${datasource}"');
      expect(json).not.toMatch(/"uid":"(?!\$\{datasource\})[^"]*","?type"?/);
    }
  });
});

describe("rules", () => {
  it("reference only exported metrics and our recording rules", () => {
    const unknown = rules.flatMap((r) =>
      metricNamesIn(r.expr)
        .filter((n) => !isKnownMetric(n, recorded))
        .map((n) => `${r.alert ?? r.record}: ${n}`),
    );
    expect(unknown).toEqual([]);
  });

  it("every alert has a runbook section", () => {
    const runbooks = readFileSync(`${root}runbooks.md`, "utf8");
    for (const r of rules.filter((x) => x.alert)) expect(runbooks).toContain(`## ${r.alert}\n`);
  });

  it("pass promtool check rules and promtool test rules", async () => {
    const tool = await ensurePromtool();
    execFileSync(tool, ["check", "rules", rulesFile], { encoding: "utf8" });
    const out = execFileSync(tool, ["test", "rules", `${root}rules/kubevirt-ts.rules.test.yaml`], { encoding: "utf8" });
    expect(out).toContain("SUCCESS");
  });
});

describe("catalog", () => {
  it("has unique names following the Prometheus naming guide", () => {
    const names = METRICS.map((m) => m.name);
    expect(new Set(names).size).toBe(names.length);
    for (const m of METRICS) {
      expect(m.name).toMatch(/^kubevirt_[a-z0-9_]+$/);
      if (m.type === "counter" && !m.kubevirt) expect(m.name).toMatch(/_total$/);
      expect(m.help).toMatch(/^[A-Za-z].*\.$/);
    }
  });

  it("keeps per-VMI labels on virt-handler metrics only", () => {
    for (const m of METRICS) {
      if (m.labels.includes("name") && m.labels.includes("namespace")) expect(m.component).toBe("virt-handler");
    }
  });

  it("exists on disk for each dashboard file", () => {
    for (const file of Object.keys(DASHBOARDS)) expect(existsSync(`${root}dashboards/${file}`)).toBe(true);
  });
});
