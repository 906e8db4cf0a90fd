/**
 * @kvt/api: the kubevirt.io/v1 API. Types inferred from structural OpenAPI schemas, the CRDs built from them,
 * constants, quantities, defaults, validation and the semantics the controllers and virt-api share. Pure, no I/O.
 */

// Literal-union types of the constant lists above.
export type { MigrationPhase, PrintableStatus, RunStrategy, VmiPhase } from "./constants.ts";
// Constants: group/version, kinds, resources, labels, annotations, finalizers, phases, conditions, reasons.
export {
  ANNOTATION,
  API_VERSION,
  DEFAULT_GRACE_PERIOD_SECONDS,
  DEFAULT_NETWORK_NAME,
  DISK_BUSES,
  EVICTION_STRATEGIES,
  FINALIZER,
  GROUP,
  INTERFACE_MODELS,
  KIND,
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
  PRINTABLE_STATUSES,
  REASON,
  RESOURCE,
  RUN_STRATEGIES,
  SHORT_NAMES,
  START_REQUEST_DATA_PAUSED_KEY,
  START_STRATEGIES,
  STATE_CHANGE_ACTIONS,
  SUBRESOURCES_GROUP,
  VERSION,
  VM_CONDITION,
  VMI_CONDITION,
  VMI_PHASES,
} from "./constants.ts";
export type { CustomResourceDefinition, PrinterColumn } from "./crds/crds.ts";
// The CRDs as objects (install them from code), per-kind OpenAPI schema lookup, and the status-subresource rule.
export { apiVersionOf, customResourceDefinitions, hasStatusSubresource, openApiSchemaOf } from "./crds/crds.ts";
// The CRDs rendered as the YAML files under libs/api/crds/.
export { renderCrdFiles } from "./crds/render.ts";
// Defaulting: what the mutating webhooks apply (VM: firmware uuid/serial; VMI: the full KubeVirt defaults; VMIM: label, finalizer).
export { defaultMigration } from "./defaults/migration-defaults.ts";
export { defaultVm, legacyFirmwareUuid, uuidV5 } from "./defaults/vm-defaults.ts";
export type { DefaultingOptions } from "./defaults/vmi-defaults.ts";
export { applyVmiSpecDefaults, defaultVmi } from "./defaults/vmi-defaults.ts";
export type { HasMetadata, ObjectKey } from "./object-key.ts";
// Object keys: "namespace/name", built only through keyOf().
export { keyOf, objectKey, splitKey } from "./object-key.ts";
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
// The schema node type and its type-level inference helper.
export type { Infer, JsonSchema, Schema } from "./schema/builder.ts";
// The raw schemas (structural OpenAPI v3 JSON): for the strict decoder, OpenAPI documents and explain.
export { migrationPolicySchema, vmimSchema } from "./schema/migration-schemas.ts";
export { vmSchema } from "./schema/vm-schemas.ts";
export { vmiSchema } from "./schema/vmi-schemas.ts";
export type { ResolvedMigrationConfiguration } from "./semantics/migration-config.ts";
// Migration configuration defaults and MigrationPolicy matching.
export {
  applyMigrationPolicy,
  clusterMigrationConfiguration,
  DEFAULT_MIGRATION_CONFIGURATION,
  matchMigrationPolicy,
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
export type { PrintableStatusInput } from "./semantics/printable-status.ts";
// VM status.printableStatus with KubeVirt's precedence.
export { PRINTABLE_STATUS_PRECEDENCE, printableStatus } from "./semantics/printable-status.ts";
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
export type { VmRunAction } from "./semantics/vm-run-plan.ts";
// The VM controller's decision per run strategy (create, delete, wait for backoff, ...).
export { planVmRun } from "./semantics/vm-run-plan.ts";
// Shared semantics: readings of VM/VMI state used by virt-api and virt-controller.
export {
  findCondition,
  hasCondition,
  hasStartRequest,
  hasStopRequestForVmi,
  isSetToStart,
  isVmiFinal,
  isVmiMigrating,
  isVmiUnprocessed,
  runStrategyOf,
} from "./semantics/vm-state.ts";
export type { StrictDecodeResult } from "./strict-decode.ts";
// Strict decoding (fieldValidation=Strict): unknown fields and wrongly typed values against the CRD schemas.
export { decodeStrict, decodeStrictWith, strictDecodingMessage, typeErrors } from "./strict-decode.ts";
// The API types (inferred from the schemas) and StatusCause.
export type {
  Affinity,
  Condition,
  Disk,
  DomainSpec,
  Interface,
  MigrationConfiguration,
  MigrationPolicy,
  MigrationPolicySpec,
  MigrationState,
  Network,
  ObjectMeta,
  StatusCause,
  Toleration,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VirtualMachineInstanceMigrationSpec,
  VirtualMachineInstanceMigrationStatus,
  VirtualMachineInstanceNetworkInterface,
  VirtualMachineInstanceSpec,
  VirtualMachineInstanceStatus,
  VirtualMachineInstanceTemplateSpec,
  VirtualMachineSpec,
  VirtualMachineStateChangeRequest,
  VirtualMachineStatus,
  Volume,
} from "./types.ts";
export type { AdmissionDenial } from "./validation/causes.ts";
// Validation: StatusCause[] with full field paths and KubeVirt's messages; admission denials as KubeVirt builds them.
export { CAUSE_TYPE, cause, denialFromCauses, denialFromError, FieldPath, path } from "./validation/causes.ts";
export { dns1123LabelErrors, dns1123SubdomainErrors } from "./validation/dns.ts";
export type { MigrationCreateContext } from "./validation/migration-validation.ts";
export {
  admitMigrationCreate,
  admitMigrationUpdate,
  MAX_DOWNTIME_MS_LIMIT,
  validateMigrationPolicy,
} from "./validation/migration-validation.ts";
export type { ClusterConfig } from "./validation/validation-config.ts";
// Cluster settings defaulting and validation depend on, with KubeVirt's defaults.
export { DEFAULT_CLUSTER_CONFIG } from "./validation/validation-config.ts";
export { validateVm, validateVmSpec } from "./validation/vm-validation.ts";
export type { RequestContext } from "./validation/vmi-validation.ts";
export {
  validateObjectName,
  validateVmiCreate,
  validateVmiMetadata,
  validateVmiSpec,
  validateVmiUpdate,
} from "./validation/vmi-validation.ts";
