/**
 * Encodes finished spans as OTLP/JSON (the `ExportTraceServiceRequest` shape of the OTLP HTTP/JSON protocol): hex
 * trace and span ids, nanosecond timestamps as decimal strings, attributes as typed `AnyValue`s. Used by the file
 * exporter (`npm start -- --traces FILE`, one request per line) and read back by the trace renderer.
 */
import type { Attributes, AttributeValue, HrTime, SpanContext, SpanKind, SpanStatus } from "@opentelemetry/api";

/**
 * What the encoder reads of a finished span: a subset of the SDK's `ReadableSpan`, so the SDK's spans and the
 * file tracer provider's both qualify.
 */
export interface ExportableSpan {
  readonly name: string;
  readonly kind: SpanKind;
  spanContext(): SpanContext;
  readonly parentSpanContext?: SpanContext | undefined;
  readonly startTime: HrTime;
  readonly endTime: HrTime;
  readonly attributes: Attributes;
  readonly events: readonly { readonly name: string; readonly time: HrTime; readonly attributes?: Attributes }[];
  readonly status: SpanStatus;
  readonly resource: { readonly attributes: Attributes };
  readonly instrumentationScope: { readonly name: string; readonly version?: string };
}

/** An OTLP `AnyValue`. */
export type OtlpAnyValue =
  | { stringValue: string }
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number }
  | { arrayValue: { values: OtlpAnyValue[] } };

/** An OTLP key/value attribute. */
export interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}

/** One span in OTLP/JSON. */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: OtlpKeyValue[];
  events: { name: string; timeUnixNano: string; attributes: OtlpKeyValue[] }[];
  status: { code: number; message?: string };
}

/** An OTLP/JSON trace export request. */
export interface OtlpTraceRequest {
  resourceSpans: {
    resource: { attributes: OtlpKeyValue[] };
    scopeSpans: { scope: { name: string; version?: string }; spans: OtlpSpan[] }[];
  }[];
}

function anyValue(v: AttributeValue): OtlpAnyValue {
  if (Array.isArray(v))
    return { arrayValue: { values: v.filter((x) => x != null).map((x) => anyValue(x as AttributeValue)) } };
  if (typeof v === "boolean") return { boolValue: v };
  if (typeof v === "number") return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
  return { stringValue: String(v) };
}

/** OTLP attributes from OpenTelemetry attributes (undefined values dropped). */
export function toOtlpAttributes(attrs: Attributes): OtlpKeyValue[] {
  const out: OtlpKeyValue[] = [];
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined) out.push({ key, value: anyValue(value) });
  }
  return out;
}

function nanos(t: HrTime): string {
  return (BigInt(t[0]) * 1_000_000_000n + BigInt(t[1])).toString();
}

function toOtlpSpan(span: ExportableSpan): OtlpSpan {
  const ctx = span.spanContext();
  const parent = span.parentSpanContext?.spanId;
  return {
    traceId: ctx.traceId,
    spanId: ctx.spanId,
    ...(parent ? { parentSpanId: parent } : {}),
    name: span.name,
    kind: span.kind + 1, // OTLP kinds are api SpanKind + 1 (0 = unspecified)
    startTimeUnixNano: nanos(span.startTime),
    endTimeUnixNano: nanos(span.endTime),
    attributes: toOtlpAttributes(span.attributes),
    events: span.events.map((e) => ({
      name: e.name,
      timeUnixNano: nanos(e.time),
      attributes: toOtlpAttributes(e.attributes ?? {}),
    })),
    status: { code: span.status.code, ...(span.status.message ? { message: span.status.message } : {}) },
  };
}

/** Groups `spans` by resource and scope into one OTLP/JSON export request. */
export function toOtlpRequest(spans: readonly ExportableSpan[]): OtlpTraceRequest {
  const byResource = new Map<ExportableSpan["resource"], Map<string, ExportableSpan[]>>();
  for (const span of spans) {
    let scopes = byResource.get(span.resource);
    if (!scopes) {
      scopes = new Map<string, ExportableSpan[]>();
      byResource.set(span.resource, scopes);
    }
    const scopeName = span.instrumentationScope.name;
    scopes.set(scopeName, [...(scopes.get(scopeName) ?? []), span]);
  }
  return {
    resourceSpans: [...byResource].map(([resource, scopes]) => ({
      resource: { attributes: toOtlpAttributes(resource.attributes) },
      scopeSpans: [...scopes].map(([name, list]) => ({ scope: { name }, spans: list.map(toOtlpSpan) })),
    })),
  };
}
