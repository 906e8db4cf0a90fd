/**
 * Renders one trace as a waterfall: in the terminal (indented names, service, a bar on a shared time axis, the
 * duration) and as a standalone SVG (one row per span, coloured by service, key attributes as tooltips).
 */
import type { SpanNode, SpanRecord } from "./trace-file.ts";

interface Row {
  readonly depth: number;
  readonly span: SpanRecord;
}

function flatten(roots: readonly SpanNode[]): Row[] {
  const rows: Row[] = [];
  const walk = (n: SpanNode, depth: number): void => {
    rows.push({ depth, span: n.span });
    for (const c of n.children) walk(c, depth + 1);
  };
  for (const r of roots) walk(r, 0);
  return rows;
}

function bounds(rows: readonly Row[]): { start: bigint; end: bigint } {
  let start = rows[0].span.startNs;
  let end = rows[0].span.endNs;
  for (const { span } of rows) {
    if (span.startNs < start) start = span.startNs;
    if (span.endNs > end) end = span.endNs;
  }
  return { start, end: end > start ? end : start + 1n };
}

/** Milliseconds between two nanosecond timestamps. */
export function ms(from: bigint, to: bigint): number {
  return Number(to - from) / 1e6;
}

const KEY_ATTRIBUTES = [
  "migration.iteration",
  "migration.downtime_ms",
  "migration.bytes",
  "migration.dirty_rate_bytes_per_second",
  "k8s.namespace.name",
];

function attrSummary(span: SpanRecord): string {
  const parts = KEY_ATTRIBUTES.filter((k) => span.attributes[k] !== undefined).map(
    (k) => `${k.split(".").at(-1)}=${span.attributes[k]}`,
  );
  return parts.length ? ` ${parts.join(" ")}` : "";
}

/** The terminal waterfall, `width` columns for the bars. */
export function renderText(roots: readonly SpanNode[], width = 50): string {
  const rows = flatten(roots);
  if (rows.length === 0) return "(no spans)\n";
  const { start, end } = bounds(rows);
  const total = ms(start, end);
  const labels = rows.map((r) => `${"  ".repeat(r.depth)}${r.span.name}`);
  const labelWidth = Math.min(60, Math.max(...labels.map((l) => l.length)));
  const serviceWidth = Math.max(...rows.map((r) => r.span.service.length));
  const lines = [`trace ${rows[0].span.traceId}  total ${total.toFixed(1)} ms  ${rows.length} spans`];
  rows.forEach((r, i) => {
    const from = Math.floor((ms(start, r.span.startNs) / total) * width);
    const len = Math.max(1, Math.round((ms(r.span.startNs, r.span.endNs) / total) * width));
    const bar = `${" ".repeat(from)}${(r.span.error ? "!" : "█").repeat(Math.min(len, width - from))}`.padEnd(width);
    const dur = ms(r.span.startNs, r.span.endNs).toFixed(1).padStart(9);
    lines.push(
      `${labels[i].slice(0, labelWidth).padEnd(labelWidth)}  ${r.span.service.padEnd(serviceWidth)} |${bar}|${dur} ms${attrSummary(r.span)}`,
    );
  });
  return `${lines.join("\n")}\n`;
}

const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** The SVG waterfall. */
export function renderSvg(roots: readonly SpanNode[]): string {
  const rows = flatten(roots);
  const rowH = 22;
  const labelW = 420;
  const chartW = 760;
  const height = (rows.length + 2) * rowH;
  if (rows.length === 0)
    return `<svg xmlns="http://www.w3.org/2000/svg" width="400" height="40"><text x="10" y="25">no spans</text></svg>\n`;
  const { start, end } = bounds(rows);
  const total = ms(start, end);
  const services = [...new Set(rows.map((r) => r.span.service))];
  const color = (s: string): string => PALETTE[services.indexOf(s) % PALETTE.length];
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelW + chartW + 120}" height="${height}" font-family="monospace" font-size="12">`,
    `<text x="8" y="15">trace ${rows[0].span.traceId} - ${total.toFixed(1)} ms - ${services.map(esc).join(", ")}</text>`,
  ];
  rows.forEach((r, i) => {
    const y = (i + 1) * rowH + 4;
    const x = labelW + (ms(start, r.span.startNs) / total) * chartW;
    const w = Math.max(1, (ms(r.span.startNs, r.span.endNs) / total) * chartW);
    const tip = esc(
      `${r.span.service}: ${r.span.name} ${ms(r.span.startNs, r.span.endNs).toFixed(2)} ms ${JSON.stringify(r.span.attributes)}`,
    );
    out.push(
      `<text x="${8 + r.depth * 12}" y="${y + 14}">${esc(r.span.name)} <tspan fill="#777">(${esc(r.span.service)})</tspan></text>`,
    );
    out.push(
      `<rect x="${x.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${r.span.error ? "#d62728" : color(r.span.service)}"><title>${tip}</title></rect>`,
    );
    out.push(
      `<text x="${(x + w + 4).toFixed(1)}" y="${y + 14}" fill="#333">${ms(r.span.startNs, r.span.endNs).toFixed(1)} ms</text>`,
    );
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
