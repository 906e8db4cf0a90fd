/**
 * Proof that no rule of a KubeVirt component's role is unused, and that no component read a Secret it does not
 * own, from the authorization audit of a whole e2e run (apiserver/auth/authorization-audit.ts):
 *
 *   deploy/'s RBAC objects -> each component's ServiceAccount -> the rules its bindings grant, where written
 *   audit lines of that ServiceAccount, made by the component's own code (not kubectl with its kubeconfig)
 *     -> a rule is needed when some allowed request had it as the ONLY allowing rule: remove it and RBAC denies
 *        that request (RBAC is a union of rules), which breaks the flow that made it
 *     -> the flow: the e2e file running when the request was first made (vitest's per-file times), or the
 *        cluster's start-up before the first file
 *   secrets get/list/watch by a component (or impersonated by one): allowed only by name, on its own Secrets
 *
 * The Kubernetes bootstrap roles (system:basic-user, system:discovery, the kubelets', the scheduler's) are
 * Kubernetes' own and not checked; they count as other allowing rules, so a request they also allow proves nothing.
 */
import { CERTIFICATES, KUBEVIRT_CR } from "@kvt/api";
import type { KubeObject as WireObject } from "@kvt/kube";
import type { AuthorizationAuditEntry } from "../apiserver/auth/authorization-audit.ts";
import { type PolicyRule, type RuleRef, subjectMatches } from "../apiserver/auth/rbac.ts";
import { fromLabelSelectorObject, matchLabels } from "../apiserver/selectors/labels.ts";

