/**
 * Instancetypes and preferences at admission (KubeVirt `pkg/instancetype/webhooks`):
 *
 *   /virtualmachineinstancetypes-validate           VirtualMachineInstancetype create/update
 *   /virtualmachineclusterinstancetypes-validate    VirtualMachineClusterInstancetype create/update
 *   /virtualmachinepreferences-validate             VirtualMachinePreference create/update
 *   /virtualmachineclusterpreferences-validate      VirtualMachineClusterPreference create/update
 *
 * and, for the VM webhook, `expandForValidation`: the VM's instancetype and preference are applied to a copy of its
 * template before the template is validated; a VM that sets what its instancetype owns is refused with KubeVirt's
 * "VM field(s) ... conflicts with selected instance type". An instancetype that cannot be found is ignored here (as
 * KubeVirt's admitter does): virt-controller reports it on the VM.
 */
import {
  applyInstancetypeToVmi,
  type ControllerRevision,
  checkPreferenceRequirements,
  checkSpreadCpuTopology,
  type InstancetypeObject,
  type InstancetypeSpec,
  type PreferenceSpec,
  type ResolvedMatcher,
  resolveMatcher,
  type ValidationCause,
  type VirtualMachine,
  type VirtualMachineInstancetype,
  type VirtualMachinePreference,
  validateInstancetype,
  validatePreference,
} from "@kvt/api";
import { CORE_V1, type RestTransport, resourcePath } from "@kvt/kube";
import { getIfExists } from "../kube/cluster-client.ts";
import { type AdmissionRequest, type AdmitResult, type Admitter, ALLOW } from "./admission.ts";

/** Reads instancetypes, preferences and their ControllerRevisions (as virt-api). Missing objects give `undefined`. */
export interface InstancetypeReader {
  get(matcher: ResolvedMatcher, namespace: string): Promise<InstancetypeObject | undefined>;
  getControllerRevision(namespace: string, name: string): Promise<ControllerRevision | undefined>;
  /** A claim's labels, for `inferFromVolume`; without it inference is not done. */
  getPvc?(namespace: string, name: string): Promise<PvcLabels | undefined>;
}

const CONTROLLER_REVISIONS = {
  group: "apps",
  version: "v1",
  plural: "controllerrevisions",
  kind: "ControllerRevision",
  namespaced: true,
};

/** {@link InstancetypeReader} over the API server's REST interface. */
export class RestInstancetypeReader implements InstancetypeReader {
  readonly #transport: RestTransport;
  constructor(transport: RestTransport) {
    this.#transport = transport;
  }

