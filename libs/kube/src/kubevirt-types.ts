/** The kubevirt.io resource types (for typed clients and informers), from the API constants. */
import { GROUP, KIND, MIGRATIONS_GROUP, POOL_GROUP, POOL_VERSION, RESOURCE, VERSION } from "@kvt/api";
import type { ResourceType } from "./client/resource-client.ts";

/** VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration, MigrationPolicy, KubeVirt, VMIRS, VirtualMachinePool. */
export const KUBEVIRT_V1 = {
  virtualMachines: {
    group: GROUP,
    version: VERSION,
    plural: RESOURCE.virtualMachines,
    kind: KIND.VirtualMachine,
    namespaced: true,
  },
  virtualMachineInstances: {
    group: GROUP,
    version: VERSION,
    plural: RESOURCE.virtualMachineInstances,
    kind: KIND.VirtualMachineInstance,
    namespaced: true,
  },
  virtualMachineInstanceMigrations: {
    group: GROUP,
    version: VERSION,
    plural: RESOURCE.virtualMachineInstanceMigrations,
    kind: KIND.VirtualMachineInstanceMigration,
    namespaced: true,
  },
  migrationPolicies: {
    group: MIGRATIONS_GROUP,
    version: "v1alpha1",
    plural: RESOURCE.migrationPolicies,
    kind: KIND.MigrationPolicy,
    namespaced: false,
  },
  kubevirts: {
    group: GROUP,
    version: VERSION,
    plural: RESOURCE.kubevirts,
    kind: KIND.KubeVirt,
    namespaced: true,
  },
  virtualMachineInstanceReplicaSets: {
    group: GROUP,
    version: VERSION,
    plural: RESOURCE.virtualMachineInstanceReplicaSets,
    kind: KIND.VirtualMachineInstanceReplicaSet,
    namespaced: true,
  },
  virtualMachinePools: {
    group: POOL_GROUP,
    version: POOL_VERSION,
    plural: RESOURCE.virtualMachinePools,
    kind: KIND.VirtualMachinePool,
    namespaced: true,
  },
} as const satisfies Record<string, ResourceType>;
