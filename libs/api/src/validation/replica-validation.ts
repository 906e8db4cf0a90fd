/**
 * Validation of VirtualMachineInstanceReplicaSets (KubeVirt `vmirs-admitter.go`) and VirtualMachinePools
 * (`vmpool-admitter.go`): a template is required and passes the VMI (or VM) rules, the selector parses and matches
 * the template's labels; a pool's maxUnavailable is a positive count or a percentage in 1..100, at most one
 * scale-in and one update strategy is set, and its selector cannot change.
 */
import { isDeepStrictEqual } from "node:util";
import { labelSelectorOf } from "../semantics/label-selector.ts";
import { typeErrors } from "../strict-decode.ts";
import type {
  ObjectMeta,
  ValidationCause,
  VirtualMachineInstanceReplicaSet,
  VirtualMachinePool,
  VirtualMachinePoolSpec,
} from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath, path } from "./causes.ts";
import { validateVmSpec } from "./vm-validation.ts";
import { type RequestContext, validateObjectName, validateVmiSpec } from "./vmi-validation.ts";

function validateSelector(
  field: FieldPath,
  selector: Parameters<typeof labelSelectorOf>[0],
  templateMeta: ObjectMeta | undefined,
): ValidationCause[] {
  try {
    if (!labelSelectorOf(selector).matches(templateMeta?.labels ?? {}))
      return [cause(CAUSE_TYPE.invalid, "selector does not match labels.", field.child("selector"))];
  } catch (error) {
    return [cause(CAUSE_TYPE.invalid, (error as Error).message, field.child("selector"))];
  }
  return [];
}

/** A VMIRS on create or update. */
export function validateVmirs(rs: VirtualMachineInstanceReplicaSet, ctx: RequestContext = {}): ValidationCause[] {
  const typeCauses = typeErrors("VirtualMachineInstanceReplicaSet", rs);
  if (typeCauses.length > 0) return typeCauses;
  const field = path("spec");
  const spec = rs.spec;
  if (!spec?.template || typeof spec.template !== "object")
    return [cause(CAUSE_TYPE.required, "missing virtual machine template.", field.child("template"))];
  return [
    ...validateObjectName(rs.metadata),
    ...validateVmiSpec(field.child("template", "spec"), spec.template.spec, ctx.config),
    ...validateSelector(field, spec.selector, spec.template.metadata),
  ];
}

function validateMaxUnavailable(field: FieldPath, value: string | number | undefined): ValidationCause[] {
  const f = field.child("maxUnavailable");
  if (value === undefined) return [];
  if (typeof value === "number")
    return value <= 0 ? [cause(CAUSE_TYPE.invalid, "maxUnavailable must be greater than 0", f)] : [];
  if (!value.endsWith("%")) return [cause(CAUSE_TYPE.invalid, "maxUnavailable percentage must end with %", f)];
  const percentage = value.slice(0, -1);
  if (!/^[+-]?\d+$/.test(percentage))
    return [
      cause(
        CAUSE_TYPE.invalid,
        `maxUnavailable percentage value "${percentage}" is invalid: strconv.Atoi: parsing "${percentage}": invalid syntax`,
        f,
      ),
    ];
  const n = Number(percentage);
  if (n <= 0 || n > 100)
    return [cause(CAUSE_TYPE.invalid, `maxUnavailable percentage value ${n} must be between 1 and 100`, f)];
  return [];
}

function validateExclusive(field: FieldPath, strategy: Record<string, unknown> | undefined): ValidationCause[] {
  const configured = ["unmanaged", "opportunistic", "proactive"].filter((k) => strategy?.[k] != null);
  if (configured.length <= 1) return [];
  return [
    cause(
      CAUSE_TYPE.invalid,
      `only one strategy can be configured at a time: but found ${configured.join(", ")} strategies`,
      field,
    ),
  ];
}

/** A VirtualMachinePool on create (`old` undefined) or update. */
export function validateVmPool(
  pool: VirtualMachinePool,
  old: VirtualMachinePool | undefined,
  ctx: RequestContext = {},
): ValidationCause[] {
  const typeCauses = typeErrors("VirtualMachinePool", pool);
  if (typeCauses.length > 0) return typeCauses;
  const field = path("spec");
  const spec: Partial<VirtualMachinePoolSpec> = pool.spec ?? {};
  const template = spec.virtualMachineTemplate;
  // KubeVirt names the field "template" in this message, though the pool's field is virtualMachineTemplate.
  if (!template || typeof template !== "object")
    return [cause(CAUSE_TYPE.required, "missing virtual machine template.", field.child("template"))];
  const causes = [
    ...validateObjectName(pool.metadata),
    ...validateVmSpec(field.child("virtualMachineTemplate", "spec"), template.spec ?? ({} as never), ctx),
    ...validateSelector(field, spec.selector, template.metadata),
    ...validateMaxUnavailable(field, spec.maxUnavailable),
    ...validateExclusive(field.child("updateStrategy"), spec.updateStrategy),
    ...validateExclusive(field.child("scaleInStrategy"), spec.scaleInStrategy),
  ];
  if (old && !isDeepStrictEqual(spec.selector, old.spec?.selector))
    causes.push(cause(CAUSE_TYPE.invalid, "selector is immutable after creation.", field.child("selector")));
  return causes;
}
