/**
 * The RBAC authorizer, as kube-apiserver's (`--authorization-mode=RBAC` behind the privileged-group authorizer):
 *
 *   attributes (user, verb, resource request or path)
 *     -> user in system:masters?                                        allow (no policy read)
 *     -> every ClusterRoleBinding, then every RoleBinding of the request's namespace, whose subjects name the user,
 *        one of its groups, or its ServiceAccount -> the roleRef's rules (an aggregated ClusterRole's rules are the
 *        union of the ClusterRoles its aggregationRule selects) -> any rule allows?          allow
 *     -> otherwise no opinion (a deny), with kube's reason when a binding names a role that does not exist
 *
 * Policy is read from the store on each decision (the objects are few and already in memory), so a binding takes
 * effect with the write that creates it, as kube-apiserver's informer-fed authorizer does within moments.
 */
import { fromLabelSelectorObject, matchLabels } from "../selectors/labels.ts";
import type { Store } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";

/** Who is asking (an authenticated, possibly impersonated user). */
export interface AuthUser {
  readonly username: string;
  readonly groups: readonly string[];
}

/** What is asked, as k8s.io/apiserver's authorizer.Attributes. */
export interface Attributes {
  readonly user: AuthUser;
  /** get, list, watch, create, update, patch, delete, deletecollection, impersonate, ... or a lower-case HTTP verb. */
  readonly verb: string;
  readonly resourceRequest: boolean;
  /** Non-resource requests: the URL path. */
  readonly path?: string;
  readonly apiGroup?: string;
  readonly apiVersion?: string;
  readonly namespace?: string;
  readonly resource?: string;
  readonly subresource?: string;
  readonly name?: string;
}

/** The answer: allowed, or not with kube's optional reason. */
export interface Decision {
  readonly allowed: boolean;
  readonly reason: string;
}

/** Decides requests. */
export interface Authorizer {
  authorize(attrs: Attributes): Decision;
  /** Every rule that applies to `user` in `namespace` ("" = cluster-wide bindings only), for SelfSubjectRulesReview. */
  rulesFor(user: AuthUser, namespace: string): PolicyRule[];
}

/** One PolicyRule (rbac.authorization.k8s.io/v1). */
export interface PolicyRule {
  readonly verbs: readonly string[];
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly resourceNames?: readonly string[];
  readonly nonResourceURLs?: readonly string[];
}

/**
 * Where a rule is written: the Role or ClusterRole that holds it and its index in that role's `rules`. A rule an
 * aggregated ClusterRole grants is where its source ClusterRole holds it (removing it there removes it from both).
 */
export interface RuleRef {
  readonly kind: "Role" | "ClusterRole";
  /** The Role's namespace (absent for a ClusterRole). */
  readonly namespace?: string;
  readonly name: string;
  readonly index: number;
}

/** A rule and where it is written. */
interface SourcedRule {
  readonly rule: PolicyRule;
  readonly ref: RuleRef;
}

/** The group whose members are never checked (kube-apiserver's privileged group). */
export const MASTERS_GROUP = "system:masters";

const RBAC = "rbac.authorization.k8s.io";
const COLL = {
  roles: `${RBAC}/roles`,
  clusterRoles: `${RBAC}/clusterroles`,
  roleBindings: `${RBAC}/rolebindings`,
  clusterRoleBindings: `${RBAC}/clusterrolebindings`,
} as const;

interface Subject {
  kind?: string;
  name?: string;
  namespace?: string;
}
interface RoleRef {
  kind?: string;
  name?: string;
}

function has(list: readonly string[] | undefined, value: string): boolean {
  return list?.includes(value) ?? false;
}

/** rbac/v1 helpers VerbMatches, APIGroupMatches, ResourceMatches (with `*` and `*\/sub`), ResourceNameMatches. */
export function ruleAllows(attrs: Attributes, rule: PolicyRule): boolean {
  if (!has(rule.verbs, "*") && !has(rule.verbs, attrs.verb)) return false;
  if (!attrs.resourceRequest) return nonResourceUrlMatches(rule, attrs.path ?? "");
  const group = attrs.apiGroup ?? "";
  if (!has(rule.apiGroups, "*") && !has(rule.apiGroups, group)) return false;
  if (!resourceMatches(rule, attrs.resource ?? "", attrs.subresource ?? "")) return false;
  const names = rule.resourceNames ?? [];
  return names.length === 0 || (attrs.name !== undefined && attrs.name !== "" && names.includes(attrs.name));
}

