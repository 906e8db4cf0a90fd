import type { ControllerRevision, InstancetypeObject, ResolvedMatcher, VirtualMachine } from "@kvt/api";
import { ApiError } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { route } from "../server/routes.ts";
import type { InstancetypeReader } from "../webhooks/instancetype-admitters.ts";
import { expandPostedVm, expandStoredVm } from "./expand-spec.ts";

const reader: InstancetypeReader = {
  get(m: ResolvedMatcher): Promise<InstancetypeObject | undefined> {
    if (m.plural === "virtualmachineclusterinstancetypes" && m.name === "u1.nano")
      return Promise.resolve({ spec: { cpu: { guest: 1 }, memory: { guest: "512Mi" } } });
    if (m.plural === "virtualmachineclusterpreferences" && m.name === "linux")
      return Promise.resolve({ spec: { devices: { preferredDiskBus: "sata", preferredInterfaceModel: "e1000" } } });
    return Promise.resolve(undefined);
  },
  getControllerRevision(): Promise<ControllerRevision | undefined> {
    return Promise.resolve(undefined);
  },
};

function vm(instancetype: string, extra: Record<string, unknown> = {}): VirtualMachine {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name: "v", namespace: "default" },
    spec: {
      runStrategy: "Always",
      instancetype: { name: instancetype },
      preference: { name: "linux" },
      template: {
        spec: { domain: { devices: {}, ...extra }, volumes: [{ name: "root", containerDisk: { image: "x" } }] },
      },
    },
    status: { instancetypeRef: { name: instancetype } },
  };
}

describe("expand-spec (KubeVirt pkg/instancetype/expand)", () => {
  it("applies the instancetype and preference, defaults disks and the pod interface, drops the matchers", async () => {
    const out = await expandStoredVm(reader, vm("u1.nano"));
    expect(out.spec.instancetype).toBeUndefined();
    expect(out.spec.preference).toBeUndefined();
    expect(out.status?.instancetypeRef).toBeUndefined();
    const spec = out.spec.template.spec!;
    expect(spec.domain.cpu).toMatchObject({ sockets: 1, cores: 1, threads: 1 });
    expect(spec.domain.memory).toMatchObject({ guest: "512Mi" });
    expect(spec.domain.devices.disks?.[0]).toMatchObject({ name: "root", disk: { bus: "sata" } });
    expect(spec.domain.devices.interfaces?.[0]).toMatchObject({ name: "default", model: "e1000" });
  });

  it("a missing instancetype is a 500 from the GET and a 400 from the PUT, with the not-found message", async () => {
    const message = 'virtualmachineclusterinstancetypes.instancetype.kubevirt.io "nope" not found';
    const get = await expandStoredVm(reader, vm("nope")).catch((e: unknown) => e);
    expect(get).toBeInstanceOf(ApiError);
    expect((get as ApiError).status).toMatchObject({ code: 500, message: `Internal error occurred: ${message}` });
    const put = await expandPostedVm(reader, vm("nope"), "default").catch((e: unknown) => e);
    expect((put as ApiError).status).toMatchObject({ code: 400, message });
  });

  it("conflicts are refused with KubeVirt's message", async () => {
    const put = await expandPostedVm(reader, vm("u1.nano", { cpu: { sockets: 2 } }), "default").catch(
      (e: unknown) => e,
    );
    expect((put as ApiError).status.message).toBe(
      "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type",
    );
  });

  it("the PUT refuses a VM of another namespace", async () => {
    const other = vm("u1.nano");
    other.metadata = { name: "v", namespace: "elsewhere" };
    const put = await expandPostedVm(reader, other, "default").catch((e: unknown) => e);
    expect((put as ApiError).status.message).toBe("VM namespace must be empty or default");
  });

  it.each([
    [
      "GET",
      "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/v/expand-spec",
      { kind: "expandSpec", namespace: "ns", name: "v" },
    ],
    [
      "PUT",
      "/apis/subresources.kubevirt.io/v1/namespaces/ns/expand-vm-spec",
      { kind: "expandVmSpec", namespace: "ns" },
    ],
    [
      "PUT",
      "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/v/expand-spec",
      { kind: "methodNotAllowed" },
    ],
    ["GET", "/apis/subresources.kubevirt.io/v1/namespaces/ns/expand-vm-spec", { kind: "methodNotAllowed" }],
  ])("routes %s %s", (method, path, want) => {
    expect(route(method, path, new Set())).toEqual(want);
  });
});
