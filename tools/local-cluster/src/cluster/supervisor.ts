/**
 * Runs the local cluster's components, each as its own OS process, and restarts any that dies.
 *
 *   start(spec) --> running --(exit, not stopping)--> wait backoff (1 s, 2 s, ... 30 s) --> running ...
 *                      `--(stopAll)--> SIGTERM --(10 s)--> SIGKILL --> stopped
 *
 * Output of each component goes to its own log file (JSON lines from pino) so the terminal stays readable.
 * A component that stayed up for a minute has its backoff reset.
 *
 * Components die with the supervisor, even when it is killed with SIGKILL and has no chance to stop them: each is
 * started through util-linux's `setpriv --pdeathsig SIGTERM`, which sets the Linux parent-death signal and then
 * execs the component (same pid), so the kernel sends the component SIGTERM when the supervisor's process ends.
 * Without setpriv (not Linux, no util-linux) components start as before and {@link Supervisor.parentDeathSignal} is
 * false.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { closeSync, openSync } from "node:fs";

/** How to run one component. */
export interface ComponentSpec {
  /** Short name, e.g. `virt-handler/node01`. */
  readonly name: string;
  /** Executable and arguments. */
  readonly argv: readonly string[];
  /** Extra environment on top of the supervisor's. */
  readonly env?: Record<string, string>;
  /** File receiving stdout and stderr (appended). */
  readonly logFile: string;
}

/** What the supervisor reports. */
export type SupervisorEvent =
  | { readonly type: "started"; readonly name: string; readonly pid: number; readonly restarts: number }
  | {
      readonly type: "exited";
      readonly name: string;
      readonly code: number | null;
      readonly signal: string | null;
      readonly restartInMs?: number;
    };

interface Managed {
  readonly spec: ComponentSpec;
  child?: ChildProcess;
  restarts: number;
  backoffMs: number;
  startedAt: number;
  timer?: ReturnType<typeof setTimeout>;
}

const MAX_BACKOFF_MS = 30_000;
const STABLE_MS = 60_000;
const STOP_GRACE_MS = 10_000;

/** The argv prefix that makes a component die with its supervisor, or [] where setpriv cannot (tested once). */
let deathSignalPrefix: readonly string[] | undefined;
function parentDeathPrefix(): readonly string[] {
  if (deathSignalPrefix === undefined) {
    const prefix = ["setpriv", "--pdeathsig", "SIGTERM", "--"];
    const probe = spawnSync(prefix[0], [...prefix.slice(1), "true"], { stdio: "ignore" });
    deathSignalPrefix = probe.status === 0 ? prefix : [];
  }
  return deathSignalPrefix;
}

/** Starts, watches and stops component processes. */
export class Supervisor {
  readonly #managed: Managed[] = [];
  readonly #onEvent: (event: SupervisorEvent) => void;
  #stopping = false;

  constructor(onEvent: (event: SupervisorEvent) => void = () => {}) {
    this.#onEvent = onEvent;
  }

  /** Starts `spec` and keeps it running until {@link stopAll}. */
  start(spec: ComponentSpec): void {
    const m: Managed = { spec, restarts: 0, backoffMs: 1000, startedAt: 0 };
    this.#managed.push(m);
    this.#spawn(m);
  }

  /** True if components get SIGTERM from the kernel when the supervisor's process dies (setpriv --pdeathsig). */
  get parentDeathSignal(): boolean {
    return parentDeathPrefix().length > 0;
  }

  /** The names of the components started, in start order. */
  names(): string[] {
    return this.#managed.map((m) => m.spec.name);
  }

  /** The pid of a running component, by name. */
  pidOf(name: string): number | undefined {
    return this.#managed.find((m) => m.spec.name === name)?.child?.pid;
  }

  /** How often `name` was restarted. */
  restartsOf(name: string): number {
    return this.#managed.find((m) => m.spec.name === name)?.restarts ?? 0;
  }

  /** Stops every component, last started first; resolves when all have exited. */
  async stopAll(): Promise<void> {
    this.#stopping = true;
    for (const m of [...this.#managed].reverse()) {
      clearTimeout(m.timer);
      await stopChild(m.child);
    }
  }

  #spawn(m: Managed): void {
    const fd = openSync(m.spec.logFile, "a");
    const [cmd, ...args] = [...parentDeathPrefix(), ...m.spec.argv];
    const child = spawn(cmd, args, { stdio: ["ignore", fd, fd], env: { ...process.env, ...m.spec.env } });
    closeSync(fd);
    m.child = child;
    m.startedAt = Date.now();
    child.once("spawn", () =>
      this.#onEvent({ type: "started", name: m.spec.name, pid: child.pid ?? 0, restarts: m.restarts }),
    );
    child.once("error", () => undefined); // reported through "exit" (code null), which schedules the restart
    child.once("exit", (code, signal) => {
      m.child = undefined;
      if (this.#stopping) {
        this.#onEvent({ type: "exited", name: m.spec.name, code, signal });
        return;
      }
      if (Date.now() - m.startedAt > STABLE_MS) m.backoffMs = 1000;
      const delay = m.backoffMs;
      m.backoffMs = Math.min(MAX_BACKOFF_MS, m.backoffMs * 2);
      this.#onEvent({ type: "exited", name: m.spec.name, code, signal, restartInMs: delay });
      m.timer = setTimeout(() => {
        m.restarts++;
        if (!this.#stopping) this.#spawn(m);
      }, delay);
    });
  }
}

async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}
