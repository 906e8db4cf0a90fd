/**
 * A virt-launcher process started the way the process-kubelet starts a launcher Pod's `compute` container
 * (tools/local-cluster/src/kubelet/container-spec.ts, the Pod from virt-controller's pod-template.ts), and driven
 * the way virt-handler drives it: through @kvt/launcher-rpc's LauncherClient on the socket it creates.
 *
 *   node --max-semi-space-size=1 --v8-pool-size=1 apps/virt-launcher/src/main.ts --namespace NS --name N --uid UID
 *     env: POD_NAME, POD_NAMESPACE, POD_UID, NODE_NAME, KUBEVIRT_POD_DIR (private), KUBEVIRT_SOCKET_DIR (the node's),
 *          NODE_COMPILE_CACHE (the node's), KVT_VOLUME_MOUNTS (the pod's volumes, when it has some), PATH, HOME
 *   <socket dir>/launcher-<key>.sock appears --> LauncherClient(socket).info() names this launcher's pod
 *   openConsole() --> raw serial bytes (scrollback first) --> GuestConsole; typed lines go back the same way
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Duplex } from "node:stream";
import { isLauncherSocketName, LauncherClient } from "@kvt/launcher-rpc";
import type { ConsolePeer } from "./check-runner.ts";
import { GuestConsole } from "./guest-console.ts";

/** The launcher's entry point, as the process-kubelet runs it when no bundled launcher image is built. */
export const LAUNCHER_ENTRY = new URL("../../../apps/virt-launcher/src/main.ts", import.meta.url).pathname;
/** The process-kubelet's Node flags for launchers (container-spec.ts NODE_LAUNCHER_FLAGS). */
const NODE_LAUNCHER_FLAGS = ["--max-semi-space-size=1", "--v8-pool-size=1", "--optimize-for-size"];
/** Lines of the launcher's own log kept for a failure's detail. */
const LOG_TAIL = 30;

/** Where a launcher runs: its "node" (socket directory, compile cache) and the VMI it serves. */
export interface LauncherPlacement {
  readonly nodeName: string;
  /** The node's directory: sockets/, compile-cache/ and pods/<pod uid>/ go under it. */
  readonly nodeDir: string;
  readonly vmi: { readonly namespace: string; readonly name: string; readonly uid: string };
  /** The pod's volumes as the process-kubelet hands them over (KVT_VOLUME_MOUNTS: mountPath -> host path). */
  readonly volumeMounts?: readonly { mountPath: string; hostPath: string }[];
}

/** A running launcher process and the client that drives it. */
export interface LauncherPeer {
  readonly podName: string;
  readonly client: LauncherClient;
  /** Resolves with the exit code (a signal counts as null) when the process ends. */
  readonly exited: Promise<number | null>;
  /** The launcher's last log lines (stdout and stderr). */
  logTail(): string;
  /** SIGKILL unless it already exited; waits for the exit. */
  kill(): Promise<void>;
}

/** Starts a launcher for `placement.vmi` as a Pod on `placement.nodeName` would, and waits for its socket. */
export async function startLauncher(placement: LauncherPlacement, socketTimeoutMs: number): Promise<LauncherPeer> {
  const { vmi, nodeName, nodeDir } = placement;
  const podUid = randomUUID();
  const podName = `virt-launcher-${vmi.name}-${podUid.slice(0, 5)}`;
  const socketDir = join(nodeDir, "sockets");
  const podDir = join(nodeDir, "pods", podUid);
  const compileCache = join(nodeDir, "compile-cache");
  for (const d of [socketDir, podDir, compileCache]) mkdirSync(d, { recursive: true });
  const before = new Set(readdirSync(socketDir));
  const child = spawn(
    process.execPath,
    [...NODE_LAUNCHER_FLAGS, LAUNCHER_ENTRY, ...["--namespace", vmi.namespace, "--name", vmi.name, "--uid", vmi.uid]],
    {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: process.env.HOME ?? "/tmp",
        KUBEVIRT_POD_DIR: podDir,
        KUBEVIRT_SOCKET_DIR: socketDir,
        NODE_NAME: nodeName,
        POD_NAME: podName,
        POD_NAMESPACE: vmi.namespace,
        POD_UID: podUid,
        NODE_COMPILE_CACHE: compileCache,
        ...(placement.volumeMounts ? { KVT_VOLUME_MOUNTS: JSON.stringify(placement.volumeMounts) } : {}),
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const log: string[] = [];
  const keep = (line: string): void => {
    log.push(line);
    if (log.length > LOG_TAIL) log.shift();
  };
  if (child.stdout) createInterface({ input: child.stdout }).on("line", keep);
  if (child.stderr) createInterface({ input: child.stderr }).on("line", keep);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const logTail = (): string => log.slice(-8).join(" | ");
  const kill = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  };
  try {
    const socket = await newSocket(socketDir, before, child, socketTimeoutMs);
    const client = new LauncherClient(socket, { timeoutMs: 30_000 });
    const info = await client.info();
    if (info.pod.uid !== podUid) throw new Error(`the socket ${socket} is pod ${info.pod.uid}'s, not ${podUid}`);
    return { podName, client, exited, logTail, kill };
  } catch (err) {
    await kill();
    throw new Error(`${(err as Error).message}; launcher log: ${logTail()}`, { cause: err });
  }
}

async function newSocket(dir: string, before: Set<string>, child: ChildProcess, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const fresh = readdirSync(dir).find((f) => isLauncherSocketName(f) && !before.has(f));
    if (fresh) return join(dir, fresh);
    if (child.exitCode !== null) throw new Error(`the launcher exited (${child.exitCode}) before serving`);
    if (Date.now() > deadline) throw new Error(`no launcher socket in ${dir} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** A launcher's serial console as the checks use it: output into a GuestConsole, typed lines into the stream. */
export interface LauncherConsole extends ConsolePeer {
  /** Resolves when the launcher ends the stream (its guest is gone or migrated away). */
  readonly closed: Promise<void>;
  close(): void;
}

/** Attaches to the console of the launcher behind `client` (its scrollback arrives first). */
export async function attachConsole(client: LauncherClient): Promise<LauncherConsole> {
  const stream: Duplex = await client.openConsole({ timeoutMs: 30_000 });
  const console = new GuestConsole();
  stream.on("data", (chunk: Buffer) => console.feed(chunk));
  const closed = new Promise<void>((resolve) => {
    stream.on("close", () => resolve());
    stream.on("end", () => resolve());
    stream.on("error", () => resolve());
  });
  return {
    console,
    closed,
    writeSerial: (text) => void stream.write(text),
    close: () => void stream.destroy(),
  };
}
