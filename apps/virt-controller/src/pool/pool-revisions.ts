/**
 * Pool revisions and what is out of date (pure), after KubeVirt's `watch/pool`: each pool generation that creates
 * or updates VMs is recorded in a ControllerRevision `<pool>-<generation>` holding the pool spec; VMs and their VMIs
 * carry the revision they came from in the label `kubevirt.io/vm-pool-revision-name`.
 *
 * ```
 *   VM outdated   <=> no revision label, its revision is gone, or its revision's VM template differs from the pool's
 *                     -> opportunistic update: the VM gets the pool's template (firmware uuid/serial kept)
 *   VMI outdated  (VM up to date, proactive updates):
 *        VMI label missing or its revision gone   -> restart (delete the VMI; the VM recreates it)
 *        data volume templates differ             -> delete the VM (the pool recreates it)
 *        VMI templates differ                     -> restart
 *        same template under another name         -> patch the VMI's label
 *   at most maxUnavailable (default 100%, at least 1) VMIs not ready at a time
 * ```
 */
import { isDeepStrictEqual } from "node:util";
import {
  hasCondition,
  LABEL,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachinePool,
  type VirtualMachinePoolSpec,
  VMI_CONDITION,
} from "@kvt/api";
import { poolOwnerRef, revisionName } from "./pool-plan.ts";

type Pool = VirtualMachinePool;
type Vm = VirtualMachine;
type Vmi = VirtualMachineInstance;

/** An apps/v1 ControllerRevision holding a pool spec. */
export interface PoolRevision {
  apiVersion: "apps/v1";
  kind: "ControllerRevision";
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    ownerReferences?: NonNullable<NonNullable<Vm["metadata"]>["ownerReferences"]>;
  };
  data?: VirtualMachinePoolSpec;
  revision?: number;
}

/** The revision the pool's current generation is recorded in. */
export function poolRevision(pool: Pool): PoolRevision {
  return {
    apiVersion: "apps/v1",
    kind: "ControllerRevision",
    metadata: {
      name: revisionName(pool),
      namespace: pool.metadata?.namespace,
      ownerReferences: [poolOwnerRef(pool)],
    },
    data: structuredClone(pool.spec),
    revision: pool.metadata?.generation ?? 0,
  };
}

/** Looks a revision up by name (in the pool's namespace). */
export type RevisionLookup = (name: string) => PoolRevision | undefined;

/** KubeVirt `isOutdatedVM`: the VM does not carry the pool's current VM template. */
export function isOutdatedVm(pool: Pool, vm: Vm, revision: RevisionLookup): boolean {
  const name = vm.metadata?.labels?.[LABEL.poolRevisionName];
  if (!name) return true;
  const old = revision(name)?.data;
  if (!old) return true;
  return !isDeepStrictEqual(old.virtualMachineTemplate, pool.spec.virtualMachineTemplate);
}

/** What a proactive update does to an up-to-date VM's VMI. */
export type VmiUpdate = "none" | "restart" | "label-patch" | "vm-delete";

/** KubeVirt `isOutdatedVMI`: how the VMI must follow its (up-to-date) VM. */
export function vmiUpdate(vm: Vm, vmi: Vmi, revision: RevisionLookup): VmiUpdate {
  const vmRevision = vm.metadata?.labels?.[LABEL.poolRevisionName];
  if (!vmRevision) return "none";
  const vmiRevision = vmi.metadata?.labels?.[LABEL.poolRevisionName];
  if (!vmiRevision) return "restart";
  if (vmRevision === vmiRevision) return "none";
  const expected = revision(vmRevision)?.data?.virtualMachineTemplate.spec;
  if (!expected) return "none";
  const current = revision(vmiRevision)?.data?.virtualMachineTemplate.spec;
  if (!current) return "restart";
  if (!isDeepStrictEqual(current.dataVolumeTemplates, expected.dataVolumeTemplates)) return "vm-delete";
  if (!isDeepStrictEqual(current.template, expected.template)) return "restart";
  return "label-patch";
}

/** A VMI counts as available when Running, Ready and not being deleted (`isVMIReady`). */
export function vmiAvailable(vmi: Vmi | undefined): boolean {
  return (
    vmi !== undefined &&
    !vmi.metadata?.deletionTimestamp &&
    vmi.status?.phase === "Running" &&
    hasCondition(vmi.status.conditions, VMI_CONDITION.Ready)
  );
}

/** `maxUnavailable` as a count of VMIs (default 100% of replicas; at least 1), as KubeVirt computes it. */
export function maxUnavailableCount(pool: Pool): number {
  const value = pool.spec.maxUnavailable ?? "100%";
  const replicas = pool.spec.replicas ?? 1;
  const n = typeof value === "number" ? value : Math.trunc((replicas * Number.parseInt(value, 10)) / 100);
  return Number.isFinite(n) && n >= 1 ? n : 1;
}

/** The VM after an opportunistic update: the pool's template (indexed) with identity fields kept. */
export function updatedVm(vm: Vm, target: Vm): Vm {
  const out = structuredClone(vm);
  out.metadata = { ...out.metadata, labels: target.metadata?.labels };
  if (target.metadata?.annotations) out.metadata.annotations = target.metadata.annotations;
  else delete out.metadata.annotations;
  out.spec = structuredClone(target.spec);
  // Firmware uuid and serial identify the machine to its guest: they never change (`preserveVMIdentityFields`).
  const firmware = vm.spec.template.spec?.domain?.firmware;
  const spec = out.spec.template.spec;
  if (firmware && spec?.domain) {
    spec.domain.firmware = {
      ...spec.domain.firmware,
      ...(firmware.uuid ? { uuid: firmware.uuid } : {}),
      ...(firmware.serial ? { serial: firmware.serial } : {}),
    };
  }
  return out;
}
