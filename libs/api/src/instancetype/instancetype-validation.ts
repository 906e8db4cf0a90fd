/**
 * Validation of the four instancetype.kubevirt.io kinds (KubeVirt `pkg/instancetype/webhooks/admitter.go` and
 * `pkg/instancetype/preference/webhooks/admitter.go`), with KubeVirt's messages and warnings:
 *
 * | kind                     | rule                                                                  |
 * | ------------------------ | --------------------------------------------------------------------- |
 * | (Cluster)Instancetype    | memory.overcommitPercent in [0, 100]                                  |
 * | (Cluster)Instancetype    | memory.overcommitPercent and memory.hugepages not together            |
 * | (Cluster)Instancetype    | launchSecurity: deprecation warning                                   |
 * | (Cluster)Preference      | cpu.preferredCPUTopology is a known topology                          |
 * | (Cluster)Preference      | spread: spreadOptions.across known; CoresThreads only with ratio 2    |
 * | (Cluster)Preference      | deprecated prefer* topology: warning naming the replacement          |
 * and, for a VM using both, the spread topology divides the instancetype's vCPUs (`CheckSpreadCPUTopology`).
 */
import { typeErrors } from "../strict-decode.ts";
import type { ValidationCause } from "../types.ts";
import { CAUSE_TYPE, cause } from "../validation/causes.ts";
import { PREFERRED_CPU_TOPOLOGIES, SPREAD_ACROSS } from "./instancetype-schemas.ts";
import type {
  InstancetypeMatcher,
  InstancetypeSpec,
  PreferenceSpec,
  VirtualMachineInstancetype,
  VirtualMachinePreference,
} from "./instancetype-types.ts";

/** Admission result for an instancetype or preference: causes refuse it, warnings go back to the client. */
export interface InstancetypeAdmission {
  readonly causes: ValidationCause[];
  readonly warnings: string[];
}

/** KubeVirt's warning for an instancetype with launchSecurity. */
export const DEPRECATED_LAUNCH_SECURITY_WARNING =
  "launchSecurity is deprecated and will be removed in a future release. Use preference instead.";

