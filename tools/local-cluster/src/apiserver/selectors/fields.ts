/**
 * Field selectors: `f=v`, `f==v`, `f!=v`, comma = AND, with `\,` `\=` `\\` escapes. Each resource declares which
 * fields it supports; any other field is a 400 `field label not supported: <f>`, as on a real server.
 */
import { badRequest } from "../errors.ts";
import type { KubeObject } from "../types.ts";

/** One requirement. */
export interface FieldRequirement {
  readonly field: string;
  readonly op: "=" | "!=";
  readonly value: string;
}

/** A parsed field selector. */
export type FieldSelector = readonly FieldRequirement[];

/** Reads a selectable field's value from an object (undefined reads as ""). */
export type FieldGetter = (obj: KubeObject) => string | undefined;

function splitUnescaped(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (ch === "\\" && i + 1 < s.length) {
      cur += ch + s[i + 1];
      i++;
    } else if (ch === sep) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

function unescapeValue(s: string): string {
  return s.replace(/\\(.)/g, "$1");
}

/** Parses `sel`, checking every field against `supported`. */
export function parseFieldSelector(sel: string | null | undefined, supported: ReadonlySet<string>): FieldSelector {
  if (!sel || sel.trim() === "") return [];
  const out: FieldRequirement[] = [];
  for (const part of splitUnescaped(sel, ",")) {
    if (part.trim() === "") continue;
    const m = /^(.*?)(!=|==|=)(.*)$/s.exec(part);
    if (!m) throw badRequest(`invalid selector: '${sel}'; can't understand '${part}'`);
    const field = m[1].trim();
    if (!supported.has(field)) throw badRequest(`field label not supported: ${field}`);
    out.push({ field, op: m[2] === "!=" ? "!=" : "=", value: unescapeValue(m[3]) });
  }
  return out;
}

/** True if the object's fields satisfy the selector. */
export function matchFields(sel: FieldSelector, obj: KubeObject, getters: ReadonlyMap<string, FieldGetter>): boolean {
  for (const r of sel) {
    const get = getters.get(r.field);
    const v = get ? (get(obj) ?? "") : "";
    if (r.op === "=" ? v !== r.value : v === r.value) return false;
  }
  return true;
}

/** Reads a dotted path (`spec.nodeName`) as a selectable string value. */
export function pathGetter(path: string): FieldGetter {
  const parts = path.split(".");
  return (obj) => {
    let cur: unknown = obj;
    for (const p of parts) {
      if (typeof cur !== "object" || cur === null) return undefined;
      cur = (cur as Record<string, unknown>)[p];
    }
    if (cur === undefined || cur === null) return undefined;
    return typeof cur === "string" ? cur : typeof cur === "object" ? JSON.stringify(cur) : JSON.stringify(cur);
  };
}
