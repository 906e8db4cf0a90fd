/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString) exactly as KubeVirt formats paths into its messages. */
/**
 * Validation of VirtualMachineInstances, what virt-api's VMI webhooks enforce: the spec rules (shared with VM
 * templates), reserved labels, mandatory memory on create, and the immutable spec on update.
 */
import { isDeepStrictEqual } from "node:util";
import { LABEL } from "../constants.ts";
import { typeErrors } from "../strict-decode.ts";
import type { ObjectMeta, ValidationCause, VirtualMachineInstance, VirtualMachineInstanceSpec } from "../types.ts";
import { validateAccessCredentials } from "./access-credentials-validation.ts";
import { CAUSE_TYPE, cause, type FieldPath, path } from "./causes.ts";
import { dns1123SubdomainErrors } from "./dns.ts";
import { validateDnsSettings } from "./dns-config-validation.ts";
import { validateDiscontinuedGates, validateGatedMetadata, validateGatedSpec } from "./feature-gate-validation.ts";
import { validateUnsupportedHardware } from "./unsupported-hardware.ts";
import { type ClusterConfig, DEFAULT_CLUSTER_CONFIG } from "./validation-config.ts";
import { validateNetworks } from "./vmi-network-validation.ts";
import {
  validateCpu,
  validateKernelBoot,
  validateMandatoryMemory,
  validateMemory,
  validateNames,
  validateStrategies,
} from "./vmi-resources-validation.ts";
import { validateDisks, validateVolumes } from "./vmi-storage-validation.ts";

/** Who makes the request: KubeVirt's own service accounts may do what users may not. */
export interface RequestContext {
  /** True for virt-controller, virt-handler and virt-api's service accounts. */
  isKubeVirtServiceAccount?: boolean;
  /** Cluster settings (defaults to KubeVirt's). */
  config?: ClusterConfig;
}

const RESTRICTED_LABELS: readonly string[] = [
  LABEL.createdBy,
  LABEL.migrationJob,
  LABEL.nodeName,
  LABEL.migrationTargetNodeName,
  LABEL.schedulable,
  "kubevirt.io/install-strategy",
];

/** A VMI spec (or a VM template's spec) at `field`: every rule of `ValidateVirtualMachineInstanceSpec` we carry. */
export function validateVmiSpec(
  field: FieldPath,
  spec: VirtualMachineInstanceSpec | undefined,
  config: ClusterConfig = DEFAULT_CLUSTER_CONFIG,
): ValidationCause[] {
  if (!spec?.domain || typeof spec.domain !== "object")
    return [cause(CAUSE_TYPE.required, `${field.child("domain")} is a required field`, field.child("domain"))];
  if (!spec.domain.devices || typeof spec.domain.devices !== "object") {
    const f = field.child("domain", "devices");
    return [cause(CAUSE_TYPE.required, `${f} is a required field`, f)];
  }
  return [
    ...validateNames(field, spec),
    ...validateMemory(field, spec, config),
    ...validateCpu(field, spec),
    ...validateStrategies(field, spec, config),
    ...validateNetworks(field, spec, config),
    ...validateDisks(field, spec),
    ...validateVolumes(field, spec),
    ...validateKernelBoot(field, spec),
    ...validateDnsSettings(field, spec),
    ...validateGatedSpec(field, spec, config.developerConfiguration),
    ...validateUnsupportedHardware(field, spec),
    ...validateAccessCredentials(field.child("accessCredentials"), spec),
  ];
}

/** Reserved `kubevirt.io/` labels users may not set on a VMI (or a VM template). */
export function validateVmiMetadata(
  field: FieldPath,
  meta: ObjectMeta | undefined,
  ctx: RequestContext = {},
): ValidationCause[] {
  // Feature gates bind KubeVirt's own service accounts too (a VMI virt-controller creates from a VM template).
  const gated = validateGatedMetadata(field, meta, ctx.config?.developerConfiguration);
  if (ctx.isKubeVirtServiceAccount) return gated;
  const labels = Object.keys(meta?.labels ?? {});
  if (labels.some((l) => RESTRICTED_LABELS.includes(l))) {
    return [
      cause(
        CAUSE_TYPE.notSupported,
        "creation of the following reserved kubevirt.io/ labels on a VMI object is prohibited",
        field.child("labels"),
      ),
      ...gated,
    ];
  }
  return gated;
}

/** `metadata.name` as the API server checks it for custom resources (a DNS-1123 subdomain). */
export function validateObjectName(meta: ObjectMeta | undefined): ValidationCause[] {
  const name = meta?.name ?? "";
  if (!name && meta?.generateName) return [];
  if (!name) return [cause(CAUSE_TYPE.required, "name or generateName is required", "metadata.name")];
  return dns1123SubdomainErrors(name).map((e) =>
    cause(CAUSE_TYPE.invalid, `Invalid value: "${name}": ${e}`, "metadata.name"),
  );
}

/** A VMI on create (after defaulting): name, reserved labels, the spec, mandatory memory. */
export function validateVmiCreate(vmi: VirtualMachineInstance, ctx: RequestContext = {}): ValidationCause[] {
  const typeCauses = typeErrors("VirtualMachineInstance", vmi);
  if (typeCauses.length > 0) return typeCauses;
  const spec = path("spec");
  return [
    ...validateObjectName(vmi.metadata),
    ...validateVmiMetadata(path("metadata"), vmi.metadata, ctx),
    ...validateVmiSpec(spec, vmi.spec, ctx.config),
    ...(vmi.spec?.domain?.devices ? validateMandatoryMemory(spec, vmi.spec) : []),
    ...validateDiscontinuedGates(vmi.spec, ctx.config?.developerConfiguration),
  ];
}

/** A VMI on update: only KubeVirt may change the spec, and users may not touch reserved labels. */
export function validateVmiUpdate(
  vmi: VirtualMachineInstance,
  old: VirtualMachineInstance,
  ctx: RequestContext = {},
): ValidationCause[] {
  if (ctx.isKubeVirtServiceAccount) return [];
  if (!isDeepStrictEqual(vmi.spec, old.spec))
    return [cause(CAUSE_TYPE.notSupported, "update of VMI object is restricted", "")];
  const reserved = (m: ObjectMeta | undefined): Record<string, string> =>
    Object.fromEntries(Object.entries(m?.labels ?? {}).filter(([k]) => RESTRICTED_LABELS.includes(k)));
  if (!isDeepStrictEqual(reserved(vmi.metadata), reserved(old.metadata))) {
    return [
      cause(
        CAUSE_TYPE.notSupported,
        "modification of the following reserved kubevirt.io/ labels on a VMI object is prohibited",
        "metadata.labels",
      ),
    ];
  }
  return [];
}
