/** Reads the OTLP/JSON lines every component appends to the cluster's trace file into flat spans. */
import { existsSync, readFileSync } from "node:fs";

/** One span with its resource's identity. */
export interface FlatSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly service: string;
  /** `k8s.node.name` of the process, when it has one. */
  readonly node: string;
  /** `k8s.pod.name` of the process, when it has one. */
  readonly pod: string;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly attributes: Record<string, string | number | boolean>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpKv {
  key: string;
  value: OtlpValue;
}
interface OtlpLine {
  resourceSpans?: {
    resource?: { attributes?: OtlpKv[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        startTimeUnixNano: string;
        endTimeUnixNano: string;
        attributes?: OtlpKv[];
      }[];
    }[];
  }[];
}

function attrs(list: OtlpKv[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
      value.doubleValue ??
      value.boolValue ??
      "";
  }
  return out;
}

/** Every span in `file` (an absent file has none). */
export function readSpans(file: string): FlatSpan[] {
  if (!existsSync(file)) return [];
  const spans: FlatSpan[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const parsed = JSON.parse(line) as OtlpLine;
    for (const rs of parsed.resourceSpans ?? []) {
      const resource = attrs(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? "",
            name: s.name,
            service: String(resource["service.name"] ?? ""),
            node: String(resource["k8s.node.name"] ?? ""),
            pod: String(resource["k8s.pod.name"] ?? ""),
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: attrs(s.attributes),
          });
        }
      }
    }
  }
  return spans;
}
