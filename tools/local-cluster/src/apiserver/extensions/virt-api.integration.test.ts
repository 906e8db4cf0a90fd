/**
 * The real virt-api behind the real API server, wired as the local cluster wires it: virt-api's own manifests
 * (webhook configurations and APIServices with its URL), its HTTPS server with requestheader auth, the API server
 * with the front-proxy client certificate, and kubectl in front. Invalid VMs are refused with KubeVirt's causes,
 * and subresources go through aggregation acting as the caller.
 */
import { customResourceDefinitions } from "@kvt/api";
import { loadKubeConfig, RestClient } from "@kvt/kube";
import {
  generateCa,
  HttpHandlerClient,
  issueCertificate,
  RestClusterClient,
  type RunningServer,
  startVirtApiServer,
  TemplateHandlerLocator,
  VirtApiApp,
  virtApiManifests,
  webhookRoutes,
} from "@kvt/virt-api/lib";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";
import { call, eventually } from "./testdata/fixtures.ts";

const VMS = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines";
const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines";
let api: ApiServerHandle;
let virtApi: RunningServer;
let k: Kubectl;
const users: string[] = [];

const vm = (name: string, disks: string[], volumes: string[]): string => `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: ${name}}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        devices:
          disks: [${disks.map((d) => `{name: ${d}, disk: {bus: virtio}}`).join(", ")}]
        resources: {requests: {memory: 64Mi}}
      volumes: [${volumes.map((v) => `{name: ${v}, containerDisk: {image: local/demo-linux:latest}}`).join(", ")}]
`;

beforeAll(async () => {
  const ca = await generateCa("virt-api-ca");
  const serving = await issueCertificate(ca, {
    dnsNames: ["localhost", "virt-api.kubevirt.svc"],
    ipAddresses: ["127.0.0.1"],
  });
  const frontProxyCa = await generateCa("front-proxy-ca");
  const proxyClient = await issueCertificate(frontProxyCa, { commonName: "front-proxy-client", usage: "client" });
  api = await startApiServer({
    inMemory: true,
    proxyClient: { certPem: proxyClient.certPem, keyPem: proxyClient.keyPem },
  });
  k = kubectl(api.kubeconfigPath);
  for (const crd of customResourceDefinitions())
    expect((await call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)).code).toBe(201);
  await eventually("the VM CRD", async () => ((await call(api, "GET", VMS)).code === 200 ? true : undefined));
  const transport = new RestClient(loadKubeConfig({ kubeconfig: api.kubeconfigPath }));
  const app = new VirtApiApp({
    logger: pino({ level: "silent" }),
    clientFor: (user) => {
      if (user) users.push(user.username);
      return new RestClusterClient(transport, user);
    },
    handler: new HttpHandlerClient(new TemplateHandlerLocator("http://127.0.0.1:1"), {}),
    webhooks: webhookRoutes(new RestClusterClient(transport), "kubevirt"),
    requestHeaderAuth: { allowedNames: ["front-proxy-client"] },
    version: "0.1.0",
  });
  virtApi = await startVirtApiServer(app, {
    certPem: serving.certPem,
    keyPem: serving.keyPem,
    clientCaPem: frontProxyCa.certPem,
    host: "127.0.0.1",
    port: 0,
  });
  for (const obj of virtApiManifests({ url: `https://127.0.0.1:${virtApi.port}`, caPem: ca.certPem })) {
    const [group, version] = String(obj.apiVersion).split("/");
    const plural = `${String(obj.kind).toLowerCase()}s`;
    expect((await call(api, "POST", `/apis/${group}/${version}/${plural}`, obj)).code).toBe(201);
  }
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await api?.stop();
  await virtApi?.close();
});

