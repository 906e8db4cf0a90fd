/**
 * `npm run bench -- boot [runs]`: in the nested lane (an L1 TCG host with nested SVM KVM, see ../README.md), the
 * time from VMM start to the kernel's first console line and to the demo image's boot marker (1 vCPU, 256 MiB),
 * median of `runs` (default 5), on our VMM and on QEMU `-accel kvm -M microvm -kernel` with the same kernel build and
 * initramfs, side by side. Our VMM boots the image's uncompressed kernel (ELF vmlinux, as the launcher's native
 * backend does, and as Firecracker boots), QEMU the bzImage (the usual `-kernel`); both also run the other form, so
 * the table shows what the kernel form is worth on each. Prints a table, then one JSON line:
 *   {"area":"boot","lane":"nested","runs":..,"kernelFirstLineMs":..,"bootMarkerMs":..,"qemuBootMarkerMs":..,
 *    "bzImageBootMarkerMs":..,"qemuVmlinuxBootMarkerMs":..}
 */
import { buildL1Image } from "../src/l1-image.ts";
import { runInL1 } from "../src/l1-run.ts";
import { prepareLane } from "../src/lane.ts";
import { parseBenchSamples } from "../src/results.ts";

interface Sample {
  readonly vmm: "kvt" | "kvt-bzimage" | "qemu" | "qemu-vmlinux";
  readonly run: number;
  readonly kernelFirstLineMs: number;
  readonly bootMarkerMs: number;
}

function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? null) : Math.round(((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2);
}

const runs = Number(process.argv[2] ?? 5);
if (!Number.isInteger(runs) || runs < 1) {
  process.stderr.write(`usage: npm run bench -- boot [RUNS]: RUNS is a positive integer, not ${process.argv[2]}\n`);
  process.exit(2);
}
const log = (l: string): void => void process.stdout.write(`${l}\n`);
await prepareLane(log, true);
const image = await buildL1Image(log);
const result = await runInL1(image, {
  job: "tools/nested/src/guest-bench.ts",
  args: [String(runs)],
  timeoutMs: 20 * 60_000,
  onLine: (line, atMs) => {
    if (/^KVT_/.test(line)) process.stdout.write(`[L1 +${(atMs / 1000).toFixed(1)}s] ${line}\n`);
  },
});
const samples = parseBenchSamples<Sample>(result.lines);
const ours = samples.filter((s) => s.vmm === "kvt");
const oursBz = samples.filter((s) => s.vmm === "kvt-bzimage");
const qemu = samples.filter((s) => s.vmm === "qemu");
const qemuVmlinux = samples.filter((s) => s.vmm === "qemu-vmlinux");
const row = (name: string, list: readonly Sample[]): string =>
  `${name.padEnd(28)} ${String(list.length).padStart(4)}  ${String(median(list.map((s) => s.kernelFirstLineMs))).padStart(10)}  ${String(median(list.map((s) => s.bootMarkerMs))).padStart(10)}`;
process.stdout.write(
  `\nboot (nested lane, 1 vCPU, 256 MiB)  runs  first line  boot marker   (median ms from VMM start)\n`,
);
process.stdout.write(
  [
    row("kubevirt-ts VMM, vmlinux", ours),
    row("kubevirt-ts VMM, bzImage", oursBz),
    row("QEMU microvm, bzImage", qemu),
    row("QEMU microvm, vmlinux (PVH)", qemuVmlinux),
  ].join("\n") + "\n",
);
// A bench that measured nothing is a failure with its reason, never an empty success.
const byForm: [string, readonly Sample[]][] = [
  ["our VMM (vmlinux)", ours],
  ["our VMM (bzImage)", oursBz],
  ["QEMU (bzImage)", qemu],
  ["QEMU (vmlinux)", qemuVmlinux],
];
const missing = byForm.flatMap(([name, list]) => (list.length < runs ? [`${name} ${list.length}/${runs}`] : []));
const failure = missing.length
  ? `runs missing: ${missing.join(", ")}${result.timedOut ? " (L1 stopped by its timeout)" : ""}; last L1 lines:\n${result.lines.slice(-15).join("\n")}`
  : undefined;
if (failure) process.stdout.write(`boot bench: ${failure}\n`);
process.stdout.write(
  `${JSON.stringify({
    area: "boot",
    ...(failure ? { error: failure.split("\n")[0] } : {}),
    lane: "nested",
    runs: Math.min(ours.length, qemu.length),
    kernelFirstLineMs: median(ours.map((s) => s.kernelFirstLineMs)),
    bootMarkerMs: median(ours.map((s) => s.bootMarkerMs)),
    qemuBootMarkerMs: median(qemu.map((s) => s.bootMarkerMs)),
    bzImageBootMarkerMs: median(oursBz.map((s) => s.bootMarkerMs)),
    qemuVmlinuxBootMarkerMs: median(qemuVmlinux.map((s) => s.bootMarkerMs)),
  })}\n`,
);
process.exit(failure ? 1 : 0);
