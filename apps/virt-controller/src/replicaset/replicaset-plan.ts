/**
 * What the VirtualMachineInstanceReplicaSet controller decides (pure), after KubeVirt's `watch/replicaset`:
 *
 * ```
 *   VMIs in the namespace --claim--> owned (adopt matching orphans, release owned ones the selector lost)
 *        owned --split--> active   (not final, not deleting, not Ready=False/PodTerminating)
 *                         finished (final, or Ready=False/PodTerminating, and not deleting yet)
 *   diff = |active| - replicas (default 1), at most `burst` per pass:
 *        diff < 0: create |diff| VMIs from the template;  diff > 0: delete diff active VMIs;
 *        then delete the finished ones (up to `burst`)
 *   status: replicas = |active|, readyReplicas = |active with Ready=True|, labelSelector, ReplicaPaused/ReplicaFailure
 * ```
 * KubeVirt deletes the first `diff` VMIs of its cache listing (an order it leaves open, with a TODO to prefer
 * VMIs not yet running); this controller makes that order explicit: not yet Running first, then not Ready, then the
 * newest.
 */
import {
  API_VERSION,
  type Condition,
  findCondition,
  hasCondition,
  isVmiFinal,
  KIND,
  type LabelSelector,
  REASON,
  REPLICA_CONDITION,
  type VirtualMachineInstance,
  type VirtualMachineInstanceReplicaSet,
  type VirtualMachineInstanceReplicaSetStatus,
  VMI_CONDITION,
} from "@kvt/api";
import { controllerRefOf } from "@kvt/kube";

/** KubeVirt's `controller.BurstReplicas`: a replica set creates or deletes at most this many VMIs per pass. */
export const DEFAULT_BURST_REPLICAS = 250;

type Vmi = VirtualMachineInstance;
type ReplicaSet = VirtualMachineInstanceReplicaSet;

/** How the replica set's claim on the namespace's VMIs turns out. */
export interface Claim {
  /** Owned and matching (after adoption). */
  readonly owned: Vmi[];
  /** Orphans that match the selector: to adopt (counted in `owned` once adopted). */
  readonly adopt: Vmi[];
  /** Owned but no longer matching: to release. */
  readonly release: Vmi[];
}

/** KubeVirt's `ClaimVirtualMachineInstances`: which VMIs the replica set owns, adopts and releases. */
export function claimVmis(rs: ReplicaSet, selector: LabelSelector, vmis: readonly Vmi[]): Claim {
  const owned: Vmi[] = [];
  const adopt: Vmi[] = [];
  const release: Vmi[] = [];
  const deleting = rs.metadata?.deletionTimestamp != null;
  for (const vmi of vmis) {
    const ref = controllerRefOf(vmi);
    const matches = selector.matches(vmi.metadata?.labels);
    if (ref) {
      if (ref.uid !== rs.metadata?.uid) continue;
      if (matches) owned.push(vmi);
      else if (!deleting) release.push(vmi);
      continue;
    }
    if (deleting || !matches || vmi.metadata?.deletionTimestamp) continue;
    adopt.push(vmi);
  }
  return { owned, adopt, release };
}

/** Ready=False with reason PodTerminating: the launcher pod is going away, the VMI with it. */
function terminating(vmi: Vmi): boolean {
  const ready = findCondition(vmi.status?.conditions, VMI_CONDITION.Ready);
  return ready?.status === "False" && ready.reason === REASON.PodTerminating;
}

/** Active VMIs: not final, not being deleted, not terminating (`filterActiveVMIs`). */
export function activeVmis(vmis: readonly Vmi[]): Vmi[] {
  return vmis.filter((v) => !isVmiFinal(v) && !v.metadata?.deletionTimestamp && !terminating(v));
}

/** Finished VMIs still to delete: final or terminating, not yet being deleted (`filterFinishedVMIs`, `filterUnkownVMIs`). */
export function finishedVmis(vmis: readonly Vmi[]): Vmi[] {
  return vmis.filter((v) => !v.metadata?.deletionTimestamp && (isVmiFinal(v) || terminating(v)));
}

/** VMIs whose Ready condition is True. */
export function readyVmis(vmis: readonly Vmi[]): Vmi[] {
  return vmis.filter((v) => hasCondition(v.status?.conditions, VMI_CONDITION.Ready));
}

/** `spec.replicas`, defaulting to 1. */
export function desiredReplicas(rs: ReplicaSet): number {
  return rs.spec.replicas ?? 1;
}

/** Active VMIs minus desired replicas: negative means create, positive delete. */
export function replicaDiff(rs: ReplicaSet, active: readonly Vmi[]): number {
  return active.length - desiredReplicas(rs);
}

function deletionRank(v: Vmi): number {
  if (v.status?.phase !== "Running") return 0;
  return hasCondition(v.status.conditions, VMI_CONDITION.Ready) ? 2 : 1;
}

