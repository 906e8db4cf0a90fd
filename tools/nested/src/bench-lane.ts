/**
 * Benchmarks of our VMM on a real KVM, run where one is: on this host when its KVM runs Linux guests (hardware
 * VT-x/SVM), else inside the nested lane's L1 (`npm run bench -- migration` on a host without KVM, or with PVM).
 *
 *   npm run bench -- AREA [args]  --(AREA in KVM_BENCH_AREAS, host KVM cannot run Linux)-->  runBenchInL1:
 *       make -C native, build L1 --> L1 job: node <the same bench file> [args] (KVT_NESTED_L1=1 inside)
 *       --> every line echoed here --> its last line must be the area's JSON, with "lane":"nested"
 *
 * A bench that printed no JSON line (it crashed, or L1 did) fails with the reason and L1's last lines.
 */
import { relative } from "node:path";
import { ensureHostTools, type HostTool } from "@kvt/images";
import { POD_NETWORK_TOOLS } from "@kvt/local-cluster";
import { kvmRunsLinux } from "@kvt/vmm";
import { buildL1Image, projectRoot } from "./l1-image.ts";
import { runInL1 } from "./l1-run.ts";
import { prepareLane } from "./lane.ts";

/** Bench areas that measure our VMM on KVM (their scripts add `"lane"` to their JSON). */
export const KVM_BENCH_AREAS: ReadonlySet<string> = new Set(["migration", "vmm-start", "disk", "network"]);

/**
 * Debian programs an area runs inside L1, installed here first (L1 sees this host's `/` read-only and cannot
 * install anything). network: its host-side iperf3 and busybox (the ping-pong's echo server for the veth limit),
 * and what the local cluster's pod network needs (which the bench checks again in L1 without being able to install);
 * disk: fio, for its figures on the host file (the guests bring their own).
 */
export const L1_BENCH_HOST_TOOLS: Readonly<Record<string, readonly HostTool[]>> = {
  disk: [{ bin: "fio", pkg: "fio" }],
  network: [{ bin: "iperf3", pkg: "iperf3" }, { bin: "busybox", pkg: "busybox" }, ...POD_NETWORK_TOOLS],
};

/** The flag that sends any bench area into L1 (e.g. `npm run bench -- density --nested`: the cluster in L1). */
export const NESTED_FLAG = "--nested";

/**
 * The flag that keeps a KVM bench on this host although its KVM cannot run Linux (a PVM host runs the test guest
 * that the migration and vmm-start benches use, so their host figures can still be taken there).
 */
export const HOST_FLAG = "--host";

/**
 * `--l1-cpus N`: L1 gets N vCPUs (default 1), each a TCG thread of this host, so a guest's vCPU and its VMM's I/O
 * worker can run at once as they would on a host with cores to spare. The JSON says which (`l1Cpus`).
 */
export const L1_CPUS_FLAG = "--l1-cpus";

/** The `--l1-cpus` value of `args` (1 when absent); throws for anything but 1 to 4. */
export function l1CpusOf(args: readonly string[]): number {
  const i = args.indexOf(L1_CPUS_FLAG);
  if (i < 0) return 1;
  const n = Number(args[i + 1]);
  if (!Number.isInteger(n) || n < 1 || n > 4) throw new Error(`${L1_CPUS_FLAG} ${args[i + 1]}: expected 1 to 4`);
  return n;
}

/** `args` without `--nested` and `--l1-cpus N` (what the bench inside L1 gets). */
export function argsForL1(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === NESTED_FLAG) continue;
    if (args[i] === L1_CPUS_FLAG) {
      i++;
      continue;
    }
    out.push(args[i] ?? "");
  }
  return out;
}

/** True when `area` (with its `args`) must run inside L1 on this host. */
export function benchNeedsL1(area: string, args: readonly string[] = []): boolean {
  if (process.env.KVT_NESTED_L1 || args.includes(HOST_FLAG)) return false;
  return args.includes(NESTED_FLAG) || (KVM_BENCH_AREAS.has(area) && !kvmRunsLinux());
}

/** The last line of `lines` that is the area's JSON object, parsed; undefined when there is none. */
export function lastJsonLine(lines: readonly string[], area: string): Record<string, unknown> | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]?.trim() ?? "";
    if (!line.startsWith("{")) continue;
    try {
      const obj = JSON.parse(line) as Record<string, unknown>;
      if (obj.area === area) return obj;
    } catch {
      // A console line that merely starts with "{": keep looking.
    }
  }
  return undefined;
}

/**
 * Runs the bench script `file` (with `args`) inside L1 and prints its output; resolves to the exit code: 0 when it
 * printed its JSON (echoed last, with `"lane":"nested"`), 1 otherwise.
 */
export async function runBenchInL1(
  area: string,
  file: string,
  args: readonly string[],
  log: (line: string) => void,
): Promise<number> {
  log(
    args.includes(NESTED_FLAG)
      ? `bench ${area}: running it in the nested lane (L1, nested SVM KVM), as --nested asks`
      : `bench ${area}: this host's KVM cannot run Linux guests; running it in the nested lane (L1, nested SVM KVM)`,
  );
  await ensureHostTools(L1_BENCH_HOST_TOOLS[area] ?? [], log);
  await prepareLane(log, true);
  const image = await buildL1Image(log);
  const cpus = l1CpusOf(args);
  const result = await runInL1(image, {
    job: relative(projectRoot, file),
    args: argsForL1(args),
    cpus,
    // Two 1 GiB guests side by side (source and target), then QEMU's pair; L1's RAM is allocated as it is touched.
    memoryMiB: 6144,
    timeoutMs: 45 * 60_000,
    onLine: (line) => log(line),
  });
  const json = lastJsonLine(result.lines, area);
  if (!json) {
    log(`bench ${area}: no JSON result came out of L1${result.timedOut ? " (stopped by the 45 min timeout)" : ""}`);
    log(result.lines.slice(-20).join("\n"));
    return 1;
  }
  log(JSON.stringify({ ...json, lane: "nested", l1Cpus: cpus }));
  return json.skipped || json.error ? 1 : 0;
}