  get(m: ResolvedMatcher, namespace: string): Promise<InstancetypeObject | undefined> {
    const type = {
      group: "instancetype.kubevirt.io",
      version: "v1beta1",
      plural: m.plural,
      kind: "",
      namespaced: m.namespaced,
    };
    return getIfExists(this.#transport, { path: resourcePath(type, namespace, m.name) });
  }

  getControllerRevision(namespace: string, name: string): Promise<ControllerRevision | undefined> {
    return getIfExists(this.#transport, { path: resourcePath(CONTROLLER_REVISIONS, namespace, name) });
  }

  getPvc(namespace: string, name: string): Promise<PvcLabels | undefined> {
    return getIfExists(this.#transport, { path: resourcePath(CORE_V1.persistentVolumeClaims, namespace, name) });
  }
}

/**
 * The spec a VM's matcher refers to: the pinned ControllerRevision's when the VM status names one, else the live
 * object's (KubeVirt `find.SpecFinder`). `undefined` when the VM has no such matcher or the object is missing.
 */
export async function findSpec<T>(
  reader: InstancetypeReader,
  vm: VirtualMachine,
  role: "instancetype" | "preference",
): Promise<T | undefined> {
  const matcher = vm.spec?.[role];
  if (!matcher?.name) return undefined;
  const namespace = vm.metadata?.namespace ?? "";
  const pinned = (role === "instancetype" ? vm.status?.instancetypeRef : vm.status?.preferenceRef)
    ?.controllerRevisionRef;
  if (pinned?.name) {
    const cr = await reader.getControllerRevision(namespace, pinned.name);
    if (cr?.data?.spec) return cr.data.spec as T;
  }
  const obj = await reader.get(resolveMatcher(role, matcher), namespace);
  return obj?.spec as T | undefined;
}

/** Like {@link findSpec}, but a failed lookup is `undefined` (KubeVirt's admitter ignores it and warns). */
async function findOrIgnore<T>(
  reader: InstancetypeReader,
  vm: VirtualMachine,
  role: "instancetype" | "preference",
): Promise<T | undefined> {
  try {
    return await findSpec<T>(reader, vm, role);
  } catch {
    // Ignored as KubeVirt's admitter does ("ignoring err ... when looking for instance type"): virt-controller
    // reports a missing or unreadable instancetype on the VM's status.
    return undefined;
  }
}

/**
 * The VM with its instancetype and preference applied to (a copy of) its template, for validation; or the causes
 * that refuse it (conflicts, an indivisible spread topology). Returns the VM itself when it references neither.
 */
export async function expandForValidation(
  reader: InstancetypeReader,
  vm: VirtualMachine,
): Promise<{
  vm: VirtualMachine;
  causes: ValidationCause[];
  instancetype?: InstancetypeSpec;
  preference?: PreferenceSpec;
}> {
  if (!vm.spec?.instancetype && !vm.spec?.preference) return { vm, causes: [] };
  const instancetype = await findOrIgnore<InstancetypeSpec>(reader, vm, "instancetype");
  const preference = await findOrIgnore<PreferenceSpec>(reader, vm, "preference");
  if (!instancetype && !preference) return { vm, causes: [] };
  const spread = checkSpreadCpuTopology(instancetype, preference);
  if (spread) return { vm, causes: [spread] };
  const copy = structuredClone(vm);
  copy.spec.template.metadata ??= {};
  copy.spec.template.spec ??= { domain: { devices: {} } };
  const conflicts = applyInstancetypeToVmi(
    "spec.template.spec",
    instancetype,
    preference,
    copy.spec.template.spec,
    copy.spec.template.metadata,
  );
  const causes = conflicts.map((c) => ({ type: "FieldValueInvalid", message: c.message, field: c.field }));
  return { vm: copy, causes, instancetype, preference };
}

/**
 * `causes` with each refusal of hardware this platform cannot provide (FieldValueNotSupported) that the VM's
 * instancetype or preference brought in (the field is set in the expanded template but not in the VM as submitted)
 * naming where it came from: a VM of cx1.medium learns why it is refused although it never set
 * `dedicatedCpuPlacement`, a VM with the windows.11 preference why it gets a TPM.
 */
export function attributeToMatchers(
  causes: ValidationCause[],
  submitted: VirtualMachine,
  instancetype: InstancetypeSpec | undefined,
): ValidationCause[] {
  const it = submitted.spec?.instancetype;
  const pref = submitted.spec?.preference;
  if (!it?.name && !pref?.name) return causes;
  // What the instancetype alone puts into the template tells its fields from the preference's.
  let withInstancetype: VirtualMachine | undefined;
  if (it?.name && instancetype && submitted.spec?.template) {
    withInstancetype = structuredClone(submitted);
    const template = withInstancetype.spec.template;
    template.spec ??= { domain: { devices: {} } };
    template.metadata ??= {};
    applyInstancetypeToVmi("spec.template.spec", instancetype, undefined, template.spec, template.metadata);
  }
  const source = (field: string): string | undefined => {
    if (it?.name && (!pref?.name || (withInstancetype && valueAt(withInstancetype, field) !== undefined)))
      return `${resolveMatcher("instancetype", it).kind} "${it.name}"`;
    return pref?.name ? `${resolveMatcher("preference", pref).kind} "${pref.name}"` : undefined;
  };
  return causes.map((c) => {
    if (c.type !== "FieldValueNotSupported" || !c.field || valueAt(submitted, c.field) !== undefined) return c;
    const from = source(c.field);
    return from ? { ...c, message: `${c.message} (set by ${from})` } : c;
  });
}

/** The value at a dotted field path without list indexes (`spec.template.spec.domain.cpu.numa`), or undefined. */
function valueAt(obj: unknown, path: string): unknown {
  if (path.includes("[")) return true; // list members are the VM's own (instancetype devices are refused elsewhere)
  let at = obj;
  for (const key of path.split(".")) {
    if (at === null || typeof at !== "object") return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}

/**
 * The cause refusing a VM whose defaulted, expanded template misses its preference's requirements (KubeVirt's VM
 * admitter: "failure checking preference requirements: ..."), or undefined.
 */
export function requirementsCause(
  instancetype: InstancetypeSpec | undefined,
  preference: PreferenceSpec | undefined,
  vm: VirtualMachine,
): ValidationCause | undefined {
  const spec = vm.spec?.template?.spec;
  const failure = spec ? checkPreferenceRequirements(instancetype, preference, spec) : undefined;
  if (!failure) return undefined;
  return {
    type: "FieldValueNotFound",
    message: `failure checking preference requirements: ${failure.message}`,
    field: failure.fields.join(", "),
  };
}

function admit(
  req: AdmissionRequest,
  check: (o: Record<string, unknown>) => { causes: ValidationCause[]; warnings: string[] },
  deny: (causes: ValidationCause[]) => AdmitResult,
): AdmitResult {
  if (req.operation !== "CREATE" && req.operation !== "UPDATE") return ALLOW;
  const { causes, warnings } = check(req.object ?? {});
  if (causes.length > 0) return deny(causes);
  return warnings.length > 0 ? { allowed: true, warnings } : ALLOW;
}

/** The four instancetype.kubevirt.io webhooks by path; `deny` turns causes into a denial (admitters.ts's). */
export function instancetypeWebhookRoutes(deny: (causes: ValidationCause[]) => AdmitResult): Record<string, Admitter> {
  const it =
    (kind: "VirtualMachineInstancetype" | "VirtualMachineClusterInstancetype"): Admitter =>
    (req) =>
      Promise.resolve(admit(req, (o) => validateInstancetype(kind, o as VirtualMachineInstancetype), deny));
  const pref =
    (kind: "VirtualMachinePreference" | "VirtualMachineClusterPreference"): Admitter =>
    (req) =>
      Promise.resolve(admit(req, (o) => validatePreference(kind, o as VirtualMachinePreference), deny));
  return {
    "/virtualmachineinstancetypes-validate": it("VirtualMachineInstancetype"),
    "/virtualmachineclusterinstancetypes-validate": it("VirtualMachineClusterInstancetype"),
    "/virtualmachinepreferences-validate": pref("VirtualMachinePreference"),
    "/virtualmachineclusterpreferences-validate": pref("VirtualMachineClusterPreference"),
  };
}

/** A PersistentVolumeClaim, as far as inference reads it. */
export interface PvcLabels {
  metadata?: { labels?: Record<string, string> };
}

/** Inference failures a matcher's `inferFromVolumeFailurePolicy: Ignore` forgives (KubeVirt IgnoreableInferenceError). */
class IgnorableInferenceError extends Error {}

const DEFAULT_LABELS = {
  instancetype: ["instancetype.kubevirt.io/default-instancetype", "instancetype.kubevirt.io/default-instancetype-kind"],
  preference: ["instancetype.kubevirt.io/default-preference", "instancetype.kubevirt.io/default-preference-kind"],
} as const;

async function fromPvc(
  getPvc: (namespace: string, name: string) => Promise<PvcLabels | undefined>,
  role: "instancetype" | "preference",
  namespace: string,
  name: string,
): Promise<{ name: string; kind?: string }> {
  const pvc = await getPvc(namespace, name);
  if (!pvc) throw new Error(`persistentvolumeclaims "${name}" not found`);
  const [nameLabel, kindLabel] = DEFAULT_LABELS[role];
  const labels = pvc.metadata?.labels ?? {};
  const found = labels[nameLabel];
  if (found === undefined)
    throw new IgnorableInferenceError(`unable to find required ${nameLabel} label on the volume`);
  return labels[kindLabel] ? { name: found, kind: labels[kindLabel] } : { name: found };
}

/** The defaults the volume a matcher names carries (KubeVirt `volumeHandler.fromVolumes`, PVC and DataVolume). */
async function fromVolumes(
  getPvc: (namespace: string, name: string) => Promise<PvcLabels | undefined>,
  role: "instancetype" | "preference",
  vm: VirtualMachine,
  volumeName: string,
): Promise<{ name: string; kind?: string }> {
  const namespace = vm.metadata?.namespace ?? "";
  const volume = vm.spec.template.spec?.volumes?.find((v) => v.name === volumeName) as
    | { persistentVolumeClaim?: { claimName?: string }; dataVolume?: { name?: string } }
    | undefined;
  if (!volume) throw new Error(`unable to find volume ${volumeName} to infer defaults`);
  if (volume.persistentVolumeClaim)
    return fromPvc(getPvc, role, namespace, volume.persistentVolumeClaim.claimName ?? "");
  if (volume.dataVolume) {
    const dvName = volume.dataVolume.name ?? "";
    const template = (vm.spec.dataVolumeTemplates ?? []).find(
      (t) => (t as { metadata?: { name?: string } }).metadata?.name === dvName,
    ) as { spec?: { source?: { pvc?: { name?: string; namespace?: string } } } } | undefined;
    const sourcePvc = template?.spec?.source?.pvc;
    if (sourcePvc) return fromPvc(getPvc, role, sourcePvc.namespace ?? namespace, sourcePvc.name ?? "");
    if (template) {
      throw new IgnorableInferenceError(
        "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported",
      );
    }
    // No CDI here: a DataVolume's claim has the DataVolume's name.
    return fromPvc(getPvc, role, namespace, dvName);
  }
  throw new IgnorableInferenceError(`unable to infer defaults from volume ${volumeName} as type is not supported`);
}

/**
 * Resolves `inferFromVolume` matchers in place (KubeVirt's VM mutator `inferMatchers`): the volume's
 * instancetype.kubevirt.io/default-instancetype(-kind) or default-preference(-kind) labels become the matcher; with
 * failure policy Ignore an ignorable failure drops the matcher, and a found instancetype drops the template's
 * memory. Returns the error message that refuses the VM (answered 400), or undefined.
 */
export async function inferMatchers(
  getPvc: (namespace: string, name: string) => Promise<PvcLabels | undefined>,
  vm: VirtualMachine,
): Promise<string | undefined> {
  for (const role of ["instancetype", "preference"] as const) {
    const matcher = vm.spec?.[role];
    if (!matcher?.inferFromVolume) continue;
    const ignore = matcher.inferFromVolumeFailurePolicy === "Ignore";
    try {
      const found = await fromVolumes(getPvc, role, vm, matcher.inferFromVolume);
      if (role === "instancetype" && ignore && vm.spec.template.spec) delete vm.spec.template.spec.domain.memory;
      vm.spec[role] = found;
    } catch (error) {
      if (error instanceof IgnorableInferenceError && ignore) {
        delete vm.spec[role];
        continue;
      }
      return error instanceof Error ? error.message : String(error);
    }
  }
  return undefined;
}
