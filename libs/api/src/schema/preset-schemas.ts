/**
 * VirtualMachineInstancePreset (kubevirt.io, deprecated but still served by KubeVirt): a label selector and a
 * partial DomainSpec that virt-api merges into matching VMIs on create.
 */
import { obj, str } from "./builder.ts";
import { labelSelectorSchema, objectMetaSchema } from "./meta.ts";
import { domainSchema } from "./vmi-spec.ts";

/** VirtualMachineInstancePresetSpec. */
export const vmiPresetSpecSchema = obj(
  {
    selector: { ...labelSelectorSchema, description: "Selector is a label query over a set of VMIs." },
    domain: {
      ...domainSchema,
      description: "Domain is the same object type as contained in VirtualMachineInstanceSpec",
    },
  },
  { required: ["selector"] },
);

/** VirtualMachineInstancePreset. */
export const vmiPresetSchema = obj(
  { apiVersion: str(), kind: str(), metadata: objectMetaSchema, spec: vmiPresetSpecSchema },
  {
    description:
      "Deprecated for removal in v2, please use VirtualMachineInstanceType and VirtualMachinePreference instead.",
  },
);
