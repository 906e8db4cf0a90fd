/**
 * Every field of KubeVirt's VirtualMachine, VirtualMachineInstance and VirtualMachineInstanceMigration (spec and
 * status) and of the instancetype.kubevirt.io/v1beta1 instancetype and preference specs (from KubeVirt's generated
 * OpenAPI: kubevirt-field-paths.txt) is declared by our CRD schemas with the same
 * JSON type, so strict decoding neither refuses a KubeVirt manifest's field nor accepts it without a schema.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { openApiSchemaOf } from "../crds/crds.ts";
import type { JsonSchema } from "../schema/builder.ts";
import { decodeStrict } from "../strict-decode.ts";

const lines = readFileSync(new URL("./kubevirt-field-paths.txt", import.meta.url), "utf8")
  .split("\n")
  .filter((l) => l && !l.startsWith("#"));
const entries = lines.map((l) => {
  const [kind = "", path = "", type = ""] = l.split(" ");
  return { kind, path, type };
});

/** The schema node at a KubeVirt path (`a.b[].c{}`), or why there is none. */
function resolve(root: JsonSchema, path: string): JsonSchema | string {
  let s = root;
  for (const seg of path.split(".")) {
    const m = /^([^[{]+)(\[\]|\{\})?$/.exec(seg);
    if (!m?.[1]) return `bad segment ${seg}`;
    if (s["x-kubernetes-preserve-unknown-fields"] && !s.properties) return `below a schemaless object at ${seg}`;
    const next = s.properties?.[m[1]];
    if (!next) return `unknown field ${m[1]}`;
    s = next;
    if (m[2] === "[]") {
      if (s.type !== "array" || !s.items) return `${m[1]} is not an array`;
      s = s.items;
    } else if (m[2] === "{}") {
      if (s.type !== "object" || !s.additionalProperties) return `${m[1]} is not a map`;
      s = s.additionalProperties;
    }
  }
  return s;
}

function typeOf(s: JsonSchema): string {
  if (s["x-kubernetes-int-or-string"]) return "int-or-string";
  return s.type ?? "none";
}

/** A schema node that accepts anything: KubeVirt types every field it declares. */
function schemaless(s: JsonSchema): boolean {
  return s.type === "object" && s["x-kubernetes-preserve-unknown-fields"] === true && !s.properties;
}

describe("KubeVirt's kubevirt.io/v1 field paths", () => {
  it("the list covers the three kinds' spec and status, and the instancetype and preference specs", () => {
    expect(entries.length).toBeGreaterThan(1800);
    for (const kind of ["VirtualMachineInstancetype", "VirtualMachinePreference"]) {
      expect(entries.some((e) => e.kind === kind && e.path.startsWith("spec."))).toBe(true);
    }
    for (const kind of ["VirtualMachine", "VirtualMachineInstance", "VirtualMachineInstanceMigration"]) {
      expect(entries.some((e) => e.kind === kind && e.path.startsWith("spec."))).toBe(true);
      expect(entries.some((e) => e.kind === kind && e.path.startsWith("status."))).toBe(true);
    }
  });

  it("every path is declared, with KubeVirt's type, and none is schemaless (metadata aside)", () => {
    const problems: string[] = [];
    const roots = new Map<string, JsonSchema | undefined>();
    for (const { kind, path, type } of entries) {
      const apiVersion =
        kind.startsWith("VirtualMachineInstancetype") || kind === "VirtualMachinePreference"
          ? "instancetype.kubevirt.io/v1beta1"
          : "kubevirt.io/v1";
      if (!roots.has(kind)) roots.set(kind, openApiSchemaOf(apiVersion, kind));
      const root = roots.get(kind);
      if (!root) throw new Error(`no schema for ${kind}`);
      const s = resolve(root, path);
      if (typeof s === "string") problems.push(`${kind} ${path}: ${s}`);
      else if (typeOf(s) !== type) problems.push(`${kind} ${path}: ${typeOf(s)}, KubeVirt ${type}`);
      else if (schemaless(s) && !path.endsWith("metadata")) problems.push(`${kind} ${path}: no schema`);
    }
    expect(problems).toEqual([]);
  });

  it.each([
    ["spec.domain.devices.gpus", [{ name: "gpu1", deviceName: "nvidia.com/GP102GL_Tesla_P40" }]],
    ["spec.domain.devices.tpm", { persistent: true }],
    ["spec.domain.cpu.numa", { guestMappingPassthrough: {} }],
    ["spec.volumes", [{ name: "v", cloudInitConfigDrive: { secretRef: { name: "s" } } }]],
    ["spec.livenessProbe", { httpGet: { port: 1500 }, initialDelaySeconds: 120 }],
  ])("a VMI with %s decodes strictly without unknown fields", (path, value) => {
    const [, field = ""] = path.split(".", 2);
    const rest = path.split(".").slice(1);
    const spec: Record<string, unknown> = { domain: { devices: {} } };
    let at: Record<string, unknown> = spec;
    rest.forEach((k, i) => {
      if (i === rest.length - 1) at[k] = value;
      else {
        at[k] ??= {};
        at = at[k] as Record<string, unknown>;
      }
    });
    const result = decodeStrict("VirtualMachineInstance", { apiVersion: "kubevirt.io/v1", spec });
    expect(result.causes, field).toEqual([]);
  });

  it("the Go field name userDataSecretRef is unknown, as on KubeVirt", () => {
    const result = decodeStrict("VirtualMachineInstance", {
      spec: {
        domain: { devices: {} },
        volumes: [{ name: "v", cloudInitNoCloud: { userDataSecretRef: { name: "s" } } }],
      },
    });
    expect(result.unknownFields).toEqual(["spec.volumes[0].cloudInitNoCloud.userDataSecretRef"]);
  });

  it("a wrongly typed probe is refused with the API server's wording", () => {
    const result = decodeStrict("VirtualMachineInstance", {
      spec: { domain: { devices: {} }, readinessProbe: { periodSeconds: "often" } },
    });
    expect(result.causes.map((c) => c.field)).toEqual(["spec.readinessProbe.periodSeconds"]);
  });
});
