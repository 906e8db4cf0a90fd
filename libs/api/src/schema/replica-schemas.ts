/**
 * VirtualMachineInstanceReplicaSet (kubevirt.io/v1) and VirtualMachinePool (pool.kubevirt.io/v1beta1): spec, status
 * and object, with KubeVirt's field names and descriptions (`core/v1/types.go`, `pool/v1beta1/types.go`).
 */
import { arr, bool, int, intOrString, marker, obj, str, strEnum } from "./builder.ts";
import { conditionSchema, labelSelectorSchema, objectMetaSchema } from "./meta.ts";
import { vmiTemplateSchema, vmSpecSchema } from "./vm-schemas.ts";

const replicasCondition = conditionSchema;

/** VirtualMachineInstanceReplicaSetSpec. */
export const vmirsSpecSchema = obj(
  {
    replicas: int({
      description:
        "Number of desired pods. This is a pointer to distinguish between explicit\nzero and not specified. Defaults to 1.",
    }),
    selector: labelSelectorSchema,
    template: vmiTemplateSchema,
    paused: bool({ description: "Indicates that the replica set is paused." }),
  },
  {
    required: ["selector", "template"],
    description: "VirtualMachineInstance Spec contains the VirtualMachineInstance specification.",
  },
);

/** VirtualMachineInstanceReplicaSetStatus. */
export const vmirsStatusSchema = obj(
  {
    replicas: int({
      description: "Total number of non-terminated pods targeted by this deployment (their labels match the selector).",
    }),
    readyReplicas: int({ description: "The number of ready replicas for this replica set." }),
    conditions: arr(replicasCondition),
    labelSelector: str({
      description: "Canonical form of the label selector for HPA which consumes it through the scale subresource.",
    }),
  },
  {
    nullable: true,
    description:
      "Status is the high level overview of how the VirtualMachineInstance is doing. It contains information available to controllers and users.",
  },
);

/** VirtualMachineInstanceReplicaSet. */
export const vmirsSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: vmirsSpecSchema,
    status: vmirsStatusSchema,
  },
  {
    required: ["spec"],
    description:
      "VirtualMachineInstance is *the* VirtualMachineInstance Definition. It represents a virtual machine in the runtime environment of kubernetes.",
  },
);

/** VirtualMachinePool sort policies (scale-in and update selection). */
export const POOL_SORT_POLICIES = ["AscendingOrder", "DescendingOrder", "Newest", "Oldest", "Random"] as const;
const STATE_PRESERVATIONS = ["Disabled", "Offline", "Online"] as const;

const statePreservation = strEnum(STATE_PRESERVATIONS, {
  description:
    "Specifies if and how to preserve the state of the VMs selected during scale-in.\nDisabled - (Default) all state for VMs selected for scale-in will be deleted.\nOffline - PVCs for VMs selected for scale-in will be preserved and reused on scale-out (decreases provisioning time during scale out).\nOnline - PVCs and memory for VMs selected for scale-in will be preserved and reused on scale-out (decreases provisioning and boot time during scale out).",
});

const selectionPolicy = obj(
  {
    sortPolicy: strEnum(POOL_SORT_POLICIES, {
      description: "SortPolicy is a catch-all policy [AscendingOrder|DescendingOrder|Newest|Oldest|Random]",
    }),
    selectors: obj(
      {
        labelSelector: labelSelectorSchema,
        nodeSelectorRequirementMatcher: arr(
          obj({ key: str(), operator: str(), values: arr(str()) }, { required: ["key", "operator"] }),
          { description: "NodeSelectorRequirementMatcher is a list of node selector requirement for VMs." },
        ),
      },
      { description: "Selectors is a list of selection policies." },
    ),
  },
  { description: "SelectionPolicy defines the priority in which VM instances are selected for proactive scale-in" },
);

/** The VM template of a pool: metadata plus a VirtualMachineSpec. */
export const vmTemplateSchema = obj(
  { metadata: objectMetaSchema, spec: vmSpecSchema },
  { description: "Template describes the VM that will be created." },
);

/** VirtualMachinePoolSpec. */
export const vmPoolSpecSchema = obj(
  {
    replicas: int({
      minimum: 0,
      description:
        "Number of desired pods. This is a pointer to distinguish between explicit\nzero and not specified. Defaults to 1.",
    }),
    selector: labelSelectorSchema,
    virtualMachineTemplate: vmTemplateSchema,
    paused: bool({ description: "Indicates that the pool is paused." }),
    nameGeneration: obj(
      { appendIndexToConfigMapRefs: bool(), appendIndexToSecretRefs: bool() },
      { description: "Options for the name generation in a pool." },
    ),
    maxUnavailable: intOrString({
      description:
        "(Defaults to 100%) Integer or string pointer, that when set represents either a percentage or number of VMs in a pool that can be unavailable (ready condition false) at a time during automated update.",
    }),
    scaleInStrategy: obj(
      {
        unmanaged: marker({
          description:
            "The VM is never touched after creation. Users are responsible for scaling in the pool manually.",
        }),
        opportunistic: obj({ statePreservation }),
        proactive: obj({ selectionPolicy, statePreservation }),
      },
      { description: "ScaleInStrategy specifies how the VMPool controller manages scaling in VMs within a VMPool" },
    ),
    updateStrategy: obj(
      { unmanaged: marker(), opportunistic: marker(), proactive: obj({ selectionPolicy }) },
      { description: "UpdateStrategy specifies how the VMPool controller manages updating VMs within a VMPool" },
    ),
    autohealing: obj(
      {
        startUpFailureThreshold: int({ format: "int32", minimum: 1 }),
        minFailingToStartDuration: str(),
      },
      {
        description: "Autohealing specifies when a VMpool should replace a failing VM with a reprovisioned instance",
      },
    ),
  },
  { required: ["selector", "virtualMachineTemplate"] },
);

/** VirtualMachinePoolStatus. */
export const vmPoolStatusSchema = obj({
  replicas: int(),
  readyReplicas: int(),
  conditions: arr(replicasCondition, { listType: "atomic" }),
  labelSelector: str({
    description: "Canonical form of the label selector for HPA which consumes it through the scale subresource.",
  }),
});

/** VirtualMachinePool. */
export const vmPoolSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: vmPoolSpecSchema,
    status: vmPoolStatusSchema,
  },
  {
    required: ["spec"],
    description:
      "VirtualMachinePool resource contains a VirtualMachine configuration\nthat can be used to replicate multiple VirtualMachine resources.",
  },
);
