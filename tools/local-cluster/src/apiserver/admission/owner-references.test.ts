import { describe, expect, it } from "vitest";
import type { Attributes, Authorizer } from "../auth/rbac.ts";
import type { ResourceDef } from "../resources/types.ts";
import type { KubeObject, OwnerReference } from "../types.ts";
import { ownerReferencesAdmission } from "./owner-references.ts";
import type { AdmissionAttributes } from "./types.ts";

const VM = { group: "kubevirt.io", resource: "virtualmachines", namespaced: true } as ResourceDef;
const NODE = { group: "", resource: "nodes", namespaced: false } as ResourceDef;
const registry = {
  byKind: (apiVersion: string, kind: string) =>
    apiVersion === "kubevirt.io/v1" && kind === "VirtualMachine" ? VM : kind === "Node" ? NODE : undefined,
};

/** An authorizer allowing what `allow` says, remembering every question. */
function authorizer(allow: (a: Attributes) => boolean): Authorizer & { asked: Attributes[] } {
  const asked: Attributes[] = [];
  return {
    asked,
    authorize: (a) => {
      asked.push(a);
      return allow(a) ? { allowed: true, reason: "" } : { allowed: false, reason: "" };
    },
    rulesFor: () => [],
  };
}

const owner = (more: Partial<OwnerReference> = {}): OwnerReference => ({
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachine",
  name: "vm1",
  uid: "u1",
  ...more,
});
const vmi = (refs: OwnerReference[]): KubeObject => ({
  metadata: { name: "vm1", namespace: "ns", ownerReferences: refs },
});
const attrs = (op: "CREATE" | "UPDATE", obj: KubeObject, old: KubeObject | null = null): AdmissionAttributes => ({
  operation: op,
  group: "kubevirt.io",
  version: "v1",
  kind: "VirtualMachineInstance",
  resource: "virtualmachineinstances",
  subResource: "",
  namespace: "ns",
  name: "vm1",
  object: obj,
  oldObject: old,
  dryRun: false,
  userInfo: { username: "ctl", groups: [] },
  options: {},
});

describe("OwnerReferencesPermissionEnforcement", () => {
  it("asks for update on the owner's finalizers when a reference blocks its deletion", async () => {
    const az = authorizer(() => true);
    await ownerReferencesAdmission(registry, az).validate(attrs("CREATE", vmi([owner({ blockOwnerDeletion: true })])));
    expect(az.asked).toEqual([
      {
        user: { username: "ctl", groups: [] },
        verb: "update",
        resourceRequest: true,
        apiGroup: "kubevirt.io",
        apiVersion: "v1",
        resource: "virtualmachines",
        subresource: "finalizers",
        namespace: "ns",
        name: "vm1",
      },
    ]);
  });

  it("denies it as kube-apiserver does without that grant", async () => {
    const az = authorizer((a) => a.subresource !== "finalizers");
    await expect(
      ownerReferencesAdmission(registry, az).validate(attrs("CREATE", vmi([owner({ blockOwnerDeletion: true })]))),
    ).rejects.toMatchObject({
      code: 403,
      message:
        'virtualmachineinstances.kubevirt.io "vm1" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can\'t set finalizers on: , <nil>',
    });
  });

  it("asks nothing on create without blocking references, nor on an update that keeps them", async () => {
    const az = authorizer(() => false);
    const plugin = ownerReferencesAdmission(registry, az);
    await plugin.validate(attrs("CREATE", vmi([owner()])));
    await plugin.validate(attrs("CREATE", vmi([])));
    const refs = [owner({ blockOwnerDeletion: true })];
    await plugin.validate(attrs("UPDATE", vmi(refs), vmi([{ ...refs[0] }])));
    expect(az.asked).toEqual([]);
  });

  it("on an update that changes references: delete on the object, then finalizers of newly blocking owners", async () => {
    const az = authorizer(() => true);
    const plugin = ownerReferencesAdmission(registry, az);
    await plugin.validate(attrs("UPDATE", vmi([owner({ blockOwnerDeletion: true })]), vmi([owner()])));
    expect(az.asked.map((a) => `${a.verb} ${a.resource}${a.subresource ? `/${a.subresource}` : ""}`)).toEqual([
      "delete virtualmachineinstances",
      "update virtualmachines/finalizers",
    ]);
    const denied = authorizer((a) => a.verb !== "delete");
    await expect(
      ownerReferencesAdmission(registry, denied).validate(attrs("UPDATE", vmi([]), vmi([owner()]))),
    ).rejects.toMatchObject({
      message:
        'virtualmachineinstances.kubevirt.io "vm1" is forbidden: cannot set an ownerRef on a resource you can\'t delete: , <nil>',
    });
  });

  it("asks about a cluster-scoped owner without a namespace, and refuses an owner kind nobody serves", async () => {
    const az = authorizer(() => true);
    const plugin = ownerReferencesAdmission(registry, az);
    await plugin.validate(
      attrs("CREATE", vmi([owner({ apiVersion: "v1", kind: "Node", name: "n1", blockOwnerDeletion: true })])),
    );
    expect(az.asked[0]).toMatchObject({
      resource: "nodes",
      subresource: "finalizers",
      name: "n1",
      namespace: undefined,
    });
    await expect(
      plugin.validate(attrs("CREATE", vmi([owner({ apiVersion: "x.io/v1", kind: "Gone", blockOwnerDeletion: true })]))),
    ).rejects.toMatchObject({
      message:
        'virtualmachineinstances.kubevirt.io "vm1" is forbidden: cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion x.io/v1 Kind Gone: no matches for kind "Gone" in version "x.io/v1"',
    });
  });

  it("leaves pods/status alone (its strategy keeps the references)", async () => {
    const az = authorizer(() => false);
    const a = { ...attrs("UPDATE", vmi([owner({ blockOwnerDeletion: true })]), vmi([])) };
    await ownerReferencesAdmission(registry, az).validate({ ...a, group: "", resource: "pods", subResource: "status" });
    expect(az.asked).toEqual([]);
  });
});
