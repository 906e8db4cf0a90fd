/**
 * The strings of the kubevirt.io API, verbatim from KubeVirt (`staging/src/kubevirt.io/api/core/v1/types.go`):
 * group/version, kinds and resource names, labels, annotations, finalizers, phases, condition types and reasons.
 * Every component spells these through this module, never as literals.
 */

/** API group of the core objects. */
export const GROUP = "kubevirt.io";
/** The served and stored version. */
export const VERSION = "v1";
/** `apiVersion` of VM, VMI and VMIM. */
export const API_VERSION = "kubevirt.io/v1";
/** API group of MigrationPolicy. */
export const MIGRATIONS_GROUP = "migrations.kubevirt.io";
/** `apiVersion` of MigrationPolicy. */
export const MIGRATIONS_API_VERSION = "migrations.kubevirt.io/v1alpha1";
/** API group of VirtualMachinePool. */
export const POOL_GROUP = "pool.kubevirt.io";
/** The stored version of VirtualMachinePool (KubeVirt also serves v1alpha1, the same schema). */
export const POOL_VERSION = "v1beta1";
/** `apiVersion` of VirtualMachinePool. */
export const POOL_API_VERSION = "pool.kubevirt.io/v1beta1";
/** API group of the subresources virt-api serves (start, stop, migrate, console, ...). */
export const SUBRESOURCES_GROUP = "subresources.kubevirt.io";

/** Kind names. */
export const KIND = {
  VirtualMachine: "VirtualMachine",
  VirtualMachineInstance: "VirtualMachineInstance",
  VirtualMachineInstanceMigration: "VirtualMachineInstanceMigration",
  MigrationPolicy: "MigrationPolicy",
  KubeVirt: "KubeVirt",
  VirtualMachineInstanceReplicaSet: "VirtualMachineInstanceReplicaSet",
  VirtualMachinePool: "VirtualMachinePool",
  VirtualMachineInstancePreset: "VirtualMachineInstancePreset",
} as const;

/** Resource (plural) names, as in URLs. */
export const RESOURCE = {
  virtualMachines: "virtualmachines",
  virtualMachineInstances: "virtualmachineinstances",
  virtualMachineInstanceMigrations: "virtualmachineinstancemigrations",
  migrationPolicies: "migrationpolicies",
  kubevirts: "kubevirts",
  virtualMachineInstanceReplicaSets: "virtualmachineinstancereplicasets",
  virtualMachinePools: "virtualmachinepools",
  virtualMachineInstancePresets: "virtualmachineinstancepresets",
} as const;

/** Short names kubectl accepts. */
export const SHORT_NAMES = {
  VirtualMachine: ["vm", "vms"],
  VirtualMachineInstance: ["vmi", "vmis"],
  VirtualMachineInstanceMigration: ["vmim", "vmims"],
  MigrationPolicy: [],
  KubeVirt: ["kv", "kvs"],
  VirtualMachineInstanceReplicaSet: ["vmirs", "vmirss"],
  VirtualMachinePool: ["vmpool", "vmpools"],
  VirtualMachineInstancePreset: ["vmipreset", "vmipresets"],
} as const;

/** Labels (`kubevirt.io/...`). */
export const LABEL = {
  /** The app label; on launcher pods its value is "virt-launcher". */
  app: "kubevirt.io",
  /** Launcher pod -> UID of the VMI that created it. */
  createdBy: "kubevirt.io/created-by",
  /** VMI (and its pod) -> name of the VM that owns it. */
  vm: "kubevirt.io/vm",
  /** VMI -> node it runs on (set by virt-handler). */
  nodeName: "kubevirt.io/nodeName",
  /** VMIM -> name of the VMI it migrates (set by the migration mutator). */
  migrationSelector: "kubevirt.io/vmi-name",
  /** Target pod -> UID of the VMIM. */
  migrationJob: "kubevirt.io/migrationJobUID",
  /** Target pod -> name of the VMIM. */
  migrationName: "kubevirt.io/migrationName",
  /** VMI -> node the current migration targets. */
  migrationTargetNodeName: "kubevirt.io/migrationTargetNodeName",
  /** Node -> "true"/"false": may new VMIs be scheduled there (virt-handler heartbeat). */
  schedulable: "kubevirt.io/schedulable",
  /** Launcher pod running an outdated image. */
  outdatedLauncherImage: "kubevirt.io/outdatedLauncherImage",
  /** VM of a VirtualMachinePool (and its VMI template) -> the pool revision it was created from. */
  poolRevisionName: "kubevirt.io/vm-pool-revision-name",
} as const;

