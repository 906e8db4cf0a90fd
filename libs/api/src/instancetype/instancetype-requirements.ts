/**
 * A preference's requirements (KubeVirt `pkg/instancetype/preference/requirements`): the instancetype, or else the
 * VM itself, must give at least `requirements.cpu.guest` vCPUs and `requirements.memory.guest` memory, and the VM
 * must use `requirements.architecture`. Checked by the VM webhook on the defaulted, expanded template; a failure
 * is refused as "failure checking preference requirements: <message>" on the fields named.
 */
import { parseQuantity } from "../quantity.ts";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import type { InstancetypeSpec, PreferenceSpec } from "./instancetype-types.ts";
import { spreadOptions } from "./instancetype-validation.ts";

/** An unmet requirement: the fields at fault and KubeVirt's message. */
export interface RequirementFailure {
  readonly fields: string[];
  readonly message: string;
}

const CPU = "spec.template.spec.domain.cpu";

function vmCpuFailure(
  pref: PreferenceSpec,
  spec: VirtualMachineInstanceSpec,
  need: number,
): RequirementFailure | undefined {
  const cpu = spec.domain?.cpu;
  if (!cpu)
    return { fields: [CPU], message: `no CPU resources provided by VirtualMachine, preference requires ${need} vCPU` };
  const [s, c, t] = [cpu.sockets ?? 0, cpu.cores ?? 0, cpu.threads ?? 0];
  const fail = (have: number, as: string, fields: string[]): RequirementFailure | undefined =>
    have < need
      ? {
          fields: fields.map((f) => `${CPU}.${f}`),
          message: `insufficient CPU resources of ${have} vCPU provided by VirtualMachine, preference requires ${need} vCPU provided as ${as}`,
        }
      : undefined;
  switch (pref.cpu?.preferredCPUTopology ?? "sockets") {
    case "threads":
    case "preferThreads":
      return fail(t, "threads", ["threads"]);
    case "cores":
    case "preferCores":
      return fail(c, "cores", ["cores"]);
    case "spread":
    case "preferSpread": {
      const { across } = spreadOptions(pref);
      if (across === "CoresThreads") return fail(c * t, across, ["cores", "threads"]);
      if (across === "SocketsCoresThreads") return fail(s * c * t, across, ["sockets", "cores", "threads"]);
      return fail(s * c, across, ["sockets", "cores"]);
    }
    case "any":
    case "preferAny":
      return fail(c * s * t, "cores, sockets and threads", ["cores", "sockets", "threads"]);
    default:
      return fail(s, "sockets", ["sockets"]);
  }
}

/** The first unmet requirement of `preference` (KubeVirt `checker.Check`), or undefined. */
export function checkPreferenceRequirements(
  instancetype: InstancetypeSpec | undefined,
  preference: PreferenceSpec | undefined,
  spec: VirtualMachineInstanceSpec,
): RequirementFailure | undefined {
  const req = preference?.requirements;
  if (!preference || !req) return undefined;
  if (req.cpu) {
    const need = req.cpu.guest;
    if (instancetype) {
      if (instancetype.cpu.guest < need) {
        return {
          fields: ["spec.instancetype"],
          message: `insufficient CPU resources of ${instancetype.cpu.guest} vCPU provided by instance type, preference requires ${need} vCPU`,
        };
      }
    } else {
      const failure = vmCpuFailure(preference, spec, need);
      if (failure) return failure;
    }
  }
  if (req.memory) {
    const provided = spec.domain?.memory?.guest ?? instancetype?.memory.guest ?? "0Mi";
    const wanted = parseQuantity(req.memory.guest);
    if (parseQuantity(provided).cmp(wanted) < 0) {
      const by = instancetype ? "instance type" : "VirtualMachine";
      return {
        fields: [instancetype ? "spec.instancetype" : "spec.template.spec.domain.memory"],
        message: `insufficient Memory resources of ${parseQuantity(provided).toString()} provided by ${by}, preference requires ${wanted.toString()}`,
      };
    }
  }
  if (req.architecture !== undefined && spec.architecture !== req.architecture) {
    return {
      fields: ["spec.template.spec.architecture"],
      message: `preference requires architecture ${req.architecture} but ${spec.architecture ?? ""} is being requested`,
    };
  }
  return undefined;
}