/** A component and the ServiceAccount it runs as. */
export interface ComponentAccount {
  /** `virt-api`, `virt-controller`, `virt-handler` (the ServiceAccount's app.kubernetes.io/component label). */
  readonly component: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

/** One rule a component's bindings grant, where it is written. */
export interface ComponentRule {
  readonly component: string;
  readonly ref: RuleRef;
  readonly rule: PolicyRule;
}

/** An e2e file and when it ran (ms since the epoch). */
export interface Flow {
  readonly name: string;
  readonly start: number;
  readonly end: number;
}

/** A request of the audit, and the flow it was first made in. */
export interface FlowRequest {
  readonly entry: AuthorizationAuditEntry;
  readonly flow: string;
}

/** What a component may read of Secrets: by name, in a namespace (any when absent). */
export interface OwnSecrets {
  readonly namespace?: string;
  /** Exact names. */
  readonly names: readonly string[];
}

/**
 * A rule the local cluster cannot need, and why: it serves a path only a real cluster takes. Named by content
 * (component, role, resources, verbs), not index, so an edit of the role cannot move it onto another rule.
 */
export interface LocalExemption {
  readonly component: string;
  readonly role: string;
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly why: string;
}

/**
 * The KubeVirt rules no local-cluster flow can need. virt-api finds a node's virt-handler by listing the
 * virt-handler pods (handler/handler-client.ts PodHandlerLocator); the local cluster runs the handlers as processes
 * on 127.0.0.1, one port each, not as pods, and gives virt-api `--handler-url` instead. The real-Kubernetes lane
 * (deploy/ on kube-apiserver) takes that path. Likewise virt-controller writes the KubeVirt CR's status only from
 * the component workloads, which the local cluster does not have.
 */
export const LOCAL_CLUSTER_EXEMPTIONS: readonly LocalExemption[] = [
  {
    component: "virt-api",
    role: "Role kubevirt/kubevirt-apiserver",
    resources: ["pods"],
    verbs: ["list"],
    why:
      "PodHandlerLocator lists the virt-handler pods on a real cluster; the local cluster runs the handlers as " +
      "processes and gives virt-api --handler-url",
  },
  {
    component: "virt-controller",
    role: "Role kubevirt/kubevirt-controller",
    resources: ["kubevirts/status"],
    verbs: ["update"],
    why:
      "KubeVirtStatusController writes the KubeVirt CR's status from the virt-api and virt-controller Deployments " +
      "and the virt-handler DaemonSet on a real cluster; the local cluster runs the components as processes, so " +
      "there is no workload to report from and the status is left alone",
  },
];

function roleName(r: ComponentRule): string {
  return r.ref.kind === "Role" ? `Role ${r.ref.namespace}/${r.ref.name}` : `ClusterRole ${r.ref.name}`;
}

function sameList(a: readonly string[] | undefined, b: readonly string[]): boolean {
  return (a ?? []).length === b.length && b.every((x) => a?.includes(x));
}

/** The exemption for `r` among `exemptions`, if any. */
function exemptionOf(r: ComponentRule, exemptions: readonly LocalExemption[]): LocalExemption | undefined {
  return exemptions.find(
    (x) =>
      x.component === r.component &&
      x.role === roleName(r) &&
      sameList(r.rule.resources, x.resources) &&
      sameList(r.rule.verbs, x.verbs),
  );
}

/** The report of {@link rbacUsage}. */
export interface RbacUsageReport {
  /** Every rule, with the first request that only it allowed (absent: unused). */
  readonly rules: readonly (ComponentRule & {
    readonly neededBy?: FlowRequest;
    /** `verb resource` pairs of the rule no request it allowed asked for (finer than the rule: a hint). */
    readonly unusedGrants: readonly string[];
    /** Why the local cluster cannot need this rule (LOCAL_CLUSTER_EXEMPTIONS). */
    readonly exempt?: string;
  })[];
  /** Exemptions that name no rule of the components (stale: remove them). */
  readonly staleExemptions: readonly LocalExemption[];
  /** Allowed Secret reads by a component outside its own Secrets (or by list/watch). */
  readonly foreignSecretReads: readonly (FlowRequest & { readonly component: string })[];
  /** Requests of a component's own code that RBAC denied (a flow missing a rule, or code asking for too much). */
  readonly denied: readonly (FlowRequest & { readonly component: string })[];
}

/**
 * The Secrets each KubeVirt component reads, by name: virt-controller its certificate Secrets in the install
 * namespace (certificates/cert-manager.ts); virt-api and virt-handler none (their certificates come as volumes, and
 * a migration's secret goes handler to handler over mutual TLS: virt-handler migration/migration-secrets.ts).
 */
export const KUBEVIRT_OWN_SECRETS: Readonly<Record<string, readonly OwnSecrets[]>> = {
  "virt-controller": [
    {
      namespace: KUBEVIRT_CR.namespace,
      names: [CERTIFICATES.caSecret, CERTIFICATES.virtApi, CERTIFICATES.handlerServer, CERTIFICATES.handlerClient],
    },
  ],
  "virt-handler": [],
  "virt-api": [],
};

/** An object of an RBAC set: a ServiceAccount, Role, ClusterRole or binding (other kinds are ignored). */
export type KubeObject = WireObject & {
  readonly rules?: unknown;
  readonly aggregationRule?: unknown;
  readonly subjects?: unknown;
  readonly roleRef?: unknown;
};

const RBAC_V1 = "rbac.authorization.k8s.io/v1";
const COMPONENT_LABEL = "app.kubernetes.io/component";

function refKey(r: RuleRef): string {
  return `${r.kind}/${r.namespace ?? ""}/${r.name}/${r.index}`;
}

function rulesOf(obj: KubeObject): PolicyRule[] {
  return Array.isArray(obj.rules) ? (obj.rules as PolicyRule[]) : [];
}

/** The ServiceAccounts among `objects` that name their component (deploy/'s, one per component). */
export function componentAccounts(objects: readonly KubeObject[]): ComponentAccount[] {
  return objects
    .filter((o) => o.apiVersion === "v1" && o.kind === "ServiceAccount" && o.metadata?.labels?.[COMPONENT_LABEL])
    .map((o) => ({
      component: o.metadata?.labels?.[COMPONENT_LABEL] ?? "",
      namespace: o.metadata?.namespace ?? "",
      serviceAccount: o.metadata?.name ?? "",
    }));
}

/** The user a ServiceAccount's token authenticates as (name and groups). */
export function serviceAccountUser(a: ComponentAccount): { username: string; groups: string[] } {
  return {
    username: `system:serviceaccount:${a.namespace}:${a.serviceAccount}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${a.namespace}`, "system:authenticated"],
  };
}

