/**
 * Writes kubevirt-field-paths.txt: every field path of KubeVirt's VirtualMachine, VirtualMachineInstance and
 * VirtualMachineInstanceMigration (spec and status) and of the instancetype and preference specs, with its JSON type, walked from KubeVirt's generated OpenAPI
 * document (`api/openapi-spec/swagger.json` of kubevirt/kubevirt). Object metadata stops at `metadata` (the API
 * server decodes ObjectMeta by its own rules). The list is what `kubevirt-field-paths.test.ts` proves our schemas
 * know; regenerate it when following a newer KubeVirt:
 *   node libs/api/src/testdata/gen-kubevirt-field-paths.ts <swagger.json> <commit>
 */
import { readFileSync, writeFileSync } from "node:fs";

interface Def {
  /** A list for an int-or-string (`["string", "number"]`) or a nullable value (`["string", "null"]`). */
  type?: string | string[];
  format?: string;
  properties?: Record<string, Def>;
  items?: Def;
  additionalProperties?: Def;
  $ref?: string;
}

const [swaggerPath, commit] = process.argv.slice(2);
if (!swaggerPath || !commit) throw new Error("usage: gen-kubevirt-field-paths.ts <swagger.json> <commit>");
const definitions = (JSON.parse(readFileSync(swaggerPath, "utf8")) as { definitions: Record<string, Def> }).definitions;

const SCALAR_REFS: Record<string, string> = {
  "k8s.io.apimachinery.pkg.api.resource.Quantity": "int-or-string",
  "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
  "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "string",
};
const OBJECT_META = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";

function typeOf(d: Def): string {
  if (d.$ref) return SCALAR_REFS[d.$ref.replace("#/definitions/", "")] ?? "object";
  if (Array.isArray(d.type)) {
    const types = d.type.filter((t) => t !== "null");
    return types.length === 1 ? (types[0] ?? "object") : "int-or-string";
  }
  if (d.format === "int-or-string") return "int-or-string";
  return d.type ?? "object";
}

function walk(def: Def, at: string, seen: string[], out: string[]): void {
  for (const [name, prop] of Object.entries(def.properties ?? {})) {
    const path = `${at}.${name}`;
    let node = prop;
    let suffix = "";
    if (node.type === "array" && node.items) {
      node = node.items;
      suffix = "[]";
    } else if (node.type === "object" && node.additionalProperties) {
      node = node.additionalProperties;
      suffix = "{}";
    }
    out.push(`${path}${suffix} ${typeOf(node)}`);
    const ref = node.$ref?.replace("#/definitions/", "");
    if (!ref || ref in SCALAR_REFS || ref === OBJECT_META || seen.includes(ref)) continue;
    const target = definitions[ref];
    if (target) walk(target, `${path}${suffix}`, [...seen, ref], out);
  }
}

const lines = [
  `# KubeVirt field paths (kubevirt/kubevirt ${commit}, api/openapi-spec/swagger.json); generated, do not edit`,
];
// [kind, OpenAPI definition prefix, parts]: kubevirt.io/v1 spec and status, instancetype.kubevirt.io/v1beta1 spec.
const KINDS: [string, string, string[]][] = [
  ["VirtualMachine", "v1", ["Spec", "Status"]],
  ["VirtualMachineInstance", "v1", ["Spec", "Status"]],
  ["VirtualMachineInstanceMigration", "v1", ["Spec", "Status"]],
  ["VirtualMachineInstancetype", "v1beta1", ["Spec"]],
  ["VirtualMachinePreference", "v1beta1", ["Spec"]],
];
for (const [kind, prefix, parts] of KINDS) {
  for (const part of parts) {
    const def = definitions[`${prefix}.${kind}${part}`];
    if (!def) throw new Error(`${prefix}.${kind}${part} is not in ${swaggerPath}`);
    const out: string[] = [];
    walk(def, part.toLowerCase(), [], out);
    lines.push(...out.map((l) => `${kind} ${l}`));
  }
}
writeFileSync(new URL("./kubevirt-field-paths.txt", import.meta.url), `${lines.join("\n")}\n`);
console.log(`wrote ${lines.length - 1} field paths`);
