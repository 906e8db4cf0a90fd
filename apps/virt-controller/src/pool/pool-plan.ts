/**
 * What the VirtualMachinePool controller decides (pure), after KubeVirt's `watch/pool`:
 *
 * ```
 *   VMs in the namespace --owned--> this pool's VMs (release those whose labels the selector lost)
 *   diff = |owned| - replicas (default 1), at most `burst` per pass
 *     diff < 0: scale out: VMs <pool>-<i> at the lowest unused indices i, from the VM template (data volume
 *               templates and the volumes naming them get the -<i> suffix; config maps and secrets too if
 *               nameGeneration asks), labelled with the pool revision <pool>-<generation>, with the pool finalizer
 *     diff > 0: proactive scale-in: delete diff VMs not yet being deleted, ordered by the selection policy
 *               (default Random), then drop their pool finalizer
 *     diff = 0: VMs deleted by someone else lose their pool finalizer (opportunistic scale-in)
 *   status: replicas = |owned|, readyReplicas = |owned with Ready=True|, labelSelector, ReplicaPaused/ReplicaFailure
 * ```
 */
import { isDeepStrictEqual } from "node:util";
import {
  type Condition,
  FINALIZER,
  findCondition,
  hasCondition,
  KIND,
  LABEL,
  type LabelSelector,
  labelSelectorOf,
  POOL_API_VERSION,
  REPLICA_CONDITION,
  type VirtualMachine,
  type VirtualMachinePool,
  type VirtualMachinePoolStatus,
  type VirtualMachineSpec,
  VM_CONDITION,
} from "@kvt/api";
import { controllerRefOf } from "@kvt/kube";

type Pool = VirtualMachinePool;
type Vm = VirtualMachine;
type OwnerReference = NonNullable<NonNullable<Vm["metadata"]>["ownerReferences"]>[number];

/** The VMs a pool owns, and those it must let go (owned, but the selector no longer matches their labels). */
export function ownedVms(pool: Pool, selector: LabelSelector, vms: readonly Vm[]): { owned: Vm[]; release: Vm[] } {
  const owned: Vm[] = [];
  const release: Vm[] = [];
  for (const vm of vms) {
    const ref = controllerRefOf(vm);
    if (!ref || ref.uid !== pool.metadata?.uid) continue;
    if (selector.matches(vm.metadata?.labels)) owned.push(vm);
    else if (!pool.metadata?.deletionTimestamp) release.push(vm);
  }
  return { owned, release };
}

/** `spec.replicas`, defaulting to 1. */
export function desiredReplicas(pool: Pool): number {
  return pool.spec.replicas ?? 1;
}

/** The name of the pool's VM at `index`: `<pool>-<index>`. */
export function vmName(pool: Pool, index: number): string {
  return `${pool.metadata?.name ?? ""}-${index}`;
}

/** The index a pool VM's name ends with (`-<i>`), or NaN. */
export function indexFromName(name: string): number {
  const last = name.split("-").at(-1) ?? "";
  return /^\d+$/.test(last) ? Number(last) : Number.NaN;
}

/** `count` names `<pool>-<i>` at the lowest indices no VM of the namespace uses (`calculateNewVMNames`). */
export function newVmNames(pool: Pool, count: number, exists: (name: string) => boolean): string[] {
  const names: string[] = [];
  for (let i = 0; names.length < count; i++) {
    const name = vmName(pool, i);
    if (!exists(name)) names.push(name);
  }
  return names;
}

/** The revision a pool's VMs are labelled with: `<pool>-<generation>`. */
export function revisionName(pool: Pool): string {
  return `${pool.metadata?.name ?? ""}-${pool.metadata?.generation ?? 0}`;
}

