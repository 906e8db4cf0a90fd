import { context, propagation, ROOT_CONTEXT, TraceFlags, trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import { formatTraceparent, parseTraceparent, W3CTraceparentPropagator } from "./w3c-propagator.ts";

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const SPAN = "b7ad6b7169203331";
const getter = {
  get: (c: Record<string, string>, k: string) => c[k],
  keys: (c: Record<string, string>) => Object.keys(c),
};
const setter = {
  set: (c: Record<string, string>, k: string, v: string) => {
    c[k] = v;
  },
};

afterEach(() => {
  propagation.disable();
  context.disable();
});

describe("parseTraceparent()", () => {
  it.each([
    [`00-${TRACE}-${SPAN}-01`, TraceFlags.SAMPLED],
    [`00-${TRACE}-${SPAN}-00`, TraceFlags.NONE],
    [` 00-${TRACE}-${SPAN}-01 `, TraceFlags.SAMPLED],
    [`01-${TRACE}-${SPAN}-01-future-field`, TraceFlags.SAMPLED],
  ])("reads %j", (header, flags) => {
    expect(parseTraceparent(header)).toEqual({ traceId: TRACE, spanId: SPAN, traceFlags: flags, isRemote: true });
  });

  it.each([
    ["", "empty"],
    [`ff-${TRACE}-${SPAN}-01`, "version ff"],
    [`00-${TRACE}-${SPAN}-01-extra`, "extra field in version 00"],
    [`00-${"0".repeat(32)}-${SPAN}-01`, "all-zero trace id"],
    [`00-${TRACE}-${"0".repeat(16)}-01`, "all-zero span id"],
    [`00-${TRACE.toUpperCase()}-${SPAN}-01`, "upper-case hex"],
    [`00-${TRACE.slice(1)}-${SPAN}-01`, "short trace id"],
  ])("refuses %j (%s)", (header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });

  it("round-trips through formatTraceparent()", () => {
    const header = `00-${TRACE}-${SPAN}-01`;
    const parsed = parseTraceparent(header);
    expect(parsed && formatTraceparent(parsed)).toBe(header);
  });
});

describe("W3CTraceparentPropagator", () => {
  const p = new W3CTraceparentPropagator();

  it("extracts a remote parent with its tracestate and injects it back", () => {
    const ctx = p.extract(ROOT_CONTEXT, { traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: "kv=1,ot=x" }, getter);
    const sc = trace.getSpanContext(ctx);
    expect(sc).toMatchObject({ traceId: TRACE, spanId: SPAN, isRemote: true });
    expect(sc?.traceState?.get("kv")).toBe("1");
    const out: Record<string, string> = {};
    p.inject(ctx, out, setter);
    expect(out).toEqual({ traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: "kv=1,ot=x" });
  });

  it("leaves the context alone for a malformed header and injects nothing without a span", () => {
    const ctx = p.extract(ROOT_CONTEXT, { traceparent: "00-nope" }, getter);
    expect(ctx).toBe(ROOT_CONTEXT);
    const out: Record<string, string> = {};
    p.inject(ROOT_CONTEXT, out, setter);
    expect(out).toEqual({});
  });

  it("names the fields it uses", () => {
    expect(p.fields()).toEqual(["traceparent", "tracestate"]);
  });
});