function resourceMatches(rule: PolicyRule, resource: string, subresource: string): boolean {
  const combined = subresource ? `${resource}/${subresource}` : resource;
  for (const r of rule.resources ?? []) {
    if (r === "*" || r === combined) return true;
    if (subresource && r === `*/${subresource}`) return true;
  }
  return false;
}

function nonResourceUrlMatches(rule: PolicyRule, path: string): boolean {
  for (const u of rule.nonResourceURLs ?? []) {
    if (u === "*" || u === path) return true;
    if (u.endsWith("*") && path.startsWith(u.slice(0, -1))) return true;
  }
  return false;
}

/** rbac's appliesTo: a subject names the user, one of its groups, or its ServiceAccount (namespace defaulted). */
export function subjectMatches(subject: Subject, user: AuthUser, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case "User":
      return subject.name === user.username;
    case "Group":
      return subject.name !== undefined && user.groups.includes(subject.name);
    case "ServiceAccount": {
      const ns = subject.namespace || bindingNamespace;
      return ns !== "" && user.username === `system:serviceaccount:${ns}:${subject.name}`;
    }
    default:
      return false;
  }
}

/** rbac's describeSubject: `User "alice"`, `ServiceAccount "name/namespace"`. */
function describe(s: Subject, bindingNamespace: string): string {
  if (s.kind === "ServiceAccount") return `ServiceAccount "${s.name}/${s.namespace || bindingNamespace}"`;
  return `${s.kind} "${s.name}"`;
}

interface ApplicableRules {
  readonly rules: SourcedRule[];
  /** The role is an aggregated ClusterRole (whose granted rules are its sources' without repeats). */
  readonly aggregated?: boolean;
  /** Why the binding's role gives nothing: it does not exist. */
  readonly missing?: string;
  /** The binding, its role and the subject that matched, as kube's allow reason names them. */
  readonly by: string;
}

function rulesOf(obj: KubeObject | undefined): PolicyRule[] {
  const rules: unknown = obj?.rules;
  return Array.isArray(rules) ? (rules as PolicyRule[]) : [];
}

function sourced(obj: KubeObject, kind: RuleRef["kind"]): SourcedRule[] {
  const { name = "", namespace } = obj.metadata;
  const at = kind === "Role" ? { kind, namespace, name } : { kind, name };
  return rulesOf(obj).map((rule, index) => ({ rule, ref: { ...at, index } }));
}

function refKey(r: RuleRef): string {
  return `${r.kind}/${r.namespace ?? ""}/${r.name}/${r.index}`;
}

