/**
 * @kvt/api: the kubevirt.io/v1 API. Types inferred from structural OpenAPI schemas, the CRDs built from them,
 * constants, quantities, defaults, validation and the semantics the controllers and virt-api share. Pure, no I/O.
 */

// Literal-union types of the constant lists (run strategies, phases, printable statuses).
export type { MigrationPhase, PrintableStatus, RunStrategy, VmiPhase } from "./constants.ts";
// Constants: group/version, kinds, resources, labels, annotations, finalizers, phases, conditions, reasons.
export {
  ANNOTATION,
  API_VERSION,
  CA_BUNDLE_TARGETS,
  CERTIFICATES,
  DEFAULT_GRACE_PERIOD_SECONDS,
  DEFAULT_NETWORK_NAME,
  DISK_BUSES,
  EVICTION_STRATEGIES,
  FINALIZER,
  GROUP,
  INTERFACE_MODELS,
  KIND,
  KUBEVIRT_CR,
  KUBEVIRT_PHASES,
  KVM_DEVICE_RESOURCE,
  LABEL,
  MAX_VOLUMES,
  MIGRATION_ABORT_STATUSES,
  MIGRATION_CONDITION,
  MIGRATION_METHODS,
  MIGRATION_MODES,
  MIGRATION_PHASES,
  MIGRATION_PRIORITIES,
  MIGRATIONS_API_VERSION,
  MIGRATIONS_GROUP,
  POOL_API_VERSION,
  POOL_GROUP,
  POOL_VERSION,
  PRINTABLE_STATUSES,
  REASON,
  REPLICA_CONDITION,
  RESOURCE,
  RUN_STRATEGIES,
  SHORT_NAMES,
  START_REQUEST_DATA_PAUSED_KEY,
  START_STRATEGIES,
  STATE_CHANGE_ACTIONS,
  SUBRESOURCES_GROUP,
  TUN_DEVICE_RESOURCE,
  VERSION,
  VHOST_NET_DEVICE_RESOURCE,
  VM_CONDITION,
  VMI_CONDITION,
  VMI_PHASES,
} from "./constants.ts";
// The CRD object type and its printer columns.
export type { CustomResourceDefinition, PrinterColumn } from "./crds/crds.ts";
// The CRDs as objects (install them from code), per-kind OpenAPI schema lookup, and the status-subresource rule.
export { apiVersionOf, customResourceDefinitions, hasStatusSubresource, openApiSchemaOf } from "./crds/crds.ts";
// VMIM defaulting: kubevirt.io/vmi-name label and the migration finalizer.
export { defaultMigration } from "./defaults/migration-defaults.ts";
// VM defaulting (firmware uuid/serial on CREATE, machine type) and the legacy UUIDv5.
export { defaultVm, legacyFirmwareUuid, uuidV5 } from "./defaults/vm-defaults.ts";
// Injectable inputs of defaulting: cluster config, UUID source, clock.
export type { DefaultingOptions } from "./defaults/vmi-defaults.ts";
// VMI defaulting: everything KubeVirt's VMI mutator applies on CREATE; DefaultingError when the cluster forbids it.
export {
  applyVmiSpecDefaults,
  DefaultingError,
  defaultVmi,
  setDefaultNetworkInterface,
} from "./defaults/vmi-defaults.ts";
// Text as Go's standard library writes it (encoding/json, %q, the kubelet's FormatMap, base64, time.Duration).
export {
  formatGoDuration,
  goBase64Decode,
  goFormatMap,
  goIsPrint,
  goJson,
  goQuote,
  parseGoDuration,
} from "./go-text.ts";
// The common-instancetypes bundle the local cluster installs (v1.7.0: 65 instancetypes, 54 preferences).
export {
  type BundledObject,
  COMMON_INSTANCETYPES_VERSION,
  commonInstancetypes,
} from "./instancetype/common-instancetypes.ts";
// Instancetype/preference expansion into a VMI spec, with KubeVirt's conflicts.
export {
  applyInstancetypeToVmi,
  conflictMessage,
  guestTopology,
  type InstancetypeConflict,
} from "./instancetype/instancetype-apply.ts";
// instancetype.kubevirt.io/v1beta1: group, kinds (plural, short names), VMI annotations, revision labels, reasons.
export {
  CONTROLLER_REVISION_LABEL,
  DEFAULT_INSTANCETYPE_LABEL,
  INSTANCETYPE_ANNOTATION,
  INSTANCETYPE_API_VERSION,
  INSTANCETYPE_GROUP,
  INSTANCETYPE_KINDS,
  INSTANCETYPE_SYNC_REASON,
  INSTANCETYPE_VERSION,
  type InstancetypeKindName,
  instancetypeResourceType,
} from "./instancetype/instancetype-constants.ts";
// A preference's requirements (vCPUs, memory, architecture) checked against the expanded VM.
export { checkPreferenceRequirements, type RequirementFailure } from "./instancetype/instancetype-requirements.ts";
// Matcher resolution and the ControllerRevisions that pin a VM to one version of its instancetype/preference.
export {
  type ControllerRevision,
  controllerRevisionFor,
  controllerRevisionName,
  type InstancetypeObject,
  type MatcherRole,
  type ResolvedMatcher,
  resolveMatcher,
  syncStatusRef,
} from "./instancetype/instancetype-revision.ts";
// The instancetype.kubevirt.io schemas (CRDs, strict decoding).
export { instancetypeSchema, preferenceSchema } from "./instancetype/instancetype-schemas.ts";
// The instancetype.kubevirt.io types.
export type {
  InstancetypeMatcher,
  InstancetypeSpec,
  InstancetypeStatusRef,
  PreferenceSpec,
  VirtualMachineInstancetype,
  VirtualMachinePreference,
} from "./instancetype/instancetype-types.ts";
// Validation of instancetypes and preferences (their webhooks) and of a VM's spread topology.
export {
  checkSpreadCpuTopology,
  DEPRECATED_LAUNCH_SECURITY_WARNING,
  type InstancetypeAdmission,
  validateInstancetype,
  validateMatchers,
  validatePreference,
} from "./instancetype/instancetype-validation.ts";
// ObjectKey ("namespace/name") and the minimal shape keyOf() accepts.
export type { HasMetadata, ObjectKey } from "./object-key.ts";
// Object keys: "namespace/name", built only through keyOf().
export { keyOf, objectKey, splitKey } from "./object-key.ts";
// How a quantity prints: BinarySI, DecimalSI or DecimalExponent.
export type { QuantityFormat } from "./quantity.ts";
// Kubernetes resource.Quantity: exact parsing and canonical printing as apimachinery.
export {
  canonicalQuantity,
  parseQuantity,
  QUANTITY_ERRORS,
  Quantity,
  QuantityError,
  tryParseQuantity,
} from "./quantity.ts";
// Request body limits as kube-apiserver's: size, JSON nesting depth (an iterative check).
export { exceedsDepth, MAX_JSON_DEPTH, MAX_REQUEST_BODY_BYTES } from "./request-limits.ts";
// The schema node type and its type-level inference helper.
export type { Infer, JsonSchema, Schema } from "./schema/builder.ts";
// Schema of the KubeVirt CR (the cluster configuration object).
export { kubevirtSchema } from "./schema/kubevirt-schemas.ts";
// Schemas (structural OpenAPI v3 JSON) of VMIM and MigrationPolicy.
export { migrationPolicySchema, vmimSchema } from "./schema/migration-schemas.ts";
// Schemas of VirtualMachineInstanceReplicaSet and VirtualMachinePool, and the pool's sort policies.
export { POOL_SORT_POLICIES, vmirsSchema, vmPoolSchema } from "./schema/replica-schemas.ts";
// Schema of VirtualMachine.
export { vmSchema } from "./schema/vm-schemas.ts";
// Schema of VirtualMachineInstance.
export { vmiSchema } from "./schema/vmi-schemas.ts";
// The KubeVirt CR in force and the settings read from it (useEmulation, the pod network's default binding).
export {
  activeKubeVirt,
  emulationAllowed,
  type NetworkSettings,
  networkSettings,
} from "./semantics/cluster-config.ts";
// Status conditions: read, set in place (transition time kept while the status holds), removed.
export { findCondition, hasCondition, removeCondition, setCondition } from "./semantics/conditions.ts";
// A VMI's eviction strategy (its own, else the cluster's), LiveMigratable, and whether an eviction migrates it.
export {
  type EvictionStrategy,
  isMigratable,
  migratableOnEviction,
  vmiEvictionStrategy,
} from "./semantics/eviction.ts";
// KubeVirt's feature gates: states, IsEnabled (GA on, beta on unless disabled, alpha off), the CR's warnings.
export {
  type FeatureGateState,
  featureGateEnabled,
  featureGateState,
  featureGateWarnings,
  GATE,
} from "./semantics/feature-gates.ts";
// The pod network's interface, and KubeVirt's live-migration check of the interfaces (InterfaceNotLiveMigratable).
export {
  type BindingPlugins,
  INTERFACE_NOT_MIGRATABLE_MESSAGE,
  interfacesMigrationBlocker,
  podInterface,
  podNetwork,
} from "./semantics/interfaces.ts";
// metav1.LabelSelector: the spec shape and the parsed selector (matching, canonical string).
export type { LabelSelector, LabelSelectorSpec } from "./semantics/label-selector.ts";
// LabelSelectorAsSelector: match labels, print the canonical form (status.labelSelector for an HPA).
export { labelSelectorOf } from "./semantics/label-selector.ts";
// A migration configuration with every knob resolved.
export type { ResolvedMigrationConfiguration } from "./semantics/migration-config.ts";
// Migration configuration defaults and MigrationPolicy matching.
export {
  acceptableCompletionTimeSeconds,
  applyMigrationPolicy,
  clusterMigrationConfiguration,
  DEFAULT_MIGRATION_CONFIGURATION,
  matchMigrationPolicy,
  migrationDataSizeGiga,
  resolveMigrationConfiguration,
} from "./semantics/migration-config.ts";
// Legal VMI and VMIM phase transitions.
export {
  isLegalMigrationPhaseTransition,
  isLegalVmiPhaseTransition,
  isMigrationFinal,
  nextMigrationPhases,
  nextVmiPhases,
} from "./semantics/phases.ts";
// VirtualMachineInstancePreset application (the VMI mutating webhook, on create).
export {
  applyPresets,
  PRESET_ANNOTATION_PREFIX,
  PRESET_EXCLUDE_ANNOTATION,
  PresetConflictError,
} from "./semantics/presets.ts";
// What printableStatus() looks at besides the VM and VMI.
export type { PrintableStatusInput } from "./semantics/printable-status.ts";
// VM status.printableStatus with KubeVirt's precedence.
export { PRINTABLE_STATUS_PRECEDENCE, printableStatus } from "./semantics/printable-status.ts";
// Injectable rand.Intn for deterministic backoff.
export type { RandomInt } from "./semantics/start-backoff.ts";
// Crash-loop backoff (status.startFailure).
export {
  MAX_CRASH_LOOP_BACKOFF_SECONDS,
  nextStartFailure,
  startBackoffRemainingSeconds,
  startBackoffSeconds,
  vmiFailedEarly,
  wasVmiRunning,
} from "./semantics/start-backoff.ts";
// Plans and errors of the start/stop/restart subresources.
export type { JsonPatchOp, LifecycleError, LifecyclePlan, LifecycleResult } from "./semantics/vm-lifecycle.ts";
// start/stop/restart per run strategy: the JSON patches to send, or the 409/400/500 Status with KubeVirt's messages.
export {
  badRequest,
  CHANGE_UNDERWAY,
  changeRequestPatch,
  conflict,
  internalError,
  MANUAL_RECOVERY_REQUIRED,
  planRestart,
  planStart,
  planStop,
  runningPatch,
  VM_NOT_RUNNING,
} from "./semantics/vm-lifecycle.ts";
// The VM controller decision.
export type { VmRunAction } from "./semantics/vm-run-plan.ts";
// The VM controller's decision per run strategy (create, delete, wait for backoff, ...).
export { planVmRun } from "./semantics/vm-run-plan.ts";
// Shared semantics: readings of VM/VMI state used by virt-api and virt-controller.
export {
  hasStartRequest,
  hasStopRequestForVmi,
  isSetToStart,
  isVmiFinal,
  isVmiMigrating,
  isVmiUnprocessed,
  runStrategyOf,
} from "./semantics/vm-state.ts";
export type { PersistentVolumeClaimInfo, VolumeStatus } from "./semantics/volumes.ts";
export {
  blockDevicePath,
  CONFIG_MAP_SOURCE_DIR,
  claimInfo,
  claimOfVolume,
  DEFAULT_FILESYSTEM_OVERHEAD,
  DOWNWARD_API_SOURCE_DIR,
  diskBus,
  diskTargets,
  EPHEMERAL_DISKS_DIR,
  EPHEMERAL_DISKS_VOLUME,
  hasSharedAccessMode,
  IMAGE_VOLUMES_DIR,
  imageVolumePath,
  isPvcBlock,
  KERNEL_BOOT_VOLUME,
  PRIVATE_VOLUME,
  PVC_DISK_IMAGE,
  SECRET_SOURCE_DIR,
  SERVICE_ACCOUNT_SOURCE_DIR,
  SOCKETS_VOLUME,
  VIRT_PRIVATE_DIR,
  VIRT_SOCKETS_DIR,
  VMI_DISKS_DIR,
  volumeStatuses,
  volumeStatusOf,
  volumesMigrationBlocker,
} from "./semantics/volumes.ts";
// metav1.Status as JSON (ListMeta, Status, StatusDetails, StatusCause with the type under `reason`): the one definition.
export type { ListMeta, Status, StatusCause, StatusDetails } from "./status.ts";
// Result of a strict decode.
export type { StrictDecodeResult } from "./strict-decode.ts";
// Strict decoding (fieldValidation=Strict): unknown fields and wrongly typed values against the CRD schemas.
export { decodeStrict, decodeStrictWith, strictDecodingMessage, typeErrors } from "./strict-decode.ts";
// The API types (inferred from the schemas) and ValidationCause.
export type {
  Affinity,
  Condition,
  DeveloperConfiguration,
  Disk,
  DomainSpec,
  Interface,
  KubeVirt,
  KubeVirtConfiguration,
  KubeVirtSelfSignConfiguration,
  MigrationConfiguration,
  MigrationPolicy,
  MigrationPolicySpec,
  MigrationState,
  Network,
  ObjectMeta,
  Toleration,
  ValidationCause,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VirtualMachineInstanceMigrationSpec,
  VirtualMachineInstanceMigrationStatus,
  VirtualMachineInstanceNetworkInterface,
  VirtualMachineInstancePreset,
  VirtualMachineInstanceReplicaSet,
  VirtualMachineInstanceReplicaSetSpec,
  VirtualMachineInstanceReplicaSetStatus,
  VirtualMachineInstanceSpec,
  VirtualMachineInstanceStatus,
  VirtualMachineInstanceTemplateSpec,
  VirtualMachinePool,
  VirtualMachinePoolSpec,
  VirtualMachinePoolStatus,
  VirtualMachineSpec,
  VirtualMachineStateChangeRequest,
  VirtualMachineStatus,
  Volume,
} from "./types.ts";
// A webhook denial: code, reason, message, causes.
export type { AdmissionDenial } from "./validation/causes.ts";
// Validation: ValidationCause[] with full field paths and KubeVirt's messages; admission denials as KubeVirt builds them.
export {
  CAUSE_TYPE,
  cause,
  denialFromCauses,
  denialFromError,
  denialToStatus,
  FieldPath,
  path,
  toWireCauses,
} from "./validation/causes.ts";
// DNS-1123 label/subdomain checks with apimachinery's messages.
export { dns1123LabelErrors, dns1123SubdomainErrors } from "./validation/dns.ts";
// Annotations only a feature gate allows (hook sidecars, Ignition).
export { HOOK_SIDECARS_ANNOTATION, IGNITION_ANNOTATION } from "./validation/feature-gate-validation.ts";
// What the VMIM create check needs from the cluster.
export type { MigrationCreateContext } from "./validation/migration-validation.ts";
// VMIM create/update admission and MigrationPolicy validation.
export {
  admitMigrationCreate,
  admitMigrationUpdate,
  MAX_DOWNTIME_MS_LIMIT,
  validateMigrationPolicy,
} from "./validation/migration-validation.ts";
// VMIRS and VirtualMachinePool validation (their webhooks).
export { validateVmirs, validateVmPool } from "./validation/replica-validation.ts";
// Cluster settings type.
export type { ClusterConfig } from "./validation/validation-config.ts";
// Cluster settings defaulting and validation depend on, with KubeVirt's defaults.
export { DEFAULT_CLUSTER_CONFIG } from "./validation/validation-config.ts";
// VM validation (the VM validating webhook).
export { validateVm, validateVmSpec } from "./validation/vm-validation.ts";
// Who is asking (KubeVirt service accounts may do more) and with which config.
export type { RequestContext } from "./validation/vmi-validation.ts";
// VMI validation: spec rules (also for VM templates), create, update, reserved labels, object names.
export {
  validateObjectName,
  validateVmiCreate,
  validateVmiMetadata,
  validateVmiSpec,
  validateVmiUpdate,
} from "./validation/vmi-validation.ts";
