/**
 * Instancetypes with the real kubectl: a VirtualMachineInstancetype of 2 vCPUs and 256Mi (`kubectl get vmf` lists
 * it) sizes a test-guest VM that sets no resources of its own: the VMI gets 2 sockets and memory.guest 256Mi and
 * runs, and the VM is pinned to a ControllerRevision recorded in status.instancetypeRef. A VM that also sets memory
 * is refused with KubeVirt's conflict message; a VM whose instancetype does not exist is accepted and reports
 * Failure/FailedFindInstancetype; an instancetype with overcommitPercent above 100 is refused. The local cluster
 * serves the common-instancetypes bundle (the u1, o1, cx1, m1, d1, n1 and rt1 series, the OS preferences), deployed
 * and kept by virt-controller as virt-operator does (an edit undone, removed while the KubeVirt CR's
 * commonInstancetypesDeployment.enabled is false), and a VM of
 * u1.nano + cirros gets them, while a VM of cx1.medium is refused for the dedicated CPUs and hugepages no backend
 * provides.
 * `virtctl create vm --instancetype --preference --volume-containerdisk` prints a VM that kubectl creates and runs
 * (and `virtctl create preference` a preference);
 * the expand-spec subresource and `virtctl expand` answer the VM with its instancetype applied;
 * inferFromVolume takes them from a claim's default-instancetype/-preference labels.
 */

import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { getJson, kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";

const IT = "e2e-small";
const VM = "e2e-it-vm";
const START_WAIT = { ...CLUSTER_WAIT, timeoutMs: 180_000 };

function instancetype(name: string, memory: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: "instancetype.kubevirt.io/v1beta1",
    kind: "VirtualMachineInstancetype",
    metadata: { name },
    spec: { cpu: { guest: 2 }, memory: { guest: "256Mi", ...memory } },
  });
}

/** The test guest VM minus its resources, sized by instancetype `it` (namespaced kind). */
function vmOf(name: string, it: string, keepResources = false): string {
  const vm = testGuestVm(name, { runStrategy: "Always" }) as {
    spec: { instancetype?: unknown; template: { spec: { domain: Record<string, unknown> } } };
  };
  if (!keepResources) delete vm.spec.template.spec.domain.resources;
  vm.spec.instancetype = { name: it, kind: "VirtualMachineInstancetype" };
  return JSON.stringify(vm);
}

interface VmStatusView {
  metadata: { uid: string };
  status?: {
    instancetypeRef?: { name?: string; kind?: string; controllerRevisionRef?: { name?: string } };
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

interface ExpandedVmi {
  metadata: { annotations?: Record<string, string> };
  spec: { domain: { cpu?: Record<string, unknown>; memory?: Record<string, unknown> } };
  status?: { phase?: string };
}

describe("instancetype.kubevirt.io (kubectl)", () => {
  const kubeconfig = inject("kubeconfig");

  afterAll(async () => {
    for (const vm of [VM, "e2e-it-missing"]) await kubectl(kubeconfig, ["delete", "vm", vm, "--ignore-not-found"]);
    await kubectl(kubeconfig, ["delete", "vmf", IT, "--ignore-not-found"]);
  });

  it("creates an instancetype and lists it with the short name vmf", async () => {
    const out = await kubectlOk(kubeconfig, ["create", "-f", "-"], instancetype(IT));
    expect(out.trim()).toBe(`virtualmachineinstancetype.instancetype.kubevirt.io/${IT} created`);
    const names = await kubectlOk(kubeconfig, ["get", "vmf", "-o", "name"]);
    expect(names.split("\n")).toContain(`virtualmachineinstancetype.instancetype.kubevirt.io/${IT}`);
    const table = await kubectlOk(kubeconfig, ["get", "vmf", IT]);
    expect(table).toMatch(/^NAME\s+AGE/);
  });

  it("refuses overcommitPercent above 100 with KubeVirt's message", async () => {
    const r = await kubectl(kubeconfig, ["create", "-f", "-"], instancetype("e2e-bad", { overcommitPercent: 150 }));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain("spec.memory.overcommitPercent '150': must be in range between 0 and 100.");
  });

  it("a VM sized by the instancetype runs a VMI with 2 vCPUs and 256Mi, pinned to a ControllerRevision", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], vmOf(VM, IT));
    const vmi = await eventually(
      async () => {
        const v = await getJson<ExpandedVmi>(kubeconfig, "vmi", VM);
        expect(v.status?.phase).toBe("Running");
        return v;
      },
      { ...START_WAIT, what: "the instancetype VM's VMI running" },
    );
    expect(vmi.spec.domain.cpu).toMatchObject({ sockets: 2, cores: 1, threads: 1 });
    expect(vmi.spec.domain.memory).toMatchObject({ guest: "256Mi" });
    expect(vmi.metadata.annotations?.["kubevirt.io/instancetype-name"]).toBe(IT);
    const vm = await getJson<VmStatusView>(kubeconfig, "vm", VM);
    const uid = JSON.parse(await kubectlOk(kubeconfig, ["get", "vmf", IT, "-o", "json"])) as {
      metadata: { uid: string; generation: number };
    };
    const revision = `${VM}-${IT}-v1beta1-${uid.metadata.uid}-${uid.metadata.generation}`;
    expect(vm.status?.instancetypeRef).toEqual({
      name: IT,
      kind: "VirtualMachineInstancetype",
      controllerRevisionRef: { name: revision },
    });
    const cr = JSON.parse(await kubectlOk(kubeconfig, ["get", "controllerrevision", revision, "-o", "json"])) as {
      metadata: { ownerReferences?: { uid: string }[]; labels?: Record<string, string> };
      data?: { kind?: string; spec?: { cpu?: { guest?: number } } };
    };
    expect(cr.metadata.ownerReferences?.[0]?.uid).toBe(vm.metadata.uid);
    expect(cr.metadata.labels?.["instancetype.kubevirt.io/object-name"]).toBe(IT);
    expect(cr.data?.kind).toBe("VirtualMachineInstancetype");
    expect(cr.data?.spec?.cpu?.guest).toBe(2);
  });

