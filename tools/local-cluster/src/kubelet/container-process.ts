/**
 * Runs one planned container on this machine and reports its state changes. A process container's stdout and
 * stderr go to `<podDir>/<name>.log` (what `kubectl logs` serves); a tail container copies a file that another
 * container writes (the guest's serial console) into its own log until stopped.
 *
 *   waiting --start()--> running --(exit)--> terminated{exitCode}
 *   waiting --adopt(record)--> running (a process an earlier kubelet started; watched through /proc)
 *                           `--stop(grace)--> SIGTERM ... grace ... SIGKILL --> terminated{137 or code}
 *
 * A process container runs under a shim and is recorded under the pod's directory (container-records.ts), so a
 * restarted kubelet adopts it instead of starting a second copy.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { followFile } from "@kvt/runtime";
import {
  type ContainerRecord,
  exitFileOf,
  isLive,
  processStartTime,
  readExitCode,
  shimArgv,
  writeRecord,
} from "./container-records.ts";
import type { ContainerPlan } from "./container-spec.ts";
import type { ContainerRunState } from "./pod-status.ts";

/** One running container. */
export class ContainerProcess {
  readonly #plan: ContainerPlan;
  readonly #image: string;
  readonly #logPath: string;
  readonly #cwd: string;
  readonly #onChange: () => void;
  #state: ContainerRunState;
  #child: ChildProcess | undefined;
  #stopTail: (() => void) | undefined;
  readonly #owner: ContainerOwner;
  /** The adopted process (started by an earlier kubelet), watched through /proc. */
  #adopted: { record: ContainerRecord; exited: Promise<void> } | undefined;

  /**
   * `onChange` is called after every state change (the kubelet then recomputes the pod status); `owner` names the
   * pod in the container's runtime record.
   */
  constructor(
    plan: ContainerPlan,
    image: string,
    podDir: string,
    onChange: () => void,
    owner: ContainerOwner = { podUid: "", graceSeconds: 30 },
  ) {
    this.#plan = plan;
    this.#owner = owner;
    this.#image = image;
    this.#cwd = podDir;
    this.#logPath = join(podDir, `${plan.name}.log`);
    this.#onChange = onChange;
    this.#state =
      plan.kind === "unrunnable"
        ? { name: plan.name, image, state: "waiting", reason: plan.reason, message: plan.message }
        : { name: plan.name, image, state: "waiting", reason: "ContainerCreating" };
  }

  /** Current state. */
  get state(): ContainerRunState {
    return this.#state;
  }

  /** Path of the container's log file. */
  get logPath(): string {
    return this.#logPath;
  }

  /** True for a container that only follows another's output (virt-tail): it ends when the workers end. */
  get isSidecar(): boolean {
    return this.#plan.kind === "tail";
  }

  /** The OS pid of a process container while it runs (its shim: the container's process group). */
  get pid(): number | undefined {
    return this.#child?.pid ?? this.#adopted?.record.pid;
  }

  /**
   * Takes over a container an earlier kubelet started (`record` from the pod's directory) instead of starting it:
   * running while the recorded process lives, then terminated with the exit code its shim wrote. A tail container
   * resumes copying where its log ends. Call instead of start().
   */
  adopt(record: ContainerRecord | undefined): void {
    if (this.#plan.kind === "unrunnable" || this.#state.state !== "waiting") return;
    if (this.#plan.kind === "tail") {
      const logFd = openSync(this.#logPath, "a");
      this.#stopTail = followFile(this.#plan.file, logFd, statSync(this.#logPath).size);
      this.#set({ name: this.#plan.name, image: this.#image, state: "running", startedAt: new Date() });
      return;
    }
    if (!record) return;
    const startedAt = new Date(record.startedAt);
    const finished = (): void => {
      // Whatever the container started goes with it (as in start()'s exit handler).
      killGroup(record.pid, "SIGKILL");
      const exitCode = readExitCode(record.exitFile) ?? 137;
      this.#set({
        name: this.#plan.name,
        image: this.#image,
        state: "terminated",
        exitCode,
        reason: exitCode === 0 ? "Completed" : "Error",
        startedAt,
        finishedAt: new Date(),
      });
    };
    const exited = new Promise<void>((resolve) => {
      const poll = (): void => {
        if (isLive(record)) return;
        clearInterval(timer);
        finished();
        resolve();
      };
      const timer = setInterval(poll, ADOPTED_POLL_MS);
      poll();
    });
    this.#adopted = { record, exited };
    if (isLive(record)) this.#set({ name: this.#plan.name, image: this.#image, state: "running", startedAt });
  }

