/**
 * The webhooks virt-api serves, by path (KubeVirt's paths), each a mutating or validating {@link Admitter} built
 * on @kvt/api's defaulting and validation:
 *
 *   /virtualmachines-mutate                      VM create/update: defaultVm (firmware uuid/serial, machine type)
 *   /virtualmachines-validate                    VM create/update: validateVm
 *   /virtualmachineinstances-mutate              VMI create: defaultVmi (KubeVirt's VMI defaults)
 *   /virtualmachineinstances-validate-create     VMI create: validateVmiCreate
 *   /virtualmachineinstances-validate-update     VMI update: validateVmiUpdate (spec immutable except for KubeVirt)
 *   /migration-mutate-create                     VMIM create: defaultMigration (label kubevirt.io/vmi-name, finalizer)
 *   /migration-validate-create                   VMIM create: admitMigrationCreate (reads the VMI and its VMIMs)
 *   /migration-validate-update                   VMIM update: admitMigrationUpdate
 *   /migration-policy-validate-create            MigrationPolicy create/update: validateMigrationPolicy
 *   /virtualmachine{,cluster}{instancetypes,preferences}-validate   instancetype-admitters.ts
 *   /virtualmachinereplicaset-validate           VMIRS create/update: validateVmirs
 *   /virtualmachinepool-validate                 VirtualMachinePool create/update: validateVmPool
 *   /pod-eviction-validate                       pods/eviction: pod-eviction-admitter.ts (evacuate launchers)
 *   /kubevirt-validate-update                    KubeVirt CR update: feature-gate conflicts and warnings
 *
 * Mutators answer like KubeVirt's: `replace` of every top-level section (`/spec`, `/metadata`) the defaults
 * changed.
 */
import { isDeepStrictEqual } from "node:util";
import type { JsonPatchOp } from "@kvt/api";
import {
  type AdmissionDenial,
  admitMigrationCreate,
  admitMigrationUpdate,
  validateMigrationPolicy as apiValidateMigrationPolicy,
  validateVm as apiValidateVm,
  validateVmiCreate as apiValidateVmiCreate,
  validateVmirs as apiValidateVmirs,
  validateVmiUpdate as apiValidateVmiUpdate,
  validateVmPool as apiValidateVmPool,
  applyPresets,
  applyVmiSpecDefaults,
  type ClusterConfig,
  DEFAULT_CLUSTER_CONFIG,
  DefaultingError,
  defaultMigration,
  defaultVm,
  defaultVmi,
  denialFromCauses,
  featureGateWarnings,
  type KubeVirt,
  LABEL,
  type MigrationPolicy,
  networkSettings,
  PresetConflictError,
  toWireCauses,
  typeErrors,
  type ValidationCause,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachineInstanceMigration,
  type VirtualMachineInstanceReplicaSet,
  type VirtualMachinePool,
  validateMatchers,
} from "@kvt/api";
import type { ClusterClient } from "../kube/cluster-client.ts";
import type { KubeVirtConfigSource } from "../kube/kubevirt-config.ts";
import { type AdmissionRequest, type AdmitResult, type Admitter, ALLOW } from "./admission.ts";
import {
  attributeToMatchers,
  expandForValidation,
  type InstancetypeReader,
  inferMatchers,
  instancetypeWebhookRoutes,
  requirementsCause,
} from "./instancetype-admitters.ts";
import { type EvictionCluster, validatePodEviction } from "./pod-eviction-admitter.ts";

type Obj = Record<string, unknown>;

function denied(denial: AdmissionDenial | undefined): AdmitResult {
  if (!denial) return ALLOW;
  return {
    allowed: false,
    code: denial.code,
    reason: denial.reason,
    message: denial.message,
    causes: toWireCauses(denial.causes),
  };
}

/**
 * KubeVirt decodes the object into its Go type before anything else, so a wrongly typed one is refused with the
 * type errors before any defaulting touches it (found by the API fuzz lane: a string `domain` was a 500).
 */