  it("the expand-spec subresource answers the VM with its instancetype applied", async () => {
    const path = `/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/${VM}/expand-spec`;
    const expanded = JSON.parse(await kubectlOk(kubeconfig, ["get", "--raw", path])) as {
      spec: { instancetype?: unknown; template: { spec: { domain: { cpu?: unknown; memory?: unknown } } } };
      status?: { instancetypeRef?: unknown };
    };
    expect(expanded.spec.instancetype).toBeUndefined();
    expect(expanded.status?.instancetypeRef).toBeUndefined();
    expect(expanded.spec.template.spec.domain.cpu).toMatchObject({ sockets: 2, cores: 1, threads: 1 });
    expect(expanded.spec.template.spec.domain.memory).toMatchObject({ guest: "256Mi" });
  });

  it("`virtctl expand --vm` and `virtctl expand -f -` print the expanded VM", async () => {
    const stored = await virtctl(kubeconfig, ["expand", "--vm", VM]);
    expect(stored.code, stored.stderr).toBe(0);
    // The matcher is gone from the spec (managedFields still name f:instancetype, as on kube-apiserver).
    expect(stored.stdout).not.toMatch(/^\s*instancetype:/m);
    expect(stored.stdout).toMatch(/cpu:\n\s+cores: 1\n\s+.*\n?\s*sockets: 2/);
    const fromStdin = await virtctl(kubeconfig, ["expand", "-f", "-", "-o", "json"], vmOf("e2e-it-expand", IT));
    expect(fromStdin.code, fromStdin.stderr).toBe(0);
    const vm = JSON.parse(fromStdin.stdout) as { spec: { template: { spec: { domain: { memory?: unknown } } } } };
    expect(vm.spec.template.spec.domain.memory).toMatchObject({ guest: "256Mi" });
  });

  it("virt-controller deploys the u1 and o1 series and the OS preferences (common-instancetypes)", async () => {
    const sizes = await kubectlOk(kubeconfig, ["get", "vmcf", "-o", "name"]);
    for (const size of ["nano", "micro", "small", "medium", "2xmedium", "large", "xlarge", "8xlarge"]) {
      expect(sizes).toContain(`virtualmachineclusterinstancetype.instancetype.kubevirt.io/u1.${size}`);
    }
    expect(sizes).toContain("virtualmachineclusterinstancetype.instancetype.kubevirt.io/o1.nano");
    const o1 = await kubectlOk(kubeconfig, [
      "get",
      "vmcf",
      "o1.nano",
      "-o",
      "jsonpath={.spec.memory.overcommitPercent}",
    ]);
    expect(o1).toBe("50");
    const prefs = await kubectlOk(kubeconfig, ["get", "vmcp", "-o", "name"]);
    expect(prefs.trim().split("\n")).toEqual(
      expect.arrayContaining([
        "virtualmachineclusterpreference.instancetype.kubevirt.io/cirros",
        "virtualmachineclusterpreference.instancetype.kubevirt.io/linux",
        "virtualmachineclusterpreference.instancetype.kubevirt.io/fedora",
        "virtualmachineclusterpreference.instancetype.kubevirt.io/windows.11",
      ]),
    );
  });

