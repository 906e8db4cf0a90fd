/**
 * Server-side apply with the machine's real kubectl against the embedded API server: managedFields, pruning of
 * fields a manager stops applying, field-manager conflicts (409 with kube's message) and --force-conflicts, on a
 * built-in kind, a Deployment migrated from client-side apply, and KubeVirt's VirtualMachine.
 */
import { readFileSync } from "node:fs";
import { renderCrdFiles } from "@kvt/api/crd-files";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ApiServerHandle, startApiServer } from "./apiserver.ts";
import { WIDGET_CRD } from "./testdata/crd-fixture.ts";
import { type Kubectl, kubectl } from "./testdata/kubectl.ts";

let server: ApiServerHandle;
let k: Kubectl;

beforeAll(async () => {
  server = await startApiServer({ inMemory: true });
  k = kubectl(server.kubeconfigPath);
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await server?.stop();
});

interface Entry {
  manager: string;
  operation: string;
  apiVersion: string;
  time?: string;
  fieldsType: string;
  fieldsV1: Record<string, unknown>;
  subresource?: string;
}

interface Obj {
  metadata: { managedFields?: Entry[] };
  data?: Record<string, string>;
  spec?: Record<string, unknown>;
}

async function getObj(what: string, showManaged = true): Promise<Obj> {
  const args = ["get", what, "-o", "yaml"];
  if (showManaged) args.push("--show-managed-fields");
  const r = await k.run(args);
  expect(r.stderr).toBe("");
  return parse(r.stdout) as Obj;
}

function managers(o: Obj): Record<string, Entry> {
  return Object.fromEntries((o.metadata.managedFields ?? []).map((e) => [`${e.manager}/${e.operation}`, e]));
}

const configMap = (data: string): string => `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
${data}`;

