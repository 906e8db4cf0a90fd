/**
 * Objects missing fields their schema requires reach validation when a webhook is called directly (the API
 * server's schema check runs after mutation): each must give causes, never throw (found by the API fuzz lane: a
 * disk without a name threw in dns1123LabelErrors and virt-api answered 500).
 */
import { describe, expect, it } from "vitest";
import { vm, vmi } from "../testdata/objects.ts";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { validateVmirs } from "./replica-validation.ts";
import { validateVm } from "./vm-validation.ts";
import { validateVmiCreate } from "./vmi-validation.ts";

type Edit = (s: VirtualMachineInstanceSpec) => void;
const unnamed = <T>(list: T[] | undefined): void => {
  if (list?.[0]) delete (list[0] as { name?: string }).name;
};

const edits: [string, Edit][] = [
  ["a disk without a name", (s) => unnamed(s.domain.devices.disks)],
  ["a volume without a name", (s) => unnamed(s.volumes)],
  ["an interface without a name", (s) => unnamed(s.domain.devices.interfaces)],
  ["a network without a name", (s) => unnamed(s.networks)],
  [
    "a containerDisk without an image",
    (s) => {
      const v = s.volumes?.[0];
      if (v?.containerDisk) v.containerDisk = {} as { image: string };
    },
  ],
];

describe("validation of objects missing required fields", () => {
  it.each(edits)("%s gives causes, not an exception", (_, edit) => {
    const i = vmi();
    edit(i.spec);
    expect(() => validateVmiCreate(i)).not.toThrow();
    const v = vm();
    const spec = v.spec.template?.spec;
    if (spec) edit(spec);
    expect(() => validateVm(v)).not.toThrow();
    expect(() =>
      validateVmirs({
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceReplicaSet",
        metadata: { name: "rs", namespace: "default" },
        spec: {
          replicas: 0,
          selector: { matchLabels: { a: "b" } },
          template: { metadata: { labels: { a: "b" } }, spec: spec ?? i.spec },
        },
      }),
    ).not.toThrow();
    expect(validateVmiCreate(i).length).toBeGreaterThan(0);
  });
});
