/**
 * deploy/ against an API server: the machine's real kubectl builds the kustomize tree with its built-in kustomize
 * and applies it with `--dry-run=server` to the local cluster's embedded API server, which must accept every object.
 * The embedded server's built-in schemas are permissive below the top level, and it does not serve
 * prometheus-operator's kinds (deploy/monitoring/); so every object kustomize builds is also checked offline against
 * Kubernetes' and prometheus-operator's schemas (schema-validation.ts), and the kinds the server does not serve are
 * named. PriorityClass, which it lacked, it now serves (tools/local-cluster builtins.ts).
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commonInstancetypes } from "@kvt/api";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { DEPLOY_DIR } from "./index.ts";
import { coreFiles, monitoringFiles } from "./manifests.ts";
import type { KubeObject } from "./objects.ts";
import { schemaErrors, validatedKinds } from "./schema-validation.ts";

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

let server: ApiServerHandle;
let home: string;

function kubectl(args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.env.KUBECTL ?? "kubectl",
      [...args],
      {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, KUBECONFIG: server.kubeconfigPath },
        timeout: 120_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** `kind/name` as kubectl prints it in `apply` output (`<resource>.<group>/<name>`), by kind and group. */
function appliedName(o: KubeObject): string {
  const group = o.apiVersion.includes("/") ? o.apiVersion.split("/")[0] : "";
  return `${o.kind.toLowerCase()}${group ? `.${group}` : ""}/${o.metadata.name}`;
}

const objectsOf = (files: ReturnType<typeof coreFiles>): KubeObject[] =>
  files.flatMap((f) => f.manifests.map((m) => m.object));

async function kustomize(dir: string): Promise<KubeObject[]> {
  const r = await kubectl(["kustomize", dir]);
  expect(r.stderr).toBe("");
  return parseAllDocuments(r.stdout).map((d) => d.toJS() as KubeObject);
}

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "kvt-release-kubectl-"));
  server = await startApiServer({ inMemory: true });
  // A dry run does not create the Namespace, and a real API server refuses namespaced objects in a namespace that
  // does not exist: create it, as an installer's first apply would.
  const ns = await kubectl(["apply", "-f", join(DEPLOY_DIR, "namespace.yaml")]);
  expect(ns.stdout.trim()).toBe("namespace/kubevirt created");
}, 60_000);

