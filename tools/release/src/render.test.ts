import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { customResourceDefinitions } from "@kvt/api";
import { ensurePromtool } from "@kvt/monitoring";
import { SUBRESOURCE_NAMES } from "@kvt/virt-api/lib";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { DEPLOY_DIR } from "./index.ts";
import { allObjects, coreFiles, monitoringFiles, VERSION } from "./manifests.ts";
import { KUBEVIRT_ALERTS, KUBEVIRT_RUNBOOKS } from "./monitoring.ts";
import { COMPONENTS, type KubeObject } from "./objects.ts";
import { RULES } from "./rbac.ts";
import { GENERATE_COMMAND, renderDeploy } from "./render.ts";
import { schemaErrors } from "./schema-validation.ts";
import { PRIORITY_CLASS } from "./workloads.ts";

type Obj = KubeObject & { spec?: Record<string, unknown> };
interface Container {
  name: string;
  image: string;
  ports?: { name: string; containerPort: number }[];
  readinessProbe?: { httpGet: { port: number; path: string } };
  livenessProbe?: { httpGet: { port: number; path: string } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  serviceAccountName: string;
  priorityClassName: string;
  containers: Container[];
  volumes?: { name: string; hostPath?: { path: string } }[];
  hostNetwork?: boolean;
  hostPID?: boolean;
}

const find = (kind: string, name: string): Obj => {
  const o = allObjects().find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name}`);
  return o;
};
const podSpecOf = (o: Obj): PodSpec => (o.spec as { template: { spec: PodSpec } }).template.spec;

function filesOnDisk(): string[] {
  return readdirSync(DEPLOY_DIR, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(DEPLOY_DIR, join(e.parentPath, e.name)))
    .sort();
}

describe("deploy/", () => {
  it(`the committed files are what the generator makes (run \`${GENERATE_COMMAND}\`)`, () => {
    const expected = renderDeploy();
    expect(filesOnDisk()).toEqual([...expected.keys()].sort());
    for (const [path, content] of expected) expect(readFileSync(join(DEPLOY_DIR, path), "utf8"), path).toBe(content);
  });

  it("the release file holds every core object, parsing back to the objects built in code", () => {
    const docs = parseAllDocuments(readFileSync(join(DEPLOY_DIR, "release/kubevirt-ts.yaml"), "utf8")).map(
      (d) => d.toJS() as unknown,
    );
    expect(docs).toEqual(coreFiles().flatMap((f) => f.manifests.map((m) => m.object)));
    const mon = parseAllDocuments(readFileSync(join(DEPLOY_DIR, "release/kubevirt-ts-monitoring.yaml"), "utf8"));
    expect(mon.map((d) => d.toJS() as unknown)).toEqual(
      monitoringFiles().flatMap((f) => f.manifests.map((m) => m.object)),
    );
  });

  it("ships libs/api's CRDs unchanged", () => {
    const crds = allObjects().filter((o) => o.kind === "CustomResourceDefinition");
    expect(crds).toEqual(customResourceDefinitions());
  });

  it("every object is valid by Kubernetes' and prometheus-operator's schemas (types, required, unknown fields)", () => {
    // KubeVirt's kinds (kubevirt.io, instancetype.kubevirt.io) have no schema here: the dry-run test checks them
    // against their CRD in the API server.
    const bad = allObjects()
      .filter((o) => !/^(instancetype\.)?kubevirt\.io\//.test(o.apiVersion))
      .map((o) => ({ o: `${o.kind}/${o.metadata.name}`, errors: schemaErrors(o) }))
      .filter((x) => x.errors.length > 0);
    expect(bad).toEqual([]);
  });

  it("the schema check catches an unknown field, a wrong type and a missing required field", () => {
    const d = structuredClone(find("Deployment", "virt-api"));
    const c = podSpecOf(d).containers[0] as unknown as Record<string, unknown>;
    c.livenessProbes = c.livenessProbe;
    expect(schemaErrors(d)).toEqual(['unknown field "spec.template.spec.containers[0].livenessProbes"']);
    const pc = { ...find("PriorityClass", PRIORITY_CLASS), value: "1" };
    expect(schemaErrors(pc).join()).toContain("value must be integer");
    const sm = structuredClone(find("ServiceMonitor", "kubevirt"));
    delete sm.spec?.selector;
    expect(schemaErrors(sm).join()).toContain("data/spec must have required property selector");
  });

  it("images are kubevirt-ts/<component>:<package version>, overridable in kustomization.yaml", () => {
    for (const c of COMPONENTS) {
      const w = allObjects().find((o) => o.metadata.name === c && (o.kind === "Deployment" || o.kind === "DaemonSet"));
      expect(podSpecOf(w as Obj).containers[0]?.image).toBe(`kubevirt-ts/${c}:${VERSION}`);
    }
    expect(renderDeploy().get("kustomization.yaml")).toContain(
      `  - name: kubevirt-ts/virt-api\n    newTag: ${VERSION}`,
    );
  });
});

