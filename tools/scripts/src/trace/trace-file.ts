/**
 * Reads a trace file written by the components (`KUBEVIRT_TRACES_FILE`: one OTLP/JSON export request per line,
 * from many processes) into traces: spans grouped by trace id, each tagged with its service, as a tree.
 */
import { readFileSync } from "node:fs";
import type { OtlpAnyValue, OtlpTraceRequest } from "@kvt/observability";

/** One span, flattened for rendering. */
export interface SpanRecord {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly service: string;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly attributes: Record<string, string | number | boolean>;
  readonly error: boolean;
}

/** A span and its children, ordered by start time. */
export interface SpanNode {
  readonly span: SpanRecord;
  readonly children: SpanNode[];
}

function plain(v: OtlpAnyValue): string | number | boolean {
  if ("stringValue" in v) return v.stringValue;
  if ("boolValue" in v) return v.boolValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  return JSON.stringify(v.arrayValue.values.map(plain));
}

/** Parses the lines of a trace file; malformed lines are skipped and counted. */
export function parseTraceLines(text: string): { spans: SpanRecord[]; badLines: number } {
  const spans: SpanRecord[] = [];
  let badLines = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    let req: OtlpTraceRequest;
    try {
      req = JSON.parse(line) as OtlpTraceRequest;
    } catch {
      badLines++;
      continue;
    }
    for (const rs of req.resourceSpans ?? []) {
      const service = rs.resource.attributes.find((a) => a.key === "service.name");
      const serviceName = service ? String(plain(service.value)) : "unknown";
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            name: s.name,
            service: serviceName,
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: Object.fromEntries(s.attributes.map((a) => [a.key, plain(a.value)])),
            error: s.status?.code === 2,
          });
        }
      }
    }
  }
  return { spans, badLines };
}

/** Reads and parses a trace file. */
export function readTraceFile(path: string): { spans: SpanRecord[]; badLines: number } {
  return parseTraceLines(readFileSync(path, "utf8"));
}

/** Builds the trees of one trace: roots are spans whose parent is absent from the file. */
export function buildTrees(spans: readonly SpanRecord[]): SpanNode[] {
  const nodes = new Map(spans.map((s) => [s.spanId, { span: s, children: [] as SpanNode[] }]));
  const roots: SpanNode[] = [];
  for (const node of nodes.values()) {
    const parent = node.span.parentSpanId ? nodes.get(node.span.parentSpanId) : undefined;
    (parent ? parent.children : roots).push(node);
  }
  const sort = (list: SpanNode[]): void => {
    list.sort((a, b) => (a.span.startNs < b.span.startNs ? -1 : a.span.startNs > b.span.startNs ? 1 : 0));
    for (const n of list) sort(n.children);
  };
  sort(roots);
  return roots;
}

/**
 * Picks the trace of a migration: the one with a span whose `kubevirt.migration.name` attribute (or, failing that,
 * `k8s.vmim.name`) equals `name`; without a name, the newest trace that has any migration span.
 */
export function findMigrationTrace(spans: readonly SpanRecord[], name?: string): string | undefined {
  const keys = ["kubevirt.migration.name", "k8s.vmim.name", "kubevirt.vmim.name"];
  const isMigration = (s: SpanRecord): boolean =>
    keys.some((k) => s.attributes[k] !== undefined && (name === undefined || s.attributes[k] === name)) ||
    (name === undefined && /Migration|migrat/.test(s.name));
  let best: SpanRecord | undefined;
  for (const s of spans) if (isMigration(s) && (!best || s.startNs > best.startNs)) best = s;
  return best?.traceId;
}