afterAll(async () => {
  await server?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("deploy/ against the local cluster's API server", () => {
  it("`kubectl apply -k deploy/ --dry-run=server` accepts every object", async () => {
    const r = await kubectl(["apply", "-k", DEPLOY_DIR, "--dry-run=server"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    const expected = objectsOf(coreFiles());
    expect(lines).toHaveLength(expected.length);
    for (const o of expected) {
      expect(lines).toContainEqual(
        expect.stringMatching(new RegExp(`^${appliedName(o)} (created|configured|unchanged) \\(server dry run\\)$`)),
      );
    }
  });

  it("`kubectl apply -f deploy/release/kubevirt-ts.yaml --dry-run=server` accepts every object", async () => {
    const r = await kubectl(["apply", "-f", join(DEPLOY_DIR, "release/kubevirt-ts.yaml"), "--dry-run=server"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split("\n")).toHaveLength(objectsOf(coreFiles()).length);
  });

  it("the KubeVirt custom resource passes its CRD's schema once the CRDs are established", async () => {
    const crds = await kubectl(["apply", "-f", join(DEPLOY_DIR, "crds")]);
    expect(crds.stderr).toBe("");
    const wait = await kubectl(["wait", "--for=condition=Established", "crd/kubevirts.kubevirt.io", "--timeout=30s"]);
    expect(wait.stdout).toContain("condition met");
    const r = await kubectl(["apply", "-k", join(DEPLOY_DIR, "kubevirt-cr"), "--dry-run=server", "--validate=strict"]);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("kubevirt.kubevirt.io/kubevirt created (server dry run)");
    // The same check refuses a wrong type, so the acceptance above means something.
    const file = join(home, "bad-kubevirt.yaml");
    writeFileSync(
      file,
      "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata: {name: bad, namespace: kubevirt}\nspec: {imagePullPolicy: 7}\n",
    );
    const bad = await kubectl(["apply", "-f", file, "--dry-run=server", "--validate=strict"]);
    expect(bad.stderr).toContain("spec.imagePullPolicy");
    expect(bad.code).not.toBe(0);
  });

  it("the common instancetypes and preferences virt-controller deploys pass their CRDs' schemas", async () => {
    const crds = await kubectl(["apply", "-f", join(DEPLOY_DIR, "crds")]);
    expect(crds.code).toBe(0);
    const wait = await kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"]);
    expect(wait.code).toBe(0);
    const bundle = commonInstancetypes() as unknown as KubeObject[];
    const file = join(home, "common-instancetypes.json");
    writeFileSync(file, JSON.stringify({ apiVersion: "v1", kind: "List", items: bundle }));
    const r = await kubectl(["apply", "-f", file, "--dry-run=server", "--validate=strict"]);
    expect(r.stderr).toBe("");
    const lines = r.stdout.trim().split("\n");
    expect(lines).toHaveLength(bundle.length);
    for (const o of bundle) expect(lines).toContain(`${appliedName(o)} created (server dry run)`);
  });

  it("every resource an RBAC rule names is one the API server serves (no typo grants nothing)", async () => {
    const crds = await kubectl(["apply", "-f", join(DEPLOY_DIR, "crds")]);
    expect(crds.code).toBe(0);
    const wait = await kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"]);
    expect(wait.code).toBe(0);
    const r = await kubectl(["api-resources", "--no-headers", "-o", "name"]);
    const served = new Set(r.stdout.trim().split("\n"));
    const roles = objectsOf(coreFiles()).filter((o) => o.kind === "ClusterRole" || o.kind === "Role") as (KubeObject & {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    })[];
    const unknown = roles.flatMap((role) =>
      role.rules
        .filter((rule) => !rule.verbs.includes("impersonate") && !rule.apiGroups.includes("subresources.kubevirt.io"))
        .flatMap((rule) =>
          rule.apiGroups.flatMap((g) =>
            rule.resources
              .map((res) => `${res.split("/")[0]}${g ? `.${g}` : ""}`)
              .filter((name) => !served.has(name))
              .map((name) => `${role.metadata.name}: ${name}`),
          ),
        ),
    );
    expect(unknown).toEqual([]);
  });

  it("kubectl's kustomize builds the same objects as the release files", async () => {
    const byKey = (os: KubeObject[]): KubeObject[] =>
      [...os].sort((a, b) => appliedName(a).localeCompare(appliedName(b)));
    expect(byKey(await kustomize(DEPLOY_DIR))).toEqual(byKey(objectsOf(coreFiles())));
    expect(byKey(await kustomize(join(DEPLOY_DIR, "monitoring")))).toEqual(byKey(objectsOf(monitoringFiles())));
  });

  it("the kinds the server does not serve are checked against their schemas, as is every other object", async () => {
    const built = [...(await kustomize(DEPLOY_DIR)), ...(await kustomize(join(DEPLOY_DIR, "monitoring")))];
    const r = await kubectl(["api-resources", "--no-headers", "-o", "name"]);
    expect(r.code).toBe(0);
    const served = new Set(r.stdout.trim().split("\n"));
    const unserved = [
      ...new Set(
        built
          .filter((o) => {
            const group = o.apiVersion.includes("/") ? `.${o.apiVersion.split("/")[0]}` : "";
            return ![...served].some((s) => s.endsWith(group) && s.split(".")[0] === pluralOf(o.kind));
          })
          .map((o) => `${o.apiVersion}/${o.kind}`),
      ),
    ].sort();
    // What the embedded server lacks today; each of them has a schema below.
    expect(unserved).toEqual(["monitoring.coreos.com/v1/PrometheusRule", "monitoring.coreos.com/v1/ServiceMonitor"]);
    for (const kind of unserved) expect(validatedKinds()).toContain(kind);
    const bad = built
      .map((o) => ({ o: `${o.kind}/${o.metadata.name}`, errors: schemaErrors(o) }))
      .filter((x) => x.errors.length > 0);
    expect(bad).toEqual([]);
  });
});

/** The plural resource name of the kinds deploy/ uses. */
function pluralOf(kind: string): string {
  const lower = kind.toLowerCase();
  if (lower.endsWith("class")) return `${lower}es`;
  if (lower.endsWith("policy")) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}
