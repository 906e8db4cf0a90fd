/**
 * What a restarted process-kubelet finds on its node, and the clean-up of what pods leave behind (the runtime's
 * garbage collection and kubelet's orphaned-pod clean-up):
 *
 *   <dataDir>/pods/<uid>/containers/*.json   -> the containers an earlier kubelet started (adopted by the kubelet)
 *   a pod directory whose pod is gone          -> its live containers end (SIGTERM, the recorded grace, SIGKILL),
 *                                                 then the directory is removed, with its emptyDir volumes (the
 *                                                 launcher's socket and fencing lock among them)
 */
import { readdirSync } from "node:fs";
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

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
