/**
 * Issue 23's quantities on VMs, VMIs and VM templates: `1e400`, `99999999999999999999Ei`, `0` and `-1Gi` in every
 * memory and cpu field virt-api validates, with KubeVirt's answers. KubeVirt reads Value()/MilliValue() as int64,
 * so a quantity past int64 (1e400 memory; 1e400 or 99999999999999999999Ei cpu, in millicores) reads as negative
 * and is refused with "must be greater than or equal to 0."; 99999999999999999999Ei of memory is capped at
 * 2^63-1 bytes by the parser and accepted, as KubeVirt does (the pod then cannot be scheduled).
 */
import { describe, expect, it } from "vitest";
import { vm, vmi } from "../testdata/objects.ts";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { validateVm } from "./vm-validation.ts";
import { validateVmiCreate } from "./vmi-validation.ts";

type Field = "requests.memory" | "limits.memory" | "guest" | "requests.cpu" | "limits.cpu";

function place(spec: VirtualMachineInstanceSpec, field: Field, value: string): void {
  const res = spec.domain.resources ?? {};
  spec.domain.resources = res;
  if (field === "guest") spec.domain.memory = { guest: value };
  else if (field === "requests.memory") res.requests = { ...res.requests, memory: value };
  else if (field === "limits.memory") res.limits = { ...res.limits, memory: value };
  else if (field === "requests.cpu") res.requests = { ...res.requests, cpu: value };
  else res.limits = { ...res.limits, cpu: value };
}

const templateSpec = (v: ReturnType<typeof vm>): VirtualMachineInstanceSpec => {
  const spec = v.spec.template?.spec;
  if (!spec) throw new Error("the test VM has a template");
  return spec;
};
const path = (field: Field): string => (field === "guest" ? "domain.memory.guest" : `domain.resources.${field}`);
const negative = (printed: string): string => `'${printed}': must be greater than or equal to 0.`;

/** [field, value, the printed (canonical) value, refused?] */
const table: [Field, string, string, boolean][] = [
  ["requests.memory", "1e400", "10e399", true],
  ["limits.memory", "1e400", "10e399", true],
  ["guest", "1e400", "10e399", true],
  ["requests.cpu", "1e400", "10e399", true],
  ["limits.cpu", "1e400", "10e399", true],
  ["requests.memory", "-1Gi", "-1Gi", true],
  ["limits.memory", "-1Gi", "-1Gi", true],
  ["guest", "-1Gi", "-1Gi", true],
  ["requests.cpu", "-1Gi", "-1Gi", true],
  ["limits.cpu", "-1Gi", "-1Gi", true],
  ["requests.cpu", "99999999999999999999Ei", "9223372036854775807", true],
  ["limits.cpu", "99999999999999999999Ei", "9223372036854775807", true],
  ["requests.memory", "99999999999999999999Ei", "9223372036854775807", false],
  ["guest", "99999999999999999999Ei", "9223372036854775807", false],
  ["limits.cpu", "0", "0", false],
  ["requests.cpu", "0", "0", false],
  ["limits.memory", "0", "0", false],
];

describe("quantities on a VM template and a VMI, as KubeVirt's validation answers", () => {
  it.each(table)("%s = %s", (field, value, printed, refused) => {
    const v = vm();
    place(templateSpec(v), field, value);
    const i = vmi();
    place(i.spec, field, value);
    for (const [prefix, causes] of [
      ["spec.template.spec", validateVm(v)],
      ["spec", validateVmiCreate(i)],
    ] as const) {
      const f = `${prefix}.${path(field)}`;
      const mine = causes.filter((c) => c.field === f);
      if (refused)
        expect(mine).toContainEqual({ type: "FieldValueInvalid", message: `${f} ${negative(printed)}`, field: f });
      else expect(causes).toEqual([]);
    }
  });

  it("a zero memory request is stored on a VM and refused on the VMI that would run it", () => {
    const v = vm();
    templateSpec(v).domain.resources = { requests: { memory: "0" } };
    expect(validateVm(v)).toEqual([]);
    const i = vmi();
    i.spec.domain.resources = { requests: { memory: "0" } };
    expect(validateVmiCreate(i).map((c) => c.message)).toEqual([
      "no memory requested, at least one of 'spec.domain.memory.guest', 'spec.domain.memory.hugepages.pageSize' or 'spec.domain.resources.requests.memory' must be set",
    ]);
  });
});