function typeRefusal(kind: string, obj: unknown): AdmitResult | undefined {
  const causes = typeErrors(kind, obj);
  return causes.length > 0 ? fromCauses(causes) : undefined;
}

const isLabelValue = (v: string): boolean => v.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v);

function fromCauses(causes: ValidationCause[]): AdmitResult {
  return causes.length > 0 ? denied(denialFromCauses(causes)) : ALLOW;
}

/** `replace` (or `add`) of each top-level section that differs between `before` and `after`. */
export function sectionPatch(before: unknown, after: unknown, sections: readonly string[]): JsonPatchOp[] {
  const b = (before ?? {}) as Obj;
  const a = (after ?? {}) as Obj;
  const ops: JsonPatchOp[] = [];
  for (const key of sections) {
    if (isDeepStrictEqual(b[key], a[key]) || a[key] === undefined) continue;
    ops.push({ op: key in b ? "replace" : "add", path: `/${key}`, value: a[key] });
  }
  return ops;
}

/** The request's object with its namespace filled in (the API server may omit it on CREATE). */
function objectOf<T>(req: AdmissionRequest): T {
  const obj = structuredClone(req.object ?? {}) as { metadata?: Obj };
  obj.metadata = { ...(obj.metadata ?? {}) };
  if (req.namespace && !obj.metadata.namespace) obj.metadata.namespace = req.namespace;
  return obj as T;
}

/** True for KubeVirt's own service accounts in `namespace`. */
export function isKubevirtServiceAccount(username: string | undefined, namespace: string): boolean {
  return [
    "kubevirt-controller",
    "kubevirt-handler",
    "kubevirt-apiserver",
    "kubevirt-internal-virtualization-admin",
  ].some((sa) => username === `system:serviceaccount:${namespace}:${sa}`);
}

/**
 * `/virtualmachines-mutate`: the matchers are checked, `inferFromVolume` matchers resolved from the volume's labels
 * (when `instancetypes` can read claims), then the VM defaults applied.
 */
export function mutateVmWith(instancetypes?: InstancetypeReader): Admitter {
  return async (req) => {
    if (req.operation !== "CREATE" && req.operation !== "UPDATE") return ALLOW;
    const vm = objectOf<VirtualMachine>(req);
    const badType = typeRefusal("VirtualMachine", vm);
    if (badType) return badType;
    const old = req.operation === "UPDATE" ? (req.oldObject as unknown as VirtualMachine | undefined) : undefined;
    const matcherCauses = validateMatchers(vm, old ?? undefined);
    if (matcherCauses.length > 0) return fromCauses(matcherCauses);
    const getPvc = instancetypes?.getPvc?.bind(instancetypes);
    if (getPvc && vm.spec) {
      const refused = await inferMatchers(getPvc, vm);
      if (refused) return { allowed: false, code: 400, message: refused };
    }
    const defaulted = defaultVm(vm, req.operation);
    return { allowed: true, patch: sectionPatch(req.object, defaulted, ["spec"]) };
  };
}

/** `/virtualmachines-mutate` without instancetype inference. */
export const mutateVm: Admitter = mutateVmWith();

/** `/virtualmachineinstances-mutate` */
export const mutateVmi: Admitter = mutateVmiWith();

/**
 * `/virtualmachineinstances-mutate` with VirtualMachineInstancePresets: the matching presets of the VMI's namespace
 * (listed through `presets`) are merged in before the defaults, as KubeVirt's VMI mutator does; conflicting presets
 * refuse the VMI with 422 and KubeVirt's message.
 */
