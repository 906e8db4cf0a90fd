/**
 * The bench's handle on one launcher pod process (network-pod.ts) inside a pod's network namespace: starts it with
 * nsenter (as the process-kubelet starts a container in its sandbox), turns its JSON lines into the guest's console
 * text and promises, and sends it commands.
 *
 *   start() --nsenter --net=NETNS node network-pod.ts CONFIG--> {"kind":"wired"}      --> wired
 *                                                               {"kind":"running"}    --> running
 *                                                               {"kind":"listening"}  --> listening (a target)
 *                                                               {"kind":"console"}    --> console text
 *                                                               {"kind":"migrated"}   --> migrate() resolves
 *                                                               {"kind":"datapath"}   --> dataPath() resolves
 *                                                               {"kind":"error"}/exit --> every waiter rejects
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { MigrationResult, MigrationTarget, MigrationTlsIdentity } from "../src/machine/machine.ts";
import type { NetworkPodConfig } from "./network-pod.ts";

const POD_SCRIPT = new URL("./network-pod.ts", import.meta.url).pathname;

interface PodMessage {
  readonly kind: string;
  readonly base64?: string;
  readonly target?: MigrationTarget;
  readonly result?: MigrationResult;
  readonly message?: string;
  readonly state?: string;
  readonly reason?: string;
  readonly vhost?: boolean;
}

/** A running pod process. */
export class PodPeer {
  readonly #child: ChildProcess;
  readonly #name: string;
  #console = "";
  #failure: Error | undefined;
  readonly #seen = new Map<string, PodMessage>();
  #waiters: { kind: string; resolve: (m: PodMessage) => void; reject: (e: Error) => void }[] = [];
  readonly exited: Promise<void>;

  private constructor(child: ChildProcess, name: string) {
    this.#child = child;
    this.#name = name;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    createInterface({ input: child.stdout! }).on("line", (line) => this.#onLine(line));
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    child.once("exit", (code, signal) => {
      this.#fail(new Error(`${name}: the pod process exited (${code ?? signal}): ${stderr.trim().slice(-600)}`));
    });
  }

  /** Starts the pod process for `config` inside the network namespace at `netnsPath`. */
  static start(name: string, netnsPath: string, config: NetworkPodConfig): PodPeer {
    const child = spawn("nsenter", [`--net=${netnsPath}`, "--", process.execPath, POD_SCRIPT, JSON.stringify(config)], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    return new PodPeer(child, name);
  }

  /** The guest's console output so far (latin1). */
  get console(): string {
    return this.#console;
  }

  /** The first message of `kind` (already seen or still to come); rejects when the pod fails first or on timeout. */
  next(kind: string, timeoutMs: number): Promise<PodMessage> {
    const seen = this.#seen.get(kind);
    if (seen) return Promise.resolve(seen);
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.#name}: no "${kind}" in ${timeoutMs} ms`)), timeoutMs);
      this.#waiters.push({
        kind,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  /** Waits until the console matches `re`; returns the match. Rejects when the pod fails or on timeout. */
  async waitConsole(re: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.#console.match(re);
      if (m) return m;
      if (this.#failure) throw this.#failure;
      if (Date.now() > deadline)
        throw new Error(`${this.#name}: no ${re} on the console in ${timeoutMs} ms: ${this.#tail()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Asks the source to live-migrate to `target` (over TLS with `tls`, its identity); resolves with the outcome. */
  async migrate(target: MigrationTarget, timeoutMs: number, tls?: MigrationTlsIdentity): Promise<MigrationResult> {
    this.#seen.delete("migrated");
    this.#send({ migrate: target, ...(tls ? { tls } : {}) });
    const m = await this.next("migrated", timeoutMs);
    return m.result ?? { ok: false, failureReason: "no result", totalSeconds: 0, bytesSent: 0, iterations: 0 };
  }

  /** Whether the kernel's vhost-net carries this pod's guest's frames (a vhost worker its VMM owns). */
  async dataPath(): Promise<"vhost-net" | "userspace"> {
    this.#seen.delete("datapath");
    this.#send({ datapath: true });
    return (await this.next("datapath", 30_000)).vhost ? "vhost-net" : "userspace";
  }

  /** Types `text` on the guest's serial console (keep a line within the UART's 64-byte FIFO). */
  type(text: string): void {
    this.#send({ console: text });
  }

  /** Stops the guest and the process (SIGKILL after 15 s); waits for its exit. */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    this.#send({ stop: true });
    const timer = setTimeout(() => this.kill(), 15_000);
    await this.exited;
    clearTimeout(timer);
  }

  /** SIGKILL (the guest's QEMU child, if any, goes with the pod's namespace cleanup). */
  kill(): void {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill("SIGKILL");
  }

  #send(command: object): void {
    this.#child.stdin?.write(`${JSON.stringify(command)}\n`);
  }

  #tail(): string {
    return JSON.stringify(this.#console.slice(-600));
  }

  #onLine(line: string): void {
    let m: PodMessage;
    try {
      m = JSON.parse(line) as PodMessage;
    } catch {
      return; // a log line of the pod process, not a message
    }
    if (m.kind === "console") {
      this.#console += Buffer.from(m.base64 ?? "", "base64").toString("latin1");
      return;
    }
    if (m.kind === "error") {
      this.#fail(new Error(`${this.#name}: ${m.message ?? "failed"}`));
      return;
    }
    this.#seen.set(m.kind, m);
    this.#waiters = this.#waiters.filter((w) => {
      if (w.kind !== m.kind) return true;
      w.resolve(m);
      return false;
    });
  }

  #fail(err: Error): void {
    this.#failure ??= err;
    for (const w of this.#waiters.splice(0)) w.reject(this.#failure);
  }
}