/** The ownerReference of a pool's VMs. */
export function poolOwnerRef(pool: Pool): OwnerReference {
  return {
    apiVersion: POOL_API_VERSION,
    kind: KIND.VirtualMachinePool,
    name: pool.metadata?.name ?? "",
    uid: pool.metadata?.uid ?? "",
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The VM spec for index `idx` (`indexVMSpec`): per-VM data volume names and, if asked, config map and secret names. */
export function indexVmSpec(pool: Pool, idx: number): VirtualMachineSpec {
  const spec = structuredClone(pool.spec.virtualMachineTemplate.spec ?? ({} as VirtualMachineSpec));
  const suffix = `-${idx}`;
  const renamed = new Map<string, string>();
  for (const dv of spec.dataVolumeTemplates ?? []) {
    const meta = (dv.metadata ?? {}) as { name?: string };
    if (typeof meta.name !== "string") continue;
    renamed.set(meta.name, meta.name + suffix);
    dv.metadata = { ...meta, name: meta.name + suffix };
  }
  const configMaps = pool.spec.nameGeneration?.appendIndexToConfigMapRefs === true;
  const secrets = pool.spec.nameGeneration?.appendIndexToSecretRefs === true;
  for (const v of spec.template.spec?.volumes ?? []) {
    const vol = v as Record<string, Record<string, unknown> | undefined> & { name: string };
    const pvc = vol.persistentVolumeClaim;
    const dv = vol.dataVolume;
    if (pvc) {
      const n = renamed.get(String(pvc.claimName));
      if (n) pvc.claimName = n;
    } else if (dv) {
      const n = renamed.get(String(dv.name));
      if (n) dv.name = n;
    } else if (vol.configMap && configMaps) vol.configMap.name = `${String(vol.configMap.name)}${suffix}`;
    else if (vol.secret && secrets) vol.secret.secretName = `${String(vol.secret.secretName)}${suffix}`;
    else if (secrets) for (const ci of [vol.cloudInitNoCloud, vol.cloudInitConfigDrive]) suffixSecretRefs(ci, suffix);
  }
  return spec;
}

function suffixSecretRefs(cloudInit: Record<string, unknown> | undefined, suffix: string): void {
  for (const k of ["secretRef", "networkDataSecretRef"]) {
    const ref = cloudInit?.[k] as { name?: string } | undefined;
    if (ref?.name) ref.name += suffix;
  }
}

/** The VM named `name` the pool creates (`scaleOut`). */
export function vmFromPool(pool: Pool, name: string): Vm {
  const t = pool.spec.virtualMachineTemplate;
  const spec = indexVmSpec(pool, indexFromName(name));
  const revision = revisionName(pool);
  spec.template.metadata = {
    ...spec.template.metadata,
    labels: { ...spec.template.metadata?.labels, [LABEL.poolRevisionName]: revision },
  };
  const metadata: NonNullable<Vm["metadata"]> = {
    name,
    namespace: pool.metadata?.namespace,
    labels: { ...t.metadata?.labels, [LABEL.poolRevisionName]: revision },
    finalizers: [FINALIZER.pool],
    ownerReferences: [poolOwnerRef(pool)],
  };
  if (t.metadata?.annotations) metadata.annotations = { ...t.metadata.annotations };
  return { apiVersion: "kubevirt.io/v1", kind: KIND.VirtualMachine, metadata, spec };
}

/** The scale-in order of `vms` by the pool's proactive selection policy (Random unless set). */
export function scaleInOrder(pool: Pool, vms: readonly Vm[], random: () => number = Math.random): Vm[] {
  const selection = pool.spec.scaleInStrategy?.proactive?.selectionPolicy;
  const created = (v: Vm): number => Date.parse(v.metadata?.creationTimestamp ?? "") || 0;
  const ordinal = (v: Vm): number => {
    const i = indexFromName(v.metadata?.name ?? "");
    return Number.isNaN(i) ? 0 : i;
  };
  const out = [...vms];
  switch (selection?.sortPolicy ?? "Random") {
    case "AscendingOrder":
      out.sort((a, b) => ordinal(a) - ordinal(b));
      break;
    case "DescendingOrder":
      out.sort((a, b) => ordinal(b) - ordinal(a));
      break;
    case "Newest":
      out.sort((a, b) => created(b) - created(a));
      break;
    case "Oldest":
      out.sort((a, b) => created(a) - created(b));
      break;
    default:
      for (let i = out.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [out[i], out[j]] = [out[j], out[i]];
      }
  }
  return selection?.selectors ? filterBySelectors(out, selection.selectors) : out;
}

type Selectors = NonNullable<
  NonNullable<NonNullable<Pool["spec"]["scaleInStrategy"]>["proactive"]>["selectionPolicy"]
>["selectors"];

/** The selection policy's selectors: the VMI template's labels and node selector must match (`filterVMsBasedOnSelectors`). */
export function filterBySelectors(vms: readonly Vm[], selectors: NonNullable<Selectors>): Vm[] {
  let out = [...vms];
  if (selectors.labelSelector) {
    const s = labelSelectorOf(selectors.labelSelector);
    out = out.filter((v) => s.matches(v.spec.template.metadata?.labels));
  }
  if (selectors.nodeSelectorRequirementMatcher) {
    const s = labelSelectorOf({ matchExpressions: selectors.nodeSelectorRequirementMatcher });
    out = out.filter((v) => s.matches(v.spec.template.spec?.nodeSelector));
  }
  return out;
}

/** What the status computation needs besides the pool. */
export interface PoolStatusInput {
  readonly vms: readonly Vm[];
  readonly selector: LabelSelector;
  /** The sync error of this pass: reason (FailedScaleOut, FailedScaleIn) and message. */
  readonly syncError?: { reason: string; message: string };
  readonly now: string;
}

/** The next status (KubeVirt `updateStatus`), or undefined when it would not change. */
export function nextPoolStatus(pool: Pool, input: PoolStatusInput): VirtualMachinePoolStatus | undefined {
  const old = pool.status ?? {};
  let conditions: Condition[] = [...(old.conditions ?? [])];
  const has = (type: string): boolean => findCondition(conditions, type) !== undefined;
  if (input.syncError && !has(REPLICA_CONDITION.ReplicaFailure))
    conditions.push({
      type: REPLICA_CONDITION.ReplicaFailure,
      status: "True",
      reason: input.syncError.reason,
      message: input.syncError.message,
      lastTransitionTime: input.now,
    });
  else if (!input.syncError) conditions = conditions.filter((c) => c.type !== REPLICA_CONDITION.ReplicaFailure);
  if (pool.spec.paused === true && !has(REPLICA_CONDITION.ReplicaPaused))
    conditions.push({
      type: REPLICA_CONDITION.ReplicaPaused,
      status: "True",
      reason: "SuccessfulPaused",
      message: "Pool controller is paused",
      lastTransitionTime: input.now,
    });
  else if (pool.spec.paused !== true) conditions = conditions.filter((c) => c.type !== REPLICA_CONDITION.ReplicaPaused);
  // KubeVirt's status fields are omitempty: zero counts and an empty selector are left out.
  const status: VirtualMachinePoolStatus = {};
  const replicas = input.vms.length;
  const ready = input.vms.filter((v) => hasCondition(v.status?.conditions, VM_CONDITION.Ready)).length;
  if (replicas > 0) status.replicas = replicas;
  if (ready > 0) status.readyReplicas = ready;
  if (conditions.length > 0) status.conditions = conditions;
  if (input.selector.string !== "") status.labelSelector = input.selector.string;
  return isDeepStrictEqual(status, old) ? undefined : status;
}