export function mutateVmiWith(
  presets?: Pick<ClusterClient, "listVmiPresets">,
  kubevirtConfig?: KubeVirtConfigSource,
): Admitter {
  return async (req) => {
    if (req.operation !== "CREATE") return ALLOW;
    const vmi = structuredClone(objectOf<VirtualMachineInstance>(req));
    const badType = typeRefusal("VirtualMachineInstance", vmi);
    if (badType) return badType;
    if (presets && vmi.spec?.domain?.devices && typeof vmi.spec.domain.devices === "object") {
      try {
        applyPresets(vmi, await presets.listVmiPresets(req.namespace ?? vmi.metadata?.namespace ?? "default"));
      } catch (err) {
        if (!(err instanceof PresetConflictError)) throw err;
        return { allowed: false, code: 422, message: err.message };
      }
    }
    let defaulted: VirtualMachineInstance;
    try {
      defaulted = defaultVmi(vmi, { config: await clusterConfig(kubevirtConfig) });
    } catch (err) {
      // The cluster's settings forbid the default (bridge not permitted on the pod network): KubeVirt answers 400.
      if (!(err instanceof DefaultingError)) throw err;
      return { allowed: false, code: 400, message: err.message };
    }
    return { allowed: true, patch: sectionPatch(req.object, defaulted, ["spec", "metadata", "status"]) };
  };
}

/** `/migration-mutate-create` */
export const mutateMigration: Admitter = (req) => {
  if (req.operation !== "CREATE") return Promise.resolve(ALLOW);
  const badType = typeRefusal("VirtualMachineInstanceMigration", objectOf(req));
  if (badType) return Promise.resolve(badType);
  const defaulted = defaultMigration(objectOf<VirtualMachineInstanceMigration>(req));
  return Promise.resolve({ allowed: true, patch: sectionPatch(req.object, defaulted, ["metadata"]) });
};

/**
 * `/virtualmachines-validate`. With `instancetypes`, the VM's instancetype and preference are applied to a copy of
 * the template first (conflicts refuse the VM) and the expanded template is what gets validated, as KubeVirt does.
 */
export function validateVm(
  kubevirtNamespace: string,
  instancetypes?: InstancetypeReader,
  kubevirtConfig?: KubeVirtConfigSource,
): Admitter {
  return async (req) => {
    const isKubeVirtServiceAccount = isKubevirtServiceAccount(req.userInfo?.username, kubevirtNamespace);
    let vm = objectOf<VirtualMachine>(req);
    const badType = typeRefusal("VirtualMachine", vm);
    if (badType) return badType;
    const submitted = vm;
    let expanded: Awaited<ReturnType<typeof expandForValidation>> | undefined;
    if (instancetypes && vm.spec && !vm.metadata?.deletionTimestamp) {
      expanded = await expandForValidation(instancetypes, vm);
      if (expanded.causes.length > 0) return fromCauses(expanded.causes);
      vm = expanded.vm;
    }
    // KubeVirt validates a defaulted copy of the template (SetDefaultVirtualMachineInstanceSpec): a volume without
    // a disk gets one first, as the VMI it becomes will.
    const config = await clusterConfig(kubevirtConfig);
    if (vm.spec?.template?.spec?.domain) {
      vm = structuredClone(vm);
      const spec = vm.spec.template.spec;
      // Go's structs always have devices; a manifest may omit them.
      if (spec) {
        spec.domain.devices ??= {};
        try {
          applyVmiSpecDefaults(spec, config);
        } catch (err) {
          if (!(err instanceof DefaultingError)) throw err;
          return { allowed: false, code: 400, message: err.message };
        }
      }
    }
    const unmet = expanded && requirementsCause(expanded.instancetype, expanded.preference, vm);
    if (unmet) return fromCauses([unmet]);
    const causes = apiValidateVm(vm, { isKubeVirtServiceAccount, config });
    return fromCauses(attributeToMatchers(causes, submitted, expanded?.instancetype));
  };
}

/**
 * The cluster settings defaulting and validation depend on: KubeVirt's defaults with the CR's feature gates,
 * rollout strategy and network settings (the pod interface's default binding, bridge permitted on the pod network).
 */
async function clusterConfig(source: KubeVirtConfigSource | undefined): Promise<ClusterConfig> {
  const configured = await source?.configuration();
  return {
    ...DEFAULT_CLUSTER_CONFIG,
    ...networkSettings(configured),
    developerConfiguration: configured?.developerConfiguration,
    vmRolloutStrategy: configured?.vmRolloutStrategy ?? DEFAULT_CLUSTER_CONFIG.vmRolloutStrategy,
  };
}

