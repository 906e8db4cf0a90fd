import { describe, expect, it } from "vitest";
import { ANNOTATION } from "../constants.ts";
import type { VirtualMachineInstance } from "../types.ts";
import { INTERFACE_NOT_MIGRATABLE_MESSAGE, interfacesMigrationBlocker, podInterface } from "./interfaces.ts";

const vmi = (
  iface: Record<string, unknown> | undefined,
  annotations?: Record<string, string>,
): VirtualMachineInstance => ({
  metadata: { name: "v", ...(annotations ? { annotations } : {}) },
  spec: {
    domain: { devices: { interfaces: iface ? [{ name: "default", ...iface }] : [] } },
    networks: [{ name: "default", pod: {} }],
  },
});

describe("interfacesMigrationBlocker() (KubeVirt's VerifyVMIMigratable)", () => {
  it.each([
    ["masquerade", { masquerade: {} }, undefined, undefined],
    ["bridge", { bridge: {} }, undefined, INTERFACE_NOT_MIGRATABLE_MESSAGE],
    ["bridge with the annotation", { bridge: {} }, { [ANNOTATION.allowPodBridgeNetworkLiveMigration]: "" }, undefined],
    ["passtBinding", { passtBinding: {} }, undefined, undefined],
    [
      "a binding plugin the KubeVirt CR does not declare migratable",
      { binding: { name: "passt" } },
      undefined,
      INTERFACE_NOT_MIGRATABLE_MESSAGE,
    ],
    ["no interfaces", undefined, undefined, undefined],
  ])("%s", (_name, iface, annotations, want) => {
    expect(interfacesMigrationBlocker(vmi(iface, annotations))).toBe(want);
  });

  it("a binding plugin with `migration` in the KubeVirt CR migrates", () => {
    const v = vmi({ binding: { name: "mine" } });
    expect(interfacesMigrationBlocker(v, { mine: { migration: {} } })).toBeUndefined();
    expect(interfacesMigrationBlocker(v, { mine: {} })).toBe(INTERFACE_NOT_MIGRATABLE_MESSAGE);
  });

  it("a VMI without a pod network is not held back by its interfaces", () => {
    const v = vmi({ bridge: {} });
    v.spec.networks = [{ name: "default", multus: { networkName: "x" } }] as never;
    expect(interfacesMigrationBlocker(v)).toBeUndefined();
    expect(podInterface(v)).toBeUndefined();
  });

  it("a pod network without its interface is KubeVirt's error", () => {
    const v = vmi({ bridge: {} });
    v.spec.domain.devices.interfaces = [{ name: "other", bridge: {} }];
    expect(interfacesMigrationBlocker(v)).toBe("no primary interface found for network default");
  });

  it("carries KubeVirt's message (v1.8 and later)", () => {
    expect(INTERFACE_NOT_MIGRATABLE_MESSAGE).toBe(
      "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network",
    );
  });
});
