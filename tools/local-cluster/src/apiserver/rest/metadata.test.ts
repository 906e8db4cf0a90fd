import { describe, expect, it } from "vitest";
import { builtinResources } from "../resources/builtins.ts";
import { validateName } from "./metadata.ts";

const def = (resource: string) => {
  const d = builtinResources().find((r) => r.resource === resource);
  if (!d) throw new Error(resource);
  return d;
};

describe("validateName", () => {
  it.each(["system:controller:foo", "kubevirt.io:edit", "Upper_Case"])(
    "accepts RBAC name %s (a path segment)",
    (name) => {
      expect(validateName(def("clusterroles"), name)).toEqual([]);
      expect(validateName(def("rolebindings"), name)).toEqual([]);
    },
  );

  it.each([
    ["a/b", "may not contain '/'"],
    ["a%b", "may not contain '%'"],
    ["..", "may not be '..'"],
  ])("refuses RBAC name %s: %s", (name, why) => {
    expect(validateName(def("clusterroles"), name)).toEqual([
      { reason: "FieldValueInvalid", message: `Invalid value: "${name}": ${why}`, field: "metadata.name" },
    ]);
  });

  it("keeps the DNS subdomain rule for other kinds", () => {
    expect(validateName(def("configmaps"), "kubevirt.io:edit")[0]?.message).toContain("RFC 1123 subdomain");
  });
});