/** `/virtualmachineinstances-validate-create`; feature gates from `kubevirtConfig` (none: KubeVirt's defaults). */
export function validateVmiCreate(kubevirtNamespace: string, kubevirtConfig?: KubeVirtConfigSource): Admitter {
  return async (req) => {
    const isKubeVirtServiceAccount = isKubevirtServiceAccount(req.userInfo?.username, kubevirtNamespace);
    const vmi = objectOf<VirtualMachineInstance>(req);
    const config = await clusterConfig(kubevirtConfig);
    return fromCauses(apiValidateVmiCreate(vmi, { isKubeVirtServiceAccount, config }));
  };
}

/** `/virtualmachineinstances-validate-update`: the spec is immutable for everyone but KubeVirt itself. */
export function validateVmiUpdate(kubevirtNamespace: string): Admitter {
  return (req) => {
    if (req.operation !== "UPDATE" || (req.subResource ?? "") !== "") return Promise.resolve(ALLOW);
    const isKubeVirtServiceAccount = isKubevirtServiceAccount(req.userInfo?.username, kubevirtNamespace);
    const vmi = objectOf<VirtualMachineInstance>(req);
    const old = (req.oldObject ?? {}) as unknown as VirtualMachineInstance;
    return Promise.resolve(fromCauses(apiValidateVmiUpdate(vmi, old, { isKubeVirtServiceAccount })));
  };
}

/** `/migration-validate-create`; reads the VMI and the VMI's other migrations through `client` (as virt-api). */
export function validateMigrationCreate(
  client: ClusterClient,
  kubevirtNamespace: string,
  kubevirtConfig?: KubeVirtConfigSource,
): Admitter {
  return async (req) => {
    const m = objectOf<VirtualMachineInstanceMigration>(req);
    // A wrongly typed object is refused before any lookup (found by the API fuzz lane: a 2000-element vmiName
    // became a label selector the API server refused with 431, answered here as a 500).
    const typeCauses = typeErrors("VirtualMachineInstanceMigration", m);
    if (typeCauses.length > 0) return fromCauses(typeCauses);
    const vmiName = m.spec?.vmiName;
    const namespace = req.namespace ?? "";
    const vmi = vmiName ? await client.getVmi(namespace, vmiName) : undefined;
    // No migration can carry a label value that is not one: only a valid one is worth a selector.
    const migrations =
      vmiName && isLabelValue(vmiName)
        ? await client.listVmims(namespace, `${LABEL.migrationSelector} in (${vmiName})`)
        : [];
    return denied(
      admitMigrationCreate(m, {
        vmi,
        migrationsOfVmi: migrations,
        isVirtController: req.userInfo?.username === `system:serviceaccount:${kubevirtNamespace}:kubevirt-controller`,
        developerConfiguration: (await clusterConfig(kubevirtConfig)).developerConfiguration,
      }),
    );
  };
}

/** `/migration-validate-update` */
export const validateMigrationUpdate: Admitter = (req) => {
  const m = objectOf<VirtualMachineInstanceMigration>(req);
  const old = (req.oldObject ?? {}) as unknown as VirtualMachineInstanceMigration;
  return Promise.resolve(denied(admitMigrationUpdate(m, old)));
};

/** `/migration-policy-validate-create` (create and update): @kvt/api's `validateMigrationPolicy` (KubeVirt's rules). */
export const validateMigrationPolicy: Admitter = (req) =>
  Promise.resolve(fromCauses(apiValidateMigrationPolicy(objectOf<MigrationPolicy>(req))));

/** `/virtualmachinereplicaset-validate` (create and update): @kvt/api's `validateVmirs` (KubeVirt vmirs-admitter). */
export const validateVmirs: Admitter = validateVmirsWith();

/** `/virtualmachinereplicaset-validate` with the cluster's feature gates from `kubevirtConfig`. */
export function validateVmirsWith(kubevirtConfig?: KubeVirtConfigSource): Admitter {
  return async (req) => {
    const config = await clusterConfig(kubevirtConfig);
    return fromCauses(apiValidateVmirs(objectOf<VirtualMachineInstanceReplicaSet>(req), { config }));
  };
}