  it("keeps them as virt-operator does: an edit is undone; commonInstancetypesDeployment.enabled false removes them", async () => {
    const managed = ["-l", "app.kubernetes.io/managed-by=virt-operator", "-o", "name"];
    const count = async (kind: string): Promise<number> =>
      (await kubectlOk(kubeconfig, ["get", kind, ...managed])).trim().split("\n").filter(Boolean).length;
    await kubectlOk(kubeconfig, ["patch", "vmcf", "u1.nano", "--type", "merge", "-p", '{"spec":{"cpu":{"guest":3}}}']);
    await eventually(async () => {
      expect(await kubectlOk(kubeconfig, ["get", "vmcf", "u1.nano", "-o", "jsonpath={.spec.cpu.guest}"])).toBe("1");
      return true;
    }, CLUSTER_WAIT);
    const setEnabled = (enabled: boolean): Promise<string> =>
      kubectlOk(kubeconfig, [
        ...["patch", "kubevirt", "kubevirt", "-n", "kubevirt", "--type", "merge", "-p"],
        JSON.stringify({ spec: { configuration: { commonInstancetypesDeployment: { enabled } } } }),
      ]);
    try {
      await setEnabled(false);
      await eventually(async () => {
        expect([await count("vmcf"), await count("vmcp")]).toEqual([0, 0]);
        return true;
      }, CLUSTER_WAIT);
    } finally {
      await setEnabled(true);
    }
    await eventually(async () => {
      expect([await count("vmcf"), await count("vmcp")]).toEqual([65, 54]);
      return true;
    }, CLUSTER_WAIT);
  });

