import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import type { JsonSchema } from "../schema/builder.ts";
import { customResourceDefinitions, hasStatusSubresource, openApiSchemaOf } from "./crds.ts";
import { renderCrdFiles } from "./render.ts";

const dir = fileURLToPath(new URL("../../crds/", import.meta.url));

function byKind(kind: string) {
  const crd = customResourceDefinitions().find((c) => c.spec.names.kind === kind);
  if (!crd) throw new Error(`no CRD for ${kind}`);
  return crd;
}

/** Walks a schema and returns the paths that break the structural rules the API server enforces. */
function structuralViolations(s: JsonSchema, path = ""): string[] {
  const out: string[] = [];
  const intOrString = s["x-kubernetes-int-or-string"] === true;
  if (!s.type && !intOrString && !s["x-kubernetes-preserve-unknown-fields"]) out.push(`${path}: no type`);
  if (s.type === "array" && !s.items) out.push(`${path}: array without items`);
  for (const [k, v] of Object.entries(s.properties ?? {})) out.push(...structuralViolations(v, `${path}.${k}`));
  if (s.items) out.push(...structuralViolations(s.items, `${path}[]`));
  if (s.additionalProperties) out.push(...structuralViolations(s.additionalProperties, `${path}{}`));
  for (const a of s.anyOf ?? []) if (a.description || a.properties) out.push(`${path}: anyOf carries more than a type`);
  return out;
}

describe("CRD manifests", () => {
  it("the checked-in files under libs/api/crds/ match the schemas (run `npm run gen:crds -w @kvt/api`)", () => {
    const expected = renderCrdFiles();
    const onDisk = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
    expect(onDisk.sort()).toEqual([...expected.keys()].sort());
    for (const [name, content] of expected) expect(readFileSync(`${dir}${name}`, "utf8"), name).toBe(content);
  });

  it("all.yaml holds every CRD, each parsing back to the object built in code", () => {
    const docs = parseAllDocuments(readFileSync(`${dir}all.yaml`, "utf8")).map((d) => d.toJS() as unknown);
    expect(docs).toEqual(customResourceDefinitions());
  });

  it("every schema is structural", () => {
    for (const crd of customResourceDefinitions()) {
      const schema = crd.spec.versions[0]?.schema.openAPIV3Schema;
      expect(structuralViolations(schema), crd.metadata.name).toEqual([]);
    }
  });

  it.each([
    ["VirtualMachine", "virtualmachines.kubevirt.io", ["vm", "vms"], ["Age", "Status", "Ready"]],
    [
      "VirtualMachineInstance",
      "virtualmachineinstances.kubevirt.io",
      ["vmi", "vmis"],
      ["Age", "Phase", "IP", "NodeName", "Ready", "Live-Migratable", "Paused"],
    ],
    [
      "VirtualMachineInstanceMigration",
      "virtualmachineinstancemigrations.kubevirt.io",
      ["vmim", "vmims"],
      ["Phase", "VMI"],
    ],
  ])("%s: name %s, short names %j, columns %j, category all", (kind, name, shortNames, columns) => {
    const crd = byKind(kind);
    expect(crd.metadata.name).toBe(name);
    expect(crd.spec.names.shortNames).toEqual(shortNames);
    expect(crd.spec.names.categories).toEqual(["all"]);
    expect(crd.spec.scope).toBe("Namespaced");
    expect(crd.spec.versions[0]?.additionalPrinterColumns?.map((c) => c.name)).toEqual(columns);
  });

  it("VMI priority columns are Live-Migratable and Paused only", () => {
    const cols = byKind("VirtualMachineInstance").spec.versions[0]?.additionalPrinterColumns ?? [];
    expect(cols.filter((c) => c.priority === 1).map((c) => c.name)).toEqual(["Live-Migratable", "Paused"]);
    expect(cols.find((c) => c.name === "IP")?.jsonPath).toBe(".status.interfaces[0].ipAddress");
  });

  it("status subresource on VM, VMIM and MigrationPolicy, not on VMI (as KubeVirt)", () => {
    expect(hasStatusSubresource("VirtualMachine")).toBe(true);
    expect(hasStatusSubresource("VirtualMachineInstanceMigration")).toBe(true);
    expect(hasStatusSubresource("MigrationPolicy")).toBe(true);
    expect(hasStatusSubresource("VirtualMachineInstance")).toBe(false);
  });

  it("MigrationPolicy is cluster-scoped in migrations.kubevirt.io/v1alpha1", () => {
    const crd = byKind("MigrationPolicy");
    expect(crd.metadata.name).toBe("migrationpolicies.migrations.kubevirt.io");
    expect(crd.spec.scope).toBe("Cluster");
    expect(crd.spec.versions.map((v) => v.name)).toEqual(["v1alpha1"]);
  });

  it("spec.runStrategy carries a description for kubectl explain", () => {
    const schema = openApiSchemaOf("kubevirt.io/v1", "VirtualMachine");
    const rs = schema?.properties?.spec?.properties?.runStrategy;
    expect(rs?.type).toBe("string");
    expect(rs?.description).toContain('"RerunOnFailure": VMI will initially be running');
  });

  it("the root metadata is a bare object and template metadata keeps unknown fields", () => {
    const schema = openApiSchemaOf("kubevirt.io/v1", "VirtualMachine");
    expect(schema?.properties?.metadata).toEqual({ type: "object" });
    expect(schema?.properties?.spec?.properties?.template?.properties?.metadata).toEqual({
      nullable: true,
      type: "object",
      "x-kubernetes-preserve-unknown-fields": true,
    });
  });

  it("quantities are int-or-string with Kubernetes' pattern", () => {
    const schema = openApiSchemaOf("kubevirt.io/v1", "VirtualMachineInstance");
    const requests = schema?.properties?.spec?.properties?.domain?.properties?.resources?.properties?.requests;
    expect(requests?.additionalProperties?.["x-kubernetes-int-or-string"]).toBe(true);
    expect(new RegExp(requests?.additionalProperties?.pattern ?? "$^").test("64M")).toBe(true);
  });
});

describe("kubevirt.io/v1alpha3", () => {
  it.each([
    "VirtualMachine",
    "VirtualMachineInstance",
    "VirtualMachineInstanceMigration",
    "VirtualMachineInstanceReplicaSet",
    "KubeVirt",
  ])("%s is served in v1alpha3 with KubeVirt's deprecation warning, stored in v1", (kind) => {
    const crd = customResourceDefinitions().find((c) => c.spec.names.kind === kind);
    expect(crd?.spec.versions.map((v) => [v.name, v.storage, v.deprecated ?? false])).toEqual([
      ["v1", true, false],
      ["v1alpha3", false, true],
    ]);
    expect(crd?.spec.versions[1]?.deprecationWarning).toBe(
      "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release.",
    );
  });
});
