/**
 * Container log files with a size cap, as a kubelet rotates them (containerLogMaxSize, default 10Mi).
 *
 * A process container writes its stdout/stderr straight into `<pod dir>/<name>.log` through a descriptor opened
 * with O_APPEND (so it keeps logging while the kubelet restarts), which a rename cannot redirect. So the kubelet
 * rotates by copy-and-truncate (logrotate's copytruncate):
 *
 *   size(<name>.log) > maxBytes  -->  copy to <name>.log.1 (replacing the previous one), truncate <name>.log to 0
 *                                     (the writer's next O_APPEND write lands at offset 0 of the same file)
 *
 * At most 2 x maxBytes (plus what is written during one check interval) per container; lines written between the
 * copy and the truncation are lost, as with copytruncate. `kubectl logs` serves the current file, as a kubelet does.
 * The follower of a file (virt-tail's copy into a container's log) is @kvt/runtime's `followFile`.
 */
import { copyFileSync, existsSync, renameSync, statSync, truncateSync } from "node:fs";

/** The kubelet's default containerLogMaxSize (10Mi). */
export const CONTAINER_LOG_MAX_BYTES = 10 * 1024 * 1024;

/** Rotates `path` when it is larger than `maxBytes`; true when it did. Never throws (a full disk skips a round). */
export function rotateLog(path: string, maxBytes = CONTAINER_LOG_MAX_BYTES): boolean {
  try {
    if (!existsSync(path) || statSync(path).size <= maxBytes) return false;
    const rotated = `${path}.1`;
    const tmp = `${rotated}.tmp`;
    copyFileSync(path, tmp);
    renameSync(tmp, rotated);
    truncateSync(path, 0);
    return true;
  } catch {
    // No space for the copy (or the file went away): the file stays as it is until the next round.
    return false;
  }
}