describe("RBAC", () => {
  it.each(COMPONENTS)("%s runs under its own ServiceAccount, bound to its own roles", (c) => {
    const sa = RULES[c].serviceAccount;
    const w = allObjects().find((o) => o.metadata.name === c && (o.kind === "Deployment" || o.kind === "DaemonSet"));
    expect(podSpecOf(w as Obj).serviceAccountName).toBe(sa);
    expect(find("ServiceAccount", sa).metadata.namespace).toBe("kubevirt");
    const crb = find("ClusterRoleBinding", sa) as Obj & { subjects: unknown[]; roleRef: { name: string } };
    expect(crb.subjects).toEqual([{ kind: "ServiceAccount", name: sa, namespace: "kubevirt" }]);
    expect(crb.roleRef.name).toBe(sa);
  });

  it("no rule uses a wildcard verb or resource outside impersonation, and every rule says which code needs it", () => {
    for (const c of COMPONENTS) {
      for (const r of [...RULES[c].cluster, ...RULES[c].namespaced]) {
        expect(r.verbs).not.toContain("*");
        if (!r.verbs.includes("impersonate")) expect(r.resources).not.toContain("*");
        expect(r.why).toMatch(/\.ts/);
      }
    }
  });

  it("Secrets: virt-controller's certificate Secrets by name, and no other component any; nobody lists them", () => {
    const secretRules = COMPONENTS.flatMap((c) =>
      [
        ...RULES[c].cluster.map((r) => ({ ...r, scope: "cluster" })),
        ...RULES[c].namespaced.map((r) => ({ ...r, scope: "namespace" })),
      ]
        .filter((r) => r.resources.includes("secrets"))
        .map((r) => ({ c, scope: r.scope, verbs: r.verbs, names: r.resourceNames })),
    );
    expect(secretRules).toEqual([
      { c: "virt-controller", scope: "namespace", verbs: ["create"], names: undefined },
      {
        c: "virt-controller",
        scope: "namespace",
        verbs: ["get", "update"],
        names: [
          "kubevirt-ca",
          "kubevirt-virt-api-certs",
          "kubevirt-virt-handler-server-certs",
          "kubevirt-virt-handler-certs",
        ],
      },
    ]);
  });

  it("virt-controller changes the webhook configurations and APIServices it injects the CA bundle into, only", () => {
    const rules = RULES["virt-controller"].cluster.filter((r) => /registration/.test(r.apiGroups[0] ?? ""));
    expect(rules.map((r) => [r.resources, r.resourceNames, r.verbs])).toEqual([
      [["mutatingwebhookconfigurations"], ["virt-api-mutator"], ["get", "update"]],
      [["validatingwebhookconfigurations"], ["virt-api-validator"], ["get", "update"]],
      [["apiservices"], ["v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"], ["get", "update"]],
    ]);
    const wired = allObjects().filter((o) => /WebhookConfiguration|APIService/.test(o.kind));
    expect(wired.map((o) => o.metadata.name).sort()).toEqual(rules.flatMap((r) => r.resourceNames ?? []).sort());
  });

  it("the user roles grant exactly the subresources virt-api serves (discovery.ts)", () => {
    const edit = find("ClusterRole", "kubevirt.io:edit") as Obj & {
      rules: { apiGroups: string[]; resources: string[] }[];
    };
    const granted = edit.rules
      .filter((r) => r.apiGroups.includes("subresources.kubevirt.io"))
      .flatMap((r) => r.resources);
    expect(granted.sort()).toEqual([...SUBRESOURCE_NAMES].sort());
  });

  it("writes each rule's reason as a comment above it in deploy/", () => {
    const text = renderDeploy().get("virt-handler/rbac.yaml") ?? "";
    expect(text).toContain("  # node/heartbeat.ts via handler-app.ts: patchNode = nodes.mergePatch");
  });
});

