/**
 * The kinds the API fuzz lane writes, each with a valid seed object (namespace `fuzz`), the virt-api webhooks that
 * admit it, and whether it is built in (strategic merge patches). Schemas are attached from /openapi/v3 at run time.
 */
import type { FuzzTarget } from "./api-fuzz.ts";
import type { Json } from "./generate.ts";

const NS = "fuzz";
const core = (plural: string) => `/api/v1/namespaces/${NS}/${plural}`;
const group = (gv: string, plural: string) => `/apis/${gv}/namespaces/${NS}/${plural}`;

const vmiSpec: Json = {
  domain: {
    resources: { requests: { memory: "64Mi", cpu: "100m" }, limits: { memory: "64Mi" } },
    memory: { guest: "64Mi" },
    devices: {
      disks: [{ name: "containerdisk", disk: { bus: "virtio" } }],
      interfaces: [{ name: "default", masquerade: {} }],
    },
  },
  networks: [{ name: "default", pod: {} }],
  volumes: [{ name: "containerdisk", containerDisk: { image: "local/test-guest:latest" } }],
};

/** A fresh list of targets (each run attaches schemas to its own copies). */
export function fuzzTargets(): FuzzTarget[] {
  return [
    {
      path: core("configmaps"),
      kind: "ConfigMap",
      builtin: true,
      seed: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", labels: { a: "b" } }, data: { k: "v" } },
    },
    {
      path: core("secrets"),
      kind: "Secret",
      builtin: true,
      seed: { apiVersion: "v1", kind: "Secret", metadata: { name: "x" }, type: "Opaque", data: { k: "dg==" } },
    },
    {
      path: core("pods"),
      kind: "Pod",
      builtin: true,
      seed: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "x" },
        spec: {
          containers: [
            {
              name: "c",
              image: "busybox",
              resources: { requests: { memory: "64Mi", cpu: "100m" }, limits: { memory: "128Mi" } },
            },
          ],
        },
      },
    },
    {
      path: core("services"),
      kind: "Service",
      builtin: true,
      seed: { apiVersion: "v1", kind: "Service", metadata: { name: "x" }, spec: { ports: [{ port: 80 }] } },
    },
    {
      path: group("kubevirt.io/v1", "virtualmachines"),
      kind: "VirtualMachine",
      webhooks: ["/virtualmachines-mutate", "/virtualmachines-validate"],
      seed: {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachine",
        metadata: { name: "x" },
        spec: { runStrategy: "Halted", template: { metadata: { labels: { app: "fuzz" } }, spec: vmiSpec } },
      },
    },
    {
      path: group("kubevirt.io/v1", "virtualmachineinstances"),
      kind: "VirtualMachineInstance",
      webhooks: [
        "/virtualmachineinstances-mutate",
        "/virtualmachineinstances-validate-create",
        "/virtualmachineinstances-validate-update",
      ],
      seed: { apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstance", metadata: { name: "x" }, spec: vmiSpec },
    },
    {
      path: group("kubevirt.io/v1", "virtualmachineinstancemigrations"),
      kind: "VirtualMachineInstanceMigration",
      webhooks: ["/migration-mutate-create", "/migration-validate-create", "/migration-validate-update"],
      seed: {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceMigration",
        metadata: { name: "x" },
        spec: { vmiName: "fuzz-a" },
      },
    },
    {
      path: group("kubevirt.io/v1", "virtualmachineinstancereplicasets"),
      kind: "VirtualMachineInstanceReplicaSet",
      webhooks: ["/virtualmachinereplicaset-validate"],
      seed: {
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceReplicaSet",
        metadata: { name: "x" },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: "fuzz" } },
          template: { metadata: { labels: { app: "fuzz" } }, spec: vmiSpec },
        },
      },
    },
    {
      path: group("pool.kubevirt.io/v1beta1", "virtualmachinepools"),
      kind: "VirtualMachinePool",
      webhooks: ["/virtualmachinepool-validate"],
      seed: {
        apiVersion: "pool.kubevirt.io/v1beta1",
        kind: "VirtualMachinePool",
        metadata: { name: "x" },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: "fuzz" } },
          virtualMachineTemplate: {
            metadata: { labels: { app: "fuzz" } },
            spec: { runStrategy: "Halted", template: { metadata: { labels: { app: "fuzz" } }, spec: vmiSpec } },
          },
        },
      },
    },
    {
      path: group("instancetype.kubevirt.io/v1beta1", "virtualmachineinstancetypes"),
      kind: "VirtualMachineInstancetype",
      webhooks: ["/virtualmachineinstancetypes-validate"],
      seed: {
        apiVersion: "instancetype.kubevirt.io/v1beta1",
        kind: "VirtualMachineInstancetype",
        metadata: { name: "x" },
        spec: { cpu: { guest: 1 }, memory: { guest: "64Mi" } },
      },
    },
    {
      path: group("instancetype.kubevirt.io/v1beta1", "virtualmachinepreferences"),
      kind: "VirtualMachinePreference",
      webhooks: ["/virtualmachinepreferences-validate"],
      seed: {
        apiVersion: "instancetype.kubevirt.io/v1beta1",
        kind: "VirtualMachinePreference",
        metadata: { name: "x" },
        spec: { devices: { preferredDiskBus: "virtio" } },
      },
    },
  ];
}