/** The `count` active VMIs to delete first: not yet Running, then not Ready, then the newest. */
export function deletionCandidates(active: readonly Vmi[], count: number): Vmi[] {
  const created = (v: Vmi): number => Date.parse(v.metadata?.creationTimestamp ?? "") || 0;
  return [...active]
    .sort((a, b) => deletionRank(a) - deletionRank(b) || created(b) - created(a))
    .slice(0, Math.max(0, count));
}

/** The ownerReference a replica set's VMIs carry. */
export function replicaSetOwnerRef(
  rs: ReplicaSet,
): NonNullable<NonNullable<Vmi["metadata"]>["ownerReferences"]>[number] {
  return {
    apiVersion: API_VERSION,
    kind: KIND.VirtualMachineInstanceReplicaSet,
    name: rs.metadata?.name ?? "",
    uid: rs.metadata?.uid ?? "",
    controller: true,
    blockOwnerDeletion: true,
  };
}

/**
 * A VMI to create for `rs` (`scale`): the template's metadata with `generateName` set to the template's name, else
 * its generateName, else the replica set's name (KubeVirt's `getVirtualMachineBaseName`, used as is, no dash added).
 */
export function vmiFromTemplate(rs: ReplicaSet): Vmi {
  const t = structuredClone(rs.spec.template);
  const { name, generateName, ...meta } = t.metadata ?? {};
  const base = name || generateName || rs.metadata?.name || "";
  return {
    apiVersion: API_VERSION,
    kind: KIND.VirtualMachineInstance,
    metadata: {
      ...meta,
      generateName: base,
      namespace: rs.metadata?.namespace,
      labels: t.metadata?.labels,
      ownerReferences: [replicaSetOwnerRef(rs)],
    },
    spec: t.spec ?? { domain: { devices: {} } },
  };
}

/** What the status computation needs besides the replica set. */
export interface StatusInput {
  readonly active: readonly Vmi[];
  readonly selector: LabelSelector;
  /** The scale error of this pass, if any. */
  readonly scaleError?: string;
  /** RFC 3339 time for new conditions. */
  readonly now: string;
}

/**
 * The next status (KubeVirt `updateStatus`), or undefined when nothing changed: replicas and readyReplicas of the
 * active VMIs, the canonical selector, ReplicaPaused while paused, ReplicaFailure (FailedCreate or FailedDelete)
 * while scaling fails. An existing condition is kept as it is.
 */
export function nextReplicaSetStatus(
  rs: ReplicaSet,
  input: StatusInput,
): VirtualMachineInstanceReplicaSetStatus | undefined {
  const old = rs.status ?? {};
  const replicas = input.active.length;
  const readyReplicas = readyVmis(input.active).length;
  const paused = rs.spec.paused === true;
  const failed = input.scaleError !== undefined;
  const hasPaused = findCondition(old.conditions, REPLICA_CONDITION.ReplicaPaused) !== undefined;
  const hasFailure = findCondition(old.conditions, REPLICA_CONDITION.ReplicaFailure) !== undefined;
  const same =
    replicas === (old.replicas ?? 0) &&
    readyReplicas === (old.readyReplicas ?? 0) &&
    failed === hasFailure &&
    paused === hasPaused &&
    input.selector.string === (old.labelSelector ?? "");
  if (same) return undefined;
  let conditions: Condition[] = [...(old.conditions ?? [])];
  if (paused && !hasPaused)
    conditions.push({
      type: REPLICA_CONDITION.ReplicaPaused,
      status: "True",
      reason: "Paused",
      message: "Controller got paused",
      lastTransitionTime: input.now,
    });
  else if (!paused && hasPaused) conditions = conditions.filter((c) => c.type !== REPLICA_CONDITION.ReplicaPaused);
  if (failed && !hasFailure)
    conditions.push({
      type: REPLICA_CONDITION.ReplicaFailure,
      status: "True",
      reason: replicaDiff(rs, input.active) < 0 ? "FailedCreate" : "FailedDelete",
      message: input.scaleError,
      lastTransitionTime: input.now,
    });
  else if (!failed && hasFailure) conditions = conditions.filter((c) => c.type !== REPLICA_CONDITION.ReplicaFailure);
  // KubeVirt's status fields are omitempty: zero counts and an empty selector are left out, as it writes them.
  const status: VirtualMachineInstanceReplicaSetStatus = { ...old };
  delete status.replicas;
  delete status.readyReplicas;
  delete status.labelSelector;
  delete status.conditions;
  if (replicas > 0) status.replicas = replicas;
  if (readyReplicas > 0) status.readyReplicas = readyReplicas;
  if (conditions.length > 0) status.conditions = conditions;
  if (input.selector.string !== "") status.labelSelector = input.selector.string;
  return status;
}
