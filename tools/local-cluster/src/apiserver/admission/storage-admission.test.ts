import { describe, expect, it } from "vitest";
import type { KubeObject } from "../types.ts";
import { defaultStorageClass, storageProtectionAdmission } from "./storage-admission.ts";
import type { AdmissionAttributes } from "./types.ts";

const cls = (name: string, created: string, isDefault: boolean): KubeObject => ({
  metadata: {
    name,
    creationTimestamp: created,
    annotations: isDefault ? { "storageclass.kubernetes.io/is-default-class": "true" } : {},
  },
});

describe("defaultStorageClass()", () => {
  it("picks the newest default class, then by name, and ignores the others", () => {
    expect(
      defaultStorageClass([cls("a", "2026-01-01T00:00:00Z", true), cls("b", "2026-02-01T00:00:00Z", true)])?.metadata
        .name,
    ).toBe("b");
    expect(
      defaultStorageClass([cls("z", "2026-01-01T00:00:00Z", true), cls("y", "2026-01-01T00:00:00Z", true)])?.metadata
        .name,
    ).toBe("y");
    expect(defaultStorageClass([cls("a", "2026-01-01T00:00:00Z", false)])).toBeUndefined();
  });
});

describe("storageProtectionAdmission()", () => {
  const attrs = (resource: string, object: KubeObject): AdmissionAttributes => ({
    operation: "CREATE",
    group: "",
    version: "v1",
    kind: "",
    resource,
    subResource: "",
    namespace: "",
    name: "",
    object,
    oldObject: null,
    dryRun: false,
    userInfo: { username: "u", groups: [] },
    options: {},
  });

  it.each([
    ["persistentvolumeclaims", "kubernetes.io/pvc-protection"],
    ["persistentvolumes", "kubernetes.io/pv-protection"],
  ])("adds the finalizer to new %s", async (resource, finalizer) => {
    const out = await storageProtectionAdmission().admit(
      attrs(resource, { metadata: { name: "x", finalizers: ["a"] } }),
    );
    expect(out?.metadata.finalizers).toEqual(["a", finalizer]);
  });

  it("leaves other resources alone", async () => {
    expect(await storageProtectionAdmission().admit(attrs("pods", { metadata: { name: "x" } }))).toBeUndefined();
  });
});
