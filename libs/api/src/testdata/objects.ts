/** Valid objects the tests start from and then break one field at a time (test support, not exported). */
import type { VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceSpec } from "../types.ts";

/** A small valid VMI spec: 64M, a container disk, a cloud-init disk, the pod network with masquerade. */
export function vmiSpec(): VirtualMachineInstanceSpec {
  return {
    domain: {
      resources: { requests: { memory: "64M" } },
      devices: {
        disks: [
          { name: "containerdisk", disk: { bus: "virtio" } },
          { name: "cloudinitdisk", disk: { bus: "virtio" } },
        ],
        interfaces: [{ name: "default", masquerade: {} }],
      },
    },
    networks: [{ name: "default", pod: {} }],
    volumes: [
      { name: "containerdisk", containerDisk: { image: "kubevirt/cirros-container-disk-demo:latest" } },
      { name: "cloudinitdisk", cloudInitNoCloud: { userData: "#cloud-config\n" } },
    ],
  };
}

/** A valid VMI in namespace "default". */
export function vmi(name = "testvmi"): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name, namespace: "default" },
    spec: vmiSpec(),
  };
}

/** A valid VM (runStrategy Always) wrapping `vmiSpec()`. */
export function vm(name = "testvm"): VirtualMachine {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name, namespace: "default" },
    spec: { runStrategy: "Always", template: { metadata: { labels: { "kubevirt.io/vm": name } }, spec: vmiSpec() } },
  };
}