/** Annotations (`kubevirt.io/...`). */
export const ANNOTATION = {
  /** W3C traceparent of the request that created the object (ours, not KubeVirt's: KubeVirt has no tracing). */
  traceparent: "kubevirt.io/traceparent",
  /**
   * VMI -> W3C traceparent of its current migration (copied from the VMIM by virt-controller at the handoff), so
   * both virt-handlers and, through them, both virt-launchers add their spans to the migration's trace (ours).
   */
  migrationTraceparent: "kubevirt.io/migration-traceparent",
  /** Launcher pod -> name of the domain (namespace_name). */
  domain: "kubevirt.io/domain",
  /** Target pod / VMI -> name of the VMIM. */
  migrationJobName: "kubevirt.io/migrationJobName",
  /** Node -> RFC 3339 time of virt-handler's last heartbeat. */
  heartbeat: "kubevirt.io/heartbeat",
  /** VMIM created by the evacuation controller (value: the node). */
  evacuationMigration: "kubevirt.io/evacuationMigration",
  /** VMIM created by the workload updater. */
  workloadUpdateMigration: "kubevirt.io/workloadUpdateMigration",
  /** VMI -> "descheduler" when the eviction came from the descheduler. */
  evictionSource: "kubevirt.io/eviction-source",
  /** VMIM -> seconds an unschedulable target pod may stay Pending (default 300). */
  migrationUnschedulablePodTimeoutSeconds: "kubevirt.io/migrationUnschedulablePodTimeoutSeconds",
  /** VMIM -> seconds a target pod may stay Pending for any reason (default 900). */
  migrationPendingPodTimeoutSeconds: "kubevirt.io/migrationPendingPodTimeoutSeconds",
  /** VMI -> the VM generation it was created from. */
  vmGeneration: "kubevirt.io/vm-generation",
  /** Launcher pod -> memory overhead in bytes. */
  memoryOverheadBytes: "kubevirt.io/memory-overhead-bytes",
  /** Receiver VMI of a decentralized migration. */
  createMigrationTarget: "kubevirt.io/create-migration-target",
  /** The run strategy to restore after a decentralized migration. */
  restoreRunStrategy: "kubevirt.io/restore-run-strategy",
  /** Target pod -> time the target became ready. */
  migrationTargetReadyTimestamp: "kubevirt.io/migration-target-ready-timestamp",
  /** VMI (from its VM) -> a bridge-bound pod interface may live-migrate (any value). */
  allowPodBridgeNetworkLiveMigration: "kubevirt.io/allow-pod-bridge-network-live-migration",
} as const;

/** Finalizers. */
export const FINALIZER = {
  /** On a VMI: virt-controller deletes the pod before the VMI goes. */
  vmi: "kubevirt.io/foregroundDeleteVirtualMachine",
  /** Legacy spelling of `vmi` still found on old objects. */
  vmiDeprecated: "foregroundDeleteVirtualMachine",
  /** On a VMI created by a VM controller. */
  vmController: "kubevirt.io/virtualMachineControllerFinalize",
  /** On a VMIM: kept until the migration is final (so deleting = cancel). */
  migration: "kubevirt.io/migrationJobFinalize",
  /** On a VirtualMachinePool and its VMs: the pool controller lets go of them before they are removed. */
  pool: "pool.kubevirt.io/finalizer",
} as const;

/** The node resource of the KVM device (KubeVirt's device plugin); launcher pods request one unless emulation is allowed. */
export const KVM_DEVICE_RESOURCE = "devices.kubevirt.io/kvm";
/** The tun device a launcher pod requests for its pod-network interfaces (virt-handler's device plugin). */
export const TUN_DEVICE_RESOURCE = "devices.kubevirt.io/tun";
/** The vhost-net device a launcher pod requests for in-kernel virtio-net (virt-handler's device plugin). */
export const VHOST_NET_DEVICE_RESOURCE = "devices.kubevirt.io/vhost-net";

/** KubeVirt CR `status.phase` values. */
export const KUBEVIRT_PHASES = ["Deploying", "Deployed", "Deleting", "Deleted", ""] as const;

