import type { VirtualMachineInstance } from "@kvt/api";
import { planBridge, planMasquerade } from "@kvt/pod-network";
import { describe, expect, it } from "vitest";
import { wiredInterfaces } from "./create-machine.ts";

/** A VMI with one pod interface `default` (binding and fields from `iface`). */
const vmi = (iface: Record<string, unknown>): VirtualMachineInstance => ({
  metadata: { name: "vm1", namespace: "default", uid: "u-1" },
  spec: {
    domain: { devices: { interfaces: [{ name: "default", ...iface }] } },
    networks: [{ name: "default", pod: {} }],
    subdomain: "sub",
  },
});

describe("wiredInterfaces()", () => {
  it("reports a wired masquerade NIC with the pod IP, as KubeVirt without a guest agent", () => {
    const podNetwork = planMasquerade(vmi({ masquerade: {} }))!;
    const spec = {
      vmiKey: "default/vm1",
      memoryBytes: 1,
      vcpus: 1,
      boot: { kernelPath: "/k", cmdline: "", pvmSafe: false },
      workDir: "/w",
      podNetwork,
    };
    expect(wiredInterfaces(spec, "10.64.1.7")).toEqual([]); // not wired: no NIC
    expect(wiredInterfaces({ ...spec, nics: [{ tap: "tap0", mac: podNetwork.mac }] }, "10.64.1.7")).toEqual([
      {
        name: "default",
        mac: podNetwork.mac,
        ipAddress: "10.64.1.7",
        ipAddresses: ["10.64.1.7"],
        podInterfaceName: "eth0",
        infoSource: "domain",
        queueCount: 1,
      },
    ]);
  });
});

describe("wiredInterfaces() of a bridge", () => {
  it("reports the addresses the wiring handed to the guest, its MAC, eth0 and infoSource domain", () => {
    const podNetwork = planBridge(vmi({ bridge: {} }))!;
    const spec = {
      vmiKey: "default/vm1",
      memoryBytes: 1 << 26,
      vcpus: 1,
      workDir: "/tmp",
      boot: { kernelPath: "/k", cmdline: "", pvmSafe: false },
      podNetwork,
      nics: [{ tap: "tap0", mac: "c6:63:56:a0:9b:13" }],
    };
    expect(wiredInterfaces(spec, ["10.99.1.5"])).toEqual([
      {
        name: "default",
        mac: "c6:63:56:a0:9b:13",
        ipAddress: "10.99.1.5",
        ipAddresses: ["10.99.1.5"],
        podInterfaceName: "eth0",
        infoSource: "domain",
        queueCount: 1,
      },
    ]);
    expect(wiredInterfaces(spec, [])[0]).not.toHaveProperty("ipAddress"); // a pod without IPv4
  });
});