/** An RBAC authorizer over the roles and bindings in `store`. */
export class RbacAuthorizer implements Authorizer {
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
  }

  authorize(attrs: Attributes): Decision {
    if (attrs.user.groups.includes(MASTERS_GROUP)) return { allowed: true, reason: "" };
    const errors: string[] = [];
    for (const { rules, missing, by } of this.#applicableRules(attrs.user, attrs.namespace ?? "")) {
      if (missing) errors.push(missing);
      else if (rules.some((r) => ruleAllows(attrs, r.rule))) return { allowed: true, reason: `RBAC: allowed by ${by}` };
    }
    return { allowed: false, reason: errors.length > 0 ? `RBAC: ${errors.join(", ")}` : "" };
  }

  /**
   * Every rule that allows `attrs`, each once, where it is written (an aggregated ClusterRole's rule where its
   * source role holds it): RBAC allows exactly when this is not empty, and removing a rule denies `attrs` exactly
   * when the rule is the only one here. Empty for system:masters, whom no rule is needed for.
   */
  allowingRules(attrs: Attributes): RuleRef[] {
    if (attrs.user.groups.includes(MASTERS_GROUP)) return [];
    const out = new Map<string, RuleRef>();
    for (const { rules } of this.#applicableRules(attrs.user, attrs.namespace ?? ""))
      for (const r of rules) if (ruleAllows(attrs, r.rule)) out.set(refKey(r.ref), r.ref);
    return [...out.values()];
  }

  /** Every rule that applies to `user` in `namespace` ("" = cluster scope), as kube's `RulesFor`. */
  rulesFor(user: AuthUser, namespace: string): PolicyRule[] {
    if (user.groups.includes(MASTERS_GROUP))
      return [
        { verbs: ["*"], apiGroups: ["*"], resources: ["*"] },
        { verbs: ["*"], nonResourceURLs: ["*"] },
      ];
    return [...this.#applicableRules(user, namespace)].flatMap((x) =>
      x.aggregated ? uniqueRules(x.rules) : x.rules.map((r) => r.rule),
    );
  }

  *#applicableRules(user: AuthUser, namespace: string): Generator<ApplicableRules> {
    for (const e of this.#store.list(COLL.clusterRoleBindings)) {
      const subject = ((e.obj.subjects ?? []) as Subject[]).find((s) => subjectMatches(s, user, ""));
      if (!subject) continue;
      const ref = (e.obj.roleRef ?? {}) as RoleRef;
      const by = `ClusterRoleBinding "${e.obj.metadata.name}" of ${ref.kind} "${ref.name}" to ${describe(subject, "")}`;
      yield { ...this.#resolve(ref, ""), by };
    }
    if (namespace === "") return;
    for (const e of this.#store.list(COLL.roleBindings, `${namespace}/`)) {
      const subject = ((e.obj.subjects ?? []) as Subject[]).find((s) => subjectMatches(s, user, namespace));
      if (!subject) continue;
      const ref = (e.obj.roleRef ?? {}) as RoleRef;
      const by = `RoleBinding "${e.obj.metadata.name}/${namespace}" of ${ref.kind} "${ref.name}" to ${describe(subject, namespace)}`;
      yield { ...this.#resolve(ref, namespace), by };
    }
  }

  #resolve(ref: RoleRef | undefined, namespace: string): Omit<ApplicableRules, "by"> {
    const name = ref?.name ?? "";
    if (ref?.kind === "Role") {
      const role = this.#store.get(COLL.roles, `${namespace}/${name}`);
      if (!role) return { rules: [], missing: `role.${RBAC} "${name}" not found` };
      return { rules: sourced(role.obj, "Role") };
    }
    const role = this.#store.get(COLL.clusterRoles, name);
    if (!role) return { rules: [], missing: `clusterrole.${RBAC} "${name}" not found` };
    const aggregated = aggregatedSourcedRules(this.#store, role.obj);
    return aggregated ? { rules: aggregated, aggregated: true } : { rules: sourced(role.obj, "ClusterRole") };
  }
}

/** The rules without repeats (same JSON), in order. */
function uniqueRules(rules: readonly SourcedRule[]): PolicyRule[] {
  const seen = new Set<string>();
  const out: PolicyRule[] = [];
  for (const { rule } of rules) {
    const key = JSON.stringify(rule);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(rule);
  }
  return out;
}

/**
 * An aggregated ClusterRole's rules where they are written: every rule of every other ClusterRole one of its
 * `clusterRoleSelectors` matches, in name order; undefined for a role without `aggregationRule`.
 */
function aggregatedSourcedRules(store: Store, role: KubeObject): SourcedRule[] | undefined {
  const aggregation = role.aggregationRule as { clusterRoleSelectors?: unknown[] } | undefined;
  const selectors = aggregation?.clusterRoleSelectors;
  if (!Array.isArray(selectors)) return undefined;
  const parsed = selectors.map((s) => fromLabelSelectorObject(s as Parameters<typeof fromLabelSelectorObject>[0]));
  return store
    .list(COLL.clusterRoles)
    .filter((e) => e.obj.metadata.name !== role.metadata.name)
    .filter((e) => parsed.some((sel) => matchLabels(sel, e.obj.metadata.labels)))
    .flatMap((e) => sourced(e.obj, "ClusterRole"));
}

/**
 * The rules of an aggregated ClusterRole (one with `aggregationRule`): those of every other ClusterRole one of its
 * `clusterRoleSelectors` matches, in name order, without repeats (kube-controller-manager's clusterrole-aggregation
 * controller); undefined for a role without `aggregationRule`.
 */
export function aggregatedRules(store: Store, role: KubeObject): PolicyRule[] | undefined {
  const rules = aggregatedSourcedRules(store, role);
  return rules && uniqueRules(rules);
}
