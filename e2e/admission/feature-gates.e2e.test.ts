/**
 * KubeVirt's feature gates through the real kubectl (server-side dry runs: nothing runs, nothing is stored): a
 * hostDisk VM and a hook-sidecar VM are refused with KubeVirt's messages until the KubeVirt CR lists HostDisk and
 * Sidecar, listing a GA gate earns KubeVirt's warning, and kubevirt.io/v1alpha3 and VirtualMachineInstancePreset
 * answer with their deprecation warnings. The CR's gates are restored afterwards.
 */
import { KUBEVIRT_CR } from "@kvt/api";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk } from "../lib/cli.ts";
import { testGuestVm } from "../lib/manifests.ts";

type Obj = Record<string, unknown>;
const kubeconfig = inject("kubeconfig");
const CR = ["-n", KUBEVIRT_CR.namespace, "kubevirt", KUBEVIRT_CR.name];

function withHostDisk(vm: Obj): Obj {
  const copy = structuredClone(vm) as { spec: { template: { spec: { volumes: Obj[]; domain: { devices: Obj } } } } };
  const t = copy.spec.template.spec;
  t.volumes.push({ name: "hd", hostDisk: { path: "/var/lib/kvt-e2e/hd.img", type: "DiskOrCreate", capacity: "1Mi" } });
  (t.domain.devices.disks as Obj[]).push({ name: "hd", disk: {} });
  return copy;
}

function withSidecar(vm: Obj): Obj {
  const copy = structuredClone(vm) as { spec: { template: { metadata: Obj } } };
  copy.spec.template.metadata.annotations = { "hooks.kubevirt.io/hookSidecars": '[{"image":"example/hook:1"}]' };
  return copy;
}

const dryRun = (manifest: Obj) =>
  kubectl(kubeconfig, ["create", "--dry-run=server", "-o", "name", "-f", "-"], JSON.stringify(manifest));

async function setGates(gates: string[]): Promise<{ stderr: string }> {
  const patch = JSON.stringify({ spec: { configuration: { developerConfiguration: { featureGates: gates } } } });
  const r = await kubectl(kubeconfig, ["patch", ...CR, "--type=merge", "-p", patch]);
  expect(r.code, r.stderr).toBe(0);
  return r;
}

let original: string[] = [];

beforeAll(async () => {
  const out = await kubectlOk(kubeconfig, [
    "get",
    ...CR,
    "-o",
    "jsonpath={.spec.configuration.developerConfiguration.featureGates}",
  ]);
  original = out.trim() ? (JSON.parse(out) as string[]) : [];
});

afterAll(async () => {
  await setGates(original);
});

describe("feature gates at admission", () => {
  const hostDiskVm = withHostDisk(testGuestVm("gated-hostdisk"));
  const sidecarVm = withSidecar(testGuestVm("gated-sidecar"));

  it("HostDisk and Sidecar are refused while their alpha gates are off", async () => {
    await setGates(original.filter((g) => g !== "HostDisk" && g !== "Sidecar"));
    const hd = await dryRun(hostDiskVm);
    expect(hd.code).not.toBe(0);
    expect(hd.stderr).toContain("spec.template.spec.volumes[1]: HostDisk feature gate is not enabled");
    const sc = await dryRun(sidecarVm);
    expect(sc.code).not.toBe(0);
    expect(sc.stderr).toContain(
      "sidecar feature gate is not enabled in kubevirt-config, invalid entry spec.template.metadata.annotations.hooks.kubevirt.io/hookSidecars",
    );
  });

  it("turned on in the KubeVirt CR, they are accepted; a GA gate listed earns KubeVirt's warning", async () => {
    const r = await setGates([...new Set([...original, "HostDisk", "Sidecar", "LiveMigration"])]);
    expect(r.stderr).toContain(
      'Warning: feature gate LiveMigration is deprecated (feature state is "General Availability")',
    );
    const hd = await dryRun(hostDiskVm);
    expect(hd.stderr).toBe("");
    expect(hd.stdout.trim()).toBe("virtualmachine.kubevirt.io/gated-hostdisk");
    expect((await dryRun(sidecarVm)).code).toBe(0);
  });
});

describe("deprecated API versions and kinds", () => {
  it("kubevirt.io/v1alpha3 is served with KubeVirt's deprecation warning", async () => {
    const vm = { ...testGuestVm("old-api"), apiVersion: "kubevirt.io/v1alpha3" };
    const r = await dryRun(vm);
    expect(r.stdout.trim()).toBe("virtualmachine.kubevirt.io/old-api");
    expect(r.stderr).toContain(
      "Warning: kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release.",
    );
  });

  it("a stored preset is applied to a matching VMI by virt-api's mutating webhook", async () => {
    const preset = {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstancePreset",
      metadata: { name: "e2e-two-cores" },
      spec: {
        domain: { devices: {}, cpu: { cores: 2 } },
        selector: { matchLabels: { "kubevirt.io/vmPreset": "two-cores" } },
      },
    };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(preset));
    try {
      const vm = testGuestVm("preset-target") as { spec: { template: Obj } };
      const vmi = {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance",
        metadata: { name: "preset-target", labels: { "kubevirt.io/vmPreset": "two-cores" } },
        spec: (vm.spec.template as { spec: Obj }).spec,
      };
      const out = await kubectlOk(
        kubeconfig,
        ["create", "--dry-run=server", "-o", "json", "-f", "-"],
        JSON.stringify(vmi),
      );
      const created = JSON.parse(out) as {
        metadata: { annotations?: Record<string, string> };
        spec: { domain: { cpu?: { cores?: number } } };
      };
      expect(created.metadata.annotations?.["virtualmachinepreset.kubevirt.io/e2e-two-cores"]).toBe("kubevirt.io/v1");
      expect(created.spec.domain.cpu?.cores).toBe(2);
    } finally {
      await kubectl(kubeconfig, ["delete", "virtualmachineinstancepreset", "e2e-two-cores", "--ignore-not-found"]);
    }
  });

  it("VirtualMachineInstancePreset is served with KubeVirt's deprecation warning", async () => {
    const preset = {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstancePreset",
      metadata: { name: "vmi-preset-small" },
      spec: { domain: { devices: {}, resources: {} }, selector: { matchLabels: { "kubevirt.io/vmPreset": "small" } } },
    };
    const r = await dryRun(preset);
    expect(r.stdout.trim()).toBe("virtualmachineinstancepreset.kubevirt.io/vmi-preset-small");
    expect(r.stderr).toContain(
      "Warning: kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2.",
    );
  });
});
