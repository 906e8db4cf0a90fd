/**
 * Every listening socket of one local cluster, found the way `ss -lxtp` finds them, from /proc:
 *
 *   the cluster's processes   every process whose command line or working directory names the cluster's data
 *                             directory, and all their descendants (launchers, QEMU)
 *   their socket inodes       /proc/<pid>/fd/* -> "socket:[<inode>]"
 *   TCP listeners             /proc/<pid>/net/tcp and tcp6 (the process's own network namespace: a launcher in
 *                             a pod network sees its pod's), state 0A (LISTEN), matched by inode
 *   unix listeners            /proc/<pid>/net/unix, flag __SO_ACCEPTCON (00010000), matched by inode
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

/** A process of the cluster. */
export interface ClusterProcess {
  readonly pid: number;
  readonly argv: readonly string[];
}

/** One listening socket and the process holding it. */
export type ListeningSocket =
  | { readonly kind: "tcp"; readonly address: string; readonly port: number; readonly process: ClusterProcess }
  | { readonly kind: "unix"; readonly path: string; readonly process: ClusterProcess };

interface ProcEntry extends ClusterProcess {
  readonly ppid: number;
  readonly cwd: string;
}

function readProc(pid: string): ProcEntry | undefined {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    return { pid: Number(pid), argv, ppid, cwd: readlinkSync(`/proc/${pid}/cwd`) };
  } catch {
    // The process ended while we looked.
    return undefined;
  }
}

/** The cluster's processes: those naming `dataDir` in their command line or working directory, and descendants. */
export function clusterProcesses(dataDir: string): ClusterProcess[] {
  const all = readdirSync("/proc")
    .filter((e) => /^\d+$/.test(e))
    .flatMap((e) => readProc(e) ?? []);
  const mine = new Map<number, ProcEntry>();
  for (const p of all) if (p.argv.some((a) => a.includes(dataDir)) || p.cwd.startsWith(dataDir)) mine.set(p.pid, p);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (!mine.has(p.pid) && mine.has(p.ppid)) {
        mine.set(p.pid, p);
        grew = true;
      }
    }
  }
  return [...mine.values()].map(({ pid, argv }) => ({ pid, argv }));
}

function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m?.[1]) out.add(m[1]);
      } catch {
        // The descriptor was closed while we looked.
      }
    }
  } catch {
    // The process ended.
  }
  return out;
}

function lines(file: string): string[] {
  try {
    return readFileSync(file, "utf8").split("\n").slice(1).filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * `0100007F` -> `127.0.0.1`; 32 hex digits (four host-order words) -> an uncompressed IPv6 address
 * (`0:0:0:0:0:0:0:1`).
 */
export function decodeProcAddress(hex: string): string {
  const words = hex.match(/.{8}/g) ?? [];
  const bytes = words.flatMap((w) => (w.match(/../g) ?? []).reverse().map((b) => Number.parseInt(b, 16)));
  if (bytes.length === 4) return bytes.join(".");
  return Array.from({ length: 8 }, (_, i) => (((bytes[2 * i] ?? 0) << 8) | (bytes[2 * i + 1] ?? 0)).toString(16)).join(
    ":",
  );
}

/** Every TCP and unix listening socket held by the cluster's processes. */
export function listeningSockets(dataDir: string): ListeningSocket[] {
  const out: ListeningSocket[] = [];
  const seen = new Set<string>();
  for (const process of clusterProcesses(dataDir)) {
    const inodes = socketInodes(process.pid);
    if (inodes.size === 0) continue;
    for (const table of ["tcp", "tcp6"]) {
      for (const line of lines(`/proc/${process.pid}/net/${table}`)) {
        const f = line.trim().split(/\s+/);
        const [local, state, inode] = [f[1] ?? "", f[3], f[9] ?? ""];
        if (state !== "0A" || !inodes.has(inode) || seen.has(inode)) continue;
        seen.add(inode);
        const [addr = "", port = "0"] = local.split(":");
        out.push({ kind: "tcp", address: decodeProcAddress(addr), port: Number.parseInt(port, 16), process });
      }
    }
    for (const line of lines(`/proc/${process.pid}/net/unix`)) {
      const f = line.trim().split(/\s+/);
      const [flags, inode, path] = [f[3], f[6] ?? "", f[7]];
      if (flags !== "00010000" || !inodes.has(inode) || seen.has(inode)) continue;
      seen.add(inode);
      out.push({ kind: "unix", path: path ?? "(unnamed)", process });
    }
  }
  return out;
}
