/**
 * Label-selector and node-selector-term matching, as the scheduler evaluates them (pure).
 * Operators: In, NotIn, Exists, DoesNotExist (label selectors and node selectors), Gt, Lt (node selectors).
 */
import type { V1LabelSelector, V1Node, V1NodeSelectorRequirement, V1NodeSelectorTerm } from "../cluster/kube-models.ts";

type Labels = Record<string, string> | undefined;

function requirementMatches(
  labels: Labels,
  key: string,
  operator: string,
  values: readonly string[] | undefined,
): boolean {
  const has = labels !== undefined && Object.hasOwn(labels, key);
  const value = has ? labels[key] : undefined;
  switch (operator) {
    case "In":
      return has && (values ?? []).includes(value!);
    case "NotIn":
      return !has || !(values ?? []).includes(value!);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    case "Gt":
    case "Lt": {
      if (!has || !values?.length) return false;
      const a = Number.parseInt(value!, 10);
      const b = Number.parseInt(values[0], 10);
      if (Number.isNaN(a) || Number.isNaN(b)) return false;
      return operator === "Gt" ? a > b : a < b;
    }
    default:
      return false;
  }
}

/** Whether `labels` satisfy a metav1.LabelSelector (an empty selector matches everything; null matches nothing). */
export function labelSelectorMatches(selector: V1LabelSelector | undefined, labels: Labels): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels?.[k] !== v) return false;
  }
  return (selector.matchExpressions ?? []).every((e) => requirementMatches(labels, e.key, e.operator, e.values));
}

function nodeRequirementMatches(node: V1Node, r: V1NodeSelectorRequirement, field: boolean): boolean {
  const source = field ? { "metadata.name": node.metadata?.name ?? "" } : node.metadata?.labels;
  return requirementMatches(source, r.key, r.operator, r.values);
}

/** Whether `node` matches one NodeSelectorTerm (all its expressions and fields). An empty term matches nothing. */
export function nodeSelectorTermMatches(node: V1Node, term: V1NodeSelectorTerm): boolean {
  const exprs = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  if (exprs.length === 0 && fields.length === 0) return false;
  return (
    exprs.every((r) => nodeRequirementMatches(node, r, false)) &&
    fields.every((r) => nodeRequirementMatches(node, r, true))
  );
}

/** Whether `node` matches a NodeSelector: any of its terms (ORed). */
export function nodeSelectorMatches(node: V1Node, terms: readonly V1NodeSelectorTerm[]): boolean {
  return terms.some((t) => nodeSelectorTermMatches(node, t));
}
