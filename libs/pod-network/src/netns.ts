/**
 * Where the wiring's commands run: a network namespace, reached either as this process's own (the process-kubelet's
 * root launcher wires its own pod) or by entering another process's (virt-handler wires an unprivileged launcher's
 * pod through `/proc/<launcher pid>/ns/net`, as KubeVirt's handler does). The wiring (masquerade.ts, bridge.ts)
 * only ever talks to a {@link Netns}, so one piece of code serves both.
 *
 *   ownNetns()                    ip ... | nft -f - | write /proc/sys/net/...         (this process's namespace)
 *   enteredNetns(/proc/P/ns/net)  nsenter --net=/proc/P/ns/net -- ip ... | nft -f - | node -e <write /proc/sys/...>
 *
 * A sysctl under /proc/sys/net belongs to the namespace of the process that opens it, so an entered namespace's
 * sysctl is written by a short Node process started inside it (the handler's image has Node, not procps).
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";

/** A command of the wiring failed; the message names it and carries its stderr. */
export class PodNetworkWiringError extends Error {
  override name = "PodNetworkWiringError";
}

/**
 * The wiring failed after it had changed the pod's network past undoing (the bridge binding's eth0 gave its address
 * up): no retry can rebuild it, so the VMI fails, as KubeVirt's handler fails it on a CriticalNetworkError.
 */
export class CriticalNetworkError extends PodNetworkWiringError {
  override name = "CriticalNetworkError";
}

/**
 * The programs the plumbing runs in a namespace (iproute2's ip and bridge, nftables' nft); an entered namespace
 * also needs util-linux's nsenter. virt-handler's image carries each (tools/oci-images NET_TOOLS).
 */
export const PLUMBING_PROGRAMS = ["ip", "bridge", "nft"] as const;

/** The capability bit of CAP_NET_ADMIN (linux/capability.h). */
const CAP_NET_ADMIN = 12;

/**
 * True when CAP_NET_ADMIN is in the effective set of a /proc/<pid>/status text (`CapEff:`, hexadecimal). A status
 * without a readable CapEff line holds nothing.
 */
export function holdsNetAdmin(procStatus: string): boolean {
  const hex = /^CapEff:\s*([0-9a-fA-F]+)\s*$/m.exec(procStatus)?.[1];
  if (hex === undefined) return false;
  return ((BigInt(`0x${hex}`) >> BigInt(CAP_NET_ADMIN)) & 1n) === 1n;
}

/** A network namespace the wiring runs commands in. */
export interface Netns {
  /** What the namespace is, for messages: `own` or the namespace file entered. */
  readonly description: string;
  /** Runs `program args` there (stdin: `input`); resolves with its stdout, rejects with a PodNetworkWiringError. */
  exec(program: string, args: readonly string[], input?: string): Promise<string>;
  /** Sets sysctl `name` (`net.ipv4.ip_forward`; only `net.*`, which are per namespace) to `value` there. */
  setSysctl(name: string, value: string): Promise<void>;
}

/** The sysctl's file under /proc/sys; a PodNetworkWiringError for a name outside net.* or with odd characters. */
export function sysctlPath(name: string): string {
  if (!/^net(\.[A-Za-z0-9_-]+)+$/.test(name))
    throw new PodNetworkWiringError(`"${name}" is not a per-namespace sysctl (net.*)`);
  return `/proc/sys/${name.replaceAll(".", "/")}`;
}

/** This process's own network namespace. */
export function ownNetns(): Netns {
  return {
    description: "own",
    exec: (program, args, input) => runProgram(program, args, input),
    setSysctl: (name, value) => {
      const path = sysctlPath(name);
      try {
        writeFileSync(path, `${value}\n`);
      } catch (err) {
        throw new PodNetworkWiringError(`cannot set ${name}: ${(err as Error).message}`, { cause: err });
      }
      return Promise.resolve();
    },
  };
}

/**
 * The command line of the entered namespace's sysctl writer: this runtime's own binary (no shell or sysctl in the
 * handler's image) evaluating a one-line script, `path` and `value` its arguments: Node's `-e` (process.argv[1], [2])
 * or Deno's `eval` (Deno.args).
 */
export function sysctlWriter(runtime: string, path: string, value: string, deno = "Deno" in globalThis): string[] {
  return deno
    ? [runtime, "eval", 'Deno.writeTextFileSync(Deno.args[0], Deno.args[1] + "\\n")', path, value]
    : [runtime, "-e", 'require("node:fs").writeFileSync(process.argv[1], process.argv[2] + "\\n")', path, value];
}

/**
 * The namespace of file `nsPath` (`/proc/<pid>/ns/net`), entered with util-linux's nsenter for each command (it
 * needs CAP_SYS_ADMIN: virt-handler's privileged container). `node` is the runtime binary (Node or Deno) that
 * writes sysctls there.
 */
export function enteredNetns(nsPath: string, node: string = process.execPath): Netns {
  const enter = [`--net=${nsPath}`, "--"];
  return {
    description: nsPath,
    exec: (program, args, input) => runProgram("nsenter", [...enter, program, ...args], input),
    setSysctl: async (name, value) => {
      await runProgram("nsenter", [...enter, ...sysctlWriter(node, sysctlPath(name), value)]);
    },
  };
}

/** Runs a program to its end; stdout on success, a PodNetworkWiringError with the command and stderr otherwise. */
export function runProgram(program: string, args: readonly string[], input?: string): Promise<string> {
  const what = `${program} ${args.join(" ")}`;
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (e) => reject(new PodNetworkWiringError(`cannot run ${program}: ${e.message}`, { cause: e })));
    child.on("close", (code) =>
      code === 0
        ? resolve(stdout)
        : reject(new PodNetworkWiringError(`${what} failed: ${stderr.trim() || `exit code ${code}`}`)),
    );
    child.stdin.on("error", () => {}); // a program that exits without reading its input: its exit code tells
    child.stdin.end(input ?? "");
  });
}
