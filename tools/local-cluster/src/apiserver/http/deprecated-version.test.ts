/**
 * A deprecated CRD version (kubevirt.io/v1alpha3, as KubeVirt serves it) through the real kubectl: requests in that
 * version succeed with the CRD's deprecationWarning as a `Warning: 299` header (kubectl prints it on stderr), and
 * the object reads back in the storage version v1 without a warning, as on kube-apiserver.
 */
import { renderCrdFiles } from "@kvt/api/crd-files";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";

let server: ApiServerHandle;
let k: Kubectl;

const WARNING = "Warning: kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release.";
const VM = `apiVersion: kubevirt.io/v1alpha3
kind: VirtualMachine
metadata: {name: old}
spec:
  runStrategy: Halted
  template:
    spec: {domain: {devices: {}, memory: {guest: 128Mi}}}
`;

/** KubeVirt's examples/vmi-preset-small.yaml. */
const PRESET = `apiVersion: kubevirt.io/v1
kind: VirtualMachineInstancePreset
metadata: {name: vmi-preset-small}
spec:
  domain:
    devices: {}
    memory: {guest: 128Mi}
    resources: {}
  selector:
    matchLabels: {kubevirt.io/vmPreset: vmi-preset-small}
`;

beforeAll(async () => {
  server = await startApiServer({ inMemory: true });
  k = kubectl(server.kubeconfigPath);
  const crd = renderCrdFiles().get("virtualmachines.kubevirt.io.yaml") ?? "";
  expect((await k.run(["apply", "-f", k.file("crd.yaml", crd)])).code).toBe(0);
  const presets = renderCrdFiles().get("virtualmachineinstancepresets.kubevirt.io.yaml") ?? "";
  expect((await k.run(["apply", "-f", k.file("presets.yaml", presets)])).code).toBe(0);
  for (const crd of ["virtualmachines", "virtualmachineinstancepresets"]) {
    const w = await k.run(["wait", "--for=condition=Established", `crd/${crd}.kubevirt.io`]);
    expect(w.stdout).toContain("condition met");
  }
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await server?.stop();
});

describe("a deprecated custom resource version", () => {
  it("create in v1alpha3 succeeds with the deprecation warning", async () => {
    const r = await k.run(["create", "-f", k.file("vm.yaml", VM)]);
    expect(r.stdout).toContain("virtualmachine.kubevirt.io/old created");
    expect(r.stderr).toContain(WARNING);
  });

  it("a v1alpha3 GET warns; the v1 GET (kubectl's preferred version) does not", async () => {
    const old = await k.run(["get", "--raw", "/apis/kubevirt.io/v1alpha3/namespaces/default/virtualmachines/old"]);
    expect(old.stderr).toContain(WARNING);
    expect(JSON.parse(old.stdout)).toMatchObject({ apiVersion: "kubevirt.io/v1alpha3", metadata: { name: "old" } });
    const v1 = await k.run(["get", "vm", "old", "-o", "jsonpath={.apiVersion}"]);
    expect(v1.stdout).toBe("kubevirt.io/v1");
    expect(v1.stderr).toBe("");
  });

  it("VirtualMachineInstancePreset warns in v1, its preferred version, as KubeVirt deprecates it there too", async () => {
    const r = await k.run(["create", "-f", k.file("preset.yaml", PRESET)]);
    expect(r.stdout).toContain("virtualmachineinstancepreset.kubevirt.io/vmi-preset-small created");
    expect(r.stderr).toContain(
      "Warning: kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2.",
    );
    const list = await k.run(["get", "vmipreset", "-o", "name"]);
    expect(list.stdout.trim()).toBe("virtualmachineinstancepreset.kubevirt.io/vmi-preset-small");
  });

  it("an error answer in v1alpha3 carries the warning too", async () => {
    const r = await k.run(["get", "--raw", "/apis/kubevirt.io/v1alpha3/namespaces/default/virtualmachines/nope"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(WARNING);
  });
});
