/**
 * The JSONPath subset printer columns use (`.status.phase`, `.a[0].b`, `.a[*].b`, `.a[?(@.type=='Ready')].status`),
 * printed the way kubectl's JSONPath printer does: several results joined by spaces, objects as JSON.
 */
import { isObject, type Json } from "../types.ts";

type Step =
  | { kind: "field"; name: string }
  | { kind: "index"; index: number }
  | { kind: "all" }
  | { kind: "filter"; path: string[]; op: string; value: string };

function parse(expr: string): Step[] {
  let s = expr.trim();
  if (s.startsWith("{") && s.endsWith("}")) s = s.slice(1, -1);
  if (s.startsWith("$")) s = s.slice(1);
  const steps: Step[] = [];
  let i = 0;
  while (i < s.length) {
    if (s[i] === ".") {
      i++;
      let name = "";
      while (i < s.length && s[i] !== "." && s[i] !== "[") name += s[i++];
      if (name) steps.push(name === "*" ? { kind: "all" } : { kind: "field", name });
    } else if (s[i] === "[") {
      const end = s.indexOf("]", s.startsWith("[?(", i) ? s.indexOf(")", i) : i);
      const inner = s.slice(i + 1, end);
      i = end + 1;
      if (inner === "*") steps.push({ kind: "all" });
      else if (/^-?\d+$/.test(inner)) steps.push({ kind: "index", index: Number(inner) });
      else if (/^'.*'$/.test(inner) || /^".*"$/.test(inner)) steps.push({ kind: "field", name: inner.slice(1, -1) });
      else {
        const m = /^\?\(@((?:\.[^.=!<>\s]+)+)\s*(==|!=)\s*['"]?(.*?)['"]?\)$/.exec(inner);
        if (!m) throw new Error(`unsupported JSONPath: ${expr}`);
        steps.push({
          kind: "filter",
          path: m[1].slice(1).split("."),
          op: m[2],
          value: m[3],
        });
      }
    } else {
      let name = "";
      while (i < s.length && s[i] !== "." && s[i] !== "[") name += s[i++];
      if (name) steps.push({ kind: "field", name });
    }
  }
  return steps;
}

function get(v: Json, path: string[]): Json | undefined {
  let cur: Json | undefined = v;
  for (const p of path) cur = isObject(cur) ? cur[p] : undefined;
  return cur;
}

/** Evaluates `expr` on `obj`; returns every match. */
export function evaluate(expr: string, obj: Json): Json[] {
  let cur: Json[] = [obj];
  for (const step of parse(expr)) {
    const next: Json[] = [];
    for (const v of cur) {
      if (step.kind === "field") {
        if (isObject(v) && v[step.name] !== undefined) next.push(v[step.name]);
      } else if (step.kind === "index") {
        if (Array.isArray(v)) {
          const item = v[step.index < 0 ? v.length + step.index : step.index];
          if (item !== undefined) next.push(item);
        }
      } else if (step.kind === "all") {
        if (Array.isArray(v)) next.push(...v);
        else if (isObject(v)) next.push(...Object.values(v));
      } else if (Array.isArray(v)) {
        for (const item of v) {
          const got = get(item, step.path);
          const str = got === undefined ? undefined : typeof got === "string" ? got : JSON.stringify(got);
          if (step.op === "==" ? str === step.value : str !== undefined && str !== step.value) next.push(item);
        }
      }
    }
    cur = next;
  }
  return cur;
}

/** A printer-column cell: null when nothing matches; strings joined by spaces; numbers/booleans as values. */
export function cell(expr: string, obj: Json, type: string): Json {
  let results: Json[];
  try {
    results = evaluate(expr, obj);
  } catch {
    return null;
  }
  if (results.length === 0) return null;
  if (type === "integer" || type === "number" || type === "boolean") {
    const r = results[0];
    return typeof r === "object" ? JSON.stringify(r) : r;
  }
  return results.map((r) => (typeof r === "string" ? r : JSON.stringify(r))).join(" ");
}