/**
 * KubeVirt's certificate objects in the install namespace (virt-operator's components/secrets.go), which
 * virt-controller's certificate manager keeps: Secrets of type kubernetes.io/tls (`tls.crt`, `tls.key`) and the
 * ConfigMap of the CAs every component trusts (`ca-bundle`).
 */
export const CERTIFICATES = {
  /** Secret: the KubeVirt CA's certificate and key. */
  caSecret: "kubevirt-ca",
  /** ConfigMap: the trusted CAs (the current one first, an older one during the overlap) under `ca-bundle`. */
  caConfigMap: "kubevirt-ca",
  /** The ConfigMap key of the bundle. */
  caBundleKey: "ca-bundle",
  /** Secret: virt-api's serving certificate (webhooks, the subresource APIService). */
  virtApi: "kubevirt-virt-api-certs",
  /** Secret: virt-handler's serving certificate (CN `kubevirt.io:system:node:virt-handler`). */
  handlerServer: "kubevirt-virt-handler-server-certs",
  /** Secret: the client certificate virt-api presents to virt-handler (CN `kubevirt.io:system:client:virt-handler`). */
  handlerClient: "kubevirt-virt-handler-certs",
  /** Annotation on each Secret: the duration its certificate was issued for (Go text, `24h0m0s`). */
  durationAnnotation: "kubevirt.io/duration",
} as const;

/** The objects whose CA bundle the certificate manager keeps equal to the `kubevirt-ca` ConfigMap's (by kind). */
export const CA_BUNDLE_TARGETS = {
  mutatingWebhookConfigurations: ["virt-api-mutator"],
  validatingWebhookConfigurations: ["virt-api-validator"],
  apiServices: ["v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"],
} as const;

/** Where the local cluster (and KubeVirt's install) keeps its KubeVirt CR: namespace and name. */
export const KUBEVIRT_CR = { namespace: "kubevirt", name: "kubevirt" } as const;

/** VM `spec.runStrategy` values accepted by the webhook (WaitAsReceiver needs a feature gate we do not have). */
export const RUN_STRATEGIES = ["Always", "RerunOnFailure", "Manual", "Halted", "Once"] as const;
/** A VM run strategy. */
export type RunStrategy = (typeof RUN_STRATEGIES)[number];

/** VMI phases, in declaration order; "" is the unprocessed VMI. */
export const VMI_PHASES = [
  "",
  "Pending",
  "Scheduling",
  "Scheduled",
  "Running",
  "Succeeded",
  "Failed",
  "WaitingForSync",
  "Unknown",
] as const;
/** A VMI phase. */
export type VmiPhase = (typeof VMI_PHASES)[number];

/** VMIM phases, in order. */
export const MIGRATION_PHASES = [
  "",
  "Pending",
  "Scheduling",
  "Scheduled",
  "PreparingTarget",
  "TargetReady",
  "Running",
  "Succeeded",
  "Failed",
  "WaitingForSync",
  "Synchronizing",
] as const;
/** A VMIM phase. */
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];

/** VM `status.printableStatus` values. */
export const PRINTABLE_STATUSES = [
  "Stopped",
  "Provisioning",
  "Starting",
  "Running",
  "Paused",
  "Stopping",
  "Terminating",
  "CrashLoopBackOff",
  "Migrating",
  "Unknown",
  "ErrorUnschedulable",
  "ErrImagePull",
  "ImagePullBackOff",
  "ErrorPvcNotFound",
  "DataVolumeError",
  "WaitingForVolumeBinding",
  "WaitingForReceiver",
] as const;
/** A VM printable status. */
export type PrintableStatus = (typeof PRINTABLE_STATUSES)[number];

/** `spec.evictionStrategy` values. */
export const EVICTION_STRATEGIES = ["None", "LiveMigrate", "LiveMigrateIfPossible", "External"] as const;
/** `spec.startStrategy` values. */
export const START_STRATEGIES = ["Paused"] as const;
/** `status.stateChangeRequests[].action` values. */
export const STATE_CHANGE_ACTIONS = ["Start", "Stop"] as const;
/** `migrationState.abortStatus` values. */
export const MIGRATION_ABORT_STATUSES = ["Succeeded", "Failed", "Aborting"] as const;
/** `migrationState.mode` values. */
export const MIGRATION_MODES = ["PreCopy", "PostCopy", "Paused"] as const;
/** `status.migrationMethod` values. */
export const MIGRATION_METHODS = ["BlockMigration", "LiveMigration"] as const;
/** VMIM `spec.priority` values (only virt-controller may set it). */
export const MIGRATION_PRIORITIES = ["system-critical", "user-triggered", "system-maintenance"] as const;
/** Disk and cdrom buses. */
export const DISK_BUSES = ["virtio", "sata", "scsi", "usb"] as const;
/** Interface models. */
export const INTERFACE_MODELS = ["e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139", "virtio"] as const;

