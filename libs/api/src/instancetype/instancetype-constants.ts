/**
 * The strings of instancetype.kubevirt.io, verbatim from KubeVirt (`staging/src/kubevirt.io/api/instancetype/
 * register.go`, `components/crds.go`, and the annotations of `core/v1/types.go`).
 */

/** API group of instancetypes and preferences. */
export const INSTANCETYPE_GROUP = "instancetype.kubevirt.io";
/** The served and stored version. */
export const INSTANCETYPE_VERSION = "v1beta1";
/** `apiVersion` of the four kinds. */
export const INSTANCETYPE_API_VERSION = "instancetype.kubevirt.io/v1beta1";

/** Kinds, plural resources and short names of the four kinds (short names as KubeVirt's CRDs). */
export const INSTANCETYPE_KINDS = {
  VirtualMachineInstancetype: {
    plural: "virtualmachineinstancetypes",
    singular: "virtualmachineinstancetype",
    shortNames: ["vminstancetype", "vminstancetypes", "vmf", "vmfs"],
    namespaced: true,
  },
  VirtualMachineClusterInstancetype: {
    plural: "virtualmachineclusterinstancetypes",
    singular: "virtualmachineclusterinstancetype",
    shortNames: ["vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"],
    namespaced: false,
  },
  VirtualMachinePreference: {
    plural: "virtualmachinepreferences",
    singular: "virtualmachinepreference",
    shortNames: ["vmpref", "vmprefs", "vmp", "vmps"],
    namespaced: true,
  },
  VirtualMachineClusterPreference: {
    plural: "virtualmachineclusterpreferences",
    singular: "virtualmachineclusterpreference",
    shortNames: ["vmcp", "vmcps"],
    namespaced: false,
  },
} as const;

/** One of the four kind names. */
export type InstancetypeKindName = keyof typeof INSTANCETYPE_KINDS;

/** The REST resource of kind `kind` (group, served version, plural, scope), as a client addresses it. */
export function instancetypeResourceType<K extends InstancetypeKindName>(
  kind: K,
): {
  readonly group: string;
  readonly version: string;
  readonly plural: (typeof INSTANCETYPE_KINDS)[K]["plural"];
  readonly kind: K;
  readonly namespaced: boolean;
} {
  const k = INSTANCETYPE_KINDS[kind];
  return { group: INSTANCETYPE_GROUP, version: INSTANCETYPE_VERSION, plural: k.plural, kind, namespaced: k.namespaced };
}

/** Annotations virt-controller sets on a VMI expanded from an instancetype or preference (name of the object). */
export const INSTANCETYPE_ANNOTATION = {
  instancetype: "kubevirt.io/instancetype-name",
  clusterInstancetype: "kubevirt.io/cluster-instancetype-name",
  preference: "kubevirt.io/preference-name",
  clusterPreference: "kubevirt.io/cluster-preference-name",
} as const;

/** Labels of the ControllerRevisions that pin a VM to one version of its instancetype or preference. */
export const CONTROLLER_REVISION_LABEL = {
  objectGeneration: "instancetype.kubevirt.io/object-generation",
  objectKind: "instancetype.kubevirt.io/object-kind",
  objectName: "instancetype.kubevirt.io/object-name",
  objectUid: "instancetype.kubevirt.io/object-uid",
  objectVersion: "instancetype.kubevirt.io/object-version",
} as const;

/** Labels the common-instancetypes bundle and volumes use to name a default instancetype/preference. */
export const DEFAULT_INSTANCETYPE_LABEL = {
  instancetype: "instancetype.kubevirt.io/default-instancetype",
  instancetypeKind: "instancetype.kubevirt.io/default-instancetype-kind",
  preference: "instancetype.kubevirt.io/default-preference",
  preferenceKind: "instancetype.kubevirt.io/default-preference-kind",
} as const;

/** VM sync-error reasons (the VM's Failure condition) when the referenced object cannot be found. */
export const INSTANCETYPE_SYNC_REASON = {
  failedFindInstancetype: "FailedFindInstancetype",
  failedFindPreference: "FailedFindPreference",
} as const;
