/** The README example, runnable: `node_modules/.bin/node libs/api/src/examples/readme.ts`. */
import {
  canonicalQuantity,
  customResourceDefinitions,
  defaultVm,
  keyOf,
  planStart,
  printableStatus,
  type VirtualMachine,
  validateVm,
} from "@kvt/api";

const vm: VirtualMachine = {
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachine",
  metadata: { name: "vm-cirros", namespace: "default" },
  spec: {
    runStrategy: "Halted",
    template: {
      spec: {
        domain: {
          resources: { requests: { memory: "64M" } },
          devices: { disks: [{ name: "root", disk: { bus: "virtio" } }] },
        },
        volumes: [{ name: "root", containerDisk: { image: "kubevirt/cirros-container-disk-demo:latest" } }],
      },
    },
  },
};

console.log(keyOf(vm)); // default/vm-cirros
console.log(canonicalQuantity("1024Mi")); // 1Gi
const created = defaultVm(vm, "CREATE"); // firmware uuid + serial, machine type q35
console.log(validateVm(created)); // []
console.log(printableStatus({ vm: created })); // Stopped
console.log(planStart(created, undefined)); // { ok: true, plan: { vmPatch: [test runStrategy Halted, replace with Always] } }
console.log(customResourceDefinitions().map((c) => c.metadata.name));

const broken = structuredClone(created);
broken.spec.running = true;
console.log(validateVm(broken));
// [{ type: "FieldValueInvalid", field: "spec.running",
//    message: "Running and RunStrategy are mutually exclusive. Note that Running is deprecated, please use RunStrategy instead" }]
