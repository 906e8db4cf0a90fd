import { describe, expect, it } from "vitest";
import { decodeStrict, strictDecodingMessage } from "./strict-decode.ts";
import { vm } from "./testdata/objects.ts";

describe("decodeStrict()", () => {
  it("accepts a valid VM, including unknown metadata fields (the API server's business) and template labels", () => {
    const v = { ...vm(), metadata: { name: "x", whatever: 1 } };
    expect(decodeStrict("VirtualMachine", v)).toEqual({ unknownFields: [], causes: [] });
  });

  it("reports unknown fields with their full paths, as the API server's strict decoding", () => {
    const v = vm() as unknown as {
      spec: Record<string, unknown> & {
        template: { spec: { domain: { devices: { disks: Record<string, unknown>[] } } } };
      };
    };
    v.spec.foo = 1;
    const disk = v.spec.template.spec.domain.devices.disks[1];
    if (disk) disk.size = "1Gi";
    const r = decodeStrict("VirtualMachine", v);
    expect(r.unknownFields).toEqual(["spec.template.spec.domain.devices.disks[1].size", "spec.foo"]);
    expect(strictDecodingMessage(r.unknownFields)).toBe(
      'strict decoding error: unknown field "spec.template.spec.domain.devices.disks[1].size", unknown field "spec.foo"',
    );
    expect(r.causes[1]).toEqual({ type: "FieldValueUnknown", message: 'unknown field "spec.foo"', field: "spec.foo" });
  });

  it("reports unknown fields inside empty marker objects such as `bridge: {}`", () => {
    const v = vm() as unknown as { spec: { template: { spec: { networks: Record<string, unknown>[] } } } };
    const net = v.spec.template.spec.networks[0];
    if (net) net.pod = { vmNetworkCIDR: "10.0.2.0/24", mtu: 1400 };
    expect(decodeStrict("VirtualMachine", v).unknownFields).toEqual(["spec.template.spec.networks[0].pod.mtu"]);
    const w = vm() as unknown as {
      spec: { template: { spec: { domain: { devices: { interfaces: Record<string, unknown>[] } } } } };
    };
    const iface = w.spec.template.spec.domain.devices.interfaces[0];
    if (iface) iface.masquerade = { x: 1 };
    expect(decodeStrict("VirtualMachine", w).unknownFields).toEqual([
      "spec.template.spec.domain.devices.interfaces[0].masquerade.x",
    ]);
  });

  it("reports values of the wrong type", () => {
    const v = vm() as unknown as { spec: Record<string, unknown> };
    v.spec.running = "yes";
    delete v.spec.runStrategy;
    expect(decodeStrict("VirtualMachine", v).causes).toEqual([
      {
        type: "FieldValueTypeInvalid",
        message: 'Invalid value: "yes": spec.running in body must be of type boolean: "string"',
        field: "spec.running",
      },
    ]);
  });

  it("quantities take integers and strings, not booleans; template metadata takes anything", () => {
    const v = vm() as unknown as {
      spec: {
        template: { metadata?: unknown; spec: { domain: { resources: { requests: Record<string, unknown> } } } };
      };
    };
    v.spec.template.spec.domain.resources.requests.memory = 67108864;
    v.spec.template.metadata = { anything: { goes: true } };
    expect(decodeStrict("VirtualMachine", v).causes).toEqual([]);
    v.spec.template.spec.domain.resources.requests.memory = true;
    expect(decodeStrict("VirtualMachine", v).causes.map((c) => c.field)).toEqual([
      "spec.template.spec.domain.resources.requests.memory",
    ]);
  });

  it("throws for a kind it does not define", () => {
    expect(() => decodeStrict("Pod", {})).toThrow('Cannot decode kind "Pod": not a kubevirt.io kind');
  });
});
