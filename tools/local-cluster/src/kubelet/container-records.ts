/**
 * The process-kubelet's runtime records: what a container runtime (containerd's metadata store and shims) keeps so
 * that a restarted kubelet finds the containers it started instead of starting them again. One JSON file per
 * container under the pod's directory, written when the process starts:
 *
 *   <podDir>/containers/<container>.json   {version, podUid, container, pid, startTime, startedAt, exitFile, graceSeconds}
 *   <podDir>/containers/<container>.exit   the exit code, written by the shim when the container's process ends
 *
 * A record names a live container only when a process with `pid` exists AND its start time (field 22 of
 * /proc/<pid>/stat, clock ticks since boot) equals `startTime`: a recycled pid never passes for the container.
 * The shim (`sh`, the container's process group leader, standing in for containerd-shim) runs the program and writes
 * its exit status, so a kubelet that is not the process's parent (it was restarted) still learns the exit code.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** What the kubelet recorded about one started container. */
export interface ContainerRecord {
  readonly version: 1;
  readonly podUid: string;
  readonly container: string;
  /** The shim's pid: the container's process group id. */
  readonly pid: number;
  /** Field 22 of /proc/<pid>/stat when the container started. */
  readonly startTime: string;
  /** ISO time the container started. */
  readonly startedAt: string;
  /** Where the shim writes the exit code. */
  readonly exitFile: string;
  /** The pod's termination grace period when the container started (used when its pod is gone). */
  readonly graceSeconds: number;
}

/** The directory of a pod's container records. */
export function recordsDir(podDir: string): string {
  return join(podDir, "containers");
}

/** The exit-code file of `container` in `podDir`. */
export function exitFileOf(podDir: string, container: string): string {
  return join(recordsDir(podDir), `${container}.exit`);
}

/**
 * The argv that runs `argv` under the shim: `sh` starts the program, forwards SIGTERM/SIGINT/SIGHUP to it (one that
 * arrives before the program started is forwarded as soon as it has), waits for it, then writes its exit status
 * (128+N for a signal) to `exitFile` and exits with it.
 */
export function shimArgv(argv: readonly string[], exitFile: string): string[] {
  return ["/bin/sh", "-c", SHIM, exitFile, ...argv];
}

const SHIM = [
  "t=; trap 't=1' TERM INT HUP",
  '"$@" & c=$!',
  "trap 'kill -TERM $c 2>/dev/null' TERM INT HUP",
  '[ -n "$t" ] && kill -TERM $c',
  "while :; do wait $c; s=$?; kill -0 $c 2>/dev/null || break; done",
  'echo $s > "$0"; exit $s',
].join("\n");

/** Field 22 (starttime) of /proc/<pid>/stat, or undefined when no such process exists. */
export function processStartTime(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Field 2 (comm) is parenthesised and may hold spaces or parentheses: split after its last ')'.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state); field 22 is rest[19]. A zombie has exited: it is not a live container.
  if (rest[0] === "Z") return undefined;
  return rest[19];
}

/** True while the process the record names is the one that was started (not exited, pid not recycled). */
export function isLive(record: Pick<ContainerRecord, "pid" | "startTime">): boolean {
  return processStartTime(record.pid) === record.startTime;
}

/** The exit code the shim wrote, or undefined (the shim itself was killed). */
export function readExitCode(exitFile: string): number | undefined {
  try {
    const n = Number.parseInt(readFileSync(exitFile, "utf8").trim(), 10);
    return Number.isInteger(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** Writes the record atomically (a reader sees the old file or the new one, never half of one). */
export function writeRecord(podDir: string, record: ContainerRecord): void {
  const dir = recordsDir(podDir);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${record.container}.json`);
  writeFileSync(`${file}.tmp`, JSON.stringify(record));
  renameSync(`${file}.tmp`, file);
}

/** The records of a pod's containers, by container name; unreadable files are skipped. */
export function readRecords(podDir: string): Map<string, ContainerRecord> {
  const out = new Map<string, ContainerRecord>();
  let names: string[];
  try {
    names = readdirSync(recordsDir(podDir));
  } catch {
    return out;
  }
  for (const name of names) {
    if (!name.endsWith(".json")) continue;
    try {
      const r = JSON.parse(readFileSync(join(recordsDir(podDir), name), "utf8")) as ContainerRecord;
      if (r.version === 1 && Number.isInteger(r.pid) && r.pid > 1 && typeof r.startTime === "string")
        out.set(r.container, r);
    } catch {
      // A record cut short by a crash mid-write never replaced the last good one (rename), so this is a stray
      // file: skip it, as a runtime skips a corrupt metadata entry.
    }
  }
  return out;
}
