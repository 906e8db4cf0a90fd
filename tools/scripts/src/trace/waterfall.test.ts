import { describe, expect, it } from "vitest";
import { buildTrees, findMigrationTrace, parseTraceLines } from "./trace-file.ts";
import { renderSvg, renderText } from "./waterfall.ts";

const T = "0af7651916cd43dd8448eb211c80319c";
function line(
  service: string,
  spans: {
    id: string;
    parent?: string;
    name: string;
    start: number;
    end: number;
    attrs?: Record<string, string | number>;
  }[],
): string {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [{ key: "service.name", value: { stringValue: service } }] },
        scopeSpans: [
          {
            scope: { name: "x" },
            spans: spans.map((s) => ({
              traceId: T,
              spanId: s.id,
              parentSpanId: s.parent,
              name: s.name,
              kind: 1,
              startTimeUnixNano: String(s.start * 1e6),
              endTimeUnixNano: String(s.end * 1e6),
              attributes: Object.entries(s.attrs ?? {}).map(([key, v]) => ({
                key,
                value: typeof v === "number" ? { intValue: String(v) } : { stringValue: v },
              })),
              events: [],
              status: { code: 0 },
            })),
          },
        ],
      },
    ],
  });
}

const file = [
  line("virt-api", [
    {
      id: "a1",
      name: "migrate VirtualMachine",
      start: 0,
      end: 20,
      attrs: { "kubevirt.migration.name": "kubevirt-migrate-vm-abc" },
    },
  ]),
  "not json",
  line("virt-launcher", [
    { id: "l1", parent: "a1", name: "migrate VirtualMachineInstance", start: 100, end: 900 },
    {
      id: "l2",
      parent: "l1",
      name: "send memory iteration",
      start: 150,
      end: 500,
      attrs: { "migration.iteration": 1 },
    },
    { id: "l3", parent: "l1", name: "switch over", start: 800, end: 890, attrs: { "migration.downtime_ms": 7 } },
  ]),
].join("\n");

describe("trace rendering", () => {
  it("parses lines from several services, skipping malformed ones", () => {
    const { spans, badLines } = parseTraceLines(file);
    expect(badLines).toBe(1);
    expect(spans.map((s) => s.service)).toEqual(["virt-api", "virt-launcher", "virt-launcher", "virt-launcher"]);
  });

  it("finds a migration's trace by name and nests spans under their parents", () => {
    const { spans } = parseTraceLines(file);
    expect(findMigrationTrace(spans, "kubevirt-migrate-vm-abc")).toBe(T);
    expect(findMigrationTrace(spans, "other")).toBeUndefined();
    const roots = buildTrees(spans);
    expect(roots).toHaveLength(1);
    expect(roots[0].children[0].children.map((c) => c.span.name)).toEqual(["send memory iteration", "switch over"]);
  });

  it("renders a terminal waterfall and an SVG with every span", () => {
    const roots = buildTrees(parseTraceLines(file).spans);
    const text = renderText(roots, 40);
    expect(text).toMatch(/total 900\.0 ms {2}4 spans/);
    expect(text).toMatch(/^ {4}switch over +virt-launcher +\|.*█.*\| +90\.0 ms downtime_ms=7$/m);
    const svg = renderSvg(roots);
    expect(svg.match(/<rect /g)).toHaveLength(4);
    expect(svg).toContain("send memory iteration");
  });
});
