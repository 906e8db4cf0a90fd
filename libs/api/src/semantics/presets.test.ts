import { describe, expect, it } from "vitest";
import { vmi } from "../testdata/objects.ts";
import type { DomainSpec, VirtualMachineInstance, VirtualMachineInstancePreset } from "../types.ts";
import { applyPresets, PresetConflictError } from "./presets.ts";

const preset = (name: string, domain: DomainSpec, matchLabels = { flavor: "small" }): VirtualMachineInstancePreset => ({
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachineInstancePreset",
  metadata: { name, namespace: "default" },
  spec: { selector: { matchLabels }, domain },
});

const labelled = (labels: Record<string, string> = { flavor: "small" }): VirtualMachineInstance => {
  const v = vmi();
  v.metadata = { ...v.metadata, labels };
  return v;
};

describe("VirtualMachineInstancePreset application (KubeVirt mutators/preset.go)", () => {
  it("a matching preset fills the sections the VMI leaves unset and annotates the VMI", () => {
    const v = labelled();
    delete v.spec.domain.cpu;
    applyPresets(v, [preset("small", { devices: {}, cpu: { cores: 2 }, features: { acpi: {} } })]);
    expect(v.spec.domain.cpu).toEqual({ cores: 2 });
    expect(v.spec.domain.features).toEqual({ acpi: {} });
    expect(v.metadata?.annotations?.["virtualmachinepreset.kubevirt.io/small"]).toBe("kubevirt.io/v1");
  });

  it("the VMI's own values win; a preset left with nothing in effect does not annotate", () => {
    const v = labelled();
    v.spec.domain.cpu = { cores: 4 };
    applyPresets(v, [preset("small", { devices: {}, cpu: { cores: 2 } })]);
    expect(v.spec.domain.cpu).toEqual({ cores: 4 });
    expect(v.metadata?.annotations).toBeUndefined();
  });

  it("memory is never merged (KubeVirt's presets do not touch it)", () => {
    const v = labelled();
    const before = structuredClone(v.spec.domain.memory);
    applyPresets(v, [preset("small", { devices: {}, memory: { guest: "1Gi" } })]);
    expect(v.spec.domain.memory).toEqual(before);
  });

  it.each<[string, Record<string, string>, Record<string, string> | undefined]>([
    ["labels that do not match", { flavor: "large" }, undefined],
    [
      "the exclude annotation",
      { flavor: "small" },
      { "virtualmachineinstancepresets.admission.kubevirt.io/exclude": "true" },
    ],
  ])("%s leave the VMI untouched", (_, labels, annotations) => {
    const v = labelled(labels);
    if (annotations) v.metadata = { ...v.metadata, annotations };
    delete v.spec.domain.cpu;
    const before = structuredClone(v);
    applyPresets(v, [preset("small", { devices: {}, cpu: { cores: 2 } })]);
    expect(v).toEqual(before);
  });

  it("two matching presets that disagree refuse the VMI with KubeVirt's message", () => {
    const a = preset("a", { devices: {}, resources: { requests: { memory: "64M" } } });
    const b = preset("b", { devices: {}, resources: { requests: { memory: "128M" } } });
    expect(() => applyPresets(labelled(), [a, b])).toThrow(
      new PresetConflictError(
        "VirtualMachinePresets cannot be applied due to conflicts: presets 'b' and 'a' conflict: spec.resources.requests[memory]: 128M != 64M",
      ),
    );
  });
});
