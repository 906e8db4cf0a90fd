/**
 * `npm run bench -- api-admission`: the cost @kvt/api adds to every VM and VMI admission in virt-api, on the user
 * guide's vm-cirros. Per iteration: strict decode + VM defaulting + VM validation (the VM webhooks), then VMI
 * defaulting + VMI validation of the VMI the VM creates (the VMI webhooks). Goal: under 1 ms per VM admission so the
 * webhooks add nothing visible to VM start. Prints a table, then one JSON line:
 *   {"area":"api-admission","iterations":..,"vmAdmissionUs":{"median","p90"},"vmiAdmissionUs":{..},"quantityParseNs":..,"goalUs":1000,"goalMet":..}
 */
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import {
  decodeStrict,
  defaultVm,
  defaultVmi,
  parseQuantity,
  type VirtualMachine,
  type VirtualMachineInstance,
  validateVm,
  validateVmiCreate,
} from "../src/index.ts";

const ITERATIONS = Number(process.env.API_ADMISSION_ITERATIONS ?? 2000);
const GOAL_US = 1000;
const manifest = parse(
  readFileSync(new URL("../src/testdata/vm-cirros.yaml", import.meta.url), "utf8"),
) as VirtualMachine;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;
}

const vmUs: number[] = [];
const vmiUs: number[] = [];
for (let i = 0; i < ITERATIONS + 200; i++) {
  const t0 = performance.now();
  if (decodeStrict("VirtualMachine", manifest).causes.length > 0) throw new Error("vm-cirros does not decode");
  const vm = defaultVm(manifest, "CREATE");
  if (validateVm(vm).length > 0) throw new Error("vm-cirros does not validate");
  const t1 = performance.now();
  const vmi: VirtualMachineInstance = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "vm-cirros", namespace: "default" },
    spec: structuredClone(vm.spec.template?.spec ?? { domain: { devices: {} } }),
  };
  if (validateVmiCreate(defaultVmi(vmi)).length > 0) throw new Error("the VMI of vm-cirros does not validate");
  const t2 = performance.now();
  // The first 200 iterations warm the JIT up and are not counted.
  if (i >= 200) {
    vmUs.push((t1 - t0) * 1000);
    vmiUs.push((t2 - t1) * 1000);
  }
}
vmUs.sort((a, b) => a - b);
vmiUs.sort((a, b) => a - b);

const qStart = performance.now();
const Q = 100_000;
for (let i = 0; i < Q; i++) parseQuantity(i % 2 ? "1536Mi" : "64M");
const quantityParseNs = ((performance.now() - qStart) * 1e6) / Q;

const round = (n: number): number => Math.round(n * 10) / 10;
const result = {
  area: "api-admission",
  iterations: ITERATIONS,
  vmAdmissionUs: { median: round(percentile(vmUs, 0.5)), p90: round(percentile(vmUs, 0.9)) },
  vmiAdmissionUs: { median: round(percentile(vmiUs, 0.5)), p90: round(percentile(vmiUs, 0.9)) },
  quantityParseNs: round(quantityParseNs),
  goalUs: GOAL_US,
  goalMet: percentile(vmUs, 0.9) < GOAL_US,
};
console.log("| step | median | p90 |");
console.log("| --- | --- | --- |");
console.log(
  `| VM admission (decode + default + validate) | ${result.vmAdmissionUs.median} us | ${result.vmAdmissionUs.p90} us |`,
);
console.log(
  `| VMI admission (default + validate) | ${result.vmiAdmissionUs.median} us | ${result.vmiAdmissionUs.p90} us |`,
);
console.log(`| Quantity.parse | ${result.quantityParseNs} ns | |`);
console.log(JSON.stringify(result));