  /** Starts the container. A no-op for unrunnable containers (they stay Waiting with their reason). */
  start(): void {
    if (this.#plan.kind === "unrunnable" || this.#state.state !== "waiting") return;
    const logFd = openSync(this.#logPath, "a");
    if (this.#plan.kind === "tail") {
      this.#stopTail = followFile(this.#plan.file, logFd);
      this.#set({ name: this.#plan.name, image: this.#image, state: "running", startedAt: new Date() });
      return;
    }
    // nice(1) execs the program (same pid), so every thread it starts inherits the niceness.
    const program = this.#plan.nice > 0 ? ["nice", "-n", String(this.#plan.nice), ...this.#plan.argv] : this.#plan.argv;
    const exitFile = exitFileOf(this.#cwd, this.#plan.name);
    rmSync(exitFile, { force: true });
    const [cmd, ...args] = shimArgv(program, exitFile);
    const child = spawn(cmd, args, {
      cwd: this.#cwd,
      env: this.#plan.env,
      stdio: ["ignore", logFd, logFd],
      detached: true,
    });
    closeSync(logFd);
    this.#child = child;
    const startedAt = new Date();
    // Recorded before anything else can run, so a kubelet killed from here on finds the container on restart.
    const startTime = child.pid ? processStartTime(child.pid) : undefined;
    if (child.pid && startTime) {
      writeRecord(this.#cwd, {
        version: 1,
        podUid: this.#owner.podUid,
        container: this.#plan.name,
        pid: child.pid,
        startTime,
        startedAt: startedAt.toISOString(),
        exitFile,
        graceSeconds: this.#owner.graceSeconds,
      });
    }
    child.once("spawn", () => this.#set({ name: this.#plan.name, image: this.#image, state: "running", startedAt }));
    child.once("error", (err) => {
      this.#set({
        name: this.#plan.name,
        image: this.#image,
        state: "terminated",
        exitCode: 128,
        reason: "StartError",
        message: err.message,
        startedAt,
        finishedAt: new Date(),
      });
    });
    child.once("exit", (code, signal) => {
      // Like a container runtime tearing down the container's cgroup: whatever the process started (QEMU for an
      // emulated guest) goes with it, so nothing outlives its container.
      if (child.pid) killGroup(child.pid, "SIGKILL");
      const exitCode = code ?? 128 + signalNumber(signal);
      this.#set({
        name: this.#plan.name,
        image: this.#image,
        state: "terminated",
        exitCode,
        reason: exitCode === 0 ? "Completed" : signal === "SIGKILL" ? "OOMKilled-or-Killed" : "Error",
        startedAt,
        finishedAt: new Date(),
      });
    });
  }

  /**
   * Stops the container: SIGTERM to its process group, SIGKILL after `graceSeconds`. Resolves once terminated.
   * A tail container stops at once; a waiting one becomes terminated without running.
   */
  async stop(graceSeconds: number): Promise<void> {
    if (this.#state.state === "terminated") return;
    if (this.#stopTail || this.#state.state === "waiting") {
      this.#stopTail?.();
      this.#stopTail = undefined;
      const ran = this.#state.state === "running";
      this.#set({
        ...this.#state,
        state: "terminated",
        exitCode: ran ? 0 : 137,
        reason: ran ? "Completed" : "ContainerCannotRun",
        finishedAt: new Date(),
      });
      return;
    }
    if (this.#adopted) {
      const pid = this.#adopted.record.pid;
      killGroup(pid, "SIGTERM");
      const timer = setTimeout(() => killGroup(pid, "SIGKILL"), Math.max(0, graceSeconds) * 1000);
      await this.#adopted.exited;
      clearTimeout(timer);
      return;
    }
    const child = this.#child;
    if (!child?.pid) return;
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once("exit", () => resolve());
    });
    killGroup(child.pid, "SIGTERM");
    const timer = setTimeout(() => killGroup(child.pid!, "SIGKILL"), Math.max(0, graceSeconds) * 1000);
    await exited;
    clearTimeout(timer);
  }

  #set(state: ContainerRunState): void {
    this.#state = state;
    this.#onChange();
  }
}

/** How often an adopted container's process is checked (it is not our child: no exit event). */
const ADOPTED_POLL_MS = 250;

/** The pod a container belongs to, as its runtime record names it. */
export interface ContainerOwner {
  readonly podUid: string;
  /** The pod's termination grace period in seconds. */
  readonly graceSeconds: number;
}

/** Signals the process group `pid` leads (a container and everything it started). */
export function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is gone already (the process exited between checks): nothing left to signal.
  }
}

function signalNumber(signal: NodeJS.Signals | null): number {
  const numbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGSEGV: 11, SIGTERM: 15, SIGABRT: 6 };
  return signal ? (numbers[signal] ?? 0) : 0;
}
