/**
 * The migration objects: the cluster migration configuration (KubeVirt CR `spec.configuration.migrations`, also
 * copied into `vmi.status.migrationState.migrationConfiguration`), the VMI's `migrationState`, the
 * VirtualMachineInstanceMigration and the MigrationPolicy (migrations.kubevirt.io/v1alpha1).
 */
import { MIGRATION_ABORT_STATUSES, MIGRATION_MODES, MIGRATION_PHASES, MIGRATION_PRIORITIES } from "../constants.ts";
import { arr, bool, int, map, obj, quantity, str, strEnum, time } from "./builder.ts";
import { conditionSchema, objectMetaSchema } from "./meta.ts";

/** MigrationConfiguration: the cluster-wide knobs (defaults in `migration-config.ts`). */
export const migrationConfigurationSchema = obj(
  {
    parallelMigrationsPerCluster: int({
      format: "int64",
      description: "Maximum migrations running at once in the cluster. Default 5.",
    }),
    parallelOutboundMigrationsPerNode: int({
      format: "int64",
      description: "Maximum outbound migrations per source node. Default 2.",
    }),
    bandwidthPerMigration: quantity({
      description: "Bandwidth cap per migration, per second; 0 = unlimited (the default).",
    }),
    completionTimeoutPerGiB: int({
      format: "int64",
      description:
        "Seconds allowed per GiB of guest memory before the migration is aborted (or switched to post-copy). Default 150.",
    }),
    progressTimeout: int({
      format: "int64",
      description: "Abort when the remaining data has not shrunk for this many seconds. Default 150.",
    }),
    unsafeMigrationOverride: bool(),
    allowAutoConverge: bool({ description: "Throttle the vCPUs when the migration does not converge. Default false." }),
    allowPostCopy: bool({ description: "Switch to post-copy when the completion timeout is reached. Default false." }),
    allowWorkloadDisruption: bool({
      description:
        "When the completion timeout is reached, post-copy (if allowed) or pause the guest. Defaults to allowPostCopy.",
    }),
    maxDowntimeMs: int({
      format: "int64",
      description: "Maximum switchover downtime in milliseconds. Default 900 (1..2000000).",
    }),
    disableTLS: bool(),
    network: str(),
    nodeDrainTaintKey: str(),
    matchSELinuxLevelOnMigration: bool(),
    utilityVolumesTimeout: int({ format: "int64" }),
    experimental: obj({
      compression: str(),
      downtimeTuning: obj({
        initialMs: int({ format: "int64" }),
        startAfterIteration: int({ format: "int64" }),
        steps: int(),
        cooldownSeconds: int(),
      }),
      stallDetector: obj({
        ewmaAlpha: quantity(),
        stallMargin: int({ format: "int64" }),
        stallProgressTimeout: int({ format: "int64" }),
        switchoverTimeout: int({ format: "int64" }),
        completionTimeoutFactor: quantity(),
        precopyPossibleFactor: quantity(),
        patienceWindowDecayFactor: quantity(),
        searchLocalMinima: bool(),
      }),
    }),
  },
  { description: "Migration configuration options." },
);

const sideState = obj({
  node: str(),
  pod: str(),
  migrationUID: str(),
  virtualMachineInstanceUID: str(),
  domainName: str(),
  domainNamespace: str(),
  syncAddress: str(),
  selinuxContext: str(),
  nodeSelectors: map(str()),
  persistentStatePVCName: str(),
  nodeAddress: str(),
  directMigrationNodePorts: map(int()),
  cpuSet: arr(int()),
  nodeTopology: str(),
  domainDetected: bool(),
  domainReadyTimestamp: time({ nullable: true }),
  attachmentPodUID: str(),
});