describe("workloads", () => {
  it.each(["virt-api", "virt-controller"])("%s: two replicas, a PDB, probes on its declared ports", (name) => {
    const d = find("Deployment", name);
    expect(d.spec?.replicas).toBe(2);
    const pdb = find("PodDisruptionBudget", `${name}-pdb`);
    expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: { "kubevirt.io": name } } });
    const pod = podSpecOf(d);
    expect(pod.priorityClassName).toBe(PRIORITY_CLASS);
    const c = pod.containers[0];
    if (!c) throw new Error("no container");
    const ports = (c.ports ?? []).map((p) => p.containerPort);
    expect(ports).toContain(c.readinessProbe?.httpGet.port);
    expect(ports).toContain(c.livenessProbe?.httpGet.port);
    expect(c.resources?.requests).toBeDefined();
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
  });

  it.each(["virt-api", "virt-controller"])("%s's pod meets the Pod Security restricted level", (name) => {
    const pod = podSpecOf(find("Deployment", name)) as PodSpec & Record<string, unknown>;
    const podSc = pod.securityContext as Record<string, unknown>;
    const allowedVolumes = ["configMap", "secret", "emptyDir", "projected", "downwardAPI", "persistentVolumeClaim"];
    for (const v of pod.volumes ?? [])
      expect(Object.keys(v).filter((k) => k !== "name")).toSatisfy((ks: string[]) =>
        ks.every((k) => allowedVolumes.includes(k)),
      );
    expect([pod.hostNetwork, pod.hostPID, pod.hostIPC]).toEqual([undefined, undefined, undefined]);
    expect(podSc.runAsUser).not.toBe(0);
    for (const c of pod.containers) {
      const sc = { ...podSc, ...c.securityContext } as Record<string, unknown>;
      expect(sc.privileged).toBeUndefined();
      expect(sc.allowPrivilegeEscalation).toBe(false);
      expect(sc.runAsNonRoot).toBe(true);
      expect(sc.seccompProfile).toEqual({ type: "RuntimeDefault" });
      expect(c.securityContext?.capabilities).toEqual({ drop: ["ALL"] });
      expect((c.ports ?? []).every((p) => !("hostPort" in p))).toBe(true);
    }
  });

  it("virt-controller elects its leader on a Lease in its own namespace, which its Role may update", () => {
    const c = podSpecOf(find("Deployment", "virt-controller")).containers[0] as Container & { args: string[] };
    expect(c.args).toContain("--namespace=$(POD_NAMESPACE)");
    const role = find("Role", "kubevirt-controller") as Obj & { rules: { resourceNames?: string[] }[] };
    expect(role.rules.some((r) => r.resourceNames?.includes("virt-controller"))).toBe(true);
  });

  it("virt-handler: privileged with host PIDs and two host paths, no host network, each justified in a comment", () => {
    const pod = podSpecOf(find("DaemonSet", "virt-handler"));
    expect(pod.hostNetwork).toBeUndefined();
    expect(pod.hostPID).toBe(true); // it enters launcher pods' network namespaces (--wire-pod-network)
    expect((pod.containers[0] as Container & { args: string[] }).args).toContain("--wire-pod-network");
    // Beyond KubeVirt: flows pinned to a migrated VMI's old pod address are deleted in the node's namespace.
    expect((pod.containers[0] as Container & { args: string[] }).args).toContain("--clear-migrated-flows");
    expect(pod.volumes?.flatMap((v) => (v.hostPath ? [v.hostPath.path] : []))).toEqual([
      "/var/lib/kubelet/pods",
      "/var/lib/kubelet/device-plugins",
    ]);
    expect(pod.containers[0]?.volumeMounts).toContainEqual({
      name: "kubelet-pods-shortened",
      mountPath: "/pods",
      readOnly: true,
    });
    expect((pod.containers[0] as Container & { args: string[] }).args).toContain("--kubelet-pods-dir=/pods");
    expect(pod.containers[0]?.securityContext?.privileged).toBe(true);
    expect((pod.containers[0] as Container & { args: string[] }).args).toContain(
      "--device-plugins-dir=/var/lib/kubelet/device-plugins",
    );
    const text = renderDeploy().get("virt-handler/workload.yaml") ?? "";
    expect(text).toContain("# privileged: the device plugins (devices.kubevirt.io/kvm, tun, vhost-net)");
    expect(text).toContain("# hostPath /var/lib/kubelet/pods, read-only at /pods: each launcher's socket");
    expect(text).toContain("# hostPath /var/lib/kubelet/device-plugins: the kubelet's kubelet.sock");
    expect(text).toContain("# hostPID: --wire-pod-network plumbs each launcher pod's network");
  });

  it("webhooks and APIServices point at Service virt-api:443, whose target port virt-api declares", () => {
    const svc = find("Service", "virt-api") as Obj & { spec: { ports: { port: number; targetPort: string }[] } };
    expect(svc.spec.ports).toEqual([{ name: "https", port: 443, targetPort: "virt-api", protocol: "TCP" }]);
    const names = (podSpecOf(find("Deployment", "virt-api")).containers[0]?.ports ?? []).map((p) => p.name);
    expect(names).toContain("virt-api");
    const text = renderDeploy().get("virt-api/webhooks.yaml") ?? "";
    expect(
      text.match(/# caBundle is left out on purpose: virt-controller's certificate manager sets it/g),
    ).toHaveLength(4);
    expect(text).not.toContain("caBundle:");
  });
});

