/**
 * The source side's handle on the target VMM process (migration-target.ts): spawns it, waits until it listens, and
 * turns its JSON lines into a console, a "running" promise and a shutdown promise.
 *
 *   spawnTarget(): mints both sides' per-migration certificates (as the handlers do), then
 *                 --node migration-target.ts '<options>' '<tls>'--> {"kind":"listening"} --> TargetPeer.destination
 *                                                {"kind":"serial"}    --> TargetPeer.console.feed
 *                                                {"kind":"running"}   --> TargetPeer.running resolves
 *                                                {"kind":"failed"}    --> TargetPeer.running rejects
 *                                                {"kind":"shutdown"}  --> TargetPeer.shutdown resolves
 *                                                {"kind":"error"}     --> TargetPeer.errors
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mintMigrationCertificate } from "@kvt/certs";
import type { MigrationTarget, MigrationTlsIdentity } from "@kvt/migration";
import type { ShutdownEvent } from "@kvt/vmm";
import type { DemoOptions } from "./demo-guest.ts";
import { GuestConsole } from "./guest-console.ts";
import type { TargetMessage } from "./migration-target.ts";

/**
 * The migration options of the lane's live migrations (a guest on our VMM moved to a second VMM process): no
 * bandwidth cap, auto-converge, and timeouts sized for nested KVM under TCG.
 */
export const LANE_MIGRATION_OPTIONS = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 300,
  allowAutoConverge: true,
  completionTimeoutSec: 300,
  progressTimeoutSec: 150,
  ioTimeoutMs: 60_000,
} as const;

const TARGET_SCRIPT = new URL("./migration-target.ts", import.meta.url).pathname;

/** The source's options for a move to `target`: the lane's, over TLS with the identity pinned there. */
export function laneMigrationOptions(target: TargetPeer): typeof LANE_MIGRATION_OPTIONS & {
  tls: MigrationTlsIdentity;
} {
  return { ...LANE_MIGRATION_OPTIONS, tls: target.sourceTls };
}

/** A target VMM process with its guest's console. */
export interface TargetPeer {
  readonly destination: MigrationTarget;
  /** The source's TLS identity for this target (its certificate is pinned there): the source's options' `tls`. */
  readonly sourceTls: MigrationTlsIdentity;
  readonly console: GuestConsole;
  /** Resolves with the target's stats once the guest runs there; rejects when the incoming migration failed. */
  readonly running: Promise<Record<string, unknown>>;
  readonly shutdown: Promise<ShutdownEvent>;
  writeSerial(text: string): void;
  /** Ctrl-Alt-Del on the target guest's PS/2 keyboard; a refusal shows up in `errors`. */
  sendCtrlAltDel(): void;
  /** Command failures the target reported. */
  readonly errors: readonly string[];
  /** Stops the target's VM and waits for its process to exit. */
  stop(): Promise<void>;
}

function settleOn(
  child: ChildProcess,
  console: GuestConsole,
  errors: string[],
): {
  listening: Promise<MigrationTarget>;
  running: Promise<Record<string, unknown>>;
  shutdown: Promise<ShutdownEvent>;
} {
  let onListening: (d: MigrationTarget) => void = () => {};
  let onRunning: (s: Record<string, unknown>) => void = () => {};
  let onFailed: (e: Error) => void = () => {};
  let onShutdown: (e: ShutdownEvent) => void = () => {};
  const listening = new Promise<MigrationTarget>((resolve, reject) => {
    onListening = resolve;
    child.on("exit", (code) => reject(new Error(`the target process exited (${code}) before listening`)));
  });
  const running = new Promise<Record<string, unknown>>((resolve, reject) => {
    onRunning = resolve;
    onFailed = reject;
    child.on("exit", (code) => reject(new Error(`the target process exited (${code})`)));
  });
  running.catch(() => {}); // observed by the caller; never an unhandled rejection here
  const shutdown = new Promise<ShutdownEvent>((resolve) => {
    onShutdown = resolve;
  });
  if (!child.stdout) throw new Error("the target process has no stdout");
  createInterface({ input: child.stdout }).on("line", (line) => {
    let m: TargetMessage;
    try {
      m = JSON.parse(line) as TargetMessage;
    } catch {
      process.stdout.write(`target: ${line}\n`); // a log line of the target process, not a message
      return;
    }
    if (m.kind === "listening") onListening(m.destination);
    else if (m.kind === "serial") console.feed(Buffer.from(m.base64, "base64"));
    else if (m.kind === "running") onRunning(m.stats);
    else if (m.kind === "failed") onFailed(new Error(`incoming migration failed: ${m.reason}`));
    else if (m.kind === "shutdown") onShutdown({ reason: m.reason as ShutdownEvent["reason"], code: m.code });
    else if (m.kind === "error") errors.push(m.message);
  });
  return { listening, running, shutdown };
}

/** Starts a target VMM process for a demo guest made with `options` and waits until it listens. */
export async function spawnTarget(options: DemoOptions = {}): Promise<TargetPeer> {
  const [source, target] = await Promise.all([
    mintMigrationCertificate("kubevirt-migration-lane-source"),
    mintMigrationCertificate("kubevirt-migration-lane-target"),
  ]);
  const tls = { tls: { certificate: target.certPem, key: target.keyPem }, sourceCertificate: source.certPem };
  const child = spawn(process.execPath, [TARGET_SCRIPT, JSON.stringify(options), JSON.stringify(tls)], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const console = new GuestConsole();
  const errors: string[] = [];
  const { listening, running, shutdown } = settleOn(child, console, errors);
  const destination = await listening;
  const command = (c: object): void => {
    child.stdin?.write(`${JSON.stringify(c)}\n`);
  };
  return {
    destination,
    sourceTls: { certificate: source.certPem, key: source.keyPem },
    console,
    running,
    shutdown,
    errors,
    writeSerial: (text) => command({ serial: text }),
    sendCtrlAltDel: () => command({ ctrlAltDel: true }),
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
      command({ stop: true });
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
