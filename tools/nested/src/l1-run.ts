/**
 * Runs one job of the project inside the L1 host: QEMU in pure TCG mode with an emulated SVM CPU (EPYC,+svm: the
 * fastest L2 in ../shared/research/NESTED-KVM.md), the build host's root shared read-only over 9p, and the job
 * (a .ts file of the project, run by the project's Node 24 inside L1) named on the kernel command line.
 *
 *   runInL1(job) --> qemu-system-x86_64 -accel tcg -cpu EPYC,+svm -kernel <L1> -initrd l1.cpio -virtfs / (ro)
 *                    L1 /init: 9p mount, kvm-amd npt=1, chroot, `node <job> <args>`, poweroff
 *   each console line --> onLine(line, msSinceStart); resolves with every line and the wall time.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { L1Image } from "./l1-image.ts";
import { projectRoot } from "./l1-image.ts";

/** What to run inside L1. */
export interface L1Job {
  /** Path of the .ts job relative to the project root, e.g. tools/nested/src/guest-checks.ts. */
  readonly job: string;
  /** Arguments for the job (no spaces or commas). */
  readonly args?: readonly string[];
  /** L1 RAM in MiB (default 3072: node, the VMM guest and QEMU side by side). */
  readonly memoryMiB?: number;
  /** L1's vCPUs (default 1), each a TCG thread of this host: a bench may give a VMM's I/O thread a CPU of its own. */
  readonly cpus?: number;
  /** Kill L1 after this long (default 12 minutes). */
  readonly timeoutMs?: number;
  /** Every console line of L1, with the milliseconds since QEMU started. */
  readonly onLine?: (line: string, atMs: number) => void;
  /** Stops L1 early (the result says `stopped`). */
  readonly signal?: AbortSignal;
}

/** How the L1 run ended. */
export interface L1Result {
  readonly lines: readonly string[];
  readonly wallMs: number;
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  /** Stopped through `signal`. */
  readonly stopped: boolean;
}

/** Boots L1 with `job` and waits for it to power off. */
export function runInL1(image: L1Image, job: L1Job): Promise<L1Result> {
  for (const a of job.args ?? []) if (/[\s,]/.test(a)) throw new Error(`L1 job argument "${a}" has a space or comma`);
  const append = [
    "console=ttyS0",
    "panic=-1",
    "quiet",
    `kvt.job=${job.job}`,
    `kvt.project=${projectRoot}`,
    ...(job.args?.length ? [`kvt.args=${job.args.join(",")}`] : []),
  ].join(" ");
  const args = [
    ...["-accel", "tcg", "-cpu", "EPYC,+svm", "-smp", String(job.cpus ?? 1), "-m", String(job.memoryMiB ?? 3072)],
    ...["-nodefaults", "-no-user-config", "-nographic", "-display", "none", "-serial", "stdio", "-no-reboot"],
    ...["-kernel", image.kernelPath, "-initrd", image.initrdPath, "-append", append],
    ...["-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"],
  ];
  const started = Date.now();
  const child = spawn("qemu-system-x86_64", args, { stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  let timedOut = false;
  const timer = setTimeout(
    () => {
      timedOut = true;
      child.kill("SIGKILL");
    },
    job.timeoutMs ?? 12 * 60_000,
  );
  const collect = (stream: NodeJS.ReadableStream): void => {
    createInterface({ input: stream }).on("line", (raw) => {
      const line = raw.replace(/\r$/, "");
      lines.push(line);
      job.onLine?.(line, Date.now() - started);
    });
  };
  collect(child.stdout);
  collect(child.stderr);
  const stop = (): void => void child.kill("SIGKILL");
  job.signal?.addEventListener("abort", stop, { once: true });
  return new Promise((resolve, reject) => {
    child.on("error", (err) => {
      clearTimeout(timer);
      job.signal?.removeEventListener("abort", stop);
      reject(new Error(`cannot start qemu-system-x86_64 (apt-get install qemu-system-x86): ${err.message}`));
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      job.signal?.removeEventListener("abort", stop);
      const stopped = job.signal?.aborted === true && !timedOut;
      resolve({ lines, wallMs: Date.now() - started, exitCode: code, timedOut, stopped });
    });
  });
}
