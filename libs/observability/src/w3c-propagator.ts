/**
 * The W3C Trace Context propagator (`traceparent` / `tracestate`, https://www.w3.org/TR/trace-context/) on
 * @opentelemetry/api alone. Every process installs one, tracing on or off, so a trace passes through components that
 * export nothing; writing it here keeps @opentelemetry/core (about 40 ms of CPU to import) out of processes that do
 * not export spans.
 */
import {
  type Context,
  createTraceState,
  isSpanContextValid,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
  trace,
} from "@opentelemetry/api";

const TRACEPARENT = "traceparent";
const TRACESTATE = "tracestate";
/** version-traceid-parentid-flags; versions after 00 may append fields (`-...`), version ff is invalid. */
const TRACEPARENT_RE = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/;

/** The `traceparent` header value of `spanContext`. */
export function formatTraceparent(spanContext: SpanContext): string {
  return `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/** The span context a `traceparent` header value names (remote), or undefined when it is malformed. */
export function parseTraceparent(value: string): SpanContext | undefined {
  const m = TRACEPARENT_RE.exec(value.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  const spanContext: SpanContext = { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
  return isSpanContextValid(spanContext) ? spanContext : undefined;
}

/** A TextMapPropagator for W3C `traceparent` and `tracestate`. */
export class W3CTraceparentPropagator implements TextMapPropagator {
  inject(ctx: Context, carrier: unknown, setter: TextMapSetter): void {
    const spanContext = trace.getSpanContext(ctx);
    if (!spanContext || !isSpanContextValid(spanContext)) return;
    setter.set(carrier, TRACEPARENT, formatTraceparent(spanContext));
    const state = spanContext.traceState?.serialize();
    if (state) setter.set(carrier, TRACESTATE, state);
  }

  extract(ctx: Context, carrier: unknown, getter: TextMapGetter): Context {
    const header = first(getter.get(carrier, TRACEPARENT));
    const spanContext = header ? parseTraceparent(header) : undefined;
    if (!spanContext) return ctx;
    const state = getter.get(carrier, TRACESTATE);
    const joined = Array.isArray(state) ? state.join(",") : state;
    return trace.setSpanContext(ctx, joined ? { ...spanContext, traceState: createTraceState(joined) } : spanContext);
  }

  fields(): string[] {
    return [TRACEPARENT, TRACESTATE];
  }
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