describe("virt-api behind the embedded API server", () => {
  it("refuses an invalid VM with field-precise causes through kubectl, and stores nothing", async () => {
    const out = await k.run([
      "create",
      "-f",
      k.file("bad.yaml", vm("vm-bad", ["containerdisk", "nope"], ["containerdisk"])),
    ]);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain("The request is invalid: ");
    expect(out.stderr).toContain("spec.template.spec.domain.devices.disks[1].name: ");
    const raw = await call(api, "POST", VMS, {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachine",
      metadata: { name: "vm-bad" },
      spec: { runStrategy: "Halted", running: true, template: { spec: { domain: { devices: {} } } } },
    });
    expect(raw.code).toBe(422);
    expect(String(raw.body.message)).toMatch(
      /^admission webhook "virtualmachine-validator\.kubevirt\.io" denied the request: /,
    );
    expect((await call(api, "GET", `${VMS}/vm-bad`)).code).toBe(404);
  });

  it("a KubeVirt CR update listing a GA gate gets virt-api's warning; a gate both on and off is refused", async () => {
    const kv = "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata: {name: kubevirt}\nspec: {}\n";
    expect((await k.run(["create", "-f", k.file("kv.yaml", kv)])).code).toBe(0);
    const gates = (on: string[], off: string[] = []) =>
      JSON.stringify({
        spec: { configuration: { developerConfiguration: { featureGates: on, disabledFeatureGates: off } } },
      });
    const warned = await k.run(["patch", "kubevirt", "kubevirt", "--type=merge", "-p", gates(["GPU", "HostDisk"])]);
    expect(warned.code).toBe(0);
    expect(warned.stderr).toContain(
      'Warning: feature gate GPU is deprecated (feature state is "General Availability")',
    );
    const refused = await k.run([
      "patch",
      "kubevirt",
      "kubevirt",
      "--type=merge",
      "-p",
      gates(["Snapshot"], ["Snapshot"]),
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      'feature gate "Snapshot" exists on both "FeatureGates" and "DisabledFeatureGates"',
    );
  });

  it("creates a valid VM and starts it through the aggregated start subresource as the caller", async () => {
    const out = await k.run(["create", "-f", k.file("ok.yaml", vm("vm-ok", ["containerdisk"], ["containerdisk"]))]);
    expect(out.stdout.trim()).toBe("virtualmachine.kubevirt.io/vm-ok created");
    await eventually("the subresource APIService", async () => {
      const r = await call(api, "GET", "/apis/apiregistration.k8s.io/v1/apiservices/v1.subresources.kubevirt.io");
      const c = (r.body.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
      return c?.some((x) => x.type === "Available" && x.status === "True") ? true : undefined;
    });
    expect((await call(api, "PUT", `${SUB}/vm-ok/start`, {})).code).toBe(202);
    const got = await call(api, "GET", `${VMS}/vm-ok`);
    expect((got.body.spec as { runStrategy: string }).runStrategy).toBe("Always");
    expect(users).toContain("kubernetes-admin");
    const again = await call(api, "PUT", `${SUB}/vm-ok/start`, {});
    expect(again.code).toBe(409);
    expect(String(again.body.message)).toContain("Always does not support manual start requests");
    expect((await k.run(["api-versions"])).stdout).toContain("subresources.kubevirt.io/v1\n");
  });
});

describe("VM memory quantities through the API server and virt-api (issue 23: all were stored)", () => {
  const vmWithMemory = (name: string, memory: string) => ({
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name },
    spec: {
      runStrategy: "Halted",
      template: { spec: { domain: { devices: {}, resources: { requests: { memory } } } } },
    },
  });
  const field = "spec.template.spec.domain.resources.requests.memory";
  it.each([
    ["1e400", "10e399"],
    ["-1Gi", "-1Gi"],
  ])("requests.memory %s is refused with KubeVirt's message and not stored", async (memory, printed) => {
    const name = `mem-${memory.replace(/[^a-z0-9]/gi, "").toLowerCase()}`;
    const r = await call(api, "POST", VMS, vmWithMemory(name, memory));
    expect(r.code).toBe(422);
    expect(String(r.body.message)).toContain(`${field} '${printed}': must be greater than or equal to 0.`);
    expect((await call(api, "GET", `${VMS}/${name}`)).code).toBe(404);
  });
  it.each(["99999999999999999999Ei", "0"])("requests.memory %s is stored, as KubeVirt stores it", async (memory) => {
    const name = `mem-ok-${memory.replace(/[^a-z0-9]/gi, "").toLowerCase()}`;
    expect((await call(api, "POST", VMS, vmWithMemory(name, memory))).code).toBe(201);
  });
});