/** VMI condition types. */
export const VMI_CONDITION = {
  Provisioning: "Provisioning",
  Ready: "Ready",
  Synchronized: "Synchronized",
  Paused: "Paused",
  AgentConnected: "AgentConnected",
  AccessCredentialsSynchronized: "AccessCredentialsSynchronized",
  AgentVersionNotSupported: "AgentVersionNotSupported",
  LiveMigratable: "LiveMigratable",
  HotVCPUChange: "HotVCPUChange",
  HotMemoryChange: "HotMemoryChange",
  VolumesChange: "VolumesChange",
  DataVolumesReady: "DataVolumesReady",
  StorageLiveMigratable: "StorageLiveMigratable",
  MigrationRequired: "MigrationRequired",
  EvictionRequested: "EvictionRequested",
  SoftwareEmulation: "SoftwareEmulation",
  /** Copied from the launcher pod. */
  PodScheduled: "PodScheduled",
} as const;

/** VM condition types. */
export const VM_CONDITION = {
  Failure: "Failure",
  Ready: "Ready",
  Paused: "Paused",
  RestartRequired: "RestartRequired",
  ManualRecoveryRequired: "ManualRecoveryRequired",
} as const;

/** VMIM condition types (lower camel case, as in KubeVirt). */
export const MIGRATION_CONDITION = {
  AbortRequested: "migrationAbortRequested",
  RejectedByResourceQuota: "migrationRejectedByResourceQuota",
  BlockedByUtilityVolumes: "migrationBlockedByUtilityVolumes",
} as const;

/** VirtualMachineInstanceReplicaSet and VirtualMachinePool condition types. */
export const REPLICA_CONDITION = {
  /** A VMI (VM) could not be created or deleted. */
  ReplicaFailure: "ReplicaFailure",
  /** `spec.paused`: the controller leaves the replicas alone. */
  ReplicaPaused: "ReplicaPaused",
} as const;

/** Condition reasons KubeVirt writes. */
export const REASON = {
  /** Ready=False: the launcher pod is terminating. */
  PodTerminating: "PodTerminating",
  /** Ready=False: no launcher pod. */
  PodNotExists: "PodNotExists",
  /** Ready=False: the pod has no Ready condition yet. */
  PodConditionMissing: "PodConditionMissing",
  /** Ready=False: the guest is not running. */
  GuestNotRunning: "GuestNotRunning",
  /** Pod condition reason when the scheduler cannot place it. */
  Unschedulable: "Unschedulable",
  /** VMI Failed because its node stopped sending heartbeats. */
  NodeUnresponsive: "NodeUnresponsive",
  /** Paused condition: paused through the API. */
  PausedByUser: "PausedByUser",
  /** Paused condition: paused for a post-copy/pause switchover. */
  PausedMigration: "Migration",
  /** LiveMigratable=False reasons. */
  DisksNotLiveMigratable: "DisksNotLiveMigratable",
  InterfaceNotLiveMigratable: "InterfaceNotLiveMigratable",
  HotplugNotLiveMigratable: "HotplugNotLiveMigratable",
  CPUModeNotLiveMigratable: "CPUModeLiveMigratable",
  HostDeviceNotLiveMigratable: "HostDeviceNotLiveMigratable",
  NotMigratable: "NotMigratable",
} as const;

/** Value of `stateChangeRequests[].data.paused` for a start-paused request. */
export const START_REQUEST_DATA_PAUSED_KEY = "paused";

/** Default `terminationGracePeriodSeconds` (KubeVirt `DefaultGracePeriodSeconds`). */
export const DEFAULT_GRACE_PERIOD_SECONDS = 30;
/** Maximum number of volumes on a VMI. */
export const MAX_VOLUMES = 256;
/** Name of the default pod network and its interface. */
export const DEFAULT_NETWORK_NAME = "default";