describe("monitoring", () => {
  it("runbook URLs are KubeVirt's published ones, never repository paths", () => {
    const rule = find("PrometheusRule", "prometheus-kubevirt-rules") as Obj & {
      spec: { groups: { rules: { alert?: string; annotations?: Record<string, string> }[] }[] };
    };
    const alerts = rule.spec.groups.flatMap((g) => g.rules).filter((r) => r.alert);
    expect(alerts.length).toBeGreaterThan(0);
    for (const a of alerts) {
      const url = a.annotations?.runbook_url;
      if (KUBEVIRT_ALERTS.has(a.alert ?? "")) expect(url).toBe(`${KUBEVIRT_RUNBOOKS}${a.alert}`);
      else expect(url).toBeUndefined();
    }
  });

  it("the PrometheusRule's groups pass `promtool check rules`", async () => {
    const promtool = await ensurePromtool();
    const rule = find("PrometheusRule", "prometheus-kubevirt-rules") as Obj & { spec: unknown };
    const dir = mkdtempSync(join(tmpdir(), "kvt-release-"));
    try {
      const file = join(dir, "rules.json");
      writeFileSync(file, JSON.stringify(rule.spec));
      expect(execFileSync(promtool, ["check", "rules", file], { encoding: "utf8" })).toContain("SUCCESS");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("each Grafana dashboard is a ConfigMap labelled for the sidecar, holding valid dashboard JSON", () => {
    const maps = allObjects().filter((o) => o.metadata.labels?.grafana_dashboard === "1");
    expect(maps.map((m) => m.metadata.name).sort()).toEqual([
      "kubevirt-dashboard-control-plane",
      "kubevirt-dashboard-live-migrations",
      "kubevirt-dashboard-virtual-machines",
    ]);
    for (const m of maps) {
      for (const json of Object.values(m.data as Record<string, string>)) {
        expect((JSON.parse(json) as { uid: string }).uid).toMatch(/^kubevirt-ts-/);
      }
    }
  });

  it("the ServiceMonitor's job label gives the job names the rules select", () => {
    const sm = find("ServiceMonitor", "kubevirt");
    expect(sm.spec?.jobLabel).toBe("kubevirt.io");
    const services = allObjects().filter((o) => o.kind === "Service" && o.metadata.labels?.["prometheus.kubevirt.io"]);
    expect(services.map((s) => s.metadata.labels?.["kubevirt.io"]).sort()).toEqual([...COMPONENTS].sort());
  });
});
