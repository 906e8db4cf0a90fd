/**
 * The four instancetype.kubevirt.io/v1beta1 CRDs, as KubeVirt's virt-operator builds them
 * (`components/crds.go` `NewVirtualMachine{,Cluster}InstancetypeCrd`, `NewVirtualMachine{,Cluster}PreferenceCrd`):
 *
 * | kind                              | scope      | short names                                           | category |
 * | --------------------------------- | ---------- | ----------------------------------------------------- | -------- |
 * | VirtualMachineInstancetype        | Namespaced | vminstancetype, vminstancetypes, vmf, vmfs            | all      |
 * | VirtualMachineClusterInstancetype | Cluster    | vmclusterinstancetype, vmclusterinstancetypes, vmcf, vmcfs | -   |
 * | VirtualMachinePreference          | Namespaced | vmpref, vmprefs, vmp, vmps                            | all      |
 * | VirtualMachineClusterPreference   | Cluster    | vmcp, vmcps                                           | -        |
 * No status subresource and no printer columns (kubectl shows NAME and AGE).
 */
import type { JsonSchema } from "../schema/builder.ts";
import {
  INSTANCETYPE_GROUP,
  INSTANCETYPE_KINDS,
  INSTANCETYPE_VERSION,
  type InstancetypeKindName,
} from "./instancetype-constants.ts";
import { instancetypeSchema, preferenceSchema } from "./instancetype-schemas.ts";

/** What `crds.ts` needs to build one CRD (its `buildCrd` input, the fields used here). */
export interface InstancetypeCrdInput {
  group: string;
  version: string;
  kind: string;
  plural: string;
  shortNames: readonly string[];
  categories: string[];
  scope: "Namespaced" | "Cluster";
  schema: JsonSchema;
  status: boolean;
}

/** The four CRDs, built with `build` (crds.ts's builder, passed in so that this module does not import crds.ts). */
export function instancetypeCrds<T>(build: (input: InstancetypeCrdInput) => T): T[] {
  return (Object.keys(INSTANCETYPE_KINDS) as InstancetypeKindName[]).map((kind) => {
    const k = INSTANCETYPE_KINDS[kind];
    return build({
      group: INSTANCETYPE_GROUP,
      version: INSTANCETYPE_VERSION,
      kind,
      plural: k.plural,
      shortNames: k.shortNames,
      // KubeVirt puts only the namespaced kinds in the "all" category.
      categories: k.namespaced ? ["all"] : [],
      scope: k.namespaced ? "Namespaced" : "Cluster",
      schema: kind.endsWith("Instancetype") ? instancetypeSchema : preferenceSchema,
      status: false,
    });
  });
}
