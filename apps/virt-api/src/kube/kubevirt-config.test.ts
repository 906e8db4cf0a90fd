import type { DeveloperConfiguration } from "@kvt/api";
import { ApiError, type RawWatchEvent, type RestRequest, type RestTransport, type WatchHandle } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import type { AdmissionRequest } from "../webhooks/admission.ts";
import { validateVm, validateVmiCreate } from "../webhooks/admitters.ts";
import { type KubeVirtConfigSource, RestKubeVirtConfigSource } from "./kubevirt-config.ts";

/** Answers queued bodies (or rejects with queued errors), in order. */
class FakeTransport implements RestTransport {
  readonly requests: RestRequest[] = [];
  responses: unknown[] = [];
  request<T>(req: RestRequest): Promise<T> {
    this.requests.push(req);
    const next = this.responses.shift();
    if (!next) return Promise.reject(new Error("no response queued"));
    return next instanceof Error ? Promise.reject(next) : Promise.resolve(next as T);
  }
  watch(
    _path: string,
    _query: unknown,
    _onEvent: (event: RawWatchEvent) => void,
    _onDone: (error: unknown) => void,
  ): Promise<WatchHandle> {
    return Promise.reject(new Error("no watches here"));
  }
}

const kubevirtList = (dev: DeveloperConfiguration) => ({
  items: [
    {
      metadata: { name: "kubevirt", namespace: "kubevirt", creationTimestamp: "2026-01-01T00:00:00Z" },
      spec: { configuration: { developerConfiguration: dev } },
    },
  ],
});

describe("RestKubeVirtConfigSource", () => {
  it("reads the active CR's developerConfiguration in virt-api's namespace", async () => {
    const t = new FakeTransport();
    t.responses.push(kubevirtList({ featureGates: ["HostDisk"] }));
    const source = new RestKubeVirtConfigSource(t, "kubevirt");
    expect(await source.configuration()).toEqual({ developerConfiguration: { featureGates: ["HostDisk"] } });
    expect(t.requests[0]).toMatchObject({ method: "GET", path: "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts" });
  });

  it("keeps the last configuration when a read fails, and fails when it has none", async () => {
    const t = new FakeTransport();
    const source = new RestKubeVirtConfigSource(t, "kubevirt");
    t.responses.push(new Error("connection refused"));
    await expect(source.configuration()).rejects.toThrow("connection refused");
    t.responses.push(kubevirtList({ featureGates: ["Sidecar"] }), new ApiError("GET: busy", 503));
    const sidecar = { developerConfiguration: { featureGates: ["Sidecar"] } };
    expect(await source.configuration()).toEqual(sidecar);
    expect(await source.configuration()).toEqual(sidecar);
  });
});

describe("virt-api admission follows the CR's feature gates", () => {
  const gates = (dev: DeveloperConfiguration | undefined): KubeVirtConfigSource => ({
    configuration: () => Promise.resolve({ developerConfiguration: dev }),
  });
  const spec = {
    domain: { resources: { requests: { memory: "128Mi" } }, devices: { disks: [{ name: "hd", disk: {} }] } },
    volumes: [{ name: "hd", hostDisk: { path: "/var/lib/hd.img", type: "DiskOrCreate", capacity: "1Mi" } }],
  };
  const request = (kind: string, object: Record<string, unknown>): AdmissionRequest => ({
    uid: "u1",
    kind: { group: "kubevirt.io", version: "v1", kind },
    resource: { group: "kubevirt.io", version: "v1", resource: `${kind.toLowerCase()}s` },
    operation: "CREATE",
    namespace: "default",
    name: "x",
    object,
  });

  it("a hostDisk VMI is refused with KubeVirt's message until HostDisk is on", async () => {
    const vmi = request("VirtualMachineInstance", { metadata: { name: "x" }, spec });
    const off = await validateVmiCreate("kubevirt", gates(undefined))(vmi);
    expect(off).toMatchObject({
      allowed: false,
      code: 422,
      causes: [
        { reason: "FieldValueInvalid", message: "HostDisk feature gate is not enabled", field: "spec.volumes[0]" },
      ],
    });
    expect(await validateVmiCreate("kubevirt", gates({ featureGates: ["HostDisk"] }))(vmi)).toEqual({ allowed: true });
  });

  it("a VM whose template carries hook sidecars is refused until Sidecar is on", async () => {
    const template = { metadata: { annotations: { "hooks.kubevirt.io/hookSidecars": '[{"image":"x"}]' } }, spec };
    const vm = request("VirtualMachine", { metadata: { name: "x" }, spec: { runStrategy: "Halted", template } });
    const off = await validateVm("kubevirt", undefined, gates({ featureGates: ["HostDisk"] }))(vm);
    expect(off).toMatchObject({
      allowed: false,
      message: expect.stringContaining("sidecar feature gate is not enabled in kubevirt-config") as unknown,
    });
    const on = await validateVm("kubevirt", undefined, gates({ featureGates: ["HostDisk", "Sidecar"] }))(vm);
    expect(on).toEqual({ allowed: true });
  });
});
