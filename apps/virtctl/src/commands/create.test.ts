import { describe, expect, it } from "vitest";
import {
  createInstancetypeManifest,
  createPreferenceManifest,
  createVmManifest,
  parseParams,
  toYaml,
} from "./create.ts";

describe("virtctl create vm (KubeVirt pkg/virtctl/create/vm)", () => {
  it("defaults: runStrategy Always, grace period 180, memory.guest 512Mi", () => {
    const vm = createVmManifest({}, "vm-abcde");
    expect(toYaml(vm).replace(/^\n/, "")).toBe(
      [
        "apiVersion: kubevirt.io/v1",
        "kind: VirtualMachine",
        "metadata:",
        "  creationTimestamp: null",
        "  name: vm-abcde",
        "spec:",
        "  runStrategy: Always",
        "  template:",
        "    metadata:",
        "      creationTimestamp: null",
        "    spec:",
        "      domain:",
        "        devices: {}",
        "        memory:",
        "          guest: 512Mi",
        "        resources: {}",
        "      terminationGracePeriodSeconds: 180",
        "status: {}",
        "",
      ].join("\n"),
    );
  });

  it("an instancetype drops the memory; kinds are checked; volumes are named <vm>-containerdisk-0", () => {
    const vm = createVmManifest(
      {
        instancetype: "virtualmachineinstancetype/small",
        preference: "cirros",
        "volume-containerdisk": "src:reg/img:tag,bootorder:1",
      },
      "v",
    ) as { spec: { instancetype: unknown; preference: unknown; template: { spec: Record<string, unknown> } } };
    expect(vm.spec.instancetype).toEqual({ kind: "virtualmachineinstancetype", name: "small" });
    expect(vm.spec.preference).toEqual({ name: "cirros" });
    expect(vm.spec.template.spec.domain).toEqual({
      devices: { disks: [{ bootOrder: 1, name: "v-containerdisk-0" }] },
      resources: {},
    });
    expect(vm.spec.template.spec.volumes).toEqual([
      { name: "v-containerdisk-0", containerDisk: { image: "reg/img:tag" } },
    ]);
  });

  it.each([
    [
      { instancetype: "pod/x" },
      'failed to parse "--instancetype" flag: invalid instancetype kind "pod", supported values are: virtualmachineinstancetype, virtualmachineclusterinstancetype',
    ],
    [
      { "run-strategy": "Sometimes" },
      'failed to parse "--run-strategy" flag: invalid run strategy "Sometimes", supported values are: Always, Manual, Halted, Once, RerunOnFailure',
    ],
    [{ "volume-containerdisk": "name:x" }, 'failed to parse "--volume-containerdisk" flag: src must be specified'],
    [
      { "volume-pvc": "src:ns/claim" },
      'failed to parse "--volume-pvc" flag: not allowed to specify namespace of pvc "claim"',
    ],
    [{ "volume-pvc": "src:c,bootorder:0" }, 'failed to parse "--volume-pvc" flag: bootorder must be greater than 0'],
  ])("refuses %j as KubeVirt does", (values, message) => {
    expect(() => createVmManifest(values, "v")).toThrow(message);
  });

  it("parses params with colons in values and refuses unknown ones", () => {
    expect(parseParams("f", "src:a:b,name:n", ["src", "name"])).toEqual({ src: "a:b", name: "n" });
    expect(() => parseParams("f", "foo:1", ["src"])).toThrow('failed to parse "--f" flag: unknown param(s): foo:1');
  });
});

describe("virtctl create instancetype|preference (KubeVirt pkg/virtctl/create/instancetype, preference)", () => {
  it("a namespaced instancetype of --cpu and --memory; the cluster kind by default", () => {
    expect(createInstancetypeManifest({ cpu: "2", memory: "256Mi", namespaced: true, name: "small" }, "abcde")).toEqual(
      {
        apiVersion: "instancetype.kubevirt.io/v1beta1",
        kind: "VirtualMachineInstancetype",
        metadata: { creationTimestamp: null, name: "small" },
        spec: { cpu: { guest: 2 }, memory: { guest: "256Mi" } },
      },
    );
    const cluster = createInstancetypeManifest({ cpu: "1", memory: "1Gi" }, "abcde");
    expect(cluster.kind).toBe("VirtualMachineClusterInstancetype");
    expect(cluster.metadata).toEqual({ creationTimestamp: null, name: "clusterinstancetype-abcde" });
  });

  it.each([
    [{ cpu: "2" }, 'required flag(s) "memory" not set'],
    [{}, 'required flag(s) "cpu", "memory" not set'],
    [{ cpu: "0", memory: "1Gi" }, "cpu value must be greater than zero"],
    [
      { cpu: "1", memory: "1Gi", iothreadspolicy: "dedicated" },
      'failed to parse "--iothreadspolicy" flag: IOThread must be of value auto or shared',
    ],
  ])("instancetype %j is refused", (values, message) => {
    expect(() => createInstancetypeManifest(values, "x")).toThrow(message);
  });

  it("a preference with topology, machine type and storage class; unknown topologies refused", () => {
    expect(
      createPreferenceManifest(
        { "cpu-topology": "cores", "machine-type": "q35", "volume-storage-class": "local" },
        "abcde",
      ),
    ).toEqual({
      apiVersion: "instancetype.kubevirt.io/v1beta1",
      kind: "VirtualMachineClusterPreference",
      metadata: { creationTimestamp: null, name: "clusterpreference-abcde" },
      spec: {
        cpu: { preferredCPUTopology: "cores" },
        machine: { preferredMachineType: "q35" },
        volumes: { preferredStorageClassName: "local" },
      },
    });
    expect(createPreferenceManifest({ namespaced: true }, "abcde").metadata).toEqual({
      creationTimestamp: null,
      name: "preference-abcde",
    });
    expect(() => createPreferenceManifest({ "cpu-topology": "any" }, "x")).toThrow(
      'failed to parse "--cpu-topology" flag: CPU topology must have a value of sockets, cores, threads or spread',
    );
  });
});
