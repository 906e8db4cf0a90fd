/**
 * metav1.LabelSelector as apimachinery reads it (`LabelSelectorAsSelector`): matching a label set, and the canonical
 * string (`Selector.String()`) a replica set publishes in `status.labelSelector` for an HPA. Requirements are sorted
 * by key; `matchLabels` become `key=value`, expressions `key in (a,b)`, `key notin (a,b)`, `key` and `!key`.
 */

/** metav1.LabelSelector. */
export interface LabelSelectorSpec {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

/** A parsed selector. */
export interface LabelSelector {
  /** True when `labels` satisfy every requirement (a missing selector matches nothing, an empty one everything). */
  matches(labels: Readonly<Record<string, string>> | undefined): boolean;
  /** The canonical form, e.g. `app=web,tier in (a,b)`; "" for an empty or missing selector. */
  readonly string: string;
}

interface Requirement {
  key: string;
  op: "=" | "in" | "notin" | "exists" | "!";
  values: string[];
}

const OPERATORS: Record<string, Requirement["op"]> = {
  In: "in",
  NotIn: "notin",
  Exists: "exists",
  DoesNotExist: "!",
};

function requirementString(r: Requirement): string {
  switch (r.op) {
    case "=":
      return `${r.key}=${r.values[0]}`;
    case "exists":
      return r.key;
    case "!":
      return `!${r.key}`;
    default:
      return `${r.key} ${r.op} (${r.values.join(",")})`;
  }
}

function satisfied(r: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, r.key);
  switch (r.op) {
    case "=":
    case "in":
      return has && r.values.includes(labels[r.key]);
    case "notin":
      return !has || !r.values.includes(labels[r.key]);
    case "exists":
      return has;
    case "!":
      return !has;
  }
}

function requirementOf(e: { key: string; operator: string; values?: string[] }): Requirement {
  const op = OPERATORS[e.operator];
  if (!op) throw new Error(`"${e.operator}" is not a valid label selector operator`);
  const values = [...new Set(e.values ?? [])].sort();
  if ((op === "in" || op === "notin") && values.length === 0)
    throw new Error("for 'in', 'notin' operators, values set can't be empty");
  if ((op === "exists" || op === "!") && values.length > 0)
    throw new Error("values set must be empty for exists and does not exist");
  return { key: e.key, op, values };
}

/**
 * Parses `spec` as apimachinery's LabelSelectorAsSelector does; throws an Error with apimachinery's message for an
 * unknown operator or a values list that does not fit its operator.
 */
export function labelSelectorOf(spec: LabelSelectorSpec | undefined): LabelSelector {
  if (!spec) return { matches: () => false, string: "" };
  const reqs: Requirement[] = Object.entries(spec.matchLabels ?? {}).map(([key, v]) => ({
    key,
    op: "=",
    values: [v],
  }));
  for (const e of spec.matchExpressions ?? []) reqs.push(requirementOf(e));
  reqs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return {
    matches: (labels) => reqs.every((r) => satisfied(r, labels ?? {})),
    string: reqs.map(requirementString).join(","),
  };
}