/** Where `role`'s rules are written: its own, or for an aggregated ClusterRole its sources' among `objects`. */
function sourcedRules(objects: readonly KubeObject[], role: KubeObject): { ref: RuleRef; rule: PolicyRule }[] {
  const kind = role.kind === "Role" ? "Role" : "ClusterRole";
  const own = (o: KubeObject) =>
    rulesOf(o).map((rule, index) => ({
      rule,
      ref: {
        kind: o.kind === "Role" ? ("Role" as const) : ("ClusterRole" as const),
        ...(o.kind === "Role" ? { namespace: o.metadata?.namespace } : {}),
        name: o.metadata?.name ?? "",
        index,
      },
    }));
  const selectors = (role.aggregationRule as { clusterRoleSelectors?: unknown[] } | undefined)?.clusterRoleSelectors;
  if (kind === "Role" || !Array.isArray(selectors)) return own(role);
  const parsed = selectors.map((s) => fromLabelSelectorObject(s as Parameters<typeof fromLabelSelectorObject>[0]));
  return objects
    .filter((o) => o.apiVersion === RBAC_V1 && o.kind === "ClusterRole" && o.metadata?.name !== role.metadata?.name)
    .filter((o) => parsed.some((sel) => matchLabels(sel, o.metadata?.labels)))
    .sort((a, b) => String(a.metadata?.name).localeCompare(String(b.metadata?.name)))
    .flatMap(own);
}

/**
 * Every rule the bindings among `objects` that name `account` itself grant it, each once, where written. Bindings to
 * a group (`system:authenticated` for the users' roles) grant every user, not the component: not its rules.
 */
export function componentRules(objects: readonly KubeObject[], account: ComponentAccount): ComponentRule[] {
  const user = serviceAccountUser(account);
  const out = new Map<string, ComponentRule>();
  for (const b of objects) {
    if (b.apiVersion !== RBAC_V1 || (b.kind !== "ClusterRoleBinding" && b.kind !== "RoleBinding")) continue;
    const ns = b.kind === "RoleBinding" ? (b.metadata?.namespace ?? "") : "";
    const subjects = (Array.isArray(b.subjects) ? b.subjects : []) as Parameters<typeof subjectMatches>[0][];
    if (!subjects.some((s) => s.kind !== "Group" && subjectMatches(s, user, ns))) continue;
    const roleRef = (b.roleRef ?? {}) as { kind?: string; name?: string };
    const role = objects.find(
      (o) =>
        o.apiVersion === RBAC_V1 &&
        o.kind === roleRef.kind &&
        o.metadata?.name === roleRef.name &&
        (roleRef.kind === "Role" ? o.metadata?.namespace === ns : true),
    );
    if (!role) throw new Error(`${b.kind} ${b.metadata?.name}: its ${roleRef.kind} ${roleRef.name} is not in the set`);
    for (const r of sourcedRules(objects, role))
      out.set(refKey(r.ref), { component: account.component, ref: r.ref, rule: r.rule });
  }
  return [...out.values()];
}

/** The flow `time` belongs to: the e2e file running then, else the last one before it, else the cluster's start. */
export function flowAt(flows: readonly Flow[], time: number): string {
  const sorted = [...flows].sort((a, b) => a.start - b.start);
  const during = sorted.find((f) => f.start <= time && time <= f.end);
  if (during) return during.name;
  const before = sorted.filter((f) => f.end < time).at(-1);
  return before ? `${before.name} (after it ended)` : "cluster start-up (before the first e2e file)";
}

/** A request a component's own code made: its identity, directly or as the impersonator, not through kubectl. */
function byComponentCode(e: AuthorizationAuditEntry, username: string): boolean {
  return (e.user === username || e.impersonatedBy === username) && !(e.userAgent ?? "").startsWith("kubectl/");
}