describe("kubectl apply --server-side", () => {
  it("creates with an Apply entry owning exactly the applied fields, and prunes a field dropped on re-apply", async () => {
    const created = await k.run([
      "apply",
      "--server-side",
      "-f",
      k.file("cm1.yaml", configMap("  a: '1'\n  b: '2'\n")),
    ]);
    expect(created.stdout.trim()).toBe("configmap/settings serverside-applied");
    const o = await getObj("configmap/settings");
    expect(o.metadata.managedFields).toEqual([
      {
        manager: "kubectl",
        operation: "Apply",
        apiVersion: "v1",
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        fieldsType: "FieldsV1",
        fieldsV1: { "f:data": { "f:a": {}, "f:b": {} } },
      },
    ]);
    // Without --show-managed-fields kubectl hides them, as against a real cluster.
    expect((await getObj("configmap/settings", false)).metadata.managedFields).toBeUndefined();

    const again = await k.run(["apply", "--server-side", "-f", k.file("cm2.yaml", configMap("  a: '1'\n"))]);
    expect(again.code).toBe(0);
    const after = await getObj("configmap/settings");
    expect(after.data).toEqual({ a: "1" });
    expect(managers(after)["kubectl/Apply"]?.fieldsV1).toEqual({ "f:data": { "f:a": {} } });
  });

  it("refuses a second manager's different value with kube's 409, shares an equal one, and moves it with --force-conflicts", async () => {
    const other = ["apply", "--server-side", "--field-manager=gitops"];
    const clash = await k.run([...other, "-f", k.file("cm3.yaml", configMap("  a: '9'\n"))]);
    expect(clash.code).not.toBe(0);
    expect(clash.stderr).toContain('Apply failed with 1 conflict: conflict with "kubectl": .data.a');
    expect((await getObj("configmap/settings")).data).toEqual({ a: "1" });

    const same = await k.run([...other, "-f", k.file("cm4.yaml", configMap("  a: '1'\n"))]);
    expect(same.code).toBe(0);
    const shared = managers(await getObj("configmap/settings"));
    expect(shared["kubectl/Apply"]?.fieldsV1).toEqual({ "f:data": { "f:a": {} } });
    expect(shared["gitops/Apply"]?.fieldsV1).toEqual({ "f:data": { "f:a": {} } });

    const forced = await k.run([...other, "--force-conflicts", "-f", k.file("cm5.yaml", configMap("  a: '9'\n"))]);
    expect(forced.stdout.trim()).toBe("configmap/settings serverside-applied");
    const moved = await getObj("configmap/settings");
    expect(moved.data).toEqual({ a: "9" });
    expect(managers(moved)["gitops/Apply"]?.fieldsV1).toEqual({ "f:data": { "f:a": {} } });
    expect(managers(moved)["kubectl/Apply"]).toBeUndefined();
  });

  it("records client-side writes as Update entries and names them in the conflict", async () => {
    const deployment = (name: string, replicas: number): string => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: ${name}}
  template:
    metadata:
      labels: {app: ${name}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`;
    expect((await k.run(["apply", "-f", k.file("d1.yaml", deployment("web", 1))])).stdout.trim()).toBe(
      "deployment.apps/web created",
    );
    const csa = managers(await getObj("deployment/web"))["kubectl-client-side-apply/Update"];
    expect(csa?.apiVersion).toBe("apps/v1");
    expect(csa?.fieldsV1).toMatchObject({
      "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
          "f:spec": { "f:containers": { 'k:{"name":"nginx"}': { ".": {}, "f:image": {}, "f:name": {} } } },
        },
      },
    });
    const argo = ["apply", "--server-side", "--field-manager=argocd"];
    const ssa = await k.run([...argo, "-f", k.file("d2.yaml", deployment("web", 3))]);
    expect(ssa.code).not.toBe(0);
    expect(ssa.stderr).toContain(
      'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas',
    );
    const forced = await k.run([...argo, "--force-conflicts", "-f", k.file("d3.yaml", deployment("web", 3))]);
    expect(forced.stdout.trim()).toBe("deployment.apps/web serverside-applied");
    const after = await getObj("deployment/web");
    expect(after.spec?.replicas).toBe(3);
    const owners = (after.metadata.managedFields ?? [])
      .filter((e) => (e.fieldsV1["f:spec"] as Record<string, unknown> | undefined)?.["f:replicas"] !== undefined)
      .map((e) => `${e.manager}/${e.operation}`);
    expect(owners).toEqual(["argocd/Apply"]);
    // An Update by another client takes the field over (kubectl patch is manager kubectl-patch).
    const p = await k.run(["patch", "deployment/web", "-p", '{"spec":{"replicas":2}}']);
    expect(p.stderr).toBe("");
    const patched = (await getObj("deployment/web")).metadata.managedFields ?? [];
    const replicasOwners = patched
      .filter((e) => (e.fieldsV1["f:spec"] as Record<string, unknown> | undefined)?.["f:replicas"] !== undefined)
      .map((e) => `${e.manager}/${e.operation}`);
    expect(replicasOwners).toEqual(["kubectl-patch/Update"]);
  });

  it("upgrades a client-side applied object to kubectl's server-side apply without conflicts, as kube does", async () => {
    const cm = (v: string): string => `apiVersion: v1
kind: ConfigMap
metadata:
  name: upgraded
data:
  v: "${v}"
`;
    expect((await k.run(["apply", "-f", k.file("u1.yaml", cm("1"))])).code).toBe(0);
    const up = await k.run(["apply", "--server-side", "-f", k.file("u2.yaml", cm("2"))]);
    expect(up.stdout.trim()).toBe("configmap/upgraded serverside-applied");
    const o = await getObj("configmap/upgraded");
    expect(o.data).toEqual({ v: "2" });
    expect(managers(o)["kubectl/Apply"]?.fieldsV1).toEqual({ "f:data": { "f:v": {} } });
    const ann = (o.metadata as { annotations?: Record<string, string> }).annotations ?? {};
    expect(JSON.parse(ann["kubectl.kubernetes.io/last-applied-configuration"] ?? "{}")).toMatchObject({
      data: { v: "2" },
    });
  });

  it("previews with --dry-run=server and kubectl diff --server-side without storing anything", async () => {
    const before = await getObj("configmap/settings");
    const f = k.file("cm-dry.yaml", configMap("  a: '9'\n  c: '3'\n"));
    const dry = await k.run(["apply", "--server-side", "--field-manager=gitops", "--dry-run=server", "-f", f]);
    expect(dry.stdout.trim()).toBe("configmap/settings serverside-applied (server dry run)");
    const diff = await k.run(["diff", "--server-side", "--field-manager=gitops", "-f", f]);
    expect(diff.code).toBe(1);
    expect(diff.stdout).toMatch(/^\+ {2}c: "3"$/m);
    expect(await getObj("configmap/settings")).toEqual(before);
  });

  it("resets managedFields when a client writes [] and shows them again after the next write", async () => {
    const p = await k.run(["patch", "configmap/settings", "--type=merge", "-p", '{"metadata":{"managedFields":[]}}']);
    expect(p.code).toBe(0);
    expect((await getObj("configmap/settings")).metadata.managedFields).toBeUndefined();
    await k.run(["label", "configmap/settings", "team=a"]);
    const m = managers(await getObj("configmap/settings"));
    expect(Object.keys(m)).toEqual(["kubectl-label/Update"]);
    expect(m["kubectl-label/Update"]?.fieldsV1).toEqual({ "f:metadata": { "f:labels": { ".": {}, "f:team": {} } } });
  });

  it("applies a custom resource's status through --subresource=status, owned with subresource: status", async () => {
    expect((await k.run(["apply", "--server-side", "-f", k.file("crd.yaml", WIDGET_CRD)])).code).toBe(0);
    await k.run(["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s"]);
    const w = (status: string): string =>
      `apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 2\n${status}`;
    expect((await k.run(["apply", "--server-side", "-f", k.file("w1.yaml", w(""))])).code).toBe(0);
    const st = await k.run([
      "apply",
      "--server-side",
      "--subresource=status",
      "--field-manager=widget-controller",
      "-f",
      k.file("w1s.yaml", w("status:\n  phase: Ready\n")),
    ]);
    expect(st.stderr).toBe("");
    const o = await getObj("widget/w1");
    expect((o as { status?: unknown }).status).toEqual({ phase: "Ready" });
    const ctl = (o.metadata.managedFields ?? []).find((e) => e.manager === "widget-controller");
    expect(ctl).toMatchObject({
      operation: "Apply",
      subresource: "status",
      fieldsV1: { "f:status": { "f:phase": {} } },
    });
    expect(managers(o)["kubectl/Apply"]?.fieldsV1).toEqual({ "f:spec": { "f:size": {} } });
  });

  it("applies KubeVirt's VirtualMachine manifest server-side, and prunes a dropped field", async () => {
    const crds = await k.run(["apply", "-f", k.file("kubevirt-crds.yaml", renderCrdFiles().get("all.yaml") ?? "")]);
    expect(crds.code).toBe(0);
    await k.run(["wait", "--for=condition=Established", "crd/virtualmachines.kubevirt.io", "--timeout=20s"]);
    const manifest = readFileSync(new URL("../../../../libs/api/src/testdata/vm-cirros.yaml", import.meta.url), "utf8");
    const f = k.file("vm.yaml", manifest);
    expect((await k.run(["apply", "--server-side", "-f", f])).stdout.trim()).toBe(
      "virtualmachine.kubevirt.io/vm-cirros serverside-applied",
    );
    const vm = await getObj("vm/vm-cirros");
    const applied = managers(vm)["kubectl/Apply"];
    expect(applied?.apiVersion).toBe("kubevirt.io/v1");
    expect(applied?.fieldsV1).toHaveProperty(["f:spec", "f:template", "f:spec", "f:domain"]);
    expect((await k.run(["apply", "--server-side", "-f", f])).code).toBe(0);
    const labelled = parse(manifest) as { metadata: { labels?: Record<string, string> } };
    expect(labelled.metadata.labels).toBeDefined();
    delete labelled.metadata.labels;
    const g = k.file("vm2.yaml", JSON.stringify(labelled));
    expect((await k.run(["apply", "--server-side", "-f", g])).code).toBe(0);
    const after = await getObj("vm/vm-cirros");
    expect((after.metadata as { labels?: unknown }).labels).toBeUndefined();
  });
});
