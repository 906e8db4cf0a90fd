/**
 * Label selectors (the query-string form of k8s.io/apimachinery/pkg/labels):
 *   k=v  k==v  k!=v  k in (a,b)  k notin (a,b)  k  !k     comma = AND
 * `!=` and `notin` also match objects without the key. A malformed selector is a 400.
 */
import { badRequest } from "../errors.ts";

/** One requirement of a selector. */
export interface LabelRequirement {
  readonly key: string;
  readonly op: "=" | "!=" | "in" | "notin" | "exists" | "!" | "gt" | "lt";
  readonly values: readonly string[];
}

/** A parsed label selector; empty matches everything. */
export type LabelSelector = readonly LabelRequirement[];

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function checkKey(k: string, sel: string): string {
  if (!KEY.test(k) || k.length > 317)
    throw badRequest(`unable to parse requirement: invalid label key "${k}" in selector "${sel}"`);
  return k;
}

function checkValue(v: string, sel: string): string {
  if (!VALUE.test(v) || v.length > 63)
    throw badRequest(`unable to parse requirement: invalid label value: "${v}" in selector "${sel}"`);
  return v;
}

/** Splits at commas that are not inside parentheses. */
function splitTop(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of s) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  parts.push(cur);
  return parts;
}

/** Parses the query-string form. */
export function parseLabelSelector(sel: string | null | undefined): LabelSelector {
  if (!sel || sel.trim() === "") return [];
  const out: LabelRequirement[] = [];
  for (const raw of splitTop(sel)) {
    const part = raw.trim();
    if (part === "")
      throw badRequest(`unable to parse requirement: found '', expected: identifier in selector "${sel}"`);
    let m = /^(\S+?)\s+(in|notin)\s*\(([^)]*)\)$/.exec(part);
    if (m) {
      const values = m[3].split(",").map((v) => checkValue(v.trim(), sel));
      out.push({ key: checkKey(m[1], sel), op: m[2] as "in" | "notin", values });
      continue;
    }
    m = /^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(.*)$/.exec(part);
    if (m) {
      const op = m[2] === "!=" ? "!=" : m[2] === ">" ? "gt" : m[2] === "<" ? "lt" : "=";
      const value = m[3].trim();
      if (op === "gt" || op === "lt") {
        if (!/^-?\d+$/.test(value))
          throw badRequest(
            `unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer in selector "${sel}"`,
          );
      } else checkValue(value, sel);
      out.push({ key: checkKey(m[1], sel), op, values: [value] });
      continue;
    }
    if (part.startsWith("!")) {
      out.push({ key: checkKey(part.slice(1).trim(), sel), op: "!", values: [] });
      continue;
    }
    out.push({ key: checkKey(part, sel), op: "exists", values: [] });
  }
  return out;
}

/** Parses the object form (metav1.LabelSelector: matchLabels + matchExpressions). */
export function fromLabelSelectorObject(obj: {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}): LabelSelector {
  const out: LabelRequirement[] = [];
  for (const [k, v] of Object.entries(obj.matchLabels ?? {})) out.push({ key: k, op: "=", values: [v] });
  for (const e of obj.matchExpressions ?? []) {
    const op = { In: "in", NotIn: "notin", Exists: "exists", DoesNotExist: "!" }[e.operator];
    if (!op) throw badRequest(`"${e.operator}" is not a valid label selector operator`);
    out.push({ key: e.key, op: op as LabelRequirement["op"], values: e.values ?? [] });
  }
  return out;
}

/** True if `labels` satisfy every requirement. */
export function matchLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  for (const r of sel) {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case "=":
        if (v !== r.values[0]) return false;
        break;
      case "!=":
        if (has && v === r.values[0]) return false;
        break;
      case "in":
        if (!has || !r.values.includes(v)) return false;
        break;
      case "notin":
        if (has && r.values.includes(v)) return false;
        break;
      case "exists":
        if (!has) return false;
        break;
      case "!":
        if (has) return false;
        break;
      case "gt":
      case "lt": {
        if (!has || !/^-?\d+$/.test(v)) return false;
        const n = Number(v);
        const w = Number(r.values[0]);
        if (r.op === "gt" ? !(n > w) : !(n < w)) return false;
        break;
      }
    }
  }
  return true;
}