function ownsSecret(own: readonly OwnSecrets[], e: AuthorizationAuditEntry): boolean {
  if (e.verb !== "get" || !e.name) return false;
  const name = e.name;
  return own.some((o) => (o.namespace === undefined || o.namespace === e.namespace) && o.names.includes(name));
}

const SECRET_READS = new Set(["get", "list", "watch"]);

/** By rule (refKey), the first allowed request of `username` that only that rule allowed. */
function firstSoleRequests(
  entries: readonly AuthorizationAuditEntry[],
  username: string,
): Map<string, AuthorizationAuditEntry> {
  const sole = new Map<string, AuthorizationAuditEntry>();
  for (const e of entries) {
    const only = e.user === username && e.allowed && e.rules.length === 1 ? e.rules[0] : undefined;
    if (only && !sole.has(refKey(only))) sole.set(refKey(only), e);
  }
  return sole;
}

/**
 * The usage of every rule the bindings among `objects` grant each component in `accounts`, from the audit
 * `entries` of a run whose e2e files ran as `flows`; `ownSecrets` says which Secrets each component may read.
 */
export function rbacUsage(
  objects: readonly KubeObject[],
  accounts: readonly ComponentAccount[],
  entries: readonly AuthorizationAuditEntry[],
  flows: readonly Flow[],
  ownSecrets: Readonly<Record<string, readonly OwnSecrets[]>>,
  exemptions: readonly LocalExemption[] = [],
): RbacUsageReport {
  const ordered = [...entries].sort((a, b) => a.time.localeCompare(b.time));
  const at = (entry: AuthorizationAuditEntry): FlowRequest => ({ entry, flow: flowAt(flows, Date.parse(entry.time)) });
  const rules: (ComponentRule & { neededBy?: FlowRequest; unusedGrants: string[]; exempt?: string })[] = [];
  const foreignSecretReads: (FlowRequest & { component: string })[] = [];
  const denied: (FlowRequest & { component: string })[] = [];
  for (const account of accounts) {
    const { username } = serviceAccountUser(account);
    const mine = ordered.filter((e) => byComponentCode(e, username));
    const sole = firstSoleRequests(mine, username);
    for (const r of componentRules(objects, account)) {
      const e = sole.get(refKey(r.ref));
      const unusedGrants = unusedGrantsOf(r, mine);
      const exempt = exemptionOf(r, exemptions)?.why;
      rules.push({ ...r, ...(e ? { neededBy: at(e) } : {}), unusedGrants, ...(exempt ? { exempt } : {}) });
    }
    const own = ownSecrets[account.component] ?? [];
    for (const e of mine) {
      if (!e.allowed) {
        if (e.user === username) denied.push({ ...at(e), component: account.component });
      } else if (e.apiGroup === "" && e.resource === "secrets" && SECRET_READS.has(e.verb) && !ownsSecret(own, e))
        foreignSecretReads.push({ ...at(e), component: account.component });
    }
  }
  const staleExemptions = exemptions.filter((x) => !rules.some((r) => exemptionOf(r, [x])));
  return { rules, foreignSecretReads, denied, staleExemptions };
}

/** The `verb resource` pairs of `r` (wildcards left out) that no entry allowed by it asked for. */
function unusedGrantsOf(r: ComponentRule, entries: readonly AuthorizationAuditEntry[]): string[] {
  const key = refKey(r.ref);
  const used = new Set<string>();
  for (const e of entries) {
    if (!e.allowed || !e.rules.some((x) => refKey(x) === key)) continue;
    used.add(`${e.verb} ${e.path ?? (e.subresource ? `${e.resource}/${e.subresource}` : e.resource)}`);
  }
  const targets = r.rule.nonResourceURLs?.length ? r.rule.nonResourceURLs : (r.rule.resources ?? []);
  const out: string[] = [];
  for (const verb of r.rule.verbs)
    for (const t of targets) {
      if (verb === "*" || t.includes("*")) continue;
      if (!used.has(`${verb} ${t}`)) out.push(`${verb} ${t}`);
    }
  return out;
}

