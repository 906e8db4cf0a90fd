/**
 * The TypeScript types of the API, all inferred from the schemas in `schema/` (never written by hand), so the CRD,
 * the strict decoder and the code can never disagree.
 */
import type { Infer } from "./schema/builder.ts";
import type {
  developerConfigurationSchema,
  kubevirtConfigurationSchema,
  kubevirtSchema,
  selfSignConfigurationSchema,
} from "./schema/kubevirt-schemas.ts";
import type { affinitySchema, conditionSchema, objectMetaSchema, tolerationSchema } from "./schema/meta.ts";
import type {
  migrationConfigurationSchema,
  migrationPolicySchema,
  migrationPolicySpecSchema,
  migrationStateSchema,
  vmimSchema,
  vmimSpecSchema,
  vmimStatusSchema,
} from "./schema/migration-schemas.ts";
import type { vmiPresetSchema } from "./schema/preset-schemas.ts";
import type {
  vmirsSchema,
  vmirsSpecSchema,
  vmirsStatusSchema,
  vmPoolSchema,
  vmPoolSpecSchema,
  vmPoolStatusSchema,
} from "./schema/replica-schemas.ts";
import type {
  stateChangeRequestSchema,
  vmiTemplateSchema,
  vmSchema,
  vmSpecSchema,
  vmStatusSchema,
} from "./schema/vm-schemas.ts";
import type { vmiInterfaceStatusSchema, vmiSchema, vmiStatusSchema } from "./schema/vmi-schemas.ts";
import type {
  diskSchema,
  domainSchema,
  interfaceSchema,
  networkSchema,
  vmiSpecSchema,
  volumeSchema,
} from "./schema/vmi-spec.ts";

/** metav1.ObjectMeta (the fields our components use). */
export type ObjectMeta = Infer<typeof objectMetaSchema>;
/** A status condition (VM, VMI and VMIM). */
export type Condition = Infer<typeof conditionSchema>;
/** core/v1 Toleration. */
export type Toleration = Infer<typeof tolerationSchema>;
/** core/v1 Affinity. */
export type Affinity = Infer<typeof affinitySchema>;

/** VirtualMachineInstanceSpec. */
export type VirtualMachineInstanceSpec = Infer<typeof vmiSpecSchema>;
/** DomainSpec: the virtual hardware. */
export type DomainSpec = Infer<typeof domainSchema>;
/** One disk. */
export type Disk = Infer<typeof diskSchema>;
/** One network interface. */
export type Interface = Infer<typeof interfaceSchema>;
/** One volume. */
export type Volume = Infer<typeof volumeSchema>;
/** One network. */
export type Network = Infer<typeof networkSchema>;
/** VirtualMachineInstanceStatus. */
export type VirtualMachineInstanceStatus = Infer<typeof vmiStatusSchema>;
/** One entry of `vmi.status.interfaces`. */
export type VirtualMachineInstanceNetworkInterface = Infer<typeof vmiInterfaceStatusSchema>;
/** VirtualMachineInstanceMigrationState (`vmi.status.migrationState`). */
export type MigrationState = Infer<typeof migrationStateSchema>;
/** VirtualMachineInstance. */
export type VirtualMachineInstance = Infer<typeof vmiSchema>;
/** VirtualMachineInstancePreset (deprecated by KubeVirt, still served and applied). */
export type VirtualMachineInstancePreset = Infer<typeof vmiPresetSchema>;

/** VirtualMachineSpec. */
export type VirtualMachineSpec = Infer<typeof vmSpecSchema>;
/** The VMI template inside a VM. */
export type VirtualMachineInstanceTemplateSpec = Infer<typeof vmiTemplateSchema>;
/** VirtualMachineStatus. */
export type VirtualMachineStatus = Infer<typeof vmStatusSchema>;
/** One `vm.status.stateChangeRequests` entry. */
export type VirtualMachineStateChangeRequest = Infer<typeof stateChangeRequestSchema>;
/** VirtualMachine. */
export type VirtualMachine = Infer<typeof vmSchema>;

/** VirtualMachineInstanceMigrationSpec. */
export type VirtualMachineInstanceMigrationSpec = Infer<typeof vmimSpecSchema>;
/** VirtualMachineInstanceMigrationStatus. */
export type VirtualMachineInstanceMigrationStatus = Infer<typeof vmimStatusSchema>;
/** VirtualMachineInstanceMigration. */
export type VirtualMachineInstanceMigration = Infer<typeof vmimSchema>;

/** MigrationConfiguration (cluster knobs; also `migrationState.migrationConfiguration`). */
export type MigrationConfiguration = Infer<typeof migrationConfigurationSchema>;
/** MigrationPolicySpec. */
export type MigrationPolicySpec = Infer<typeof migrationPolicySpecSchema>;
/** MigrationPolicy. */
export type MigrationPolicy = Infer<typeof migrationPolicySchema>;

/**
 * One validation failure as KubeVirt's validators build it: a `metav1.StatusCause` with Go's field names. Not the
 * JSON form: on the wire the type travels under `reason` (`StatusCause` in `status.ts`; `toWireCauses` converts).
 */
export interface ValidationCause {
  /** metav1.CauseType, e.g. "FieldValueInvalid", "FieldValueRequired". */
  type: string;
  /** Human-readable description, KubeVirt's wording. */
  message: string;
  /** Full field path, e.g. `spec.template.spec.domain.devices.disks[1].name`. */
  field: string;
}

/** The KubeVirt CR (kubevirt.io/v1 KubeVirt): the cluster configuration object. */
export type KubeVirt = Infer<typeof kubevirtSchema>;
/** KubeVirt `spec.certificateRotateStrategy.selfSigned` (KubeVirtSelfSignConfiguration). */
export type KubeVirtSelfSignConfiguration = Infer<typeof selfSignConfigurationSchema>;
/** KubeVirt `spec.configuration`. */
export type KubeVirtConfiguration = Infer<typeof kubevirtConfigurationSchema>;
/** KubeVirt `spec.configuration.developerConfiguration`. */
export type DeveloperConfiguration = Infer<typeof developerConfigurationSchema>;

/** VirtualMachineInstanceReplicaSetSpec. */
export type VirtualMachineInstanceReplicaSetSpec = Infer<typeof vmirsSpecSchema>;
/** VirtualMachineInstanceReplicaSetStatus. */
export type VirtualMachineInstanceReplicaSetStatus = Infer<typeof vmirsStatusSchema>;
/** VirtualMachineInstanceReplicaSet (kubevirt.io/v1). */
export type VirtualMachineInstanceReplicaSet = Infer<typeof vmirsSchema>;
/** VirtualMachinePoolSpec. */
export type VirtualMachinePoolSpec = Infer<typeof vmPoolSpecSchema>;
/** VirtualMachinePoolStatus. */
export type VirtualMachinePoolStatus = Infer<typeof vmPoolStatusSchema>;
/** VirtualMachinePool (pool.kubevirt.io/v1beta1). */
export type VirtualMachinePool = Infer<typeof vmPoolSchema>;