/**
 * `/kubevirt-validate-update` (KubeVirt's kubevirt-update-admitter, feature-gate part): when the gate lists change,
 * a gate both enabled and disabled is refused, and listing GA, deprecated or discontinued gates earns KubeVirt's
 * warnings.
 */
export const validateKubeVirtUpdate: Admitter = (req) => {
  const dev = (o: unknown) => (o as KubeVirt | undefined)?.spec?.configuration?.developerConfiguration;
  const next = dev(req.object);
  const prev = dev(req.oldObject);
  const same = (a?: readonly string[], b?: readonly string[]) => isDeepStrictEqual(a ?? [], b ?? []);
  const changed =
    next !== undefined &&
    (prev === undefined ||
      !same(prev.featureGates, next.featureGates) ||
      !same(prev.disabledFeatureGates, next.disabledFeatureGates));
  if (!changed) return Promise.resolve(ALLOW);
  const both = (next.featureGates ?? []).filter((g) => next.disabledFeatureGates?.includes(g));
  if (both.length > 0) {
    return Promise.resolve(
      fromCauses(
        both.map((g) => ({
          type: "FieldValueForbidden",
          message: `feature gate "${g}" exists on both "FeatureGates" and "DisabledFeatureGates"`,
          field: "spec.configuration.developerConfiguration.featureGates",
        })),
      ),
    );
  }
  const warnings = featureGateWarnings(next);
  return Promise.resolve(warnings.length > 0 ? { allowed: true, warnings } : ALLOW);
};

/** `/virtualmachinepool-validate` (create and update): @kvt/api's `validateVmPool`; the selector is immutable. */
export function validateVmPool(kubevirtNamespace: string, kubevirtConfig?: KubeVirtConfigSource): Admitter {
  return async (req) => {
    const isKubeVirtServiceAccount = isKubevirtServiceAccount(req.userInfo?.username, kubevirtNamespace);
    const old = req.operation === "UPDATE" ? (req.oldObject as unknown as VirtualMachinePool) : undefined;
    const config = await clusterConfig(kubevirtConfig);
    return fromCauses(apiValidateVmPool(objectOf<VirtualMachinePool>(req), old, { isKubeVirtServiceAccount, config }));
  };
}

/** Every webhook path with its admitter (`/pod-eviction-validate` when `eviction` is given). */
export function webhookRoutes(
  client: ClusterClient,
  kubevirtNamespace: string,
  instancetypes?: InstancetypeReader,
  eviction?: EvictionCluster,
  kubevirtConfig?: KubeVirtConfigSource,
): Record<string, Admitter> {
  return {
    ...(eviction ? { "/pod-eviction-validate": validatePodEviction(eviction) } : {}),
    ...instancetypeWebhookRoutes(fromCauses),
    "/virtualmachines-mutate": mutateVmWith(instancetypes),
    "/virtualmachines-validate": validateVm(kubevirtNamespace, instancetypes, kubevirtConfig),
    "/virtualmachineinstances-mutate": mutateVmiWith(client, kubevirtConfig),
    "/virtualmachineinstances-validate-create": validateVmiCreate(kubevirtNamespace, kubevirtConfig),
    "/virtualmachineinstances-validate-update": validateVmiUpdate(kubevirtNamespace),
    "/migration-mutate-create": mutateMigration,
    "/migration-validate-create": validateMigrationCreate(client, kubevirtNamespace, kubevirtConfig),
    "/migration-validate-update": validateMigrationUpdate,
    "/migration-policy-validate-create": validateMigrationPolicy,
    "/virtualmachinereplicaset-validate": validateVmirsWith(kubevirtConfig),
    "/virtualmachinepool-validate": validateVmPool(kubevirtNamespace, kubevirtConfig),
    "/kubevirt-validate-update": validateKubeVirtUpdate,
  };
}
