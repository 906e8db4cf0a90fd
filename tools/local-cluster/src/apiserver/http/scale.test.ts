/**
 * The scale subresource of custom resources, through the real kubectl: `kubectl scale` on KubeVirt's
 * VirtualMachineInstanceReplicaSet CRD writes spec.replicas, GET .../scale shows the Scale an HPA reads
 * (status.replicas, status.selector from status.labelSelector), and a negative count is refused as kube-apiserver does.
 */
import { renderCrdFiles } from "@kvt/api/crd-files";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";

let server: ApiServerHandle;
let k: Kubectl;

const RS = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstanceReplicaSet
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {domain: {devices: {}}}
`;

beforeAll(async () => {
  server = await startApiServer({ inMemory: true });
  k = kubectl(server.kubeconfigPath);
  const crd = renderCrdFiles().get("virtualmachineinstancereplicasets.kubevirt.io.yaml") ?? "";
  expect((await k.run(["apply", "-f", k.file("crd.yaml", crd)])).code).toBe(0);
  const w = await k.run(["wait", "--for=condition=Established", "crd/virtualmachineinstancereplicasets.kubevirt.io"]);
  expect(w.stdout).toContain("condition met");
  expect((await k.run(["create", "-f", k.file("rs.yaml", RS)])).stdout).toContain("created");
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await server?.stop();
});

async function scaleObject(): Promise<Record<string, unknown>> {
  const r = await k.run([
    "get",
    "--raw",
    "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstancereplicasets/web/scale",
  ]);
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

describe("the scale subresource of a custom resource", () => {
  it("discovery lists virtualmachineinstancereplicasets/scale as autoscaling/v1 Scale", async () => {
    const r = await k.run(["get", "--raw", "/apis/kubevirt.io/v1"]);
    const list = JSON.parse(r.stdout) as { resources: Record<string, unknown>[] };
    expect(list.resources.find((x) => x.name === "virtualmachineinstancereplicasets/scale")).toMatchObject({
      kind: "Scale",
      group: "autoscaling",
      version: "v1",
      verbs: ["get", "patch", "update"],
    });
  });

  it("kubectl explain describes the replica set's fields", async () => {
    const r = await k.run(["explain", "vmirs.spec.paused"]);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("Indicates that the replica set is paused.");
  });

  it("GET shows spec.replicas, status.replicas and the selector from status.labelSelector", async () => {
    await k.run([
      "patch",
      "vmirs",
      "web",
      "--subresource=status",
      "--type=merge",
      "-p",
      '{"status":{"replicas":2,"labelSelector":"app=web"}}',
    ]);
    expect(await scaleObject()).toMatchObject({
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: { name: "web", namespace: "default" },
      spec: { replicas: 2 },
      status: { replicas: 2, selector: "app=web" },
    });
  });

  it("kubectl scale writes spec.replicas and bumps the generation; the status is kept", async () => {
    const r = await k.run(["scale", "vmirs", "web", "--replicas", "3"]);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("virtualmachineinstancereplicaset.kubevirt.io/web scaled");
    const got = await k.run([
      "get",
      "vmirs",
      "web",
      "-o",
      "jsonpath={.spec.replicas} {.metadata.generation} {.status.replicas}",
    ]);
    expect(got.stdout).toBe("3 2 2");
    expect(await scaleObject()).toMatchObject({ spec: { replicas: 3 } });
  });

  it("kubectl scale --current-replicas is a precondition", async () => {
    const r = await k.run(["scale", "vmirs", "web", "--current-replicas", "7", "--replicas", "1"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("Expected replicas to be 7, was 3");
  });

  it("a negative count is refused as kube-apiserver refuses it", async () => {
    const r = await k.run(["scale", "vmirs", "web", "--replicas", "-1"]);
    expect(r.code).not.toBe(0);
    const raw = await k.run([
      "patch",
      "vmirs",
      "web",
      "--subresource=scale",
      "--type=merge",
      "-p",
      '{"spec":{"replicas":-1}}',
    ]);
    expect(raw.stderr.trim()).toBe(
      'The Scale "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0',
    );
  });
});
