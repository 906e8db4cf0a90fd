/**
 * What a restarted process-kubelet finds on its node, and the clean-up of what pods leave behind (the runtime's
 * garbage collection and kubelet's orphaned-pod clean-up):
 *
 *   <dataDir>/pods/<uid>/containers/*.json   -> the containers an earlier kubelet started (adopted by the kubelet)
 *   a pod directory whose pod is gone          -> its live containers end (SIGTERM, the recorded grace, SIGKILL),
 *                                                 then the directory is removed
 *   <socketDir>/launcher-<pod uid key>.sock    -> removed when no pod of this node has that key
 *   <socketDir>/locks/<vmi uid>.lock           -> removed when no pod of this node serves that VMI (the launchers'
 *                                                 fencing locks; a held one is never removed)
 */
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { killGroup } from "./container-process.ts";
import { type ContainerRecord, isLive, readRecords } from "./container-records.ts";

/** How often an orphaned container is checked while it stops. */
const STOP_POLL_MS = 100;

/** The container records of every pod directory under `podsDir`, by pod uid. */
export function recordedPods(podsDir: string): Map<string, Map<string, ContainerRecord>> {
  const out = new Map<string, Map<string, ContainerRecord>>();
  for (const uid of listDir(podsDir)) out.set(uid, readRecords(join(podsDir, uid)));
  return out;
}

/**
 * Ends the live containers of a pod that is gone: SIGTERM to each process group, SIGKILL after the recorded grace
 * period (`maxGraceSeconds` at most). Resolves once none of them runs.
 */
export async function endContainers(records: Iterable<ContainerRecord>, maxGraceSeconds = 30): Promise<void> {
  const live = [...records].filter(isLive);
  if (live.length === 0) return;
  for (const r of live) killGroup(r.pid, "SIGTERM");
  const grace = Math.min(maxGraceSeconds, Math.max(0, ...live.map((r) => r.graceSeconds)));
  const deadline = Date.now() + grace * 1000;
  while (live.some(isLive)) {
    if (Date.now() >= deadline) for (const r of live) killGroup(r.pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, STOP_POLL_MS));
  }
  // The shims are gone; what they started (QEMU) goes with their groups.
  for (const r of live) killGroup(r.pid, "SIGKILL");
}

/** The socket key a launcher derives from its pod uid (launcher-rpc's socket naming: 16 hex digits). */
export function socketKeyOf(podUid: string): string {
  return podUid.replaceAll("-", "").toLowerCase().slice(0, 16);
}

/**
 * Removes launcher sockets and fencing-lock files in `socketDir` that belong to no pod of this node. `podUids` are
 * the pods this node runs; `vmiUids` the VMIs they serve. Files younger than `minAgeMs` are kept (a launcher whose
 * pod this kubelet has not seen yet). Returns the paths removed.
 */
export function removeStaleSockets(
  socketDir: string,
  podUids: Iterable<string>,
  vmiUids: Iterable<string>,
  minAgeMs = 10_000,
): string[] {
  const keys = new Set([...podUids].map(socketKeyOf));
  const vmis = new Set(vmiUids);
  const removed: string[] = [];
  const old = (path: string): boolean => {
    try {
      return Date.now() - statSync(path).mtimeMs >= minAgeMs;
    } catch {
      return false;
    }
  };
  for (const name of listDir(socketDir)) {
    const m = /^launcher-([0-9a-f]{16})\.sock$/.exec(name);
    const path = join(socketDir, name);
    if (m && !keys.has(m[1]) && old(path)) {
      rmSync(path, { force: true });
      removed.push(path);
    }
  }
  const locks = join(socketDir, "locks");
  for (const name of listDir(locks)) {
    const m = /^(.+)\.lock(-journal)?$/.exec(name);
    const path = join(locks, name);
    // A journal SQLite left beside a lock goes with its lock, and only when the lock is free.
    if (m && !vmis.has(m[1]) && old(path) && !isLockHeld(join(locks, `${m[1]}.lock`))) {
      rmSync(path, { force: true });
      removed.push(path);
    }
  }
  return removed;
}

/**
 * True when some process holds a POSIX (fcntl) or flock lock on `path`: its inode appears in /proc/locks. A held
 * lock file is never removed: a launcher holding it would keep an unlinked inode while a second one locked a new file.
 */
export function isLockHeld(path: string): boolean {
  let ino: number;
  try {
    ino = statSync(path).ino;
  } catch {
    return false;
  }
  let locks: string;
  try {
    locks = readFileSync("/proc/locks", "utf8");
  } catch {
    return true; // cannot tell: keep the file
  }
  return locks
    .split("\n")
    .some((line) => line.split(/\s+/).some((f) => /^[0-9a-f]+:[0-9a-f]+:\d+$/.test(f) && f.endsWith(`:${ino}`)));
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