/** The spec of an instancetype (`field` is its path, `spec`). */
export function validateInstancetypeSpec(field: string, spec: InstancetypeSpec): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const percent = spec.memory?.overcommitPercent ?? 0;
  const percentField = `${field}.memory.overcommitPercent`;
  if (percent < 0 || percent > 100) {
    causes.push(
      cause(CAUSE_TYPE.invalid, `${percentField} '${percent}': must be in range between 0 and 100.`, percentField),
    );
  }
  if (percent !== 0 && spec.memory?.hugepages) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${percentField} and ${field}.memory.hugepages should not be requested together.`,
        percentField,
      ),
    );
  }
  return causes;
}

/** A VirtualMachineInstancetype or VirtualMachineClusterInstancetype on create or update. */
export function validateInstancetype(
  kind: "VirtualMachineInstancetype" | "VirtualMachineClusterInstancetype",
  obj: VirtualMachineInstancetype,
): InstancetypeAdmission {
  const typeCauses = typeErrors(kind, obj);
  if (typeCauses.length > 0) return { causes: typeCauses, warnings: [] };
  const spec = obj.spec ?? ({} as InstancetypeSpec);
  const causes = validateInstancetypeSpec("spec", spec);
  const warnings = causes.length === 0 && spec.launchSecurity ? [DEPRECATED_LAUNCH_SECURITY_WARNING] : [];
  return { causes, warnings };
}

const DEPRECATED_TOPOLOGIES: Record<string, string> = {
  preferSockets: "sockets",
  preferCores: "cores",
  preferThreads: "threads",
  preferSpread: "spread",
  preferAny: "any",
};

function isSpread(spec: PreferenceSpec | undefined): boolean {
  const t = spec?.cpu?.preferredCPUTopology;
  return t === "spread" || t === "preferSpread";
}

/** The spread ratio and axis a preference asks for (KubeVirt `GetSpreadOptions`: ratio 2 across SocketsCores). */
export function spreadOptions(spec: PreferenceSpec): { ratio: number; across: string } {
  const ratio = spec.cpu?.spreadOptions?.ratio ?? (spec.preferSpreadSocketToCoreRatio || 2);
  return { ratio, across: spec.cpu?.spreadOptions?.across ?? "SocketsCores" };
}

/** The spec of a preference (`field` is its path, `spec`). */
export function validatePreferenceSpec(field: string, spec: PreferenceSpec): ValidationCause[] {
  const topology = spec.cpu?.preferredCPUTopology;
  if (topology !== undefined && !(PREFERRED_CPU_TOPOLOGIES as readonly string[]).includes(topology)) {
    const f = `${field}.cpu.preferredCPUTopology`;
    return [cause(CAUSE_TYPE.invalid, `unknown preferredCPUTopology ${topology}`, f)];
  }
  if (!isSpread(spec)) return [];
  const { ratio, across } = spreadOptions(spec);
  if (!(SPREAD_ACROSS as readonly string[]).includes(across)) {
    return [cause(CAUSE_TYPE.invalid, `across ${across} is not supported`, `${field}.cpu.spreadOptions.across`)];
  }
  if (across === "CoresThreads" && ratio !== 2) {
    return [
      cause(
        CAUSE_TYPE.invalid,
        "only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads",
        `${field}.cpu.spreadOptions.ratio`,
      ),
    ];
  }
  return [];
}

/** A VirtualMachinePreference or VirtualMachineClusterPreference on create or update. */
export function validatePreference(
  kind: "VirtualMachinePreference" | "VirtualMachineClusterPreference",
  obj: VirtualMachinePreference,
): InstancetypeAdmission {
  const typeCauses = typeErrors(kind, obj);
  if (typeCauses.length > 0) return { causes: typeCauses, warnings: [] };
  const spec = obj.spec ?? {};
  const causes = validatePreferenceSpec("spec", spec);
  const topology = spec.cpu?.preferredCPUTopology ?? "";
  const replacement = DEPRECATED_TOPOLOGIES[topology];
  const warnings =
    causes.length === 0 && replacement
      ? [
          `PreferredCPUTopology ${topology} is deprecated for removal in a future release, please use ${replacement} instead`,
        ]
      : [];
  return { causes, warnings };
}

/**
 * For a VM with both: the preference's spread topology must divide the instancetype's vCPUs (KubeVirt
 * `CheckSpreadCPUTopology`; the cause's field is `instancetype.spec.cpu.guest`).
 */
export function checkSpreadCpuTopology(
  instancetype: InstancetypeSpec | undefined,
  preference: PreferenceSpec | undefined,
): ValidationCause | undefined {
  if (!instancetype || !preference || !isSpread(preference)) return undefined;
  const guest = instancetype.cpu.guest;
  const { ratio, across } = spreadOptions(preference);
  const f = "instancetype.spec.cpu.guest";
  let message: string | undefined;
  if (across === "SocketsCores" && guest % ratio > 0) {
    message = `${guest} vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of ${ratio} provided by the preference`;
  } else if (across === "CoresThreads" && guest % ratio > 0) {
    message = `${guest} vCPUs provided by the instance type are not divisible by the number of threads per core ${ratio}`;
  } else if (across === "SocketsCoresThreads" && (guest % 2 > 0 || Math.floor(guest / 2) % ratio > 0)) {
    message = `${guest} vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of ${ratio}`;
  }
  return message ? cause(CAUSE_TYPE.invalid, message, f) : undefined;
}

const FAILURE_POLICIES = ["Ignore", "Reject"];

function matcherCauses(role: "instancetype" | "preference", m: InstancetypeMatcher | undefined): ValidationCause[] {
  if (!m) return [];
  const field = `spec.${role}`;
  const matcher = role === "instancetype" ? "InstancetypeMatcher" : "PreferenceMatcher";
  const causes: ValidationCause[] = [];
  if (!m.name && !m.inferFromVolume) {
    causes.push(
      cause(CAUSE_TYPE.notFound, `Either Name or InferFromVolume should be provided within the ${matcher}`, field),
    );
  }
  if (m.inferFromVolume) {
    if (m.name) {
      const msg = "Name already set, should be cleared before setting inferFromVolume";
      causes.push(cause(CAUSE_TYPE.notSupported, msg, `${field}.name`));
    }
    if (m.kind) {
      const msg = "Kind already set, should be cleared before setting inferFromVolume";
      causes.push(cause(CAUSE_TYPE.notSupported, msg, `${field}.kind`));
    }
  }
  const policy = m.inferFromVolumeFailurePolicy;
  if (policy !== undefined && !FAILURE_POLICIES.includes(policy)) {
    const msg = `Invalid value '${policy}' for InferFromVolumeFailurePolicy`;
    causes.push(cause(CAUSE_TYPE.invalid, msg, `${field}.inferFromVolumeFailurePolicy`));
  }
  return causes;
}

function matcherUpdateCause(
  role: "instancetype" | "preference",
  now: InstancetypeMatcher | undefined,
  before: InstancetypeMatcher | undefined,
): ValidationCause[] {
  if (!now || !before || !now.revisionName) return [];
  if (now.name !== before.name && now.revisionName === before.revisionName) {
    const msg = "the Matcher Name has been updated without updating the RevisionName";
    return [cause(CAUSE_TYPE.invalid, msg, `spec.${role}.revisionName`)];
  }
  return [];
}

/**
 * A VM's instancetype and preference matchers (KubeVirt's VM mutating webhook, `validateMatchers`): a name or an
 * inferFromVolume, not both with a kind, a known inferFromVolumeFailurePolicy; on update, a renamed matcher must not
 * keep its revisionName. The mutator refuses the VM with these causes.
 */
export function validateMatchers(
  vm: { spec?: { instancetype?: InstancetypeMatcher; preference?: InstancetypeMatcher } },
  old?: { spec?: { instancetype?: InstancetypeMatcher; preference?: InstancetypeMatcher } },
): ValidationCause[] {
  if (old) {
    const update = [
      ...matcherUpdateCause("instancetype", vm.spec?.instancetype, old.spec?.instancetype),
      ...matcherUpdateCause("preference", vm.spec?.preference, old.spec?.preference),
    ];
    if (update.length > 0) return update.slice(0, 1);
  }
  const it = matcherCauses("instancetype", vm.spec?.instancetype);
  return it.length > 0 ? it : matcherCauses("preference", vm.spec?.preference);
}