  it("installs the cx1 and m1 series too; a VM of cx1.medium is refused naming what the platform cannot give", async () => {
    const sizes = await kubectlOk(kubeconfig, [
      "get",
      "vmcf",
      "-l",
      "instancetype.kubevirt.io/hugepages",
      "-o",
      "name",
    ]);
    const prefix = "virtualmachineclusterinstancetype.instancetype.kubevirt.io/";
    expect(sizes.trim().split("\n")).toEqual(
      expect.arrayContaining([
        `${prefix}cx1.medium`,
        `${prefix}cx1.8xlarge1gi`,
        `${prefix}m1.large`,
        `${prefix}n1.medium`,
        `${prefix}rt1.micro`,
      ]),
    );
    const vm = testGuestVm("e2e-it-cx1", { runStrategy: "Halted" }) as {
      spec: { instancetype?: unknown; template: { spec: { domain: Record<string, unknown> } } };
    };
    delete vm.spec.template.spec.domain.resources;
    vm.spec.instancetype = { name: "cx1.medium" };
    const created = await kubectl(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    expect(created.code).not.toBe(0);
    expect(created.stderr).toContain(
      'spec.template.spec.domain.cpu.dedicatedCpuPlacement is not supported: this platform\'s machine backends (native VMM, QEMU TCG) provide no dedicated CPU placement (set by VirtualMachineClusterInstancetype "cx1.medium")',
    );
    expect(created.stderr).toContain("spec.template.spec.domain.memory.hugepages is not supported");
  });

  it("a VM of u1.nano with the cirros preference gets their size and defaults", async () => {
    const vm = testGuestVm("e2e-it-nano", { runStrategy: "Always" }) as {
      spec: Record<string, unknown> & { template: { spec: { domain: Record<string, unknown> } } };
    };
    delete vm.spec.template.spec.domain.resources;
    vm.spec.instancetype = { name: "u1.nano" };
    vm.spec.preference = { name: "cirros" };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    const vmi = await eventually(() => getJson<ExpandedVmi>(kubeconfig, "vmi", "e2e-it-nano"), {
      ...CLUSTER_WAIT,
      what: "the u1.nano VMI",
    });
    expect(vmi.spec.domain.cpu).toMatchObject({ sockets: 1, cores: 1, threads: 1 });
    expect(vmi.spec.domain.memory).toMatchObject({ guest: "512Mi" });
    expect(vmi.metadata.annotations).toMatchObject({
      "kubevirt.io/cluster-instancetype-name": "u1.nano",
      "kubevirt.io/cluster-preference-name": "cirros",
      "vm.kubevirt.io/os": "linux",
    });
    await kubectlOk(kubeconfig, ["delete", "vm", "e2e-it-nano", "--wait=false"]);
  });

  it("`virtctl create vm --instancetype --preference --volume-containerdisk` makes a VM kubectl creates and that runs", async () => {
    const created = await virtctl(kubeconfig, [
      "create",
      "vm",
      "--name",
      "e2e-it-virtctl",
      "--instancetype",
      `virtualmachineinstancetype/${IT}`,
      "--preference",
      "cirros",
      "--volume-containerdisk",
      "src:local/test-guest:latest",
    ]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain(`instancetype:\n    kind: virtualmachineinstancetype\n    name: ${IT}\n`);
    await kubectlOk(kubeconfig, ["create", "-f", "-"], created.stdout);
    const vmi = await eventually(
      async () => {
        const v = await getJson<ExpandedVmi>(kubeconfig, "vmi", "e2e-it-virtctl");
        expect(v.status?.phase).toBe("Running");
        return v;
      },
      { ...START_WAIT, what: "the virtctl-made VM running" },
    );
    expect(vmi.spec.domain.cpu).toMatchObject({ sockets: 2 });
    expect(vmi.spec.domain.memory).toMatchObject({ guest: "256Mi" });
    await kubectlOk(kubeconfig, ["delete", "vm", "e2e-it-virtctl", "--wait=false"]);
  });

  it("`virtctl create preference --namespaced` prints a preference kubectl creates (vmp)", async () => {
    const created = await virtctl(kubeconfig, [
      "create",
      "preference",
      "--namespaced",
      "--name",
      "e2e-cores",
      "--cpu-topology",
      "cores",
    ]);
    expect(created.code, created.stderr).toBe(0);
    const out = await kubectlOk(kubeconfig, ["create", "-f", "-"], created.stdout);
    expect(out.trim()).toBe("virtualmachinepreference.instancetype.kubevirt.io/e2e-cores created");
    const topology = await kubectlOk(kubeconfig, [
      "get",
      "vmp",
      "e2e-cores",
      "-o",
      "jsonpath={.spec.cpu.preferredCPUTopology}",
    ]);
    expect(topology).toBe("cores");
    await kubectlOk(kubeconfig, ["delete", "vmp", "e2e-cores"]);
  });

  it("inferFromVolume takes the instancetype and preference from the claim's labels", async () => {
    const claim = {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: {
        name: "e2e-infer-root",
        labels: {
          "instancetype.kubevirt.io/default-instancetype": "u1.nano",
          "instancetype.kubevirt.io/default-preference": "cirros",
        },
      },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "16Mi" } } },
    };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(claim));
    const vm = testGuestVm("e2e-it-infer", { runStrategy: "Halted" }) as {
      spec: Record<string, unknown> & {
        template: { spec: Record<string, unknown> & { domain: Record<string, unknown> } };
      };
    };
    delete vm.spec.template.spec.domain.resources;
    vm.spec.template.spec.volumes = [{ name: "root", persistentVolumeClaim: { claimName: "e2e-infer-root" } }];
    vm.spec.template.spec.domain.devices = { disks: [{ name: "root", disk: { bus: "virtio" } }] };
    vm.spec.instancetype = { inferFromVolume: "root" };
    vm.spec.preference = { inferFromVolume: "root" };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    const stored = await getJson<{ spec: { instancetype?: unknown; preference?: unknown } }>(
      kubeconfig,
      "vm",
      "e2e-it-infer",
    );
    expect(stored.spec.instancetype).toEqual({ name: "u1.nano" });
    expect(stored.spec.preference).toEqual({ name: "cirros" });
    await kubectlOk(kubeconfig, ["delete", "vm", "e2e-it-infer"]);
    await kubectlOk(kubeconfig, ["delete", "pvc", "e2e-infer-root", "--wait=false"]);
  });

  it("refuses a VM that also sets memory, with KubeVirt's conflict message", async () => {
    const r = await kubectl(kubeconfig, ["create", "-f", "-"], vmOf("e2e-it-conflict", IT, true));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      // kubectl prints a 422 with causes as "The request is invalid: <field>: <message>", as against KubeVirt.
      "The request is invalid: spec.template.spec.domain.resources.requests.memory: VM field(s) spec.template.spec.domain.resources.requests.memory conflicts with selected instance type",
    );
  });

  it("a VM whose instancetype does not exist is accepted and reports FailedFindInstancetype", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], vmOf("e2e-it-missing", "e2e-nope", true));
    const failure = await eventually(
      async () => {
        const vm = await getJson<VmStatusView>(kubeconfig, "vm", "e2e-it-missing");
        const c = vm.status?.conditions?.find((x) => x.type === "Failure");
        expect(c?.reason).toBe("FailedFindInstancetype");
        return c;
      },
      { ...CLUSTER_WAIT, what: "the Failure condition" },
    );
    expect(failure?.message).toContain('"e2e-nope" not found');
    const vmi = await kubectl(kubeconfig, ["get", "vmi", "e2e-it-missing"]);
    expect(vmi.code).not.toBe(0);
  });
});