/** VirtualMachineInstanceMigrationState: the VMI's (and the VMIM's) record of the current/last migration. */
export const migrationStateSchema = obj(
  {
    startTimestamp: time({ nullable: true, description: "The time the migration action began" }),
    endTimestamp: time({ nullable: true, description: "The time the migration action ended" }),
    targetNodeDomainReadyTimestamp: time({
      nullable: true,
      description: "The timestamp at which the target node detects the domain is active",
    }),
    targetNodeDomainDetected: bool({ description: "The Target Node has seen the Domain Start Event" }),
    targetNodeAddress: str({ description: "The address of the target node to use for the migration" }),
    targetDirectMigrationNodePorts: map(int(), {
      description: "The list of ports opened for live migration on the destination node",
    }),
    targetNode: str({ description: "The target node that the VMI is moving to" }),
    targetPod: str({ description: "The target pod that the VMI is moving to" }),
    targetAttachmentPodUID: str(),
    targetCPUSet: arr(int()),
    targetNodeTopology: str(),
    targetMemoryOverhead: quantity(),
    sourceNode: str({ description: "The source node that the VMI originated on" }),
    sourcePod: str(),
    sourcePersistentStatePVCName: str(),
    targetPersistentStatePVCName: str(),
    sourceState: sideState,
    targetState: sideState,
    completed: bool({ description: "Indicates the migration completed" }),
    failed: bool({ description: "Indicates that the migration failed" }),
    abortRequested: bool({ description: "Indicates that the migration has been requested to abort" }),
    abortStatus: strEnum(MIGRATION_ABORT_STATUSES, {
      description: "Indicates the final status of the live migration abortion",
    }),
    failureReason: str({ description: "Contains the reason why the migration failed" }),
    migrationUid: str({ description: "The VirtualMachineInstanceMigration object associated with this migration" }),
    mode: strEnum(MIGRATION_MODES, {
      description: "Lets us know if the vmi is currently running pre or post copy migration",
    }),
    migrationPolicyName: str({ description: "Name of the migration policy. If string is empty, no policy is matched" }),
    migrationConfiguration: migrationConfigurationSchema,
    migrationNetworkType: str(),
  },
  { nullable: true, description: "Represents the status of a live migration" },
);

/** VirtualMachineInstanceMigration spec. */
export const vmimSpecSchema = obj({
  vmiName: str({
    description: "The name of the VMI to perform the migration on. VMI must exist in the migration objects namespace",
  }),
  addedNodeSelector: map(str(), {
    description:
      "AddedNodeSelector is an additional selector that can be used to\ncomplement a NodeSelector or NodeAffinity as set on the VM\nto restrict the set of allowed target nodes for a migration.\nIn case of key collisions, values set on the VM objects\nare going to be preserved to ensure that addedNodeSelector\ncan only restrict but not bypass constraints already set on the VM object.",
  }),
  priority: strEnum(MIGRATION_PRIORITIES, {
    description:
      "Priority of the migration. This can be one of `system-critical`, `user-triggered`, `system-maintenance`.",
  }),
  sendTo: obj(
    { migrationID: str(), connectURL: str({ description: "Where the receiving cluster's target listens." }) },
    {
      required: ["migrationID", "connectURL"],
      description: "Source half of a cross-cluster (decentralized) migration.",
    },
  ),
  receive: obj(
    { migrationID: str() },
    { required: ["migrationID"], description: "Target half of a cross-cluster (decentralized) migration." },
  ),
});

const phaseTransition = obj({ phase: strEnum(MIGRATION_PHASES), phaseTransitionTimestamp: time({ nullable: true }) });

/** VirtualMachineInstanceMigration status. */
export const vmimStatusSchema = obj({
  phase: strEnum(MIGRATION_PHASES, {
    description:
      "VirtualMachineInstanceMigrationPhase is a label for the condition of a VirtualMachineInstanceMigration at the current time.",
  }),
  phaseTransitionTimestamps: arr(phaseTransition, {
    description: "PhaseTransitionTimestamp is the timestamp of when the last phase change occurred",
  }),
  conditions: arr(conditionSchema),
  migrationState: migrationStateSchema,
  synchronizationAddresses: arr(str()),
});

/** VirtualMachineInstanceMigration. */
export const vmimSchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: vmimSpecSchema,
    status: vmimStatusSchema,
  },
  {
    required: ["spec"],
    description:
      "VirtualMachineInstanceMigration represents the object tracking a VMI's migration\nto another host in the cluster",
  },
);

/** MigrationPolicy spec: label selectors plus overrides of the cluster configuration. */
export const migrationPolicySpecSchema = obj(
  {
    selectors: obj(
      {
        namespaceSelector: map(str(), { description: "Labels the VMI's namespace must carry (exact match)." }),
        virtualMachineInstanceSelector: map(str(), { description: "Labels the VMI must carry (exact match)." }),
      },
      { description: "Selectors: every label listed must match." },
    ),
    allowAutoConverge: bool(),
    bandwidthPerMigration: quantity(),
    completionTimeoutPerGiB: int({ format: "int64" }),
    allowPostCopy: bool(),
    allowWorkloadDisruption: bool(),
    maxDowntimeMs: int({ format: "int64" }),
  },
  { required: ["selectors"] },
);

/** MigrationPolicy (cluster-scoped). */
export const migrationPolicySchema = obj(
  {
    apiVersion: str(),
    kind: str(),
    metadata: objectMetaSchema,
    spec: migrationPolicySpecSchema,
    status: obj({}, { nullable: true }),
  },
  {
    required: ["spec"],
    description: "MigrationPolicy holds migration policy (i.e. configurations) to apply to a VM or group of VMs",
  },
);
