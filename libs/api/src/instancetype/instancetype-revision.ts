/**
 * Matchers and ControllerRevisions (KubeVirt `pkg/instancetype/find` and `pkg/instancetype/revision`), pure.
 *
 *   VM spec.instancetype {name, kind}                 kind "" = VirtualMachineClusterInstancetype
 *      │  virt-controller, first sync: copy the object into
 *      v
 *   ControllerRevision <vm>-<object>-<version>-<uid>-<generation>   (owned by the VM, labels instancetype.kubevirt.io/object-*)
 *      │  recorded in
 *      v
 *   VM status.instancetypeRef {name, kind, controllerRevisionRef{name}}
 *
 * Later syncs (and every VMI the VM creates) read the revision, so editing the instancetype does not change a VM
 * that already uses it.
 */
import { API_VERSION, KIND } from "../constants.ts";
import type { VirtualMachine } from "../types.ts";
import { CONTROLLER_REVISION_LABEL, INSTANCETYPE_KINDS, INSTANCETYPE_VERSION } from "./instancetype-constants.ts";
import type { InstancetypeMatcher, InstancetypeStatusRef } from "./instancetype-types.ts";

/** Which matcher: `spec.instancetype` or `spec.preference`. */
export type MatcherRole = "instancetype" | "preference";

/** The kind a matcher refers to, resolved. */
export interface ResolvedMatcher {
  readonly kind:
    | "VirtualMachineInstancetype"
    | "VirtualMachineClusterInstancetype"
    | "VirtualMachinePreference"
    | "VirtualMachineClusterPreference";
  readonly plural: string;
  readonly namespaced: boolean;
  readonly name: string;
}

/**
 * Resolves a matcher's kind as KubeVirt does: case-insensitive singular or plural resource name; empty means the
 * cluster kind. Throws KubeVirt's "got unexpected kind in InstancetypeMatcher: X" for anything else.
 */
export function resolveMatcher(role: MatcherRole, matcher: InstancetypeMatcher): ResolvedMatcher {
  const [namespaced, cluster] =
    role === "instancetype"
      ? (["VirtualMachineInstancetype", "VirtualMachineClusterInstancetype"] as const)
      : (["VirtualMachinePreference", "VirtualMachineClusterPreference"] as const);
  const kind = (matcher.kind ?? "").toLowerCase();
  const pick = (k: ResolvedMatcher["kind"]): ResolvedMatcher => ({
    kind: k,
    plural: INSTANCETYPE_KINDS[k].plural,
    namespaced: INSTANCETYPE_KINDS[k].namespaced,
    name: matcher.name ?? "",
  });
  const ns = INSTANCETYPE_KINDS[namespaced];
  const cl = INSTANCETYPE_KINDS[cluster];
  if (kind === ns.singular || kind === ns.plural) return pick(namespaced);
  if (kind === "" || kind === cl.singular || kind === cl.plural) return pick(cluster);
  const matcherName = role === "instancetype" ? "InstancetypeMatcher" : "PreferenceMatcher";
  throw new Error(`got unexpected kind in ${matcherName}: ${matcher.kind}`);
}

/** KubeVirt's ControllerRevision name: `<vm>-<object>-<version>-<uid>-<generation>`. */
export function controllerRevisionName(
  vmName: string,
  objectName: string,
  version: string,
  uid: string,
  generation: number,
): string {
  return `${vmName}-${objectName}-${version}-${uid}-${generation}`;
}

/** An apps/v1 ControllerRevision, as far as instancetypes use it. */
export interface ControllerRevision {
  apiVersion: "apps/v1";
  kind: "ControllerRevision";
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    ownerReferences?: {
      apiVersion: string;
      kind: string;
      name: string;
      uid: string;
      controller?: boolean;
      blockOwnerDeletion?: boolean;
    }[];
    [key: string]: unknown;
  };
  data?: { apiVersion?: string; kind?: string; metadata?: Record<string, unknown>; spec?: unknown };
  revision?: number;
}

/** An instancetype or preference object as read from the API server. */
export interface InstancetypeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; uid?: string; generation?: number; [key: string]: unknown };
  spec?: unknown;
}

/**
 * The ControllerRevision that pins `vm` to `object` (KubeVirt `CreateControllerRevision`): the object with its
 * labels, annotations, finalizers, owner references and managed fields dropped, owned by the VM.
 */
export function controllerRevisionFor(
  vm: VirtualMachine,
  kind: ResolvedMatcher["kind"],
  object: InstancetypeObject,
): ControllerRevision {
  const metadata: Record<string, unknown> = { ...structuredClone(object.metadata ?? {}) };
  for (const k of ["labels", "annotations", "finalizers", "ownerReferences", "managedFields"]) delete metadata[k];
  const name = object.metadata?.name ?? "";
  const uid = object.metadata?.uid ?? "";
  const generation = object.metadata?.generation ?? 0;
  const vmName = vm.metadata?.name ?? "";
  return {
    apiVersion: "apps/v1",
    kind: "ControllerRevision",
    metadata: {
      name: controllerRevisionName(vmName, name, INSTANCETYPE_VERSION, uid, generation),
      namespace: vm.metadata?.namespace,
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: KIND.VirtualMachine,
          name: vmName,
          uid: vm.metadata?.uid ?? "",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      labels: {
        [CONTROLLER_REVISION_LABEL.objectGeneration]: String(generation),
        [CONTROLLER_REVISION_LABEL.objectKind]: kind,
        [CONTROLLER_REVISION_LABEL.objectName]: name,
        [CONTROLLER_REVISION_LABEL.objectUid]: uid,
        [CONTROLLER_REVISION_LABEL.objectVersion]: INSTANCETYPE_VERSION,
      },
    },
    data: {
      apiVersion: `instancetype.kubevirt.io/${INSTANCETYPE_VERSION}`,
      kind,
      metadata,
      spec: structuredClone(object.spec),
    },
    revision: 0,
  };
}

/**
 * The status ref to record for `matcher` given the current one (KubeVirt `syncStatusWithMatcher`): a changed name,
 * kind or inferFromVolume drops the pinned revision; a matcher's `revisionName` pins that revision. Returns the
 * new ref and whether a revision still has to be created (`controllerRevisionRef` unset).
 */
export function syncStatusRef(
  matcher: InstancetypeMatcher,
  current: InstancetypeStatusRef | undefined,
): { ref: InstancetypeStatusRef; needsRevision: boolean } {
  const ref: InstancetypeStatusRef = structuredClone(current ?? {});
  let clear = false;
  for (const key of ["name", "kind", "inferFromVolume"] as const) {
    const v = matcher[key];
    if (v && v !== ref[key]) {
      ref[key] = v;
      clear = true;
    }
  }
  if (clear) delete ref.controllerRevisionRef;
  if (matcher.inferFromVolumeFailurePolicy) ref.inferFromVolumeFailurePolicy = matcher.inferFromVolumeFailurePolicy;
  if (matcher.revisionName && ref.controllerRevisionRef?.name !== matcher.revisionName)
    ref.controllerRevisionRef = { name: matcher.revisionName };
  return { ref, needsRevision: !ref.controllerRevisionRef?.name };
}
