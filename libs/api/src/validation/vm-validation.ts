/**
 * Validation of VirtualMachines (KubeVirt `vms-admitter.go`): a template is required, `running` and `runStrategy`
 * are mutually exclusive and one is required, the strategy is known, and the template passes the VMI rules.
 */
import { RUN_STRATEGIES } from "../constants.ts";
import { typeErrors } from "../strict-decode.ts";
import type { ValidationCause, VirtualMachine, VirtualMachineSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath, path } from "./causes.ts";
import { type RequestContext, validateObjectName, validateVmiMetadata, validateVmiSpec } from "./vmi-validation.ts";

function validateRunStrategy(field: FieldPath, spec: VirtualMachineSpec): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const hasRunning = spec.running !== undefined && spec.running !== null;
  const hasStrategy = spec.runStrategy !== undefined && spec.runStrategy !== null;
  if (hasRunning && hasStrategy) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead",
        field.child("running"),
      ),
    );
  }
  if (!hasRunning && !hasStrategy)
    causes.push(cause(CAUSE_TYPE.invalid, "RunStrategy must be specified", field.child("running")));
  if (hasStrategy && !(RUN_STRATEGIES as readonly string[]).includes(spec.runStrategy as string)) {
    causes.push(
      cause(CAUSE_TYPE.invalid, `Invalid RunStrategy (${spec.runStrategy as string})`, field.child("runStrategy")),
    );
  }
  return causes;
}

/** A VM spec at `field` (`ValidateVirtualMachineSpec`). */
export function validateVmSpec(
  field: FieldPath,
  spec: VirtualMachineSpec,
  ctx: RequestContext = {},
): ValidationCause[] {
  if (!spec.template || typeof spec.template !== "object") {
    return [cause(CAUSE_TYPE.required, "missing virtual machine template.", field.child("template"))];
  }
  return [
    ...validateVmiMetadata(field.child("template", "metadata"), spec.template.metadata, ctx),
    ...validateVmiSpec(field.child("template", "spec"), spec.template.spec, ctx.config),
    ...validateRunStrategy(field, spec),
  ];
}

/** A VM on create or update (the VM webhook applies the same rules to both). */
export function validateVm(vm: VirtualMachine, ctx: RequestContext = {}): ValidationCause[] {
  const typeCauses = typeErrors("VirtualMachine", vm);
  if (typeCauses.length > 0) return typeCauses;
  if (!vm.spec || typeof vm.spec !== "object") return [cause(CAUSE_TYPE.required, "spec is a required field", "spec")];
  return [...validateObjectName(vm.metadata), ...validateVmSpec(path("spec"), vm.spec, ctx)];
}