/** A rule as one line: `ClusterRole kubevirt-handler rule 2: get,update secrets [kubevirt-ca]`. */
export function describeRule(r: ComponentRule): string {
  const where = roleName(r);
  const what = r.rule.nonResourceURLs?.length
    ? `nonResourceURLs ${r.rule.nonResourceURLs.join(",")}`
    : `${(r.rule.apiGroups ?? []).map((g) => g || '""').join(",")} ${(r.rule.resources ?? []).join(",")}`;
  const names = r.rule.resourceNames?.length ? ` resourceNames ${r.rule.resourceNames.join(",")}` : "";
  return `${where} rule ${r.ref.index}: verbs ${r.rule.verbs.join(",")} on ${what}${names}`;
}

/** A request as one line: `get secrets kubevirt/kubevirt-ca by virt-controller/0.1.0`. */
export function describeRequest(e: AuthorizationAuditEntry): string {
  const what = e.path
    ? `${e.verb} ${e.path}`
    : `${e.verb} ${e.resource}${e.subresource ? `/${e.subresource}` : ""}${e.apiGroup ? `.${e.apiGroup}` : ""} ${
        e.namespace ? `${e.namespace}/` : ""
      }${e.name ?? "*"}`;
  const via = e.source === "admission" ? " (an admission check)" : "";
  return `${what}${via} by ${e.userAgent ?? "?"}`;
}

/** The report as text; `ok` when every rule is needed and no foreign Secret was read. */
export function formatRbacUsage(
  report: RbacUsageReport,
  ruleFile: (r: ComponentRule) => string,
): {
  ok: boolean;
  text: string;
} {
  const lines: string[] = [];
  const unused = report.rules.filter((r) => !r.neededBy && !r.exempt);
  // An exemption a flow proves after all is stale too: the rule then needs no excuse.
  const stale = [...report.staleExemptions.map((x) => `${x.component} ${x.role}`)];
  for (const r of report.rules) {
    if (r.exempt && r.neededBy) stale.push(`${r.component} ${roleName(r)}`);
    if (r.exempt && !r.neededBy) lines.push(`exempt  ${r.component}: ${describeRule(r)}: ${r.exempt}`);
    if (!r.neededBy) continue;
    lines.push(`needed  ${r.component}: ${describeRule(r)}`);
    lines.push(`          only rule allowing ${describeRequest(r.neededBy.entry)}; flow: ${r.neededBy.flow}`);
    if (r.unusedGrants.length > 0) lines.push(`          never asked for: ${r.unusedGrants.join("; ")}`);
  }
  for (const r of unused) {
    lines.push(`UNUSED  ${r.component}: ${describeRule(r)} (${ruleFile(r)})`);
    lines.push(
      "          no request of this run needed it alone. Remove it (tools/release/src/rbac.ts, then " +
        "`npm run gen -w @kvt/release`), or add the e2e flow that needs it.",
    );
  }
  for (const s of report.foreignSecretReads)
    lines.push(`SECRET  ${s.component} read a Secret it does not own: ${describeRequest(s.entry)}; flow: ${s.flow}`);
  for (const d of report.denied)
    lines.push(`denied  ${d.component}: ${describeRequest(d.entry)}; flow: ${d.flow} (${d.entry.reason ?? "no rule"})`);
  for (const x of stale)
    lines.push(
      `STALE   exemption of ${x}: a flow needs the rule, or no such rule; remove it from LOCAL_CLUSTER_EXEMPTIONS`,
    );
  const ok = unused.length === 0 && report.foreignSecretReads.length === 0 && stale.length === 0;
  lines.push(
    `${report.rules.filter((r) => r.neededBy).length}/${report.rules.length} component rules needed by a flow, ` +
      `${report.rules.filter((r) => r.exempt && !r.neededBy).length} exempt, ${unused.length} unused; ${report.foreignSecretReads.length} foreign Secret reads; ` +
      `${report.denied.length} denied requests of component code`,
  );
  return { ok, text: `${lines.join("\n")}\n` };
}
