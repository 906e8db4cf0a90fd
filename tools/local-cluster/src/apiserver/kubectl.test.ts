/**
 * Black-box suite: the machine's real kubectl against a server on a random port. Every case asserts on kubectl's
 * own output, as a user would read it.
 */
import { readFileSync } from "node:fs";
import { renderCrdFiles } from "@kvt/api/crd-files";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "./apiserver.ts";
import { WIDGET_CRD, widget } from "./testdata/crd-fixture.ts";
import { type Kubectl, kubectl } from "./testdata/kubectl.ts";

let server: ApiServerHandle;
let k: Kubectl;

beforeAll(async () => {
  server = await startApiServer({ inMemory: true });
  k = kubectl(server.kubeconfigPath);
  const r = await k.run(["apply", "-f", k.file("crd.yaml", WIDGET_CRD)]);
  expect(r.stdout).toContain("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created");
  const w = await k.run(["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s"]);
  expect(w.stdout).toContain("condition met");
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await server?.stop();
});

const lines = (s: string): string[][] =>
  s
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s{2,}/));

describe("kubectl against the embedded API server", () => {
  it("reports server version 1.32 and lists api-resources from discovery", async () => {
    const v = await k.run(["version"]);
    expect(v.stdout).toContain("Server Version: v1.32.0");
    const r = await k.run(["api-resources"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^widgets\s+wd\s+example\.com\/v1\s+true\s+Widget$/m);
    expect(r.stdout).toMatch(/^pods\s+po\s+v1\s+true\s+Pod$/m);
    expect(r.stdout).toMatch(/^namespaces\s+ns\s+v1\s+false\s+Namespace$/m);
  });

  it("creates, applies twice, and gets with printer columns, -o wide and -A", async () => {
    const f = k.file("w1.yaml", widget("w1", 3));
    expect((await k.run(["create", "-f", f])).stdout.trim()).toBe("widget.example.com/w1 created");
    const dup = await k.run(["create", "-f", f]);
    expect(dup.stderr).toContain("Error from server (AlreadyExists): error when creating");
    expect(dup.stderr).toContain('widgets.example.com "w1" already exists');
    const a = k.file("w2.yaml", widget("w2", 5));
    expect((await k.run(["apply", "-f", a])).stdout.trim()).toBe("widget.example.com/w2 created");
    expect((await k.run(["apply", "-f", a])).stdout.trim()).toBe("widget.example.com/w2 unchanged");
    expect((await k.run(["apply", "-f", k.file("w2b.yaml", widget("w2", 6))])).stdout.trim()).toBe(
      "widget.example.com/w2 configured",
    );
    const get = lines((await k.run(["get", "widgets"])).stdout);
    expect(get[0]).toEqual(["NAME", "AGE", "PHASE", "SIZE"]);
    // A missing Phase is a null cell, which kubectl prints as blank (the columns collapse here).
    expect(get[1]).toEqual(["w1", expect.stringMatching(/^\d+s$/), "3"]);
    expect(get[2]).toEqual(["w2", expect.stringMatching(/^\d+s$/), "6"]);
    const wide = lines((await k.run(["get", "wd", "-o", "wide"])).stdout);
    expect(wide[0]).toEqual(["NAME", "AGE", "PHASE", "SIZE", "COLOR"]);
    expect(wide[1]?.[3]).toBe("blue");
    const all = lines((await k.run(["get", "widgets", "-A", "--show-labels"])).stdout);
    expect(all[0]).toEqual(["NAMESPACE", "NAME", "AGE", "PHASE", "SIZE", "LABELS"]);
    expect(all[1]?.[0]).toBe("default");
  });

  it("rejects unknown fields under --validate=strict and reports schema errors", async () => {
    const bad = await k.run(["apply", "-f", k.file("bad.yaml", widget("bad", 1, "  nope: 1\n"))]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('unknown field "spec.nope"');
    const neg = await k.run(["apply", "-f", k.file("neg.yaml", widget("neg", -1))]);
    expect(neg.stderr.trim()).toBe(
      'The Widget "neg" is invalid: spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0',
    );
  });

  it.each([
    ["an unserved group", "foo.example.com/v1", "Widget"],
    ["a served group with an unserved version", "example.com/v9", "Widget"],
    ["a built-in group with an unserved version", "apps/v9", "Deployment"],
    // A served group-version without the kind: kubectl's v2 fallback said "failed to download openapi" here.
    ["the core group-version with an unserved kind", "v1", "Gadget"],
    ["a custom resource group-version with an unserved kind", "example.com/v1", "Gadget"],
  ])("a kind of %s gets kube-apiserver's mapping error from apply, create and get", async (_, apiVersion, kind) => {
    const f = k.file("unserved.yaml", `apiVersion: ${apiVersion}\nkind: ${kind}\nmetadata:\n  name: x\n`);
    const mapping = `resource mapping not found for name: "x" namespace: "" from "${f}": no matches for kind "${kind}" in version "${apiVersion}"\nensure CRDs are installed first`;
    for (const verb of ["apply", "create"]) {
      const r = await k.run([verb, "-f", f]);
      expect(r.code, verb).toBe(1);
      expect(r.stderr.trim(), verb).toBe(`error: ${mapping}`);
    }
    const get = await k.run(["get", "-f", f]);
    expect(get.code).toBe(1);
    expect(get.stderr.trim()).toBe(mapping);
  });

  it("serves /openapi/v2, so kubectl validates a List client-side as against kube-apiserver", async () => {
    const item = (name: string, extra = "") =>
      widget(name, 1, extra)
        .split("\n")
        .map((l, i) => (i === 0 ? `- ${l}` : `  ${l}`))
        .join("\n");
    const list = (extra: string) =>
      `apiVersion: v1\nkind: List\nitems:\n${item("in-list")}\n${item("bad-in-list", extra)}\n`;
    const bad = await k.run(["apply", "-f", k.file("bad-list.yaml", list("  nope: 1"))]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      'error validating data: ValidationError(Widget.spec): unknown field "nope" in com.example.v1.Widget.spec',
    );
    const good = await k.run(["apply", "-f", k.file("list.yaml", list("  color: red"))]);
    expect(good.stderr).toBe("");
    expect(good.stdout.trim().split("\n")).toEqual([
      "widget.example.com/in-list created",
      "widget.example.com/bad-in-list created",
    ]);
    await k.run(["delete", "widget", "in-list", "bad-in-list"]);
  });

  it("patches with merge and json (test op), and refuses strategic merge on a custom resource", async () => {
    const m = await k.run(["patch", "widget", "w1", "--type", "merge", "-p", '{"spec":{"size":4}}']);
    expect(m.stdout.trim()).toBe("widget.example.com/w1 patched");
    const j = await k.run([
      "patch",
      "widget",
      "w1",
      "--type",
      "json",
      "-p",
      '[{"op":"test","path":"/spec/size","value":4},{"op":"replace","path":"/spec/size","value":7}]',
    ]);
    expect(j.stdout.trim()).toBe("widget.example.com/w1 patched");
    const failed = await k.run([
      "patch",
      "widget",
      "w1",
      "--type",
      "json",
      "-p",
      '[{"op":"test","path":"/spec/size","value":1}]',
    ]);
    expect(failed.stderr).toContain("test operation failed");
    const smp = await k.run(["patch", "widget", "w1", "-p", '{"spec":{"size":1}}']);
    expect(smp.stderr).toContain("application/strategic-merge-patch+json is not supported");
    const gen = await k.run(["get", "widget", "w1", "-o", "jsonpath={.metadata.generation} {.spec.size}"]);
    expect(gen.stdout).toBe("3 7");
    const status = await k.run([
      "patch",
      "widget",
      "w1",
      "--subresource=status",
      "--type",
      "merge",
      "-p",
      '{"status":{"phase":"Ready"},"spec":{"size":100}}',
    ]);
    expect(status.stdout.trim()).toBe("widget.example.com/w1 patched");
    const after = await k.run([
      "get",
      "widget",
      "w1",
      "-o",
      "jsonpath={.metadata.generation} {.spec.size} {.status.phase}",
    ]);
    expect(after.stdout).toBe("3 7 Ready");
  });

  it("labels and annotates, and selects by label and field", async () => {
    expect((await k.run(["label", "widget", "w1", "tier=gold"])).stdout.trim()).toBe("widget.example.com/w1 labeled");
    expect((await k.run(["annotate", "widget", "w1", "note=hi"])).stdout.trim()).toBe(
      "widget.example.com/w1 annotated",
    );
    const sel = lines((await k.run(["get", "widgets", "-l", "tier in (gold,silver)", "-o", "name"])).stdout);
    expect(sel).toEqual([["widget.example.com/w1"]]);
    const not = (await k.run(["get", "widgets", "-l", "!tier", "-o", "name"])).stdout.trim();
    expect(not).toBe("widget.example.com/w2");
    const byName = (
      await k.run(["get", "widgets", "--field-selector", "metadata.name=w2", "-o", "name"])
    ).stdout.trim();
    expect(byName).toBe("widget.example.com/w2");
    const bad = await k.run(["get", "widgets", "--field-selector", "spec.size=1"]);
    expect(bad.stderr).toContain("Error from server (BadRequest)");
    expect(bad.stderr).toContain("field label not supported: spec.size");
  });

  it("replace with a stale object is a Conflict", async () => {
    const y = (await k.run(["get", "widget", "w2", "-o", "yaml"])).stdout;
    await k.run(["label", "widget", "w2", "bump=1"]);
    const r = await k.run(["replace", "-f", k.file("stale.yaml", y)]);
    expect(r.stderr).toContain("Error from server (Conflict): error when replacing");
    expect(r.stderr).toContain(
      'Operation cannot be fulfilled on widgets.example.com "w2": the object has been modified; please apply your changes to the latest version and try again',
    );
  });

  it("describes with events and explains from OpenAPI v3", async () => {
    const uid = (await k.run(["get", "widget", "w1", "-o", "jsonpath={.metadata.uid}"])).stdout;
    const ev = `apiVersion: v1
kind: Event
metadata: {name: w1.1}
involvedObject: {apiVersion: example.com/v1, kind: Widget, namespace: default, name: w1, uid: ${uid}}
reason: Polished
message: the widget shines
type: Normal
source: {component: polisher}
count: 1
firstTimestamp: "${new Date().toISOString().slice(0, 19)}Z"
lastTimestamp: "${new Date().toISOString().slice(0, 19)}Z"
`;
    expect((await k.run(["create", "-f", k.file("ev.yaml", ev)])).code).toBe(0);
    const d = await k.run(["describe", "widget", "w1"]);
    expect(d.stdout).toMatch(/Name:\s+w1/);
    expect(d.stdout).toMatch(/Normal\s+Polished\s+\d+s\s+polisher\s+the widget shines/);
    const events = lines((await k.run(["get", "events"])).stdout);
    expect(events[0]).toEqual(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
    const x = await k.run(["explain", "widget.spec.size"]);
    expect(x.stdout).toContain("FIELD: size <integer>");
    expect(x.stdout).toContain("How big the widget is.");
  });

  it("waits for a condition and for deletion", async () => {
    const wait = k.run(["wait", "--for=condition=Ready", "widget/w2", "--timeout=30s"]);
    await new Promise((r) => setTimeout(r, 300));
    const p = await k.run([
      "patch",
      "widget",
      "w2",
      "--subresource=status",
      "--type",
      "merge",
      "-p",
      '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}',
    ]);
    expect(p.code).toBe(0);
    expect((await wait).stdout.trim()).toBe("widget.example.com/w2 condition met");
  });

  it("watches with -w and prints changes as table rows", async () => {
    const watch = k.run(["get", "widgets", "-w", "--request-timeout=4s"]);
    await new Promise((r) => setTimeout(r, 1200));
    await k.run(["label", "widget", "w1", "watched=yes"]);
    const out = (await watch).stdout;
    const rows = lines(out);
    expect(rows[0]).toEqual(["NAME", "AGE", "PHASE", "SIZE"]);
    expect(rows.filter((r) => r[0] === "w1").length).toBeGreaterThanOrEqual(2);
  });

  it("deletes with each cascade mode, honouring finalizers and owner references", async () => {
    const mk = async (name: string, owner?: { name: string; uid: string }, block = false): Promise<string> => {
      const refs = owner
        ? `  ownerReferences: [{apiVersion: example.com/v1, kind: Widget, name: ${owner.name}, uid: ${owner.uid}, blockOwnerDeletion: ${block}}]\n`
        : "";
      const y = `apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: ${name}\n${refs}spec: {size: 1}\n`;
      expect((await k.run(["apply", "-f", k.file(`${name}.yaml`, y)])).code).toBe(0);
      return (await k.run(["get", "widget", name, "-o", "jsonpath={.metadata.uid}"])).stdout;
    };
    const names = async (): Promise<string> =>
      (await k.run(["get", "widgets", "-o", "jsonpath={.items[*].metadata.name}"])).stdout;
    const bg = await mk("bg-owner");
    await mk("bg-dep", { name: "bg-owner", uid: bg });
    expect((await k.run(["delete", "widget", "bg-owner"])).stdout.trim()).toBe('widget.example.com "bg-owner" deleted');
    await expect.poll(names, { timeout: 10_000 }).not.toContain("bg-dep");
    const or = await mk("or-owner");
    await mk("or-dep", { name: "or-owner", uid: or });
    expect((await k.run(["delete", "widget", "or-owner", "--cascade=orphan"])).stdout.trim()).toBe(
      'widget.example.com "or-owner" deleted',
    );
    expect(await names()).toContain("or-dep");
    expect((await k.run(["get", "widget", "or-dep", "-o", "jsonpath={.metadata.ownerReferences}"])).stdout).toBe("");
    const fg = await mk("fg-owner");
    await mk("fg-dep", { name: "fg-owner", uid: fg }, true);
    expect((await k.run(["delete", "widget", "fg-owner", "--cascade=foreground"])).stdout.trim()).toBe(
      'widget.example.com "fg-owner" deleted',
    );
    const left = await names();
    expect(left).not.toContain("fg-owner");
    expect(left).not.toContain("fg-dep");
    await k.run([
      "patch",
      "widget",
      "or-dep",
      "--type",
      "merge",
      "-p",
      '{"metadata":{"finalizers":["example.com/hold"]}}',
    ]);
    const del = k.run(["delete", "widget", "or-dep", "--timeout=20s"]);
    await expect
      .poll(
        async () => (await k.run(["get", "widget", "or-dep", "-o", "jsonpath={.metadata.deletionTimestamp}"])).stdout,
        { timeout: 10_000 },
      )
      .not.toBe("");
    await k.run(["patch", "widget", "or-dep", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}']);
    expect((await del).stdout.trim()).toBe('widget.example.com "or-dep" deleted');
    const gone = await k.run(["get", "widget", "or-dep"]);
    expect(gone.stderr.trim()).toBe('Error from server (NotFound): widgets.example.com "or-dep" not found');
  });

  it("accepts the protobuf bodies of kubectl's typed create commands, and answers auth can-i", async () => {
    expect((await k.run(["create", "namespace", "typed"])).stdout.trim()).toBe("namespace/typed created");
    expect((await k.run(["create", "configmap", "cm1", "-n", "typed", "--from-literal=a=b"])).stdout.trim()).toBe(
      "configmap/cm1 created",
    );
    expect(
      (await k.run(["create", "secret", "generic", "s1", "-n", "typed", "--from-literal=pw=x"])).stdout.trim(),
    ).toBe("secret/s1 created");
    expect((await k.run(["create", "serviceaccount", "sa1", "-n", "typed"])).stdout.trim()).toBe(
      "serviceaccount/sa1 created",
    );
    expect(
      (await k.run(["create", "rolebinding", "rb1", "-n", "typed", "--clusterrole=view", "--serviceaccount=typed:sa1"]))
        .stdout,
    ).toBe("rolebinding.rbac.authorization.k8s.io/rb1 created\n");
    expect(
      (await k.run(["get", "rolebinding", "rb1", "-n", "typed", "-o", "jsonpath={.roleRef.name} {.subjects[0].name}"]))
        .stdout,
    ).toBe("view sa1");
    expect(
      (await k.run(["create", "clusterrolebinding", "crb1", "--clusterrole=view", "--group=devs"])).stdout.trim(),
    ).toBe("clusterrolebinding.rbac.authorization.k8s.io/crb1 created");
    const token = await k.run(["create", "token", "sa1", "-n", "typed", "--duration=20m"]);
    expect(token.stdout.trim()).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    // The duration arrives (protobuf field 4): under 10 minutes is refused.
    expect((await k.run(["create", "token", "sa1", "-n", "typed", "--duration=5m"])).stderr).toContain(
      "may not specify a duration less than 10 minutes",
    );
    expect((await k.run(["get", "configmap", "cm1", "-n", "typed", "-o", "jsonpath={.data.a}"])).stdout).toBe("b");
    expect((await k.run(["get", "secret", "s1", "-n", "typed", "-o", "jsonpath={.data.pw}"])).stdout).toBe(
      Buffer.from("x").toString("base64"),
    );
    const cms = lines((await k.run(["get", "configmaps", "-n", "typed"])).stdout);
    expect(cms[0]).toEqual(["NAME", "DATA", "AGE"]);
    expect(cms[1]?.slice(0, 2)).toEqual(["cm1", "1"]);
    expect((await k.run(["auth", "can-i", "create", "pods"])).stdout.trim()).toBe("yes");
  });

  it("applies KubeVirt's CRDs and the seed's VM manifest, and prints them as KubeVirt does", async () => {
    const crds = await k.run(["apply", "-f", k.file("kubevirt-crds.yaml", renderCrdFiles().get("all.yaml") ?? "")]);
    expect(crds.stdout).toContain("customresourcedefinition.apiextensions.k8s.io/virtualmachines.kubevirt.io created");
    await k.run([
      "wait",
      "--for=condition=Established",
      "crd/virtualmachines.kubevirt.io",
      "crd/virtualmachineinstances.kubevirt.io",
    ]);
    const manifest = readFileSync(new URL("../../../../libs/api/src/testdata/vm-cirros.yaml", import.meta.url), "utf8");
    const f = k.file("vm.yaml", manifest);
    expect((await k.run(["apply", "-f", f])).stdout.trim()).toBe("virtualmachine.kubevirt.io/vm-cirros created");
    expect((await k.run(["apply", "-f", f])).stdout.trim()).toBe("virtualmachine.kubevirt.io/vm-cirros unchanged");
    expect(lines((await k.run(["get", "vms"])).stdout)[0]).toEqual(["NAME", "AGE", "STATUS", "READY"]);
    expect(lines((await k.run(["get", "vmis"])).stderr)).toEqual([["No resources found in default namespace."]]);
    const all = (await k.run(["get", "all"])).stdout;
    expect(all).toContain("virtualmachine.kubevirt.io/vm-cirros");
    const x = await k.run(["explain", "vm.spec.runStrategy"]);
    expect(x.stdout).toContain("FIELD: runStrategy <string>");
  });

  it("serves built-in pods with their columns, and deleting a namespace deletes its contents", async () => {
    const ns = await k.run([
      "apply",
      "-f",
      k.file("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: tmp}\n"),
    ]);
    expect(ns.stdout).toMatch(/namespace\/tmp (created|unchanged|configured)/);
    const pod =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: tmp, labels: {app: a}}\nspec:\n  containers: [{name: c, image: busybox}]\n";
    expect((await k.run(["apply", "-f", k.file("pod.yaml", pod)])).stdout.trim()).toBe("pod/p1 created");
    const get = lines((await k.run(["get", "pods", "-n", "tmp", "-o", "wide"])).stdout);
    expect(get[0]).toEqual([
      "NAME",
      "READY",
      "STATUS",
      "RESTARTS",
      "AGE",
      "IP",
      "NODE",
      "NOMINATED NODE",
      "READINESS GATES",
    ]);
    expect(get[1]?.slice(0, 4)).toEqual(["p1", "0/1", "Pending", "0"]);
    const d = await k.run(["delete", "namespace", "tmp", "--timeout=30s"]);
    expect(d.stdout.trim()).toBe('namespace "tmp" deleted');
    const after = await k.run(["get", "pods", "-n", "tmp"]);
    expect(after.stderr.trim()).toBe("No resources found in tmp namespace.");
  });
});
