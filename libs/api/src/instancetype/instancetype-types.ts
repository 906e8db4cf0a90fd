/** The TypeScript types of instancetype.kubevirt.io/v1beta1, inferred from the schemas. */
import type { Infer } from "../schema/builder.ts";
import type {
  instancetypeSchema,
  instancetypeSpecSchema,
  instancetypeStatusRefSchema,
  matcherSchema,
  preferenceSchema,
  preferenceSpecSchema,
} from "./instancetype-schemas.ts";

/** VirtualMachineInstancetypeSpec (shared by the namespaced and the cluster kind). */
export type InstancetypeSpec = Infer<typeof instancetypeSpecSchema>;
/** VirtualMachinePreferenceSpec (shared by the namespaced and the cluster kind). */
export type PreferenceSpec = Infer<typeof preferenceSpecSchema>;
/** A VirtualMachineInstancetype or VirtualMachineClusterInstancetype. */
export type VirtualMachineInstancetype = Infer<typeof instancetypeSchema>;
/** A VirtualMachinePreference or VirtualMachineClusterPreference. */
export type VirtualMachinePreference = Infer<typeof preferenceSchema>;
/** A VM's `spec.instancetype` / `spec.preference`. */
export type InstancetypeMatcher = Infer<typeof matcherSchema>;
/** A VM's `status.instancetypeRef` / `status.preferenceRef`. */
export type InstancetypeStatusRef = Infer<typeof instancetypeStatusRefSchema>;
