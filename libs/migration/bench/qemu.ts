/**
 * The same cases on QEMU (Debian qemu-system-x86_64, KVM, 1 vCPU) booting the same PVH test guest ELF with
 * `-kernel`, migrated over loopback with QMP `migrate` (auto-converge on, the same downtime budget, bandwidth
 * unlimited), for `--with-qemu`. Serial output goes to files and is compared with the native unmigrated run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "@kvt/runtime";
import { testGuestPath } from "@kvt/vmm";

/** The subset of a bench case QEMU needs. */
export interface QemuCaseInput {
  readonly memoryBytes: number;
  readonly cmdline: string;
  readonly warmLines: number;
  readonly expectedOutput?: string;
}

const QEMU = "/usr/bin/qemu-system-x86_64";

/** A minimal QMP client over a unix socket: one command at a time, events ignored. */
class Qmp {
  readonly #sock: ReturnType<typeof connect>;
  #buf = "";
  #waiting?: (v: Record<string, unknown>) => void;
  #closed = false;

  private constructor(sock: ReturnType<typeof connect>) {
    this.#sock = sock;
    sock.setEncoding("utf8");
    const closed = (): void => {
      this.#closed = true;
      this.#waiting?.({ error: { desc: "QMP connection closed" } });
    };
    sock.on("close", closed).on("error", closed);
    sock.on("data", (d: string) => {
      this.#buf += d;
      let nl = this.#buf.indexOf("\n");
      while (nl >= 0) {
        const msg = JSON.parse(this.#buf.slice(0, nl)) as Record<string, unknown>;
        this.#buf = this.#buf.slice(nl + 1);
        if (("return" in msg || "error" in msg || "QMP" in msg) && this.#waiting) this.#waiting(msg);
        nl = this.#buf.indexOf("\n");
      }
    });
  }

  /** True once the socket closed (QEMU exited). */
  get closed(): boolean {
    return this.#closed;
  }

  static async open(path: string): Promise<Qmp> {
    for (let i = 0; i < 200 && !existsSync(path); i++) await sleep(25);
    const sock = connect(path);
    const q = new Qmp(sock);
    const greeting = await q.#next();
    if (greeting.error) throw new Error("QMP connection failed");
    await q.run("qmp_capabilities");
    return q;
  }

  #next(): Promise<Record<string, unknown>> {
    if (this.#closed) return Promise.resolve({ error: { desc: "QMP connection closed" } });
    return new Promise((r) => {
      this.#waiting = r;
    });
  }

  async run(execute: string, args?: object): Promise<Record<string, unknown>> {
    const reply = this.#next();
    this.#sock.write(`${JSON.stringify({ execute, ...(args ? { arguments: args } : {}) })}\n`);
    const r = await reply;
    if (r.error) throw new Error(`${execute}: ${JSON.stringify(r.error)}`);
    return (r.return ?? {}) as Record<string, unknown>;
  }

  close(): void {
    this.#sock.destroy();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function launch(dir: string, name: string, c: QemuCaseInput, incomingPort?: number): ChildProcess {
  const args = [
    "-enable-kvm",
    "-cpu",
    "host,-arch-capabilities",
    "-machine",
    "pc",
    "-smp",
    "1",
    "-m",
    `${c.memoryBytes / 2 ** 20}M`,
    "-nodefaults",
    "-nographic",
    "-no-reboot",
    "-display",
    "none",
    "-kernel",
    testGuestPath(),
    "-append",
    c.cmdline,
    "-serial",
    `file:${join(dir, `${name}.log`)}`,
    "-device",
    "isa-debug-exit,iobase=0xf4,iosize=4",
    "-qmp",
    `unix:${join(dir, `${name}.qmp`)},server=on,wait=off`,
    ...(incomingPort ? ["-incoming", `tcp:127.0.0.1:${incomingPort}`] : []),
  ];
  return spawn(QEMU, args, { stdio: "ignore" });
}

/** Lines the guest (not the BIOS) printed so far. */
function lines(path: string): number {
  if (!existsSync(path)) return 0;
  return readFileSync(path, "latin1")
    .split("\n")
    .filter((l) => l.startsWith("kvt-guest")).length;
}

/** The first line where two console outputs differ, for the report. */
function firstDifference(got: string, want: string): string {
  const a = got.split("\n");
  const b = want.split("\n");
  const i = a.findIndex((line, k) => line !== b[k]);
  const at = i < 0 ? a.length : i;
  return `line ${at + 1}: got ${JSON.stringify(a[at] ?? "<end>")}, want ${JSON.stringify(b[at] ?? "<end>")}`;
}

function exited(p: ChildProcess): Promise<void> {
  return p.exitCode !== null || p.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => p.once("exit", () => r()));
}

/** Runs one case on QEMU; the figures QEMU's query-migrate reports, or `{error}` when QEMU failed. */
export async function qemuCase(c: QemuCaseInput): Promise<Record<string, unknown>> {
  if (!existsSync(QEMU)) return { skipped: "qemu-system-x86_64 not installed (apt-get install -y qemu-system-x86)" };
  try {
    return await runQemuCase(c);
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
}

async function runQemuCase(c: QemuCaseInput): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), "kvt-qemu-mig-"));
  const port = await freePort();
  const source = launch(dir, "source", c);
  const target = launch(dir, "target", c, port);
  try {
    while (lines(join(dir, "source.log")) < c.warmLines) {
      if (source.exitCode !== null) return { error: "source QEMU exited early" };
      await sleep(10);
    }
    const qs = await Qmp.open(join(dir, "source.qmp"));
    await qs.run("migrate-set-capabilities", { capabilities: [{ capability: "auto-converge", state: true }] });
    await qs.run("migrate-set-parameters", { "downtime-limit": 20, "max-bandwidth": 100 * 2 ** 30 });
    const t0 = performance.now();
    await qs.run("migrate", { uri: `tcp:127.0.0.1:${port}` });
    let info: Record<string, unknown> = {};
    for (;;) {
      if (source.exitCode !== null || source.signalCode !== null || qs.closed) {
        // The workload ran to its end (isa-debug-exit) while QEMU was still iterating: it never converged.
        return {
          totalSeconds: (performance.now() - t0) / 1000,
          converged: false,
          failureReason: `the guest finished before QEMU converged (last status ${String(info.status)})`,
          iterations: ((info.ram ?? {}) as Record<string, number>)["dirty-sync-count"] ?? 0,
        };
      }
      try {
        info = await qs.run("query-migrate");
      } catch (e) {
        if (qs.closed) continue; // QEMU exited between the check and the query: reported above
        throw e;
      }
      if (info.status === "completed" || info.status === "failed" || info.status === "cancelled") break;
      await sleep(5);
    }
    qs.close();
    const ok = info.status === "completed";
    if (ok) {
      source.kill("SIGKILL");
      await exited(target);
    } else {
      await exited(source);
    }
    const raw =
      readFileSync(join(dir, "source.log"), "latin1") + (ok ? readFileSync(join(dir, "target.log"), "latin1") : "");
    const out = raw.slice(Math.max(0, raw.indexOf("kvt-guest start"))); // drop SeaBIOS's banner
    const ram = (info.ram ?? {}) as Record<string, number>;
    const totalSeconds = Number(info["total-time"] ?? 0) / 1000;
    return {
      totalSeconds,
      downtimeMs: Number(info.downtime ?? Number.NaN),
      throughputBytesPerSec: totalSeconds > 0 ? Math.round((ram.transferred ?? 0) / totalSeconds) : 0,
      bytesSent: ram.transferred ?? 0,
      iterations: ram["dirty-sync-count"] ?? 0,
      converged: ok,
      guestVerified: c.expectedOutput !== undefined && out === c.expectedOutput,
      ...(c.expectedOutput !== undefined && out !== c.expectedOutput
        ? { outputDiff: firstDifference(out, c.expectedOutput) }
        : {}),
    };
  } finally {
    source.kill("SIGKILL");
    target.kill("SIGKILL");
    await Promise.all([exited(source), exited(target)]);
    rmSync(dir, { recursive: true, force: true });
  }
}
