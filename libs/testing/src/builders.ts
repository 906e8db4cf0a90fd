/**
 * Object builders for tests (KubeVirt `libvmi`): `newVmi("vmi1", withMemory("1Gi"), withCpus(2))`. Each `with*`
 * option edits the object being built; builders return fresh objects with namespace `default` and a uid.
 */
import { randomUUID } from "node:crypto";
import type {
  RunStrategy,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VmiPhase,
} from "@kvt/api";
import type { Node, Pod } from "@kvt/kube";

/** An option that edits an object under construction. */
export type Option<T> = (obj: T) => void;

const meta = (
  name: string,
): { name: string; namespace: string; uid: string; resourceVersion: string; creationTimestamp: string } => ({
  name,
  namespace: "default",
  uid: randomUUID(),
  resourceVersion: "1",
  creationTimestamp: new Date(Date.now() - 60_000).toISOString(),
});

/** A VMI with 128Mi of memory, one disk-less domain, in namespace `default`. */
export function newVmi(name = "testvmi", ...options: Option<VirtualMachineInstance>[]): VirtualMachineInstance {
  const vmi: VirtualMachineInstance = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: meta(name),
    spec: { domain: { devices: {}, resources: { requests: { memory: "128Mi" } } } },
  };
  for (const o of options) o(vmi);
  return vmi;
}

/** A VM whose template is `newVmi`'s spec; runStrategy Always unless an option changes it. */
export function newVm(name = "testvm", ...options: Option<VirtualMachine>[]): VirtualMachine {
  const vm: VirtualMachine = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { ...meta(name), generation: 1 },
    spec: {
      runStrategy: "Always",
      template: {
        metadata: { labels: { "kubevirt.io/vm": name } },
        spec: {
          domain: { devices: {}, firmware: { uuid: randomUUID() }, resources: { requests: { memory: "128Mi" } } },
        },
      },
    },
  };
  for (const o of options) o(vm);
  return vm;
}

/** A VMIM for `vmiName`. */
export function newMigration(
  name: string,
  vmiName: string,
  ...options: Option<VirtualMachineInstanceMigration>[]
): VirtualMachineInstanceMigration {
  const m: VirtualMachineInstanceMigration = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstanceMigration",
    metadata: {
      ...meta(name),
      labels: { "kubevirt.io/vmi-name": vmiName },
      finalizers: ["kubevirt.io/migrationJobFinalize"],
    },
    spec: { vmiName },
  };
  for (const o of options) o(m);
  return m;
}

/** A Pod in namespace `default`. */
export function newPod(name: string, ...options: Option<Pod>[]): Pod {
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(name),
    spec: { containers: [{ name: "compute" }] },
    status: { phase: "Pending" },
  };
  for (const o of options) o(pod);
  return pod;
}

/** A Node with a fresh virt-handler heartbeat and `kubevirt.io/schedulable=true`. */
export function newNode(name: string, ...options: Option<Node>[]): Node {
  const node: Node = {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      uid: randomUUID(),
      resourceVersion: "1",
      labels: { "kubevirt.io/schedulable": "true" },
      annotations: { "kubevirt.io/heartbeat": new Date().toISOString() },
    },
    status: { addresses: [{ type: "InternalIP", address: "127.0.0.1" }] },
  };
  for (const o of options) o(node);
  return node;
}

/** Sets the guest memory request (`"1Gi"`). */
export function withMemory(memory: string): Option<VirtualMachineInstance> {
  return (vmi) => {
    vmi.spec.domain.resources = {
      ...vmi.spec.domain.resources,
      requests: { ...vmi.spec.domain.resources?.requests, memory },
    };
  };
}

/** Sets `cpu.cores`. */
export function withCpus(cores: number): Option<VirtualMachineInstance> {
  return (vmi) => {
    vmi.spec.domain.cpu = { ...vmi.spec.domain.cpu, cores };
  };
}

/** Sets the VMI phase (and nodeName when given). */
export function withPhase(phase: VmiPhase, nodeName?: string): Option<VirtualMachineInstance> {
  return (vmi) => {
    vmi.status = { ...vmi.status, phase };
    if (nodeName) vmi.status.nodeName = nodeName;
  };
}

/** Merges labels into any object's metadata. */
export function withLabels<T extends { metadata?: { labels?: Record<string, string> } }>(
  labels: Record<string, string>,
): Option<T> {
  return (obj) => {
    obj.metadata ??= {};
    obj.metadata.labels = { ...obj.metadata.labels, ...labels };
  };
}

/** Sets the VM's runStrategy (and clears `running`). */
export function withRunStrategy(runStrategy: RunStrategy): Option<VirtualMachine> {
  return (vm) => {
    delete vm.spec.running;
    vm.spec.runStrategy = runStrategy;
  };
}

/** Sets the deprecated `running` field (and clears runStrategy). */
export function withRunning(running: boolean): Option<VirtualMachine> {
  return (vm) => {
    delete vm.spec.runStrategy;
    vm.spec.running = running;
  };
}

/** Makes `owner` the controller owner of `obj`. */
export function ownedBy<T extends { metadata?: { ownerReferences?: unknown[] } }>(owner: {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; uid?: string };
}): Option<T> {
  return (obj) => {
    obj.metadata ??= {};
    obj.metadata.ownerReferences = [
      {
        apiVersion: owner.apiVersion ?? "v1",
        kind: owner.kind ?? "",
        name: owner.metadata?.name ?? "",
        uid: owner.metadata?.uid ?? "",
        controller: true,
        blockOwnerDeletion: true,
      },
    ];
  };
}
